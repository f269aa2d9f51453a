#!/usr/bin/env bash
# Installs the Vulkan headers that wheels are built against, from a pinned Khronos release checked by its sha256:
#
#   bash scripts/fetch-vulkan-headers.sh VERSION PREFIX
#
# VERSION is a tag of github.com/KhronosGroup/Vulkan-Headers without its "v", and must be pinned below. The headers
# land in PREFIX/include (vulkan/ and vk_video/), where build_vulkan.py finds them with VULKAN_SDK=PREFIX. pyproject's
# [tool.cibuildwheel] before-all runs this in the manylinux container; tests/test_wheels.py runs it on local tarballs.
#
# VULKAN_HEADERS_URL fetches the tarball from elsewhere (a mirror, a file:// path); it never changes the sum a pinned
# version must have. VULKAN_HEADERS_SHA256 gives the sum of a version that is not pinned here, once you have checked
# it yourself. Nothing is installed unless the sum matches and the tarball's VK_HEADER_VERSION is VERSION's.
set -euo pipefail

# The pins. 1.3.239 is the release that Debian 12's libvulkan-dev packages, which the test suite builds against; its
# sum is the one Homebrew's vulkan-headers formula pinned for the same tarball.
pinned_sha256() {
  case $1 in
    1.3.239) echo 86ef8969b96cf391dc86b9c4e5745b8ecaa12ebdaaefd3d8e38bc98e15f30653 ;;
    *) return 1 ;;
  esac
}

fail() { echo "fetch-vulkan-headers.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || { echo "usage: bash scripts/fetch-vulkan-headers.sh VERSION PREFIX" >&2; exit 2; }
version=$1
prefix=$2
if expected=$(pinned_sha256 "$version"); then
  if [ -n "${VULKAN_HEADERS_SHA256:-}" ] && [ "$VULKAN_HEADERS_SHA256" != "$expected" ]; then
    fail "Vulkan-Headers $version is pinned to sha256 $expected; VULKAN_HEADERS_SHA256 cannot change that"
  fi
else
  expected=${VULKAN_HEADERS_SHA256:-}
  [ -n "$expected" ] || fail "Vulkan-Headers $version is not pinned here: add its checked sha256 to pinned_sha256," \
    "or set VULKAN_HEADERS_SHA256"
fi
url=${VULKAN_HEADERS_URL:-https://github.com/KhronosGroup/Vulkan-Headers/archive/refs/tags/v$version.tar.gz}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/headers.tar.gz" "$url" || fail "could not fetch $url"
actual=$(sha256sum "$work/headers.tar.gz" | cut -d' ' -f1)
[ "$actual" = "$expected" ] || fail "sha256 mismatch for $url: expected $expected, got $actual; nothing was installed"

mkdir "$work/src"
tar -xzf "$work/headers.tar.gz" -C "$work/src" --strip-components=1
header=$work/src/include/vulkan/vulkan_core.h
[ -f "$header" ] || fail "$url has no include/vulkan/vulkan_core.h"
found=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9][0-9]*\).*/\1/p' "$header")
[ "$found" = "${version##*.}" ] || fail "$url holds VK_HEADER_VERSION ${found:-(none)}, not ${version##*.}"
mkdir -p "$prefix/include"
cp -R "$work/src/include/." "$prefix/include/"
echo "fetch-vulkan-headers.sh: Vulkan-Headers $version (sha256 $actual) installed in $prefix/include"
