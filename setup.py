"""setuptools entry point. The native module is built by cffi from build_vulkan.py (see that file).

The tinygrad plugin's ``vkbackend-tinygrad.pth`` must land in site-packages itself, not inside the package, so that
every interpreter (pytest-xdist workers, tinygrad's compile workers) can import ``tinygrad.runtime.ops_vk``. Its one
line only adds a finder to ``sys.meta_path``; see vkbackend/tinygrad/_hook.py. Both the regular wheel and the editable
one (``pip install -e``) carry it.

The native module uses only CPython's stable ABI of 3.10 (build_vulkan.py defines ``Py_LIMITED_API``), so it is named
``_vulkan.abi3.so`` and the wheel is tagged ``cp310-abi3``: one wheel for every CPython from 3.10 on. Debug and
free-threaded interpreters have no stable ABI; there both get the interpreter's own tag.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # build backends do not put the project on sys.path
from build_vulkan import LIMITED_API, limited_api_supported  # noqa: E402

PTH = os.path.join("vkbackend", "tinygrad", "vkbackend-tinygrad.pth")


class BuildPyWithPth(build_py):
    """Put the .pth file at the top of the wheel, which pip installs into site-packages."""

    def run(self):
        super().run()
        self.copy_file(PTH, os.path.join(self.build_lib, os.path.basename(PTH)), preserve_mode=0)


class EditableWheelWithPth(editable_wheel):
    """The editable wheel gets the same .pth file (setuptools has no public hook for extra top-level files)."""

    def _select_strategy(self, *args, **kwargs):
        strategy = super()._select_strategy(*args, **kwargs)

        class WithPth:
            def __enter__(self):
                strategy.__enter__()
                return self

            def __exit__(self, *exc):
                return strategy.__exit__(*exc)

            def __call__(self, wheel, files, mapping):
                strategy(wheel, files, mapping)
                with open(PTH, "rb") as f:
                    wheel.writestr(os.path.basename(PTH), f.read())

        return WithPth()


setup(cffi_modules=["build_vulkan.py:make_builder"],
      cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
      options={"bdist_wheel": {"py_limited_api": LIMITED_API}} if limited_api_supported() else {})
