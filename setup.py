"""setuptools entry point. The native module is built by cffi from build_vulkan.py (see that file).

The tinygrad plugin's ``vkbackend-tinygrad.pth`` must land in site-packages itself, not inside the package, so that
every interpreter (pytest-xdist workers, tinygrad's compile workers) can import ``tinygrad.runtime.ops_vk``. Its one
line only adds a finder to ``sys.meta_path``; see vkbackend/tinygrad/_hook.py. Both the regular wheel and the editable
one (``pip install -e``) carry it.

The native module uses only CPython's stable ABI of 3.10 (build_vulkan.py defines ``Py_LIMITED_API``), so it is named
``_vulkan.abi3.so`` and the wheel is tagged ``cp310-abi3``: one wheel for every CPython from 3.10 on. Debug and
free-threaded interpreters have no stable ABI; there both get the interpreter's own tag.
"""

import base64
import hashlib
import os
import sys
import zipfile
from pathlib import Path

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
    """The editable wheel (``pip install -e``) gets the same .pth file.

    setuptools has no hook for an extra top-level file in an editable wheel (build_py's outputs stay in a temporary
    build folder there), so this runs the command as it is, then adds the file to the wheel it wrote in ``dist_dir``
    and records it in the wheel's RECORD, as the wheel format (PEP 427) asks. Only public interfaces are used: the
    command's ``run`` and ``dist_dir`` and the wheel format, none of setuptools' private methods.
    """

    def run(self):
        before = _wheels(self.dist_dir)
        super().run()
        written = [path for path, stamp in _wheels(self.dist_dir).items() if before.get(path) != stamp]
        if len(written) != 1:
            raise RuntimeError(f"editable_wheel wrote {len(written)} wheels in {self.dist_dir}, expected one")
        _add_to_wheel(written[0], os.path.basename(PTH), Path(PTH).read_bytes())


def _wheels(folder) -> dict:
    """The wheels in ``folder``, with their modification times."""
    return {path: path.stat().st_mtime_ns for path in Path(folder).glob("*.whl")}


def _add_to_wheel(wheel: Path, name: str, data: bytes) -> None:
    """Rewrite ``wheel`` with ``data`` as its top-level file ``name`` and a RECORD line for it."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    with zipfile.ZipFile(wheel) as zin:
        entries = [(info, zin.read(info)) for info in zin.infolist() if info.filename != name]
    (record,) = [(info, content) for info, content in entries if info.filename.endswith(".dist-info/RECORD")]
    lines = [line for line in record[1].decode().splitlines() if not line.startswith(f"{name},")]
    tmp = wheel.with_name(wheel.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for info, content in entries:
            if info is not record[0]:
                zout.writestr(info, content)
        zout.writestr(zipfile.ZipInfo(name, date_time=record[0].date_time), data, zipfile.ZIP_DEFLATED)
        zout.writestr(record[0], "".join(f"{line}\n" for line in [*lines, f"{name},sha256={digest},{len(data)}"]))
    os.replace(tmp, wheel)


setup(
    cffi_modules=["build_vulkan.py:make_builder"],
    cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth},
    options={"bdist_wheel": {"py_limited_api": LIMITED_API}} if limited_api_supported() else {},
)
