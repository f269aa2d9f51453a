"""tinygrad devices that render and compile for given DeviceCaps and run nothing: what a device would get."""

from __future__ import annotations

import sys
import types

from tinygrad.device import Compiled
from tinygrad.helpers import Context
from tinygrad.runtime.ops_null import NullAllocator, NullProgram

from vkbackend.tinygrad.compiler.kernel_format import unpack_lib
from vkbackend.tinygrad.renderer.caps import DeviceCaps, make_arch

BASE = DeviceCaps(f16=True, f64=True, i8=True, i16=True, i64=True, local_threads=1024, shared_max=32768)
_SEEN: list = []


def render_device(name: str, caps: DeviceCaps) -> str:
    """Register the tinygrad device ``name`` (upper case), which renders and compiles for ``caps``; returns ``name``."""

    class Program(NullProgram):
        def __init__(self, dev, obj):
            super().__init__(dev, obj)
            _SEEN.append(unpack_lib(obj.lib))

    class Device(Compiled):
        def __init__(self, device: str):
            super().__init__(device, NullAllocator(self), [VKRenderer], Program, arch=make_arch(caps))

    from vkbackend.tinygrad.renderer.renderer import VKRenderer  # noqa: PLC0415

    module = types.ModuleType(f"tinygrad.runtime.ops_{name.lower()}")
    setattr(module, f"{name}Device", Device)
    sys.modules[module.__name__] = module
    return name


def kernels(dev: str | None, fn) -> list:
    """The kernels (unpacked libs: ``.source``, ``.meta``) that ``fn(dev)`` compiles on ``dev`` (None: on the devices
    it names, the default one left as it is), uncached."""
    start = len(_SEEN)
    with Context(CACHELEVEL=0, **({} if dev is None else {"DEV": dev})):
        fn(dev)
    return _SEEN[start:]
