#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for vkbackend, safe to run again: the system packages (Vulkan headers and
# loader, Mesa's lavapipe software device, glslang, SPIR-V tools, the validation layers, vulkaninfo, clang for
# tinygrad's CPU device), then this package in editable mode with the extras named by $1 (default: test).
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
packages="libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers vulkan-tools clang"
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e ".[${1:-test}]"
