#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for vkbackend, safe to run again: the system packages (Vulkan headers and
# loader, Mesa's lavapipe software device, glslang, SPIR-V tools, the validation layers, vulkaninfo, gcc for the
# native module (Debian's Python builds extensions with x86_64-linux-gnu-gcc by name), clang for tinygrad's CPU
# device), then this package in editable mode with the extras named by $1 (default: none; the tests
# need `test,tinygrad`).
#
# Where python3 is the system's own and externally managed (PEP 668: Debian 12, Ubuntu 24.04), pip may not install
# into it, so the package goes into a virtual environment, .venv in this checkout (python3-venv and python3-dev are
# installed for it); `. scripts/env.sh` then puts it first on PATH. Inside a virtual environment, or with a python3
# that is not externally managed (pyenv, conda), the package goes into that python3 as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
packages="libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers vulkan-tools gcc libc6-dev clang"
python=python3
if python3 scripts/externally_managed.py; then
  packages="$packages python3-venv python3-dev"
  python=.venv/bin/python
fi
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
if [ "$python" != python3 ] && [ ! -x "$python" ]; then
  python3 -m venv .venv
  echo "setup.sh: python3 is externally managed (PEP 668), so vkbackend goes into the virtual environment .venv;" \
       ". scripts/env.sh puts it first on PATH" >&2
fi
extras=${1:-}
"$python" -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
case ",$extras," in
  *,test,*)  # the tests also check the wheel recipe with the release tools of the `wheels` dependency group
    mapfile -t wheels < <("$python" -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["wheels"]))')
    "$python" -m pip install -q --disable-pip-version-check "${wheels[@]}" ;;
esac
