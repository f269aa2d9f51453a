"""Checks an installed vkbackend without a GPU or a Vulkan driver: cibuildwheel's test-command ([tool.cibuildwheel] in
pyproject.toml), which tests/test_packaging.py also runs on the wheel it builds.

    python scripts/check-wheel.py      # from anywhere, with the wheel installed

It checks that the package and its native module import (libvulkan is opened only when devices are asked for), that
the module is the stable-ABI build the wheel's tag promises, that the native layer answers, and that asking for
devices without a Vulkan loader raises DyLibNotFoundError with its hint. It refuses to check a source tree's import.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

# Before vkbackend opens the loader: the no-loader path, whatever this machine has installed.
os.environ["VKBACKEND_VULKAN_LIBRARY"] = "/nonexistent/libvulkan.so.1"

import vkbackend  # noqa: E402
from vkbackend import _ffi, _vulkan  # noqa: E402


def main() -> int:
    source = Path(__file__).resolve().parents[1]
    package = Path(vkbackend.__file__).resolve().parent
    if package.is_relative_to(source):
        print(
            f"check-wheel.py: imported vkbackend from the source tree ({package}); run it against an installed "
            "wheel, from outside the checkout",
            file=sys.stderr,
        )
        return 1
    module = Path(str(_vulkan.__file__)).name
    stable_abi = not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var("Py_GIL_DISABLED")
    if stable_abi and module != "_vulkan.abi3.so":
        print(f"check-wheel.py: the native module is {module}, not the stable-ABI _vulkan.abi3.so", file=sys.stderr)
        return 1
    functions = _ffi.lib.vkb_function_count()
    try:
        vkbackend.devices()
    except vkbackend.DyLibNotFoundError as error:
        if "mesa-vulkan-drivers" not in str(error):
            print(f"check-wheel.py: the no-loader error lacks its install hint: {error}", file=sys.stderr)
            return 1
    else:
        print("check-wheel.py: devices() found a Vulkan loader at a path that does not exist", file=sys.stderr)
        return 1
    print(
        f"check-wheel.py: vkbackend {vkbackend.__version__} from {package} ({module}, {functions} Vulkan functions "
        "declared) imports without a driver and says what to install"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
