"""Makes ``tinygrad.runtime.ops_vk`` importable without modifying tinygrad.

tinygrad opens device ``VK`` with ``importlib.import_module("tinygrad.runtime.ops_vk")``.  A finder on
``sys.meta_path`` answers for exactly that name with a module re-exporting :mod:`vkbackend.tinygrad.runtime.ops_vk`.

It gets there two ways:

* the ``vkbackend-tinygrad.pth`` file installed next to the package (see :data:`PTH_LINE`) puts a tiny finder on
  ``sys.meta_path`` at interpreter start-up (so fresh interpreters, pytest-xdist workers and tinygrad's spawned
  compile workers all have it); it imports nothing until ``tinygrad.runtime.ops_vk`` is asked for, and then
  delegates to :func:`find_spec` here;
* :func:`install` does the same from Python (``import vkbackend.tinygrad`` calls it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

__all__ = ["TARGET", "IMPL", "find_spec", "install", "PTH_LINE", "VKBackendTinygradFinder"]

TARGET = "tinygrad.runtime.ops_vk"
IMPL = "vkbackend.tinygrad.runtime.ops_vk"


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module) -> None:
        impl = importlib.import_module(IMPL)
        names = getattr(impl, "__all__", None) or [k for k in vars(impl) if not k.startswith("_")]
        for name in names:
            setattr(module, name, getattr(impl, name))
        module.__all__ = list(names)
        module.__doc__ = impl.__doc__
        module.__file__ = getattr(impl, "__file__", None)


def find_spec(name: str, path=None, target=None):
    if name != TARGET:
        return None
    return importlib.machinery.ModuleSpec(TARGET, _AliasLoader(), origin=IMPL)


class VKBackendTinygradFinder:
    """The ``sys.meta_path`` entry :func:`install` adds (the .pth file adds an equivalent one-line class)."""

    find_spec = staticmethod(find_spec)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (idempotent; a no-op when the .pth file already did)."""
    if any(getattr(f, "__name__", "") == "VKBackendTinygradFinder" for f in sys.meta_path):
        return
    sys.meta_path.append(VKBackendTinygradFinder)


# The single line of vkbackend-tinygrad.pth.  site.py executes .pth lines that start with "import"; this one defines
# a class (no import, no I/O) whose find_spec imports vkbackend only when tinygrad asks for ops_vk.
PTH_LINE = (
    'import sys; any(getattr(f, "__name__", "") == "VKBackendTinygradFinder" for f in sys.meta_path) or '
    'sys.meta_path.append(type("VKBackendTinygradFinder", (), {"find_spec": staticmethod(lambda n, p=None, t=None: '
    '__import__("vkbackend.tinygrad._hook", fromlist=["find_spec"]).find_spec(n, p, t) '
    'if n == "tinygrad.runtime.ops_vk" else None)}))'
)
