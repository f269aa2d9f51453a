"""Release packaging: the sdist holds everything its build needs, the wheel none of what only the build reads,
``pip install`` of the sdist and of the wheel built from it work in fresh virtual environments, run from outside the
source tree, and the wheel's tag matches its module, which needs nothing a manylinux wheel may not (readelf,
auditwheel) and passes the wheel recipe's own check; the editable wheel carries the tinygrad hook's .pth.

Slow (about a minute: three builds of the native module, the last an editable one, and two venvs);
``pytest -m "not packaging"`` leaves it out. The builds are isolated, so they fetch setuptools, wheel and cffi from
the package index (PyPI, or pip's configuration).
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import vkbackend

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("build_vulkan", ROOT / "build_vulkan.py")
assert _spec is not None and _spec.loader is not None
build_vulkan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_vulkan)  # setup.py's own ABI setting (importing it builds nothing)
LIMITED_API, limited_api_supported = build_vulkan.LIMITED_API, build_vulkan.limited_api_supported
VERSION = vkbackend.__version__

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.skipif(
        importlib.util.find_spec("build") is None,
        reason="needs the 'build' package (pip install build; it is in the test extra)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("ensurepip") is None,
        reason="python3 -m venv cannot install pip here (Debian/Ubuntu: apt-get install python3-venv)",
    ),
]

# What a build from the sdist reads, besides the Python sources.
BUILD_INPUTS = [
    "build_vulkan.py",
    "setup.py",
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "vkbackend/py.typed",
    "vkbackend/tinygrad/vkbackend-tinygrad.pth",
    *(f"vkbackend/decl/{p.name}" for p in (ROOT / "vkbackend" / "decl").glob("*.h")),
    *(f"vkbackend/csrc/{p.name}" for p in (ROOT / "vkbackend" / "csrc").iterdir()),
]
# Of those, what only the build reads: in the sdist, never in the wheel.
BUILD_ONLY = ("vkbackend/decl/", "vkbackend/csrc/")
# What the sdist carries besides: the bench's C reference, the probe built on it, and the GPU scripts
# (docs/performance.md, docs/plugin-guide.md), and the wheel recipe's scripts (README, "Wheels").
BENCH_FILES = [
    "vkbackend/bench/vulkan_ref.c",
    "scripts/round-trip-floor.c",
    "scripts/interrupt-probe.c",
    "scripts/coopmat2-gemm.c",
    "scripts/gpu-bench.sh",
    "scripts/cuda-interop-check.py",
    "scripts/fetch-vulkan-headers.sh",
    "scripts/check-wheel.py",
]
# The project's documents besides README.md and LICENSE (read by people, not by the build).
DOCUMENTS = ["CHANGELOG.md", "docs/packaging.md", "docs/api.md"]
# The C sources the installed package reads at run time: the bench compiles its C reference (bench/vulkan_ref.py).
RUNTIME_C_SOURCES = {"vkbackend/bench/vulkan_ref.c"}
# The libraries the native module may need: the C library's (libvulkan is opened at run time, cffi's API mode needs
# no libffi, and an extension module never links libpython). glibc 2.34 merged libdl and libpthread into libc.
SYSTEM_LIBRARIES = {"libc.so.6", "libdl.so.2", "libpthread.so.0"}


def _env() -> dict[str, str]:
    """The suite's environment without PYTHONPATH, so a venv imports what was installed into it, not this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run(command: list, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{command} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist, as a release makes it (``python -m build --sdist``), and the wheel ``pip wheel`` builds from it."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", out, ROOT], cwd=out)
    (sdist,) = out.glob("vkbackend-*.tar.gz")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", out, sdist], cwd=out)
    return out


def _sdist(dist: Path) -> Path:
    return next(dist.glob("vkbackend-*.tar.gz"))


def _wheel(dist: Path) -> Path:
    return next(dist.glob("vkbackend-*.whl"))


def _venv_with(artifact: Path, where: Path) -> Path:
    """A fresh venv (no system site-packages) with ``artifact`` and its dependencies installed; its python."""
    _run([sys.executable, "-m", "venv", where / "venv"], cwd=where)
    python = where / "venv" / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", artifact], cwd=where, timeout=600)
    return python


def test_sdist_holds_what_the_build_needs(dist):
    with tarfile.open(_sdist(dist)) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    members = {name.partition("/")[2] for name in names}
    missing = [path for path in BUILD_INPUTS + BENCH_FILES + DOCUMENTS if path not in members]
    assert not missing, f"the sdist {top} lacks {missing}"
    built = [m for m in members if m.endswith((".so", ".o", ".pyc")) or m == "vkbackend/_vulkan.c"]
    assert not built, f"the sdist carries build outputs: {built}"
    strays = [m for m in members if os.path.basename(m).startswith("VP_VULKANINFO")]  # vulkaninfo's profile output
    assert not strays, f"the sdist carries vulkaninfo output: {strays}"


def test_wheel_is_tagged_for_the_abi_its_module_uses(dist):
    wheel = _wheel(dist)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        tags = [
            line.split(": ", 1)[1]
            for line in zf.read(f"vkbackend-{VERSION}.dist-info/WHEEL").decode().splitlines()
            if line.startswith("Tag: ")
        ]
    if limited_api_supported():
        assert "vkbackend/_vulkan.abi3.so" in names, sorted(names)
        assert wheel.name == f"vkbackend-{VERSION}-{LIMITED_API}-abi3-linux_{platform.machine()}.whl", wheel.name
        assert all(tag.startswith(f"{LIMITED_API}-abi3-") for tag in tags), tags
    else:  # a debug or free-threaded interpreter: a module and wheel of this interpreter only
        assert not any(name.endswith(".abi3.so") for name in names)
        assert "-abi3-" not in wheel.name
    assert {
        "vkbackend/py.typed",
        "vkbackend-tinygrad.pth",
        f"vkbackend-{VERSION}.dist-info/licenses/LICENSE",
        "vkbackend/bench/vulkan_ref.c",
        "vkbackend/interop/cuda.py",
        "vkbackend/memory/external.py",
        "vkbackend/tinygrad/renderer/renderer.py",
        "vkbackend/tinygrad/compiler/compiler.py",
        "vkbackend/tinygrad/runtime/ops_vk.py",
    } <= names


def test_wheel_holds_no_build_only_files(dist):
    """The declarations and C sources build_vulkan.py compiles are in the sdist, not the wheel; the bench's C
    reference, which it compiles at run time, is in both."""
    with zipfile.ZipFile(_wheel(dist)) as zf:
        names = zf.namelist()
    build_only = [n for n in names if n.startswith(BUILD_ONLY)]
    assert not build_only, f"the wheel carries files only the build reads: {build_only}"
    c_sources = {n for n in names if n.endswith((".c", ".h"))}
    assert c_sources == RUNTIME_C_SOURCES, f"C sources in the wheel: {sorted(c_sources)}"


def test_editable_wheel_carries_the_pth_file(dist, tmp_path):
    """``pip install -e`` gets the tinygrad hook's .pth at the top of its wheel, listed in RECORD with its hash (built
    from the unpacked sdist, so that this checkout's in-place module is left alone)."""
    with tarfile.open(_sdist(dist)) as tar:
        tar.extractall(tmp_path, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (source,) = tmp_path.glob("vkbackend-*")
    out = tmp_path / "out"
    _run([sys.executable, ROOT / "tests" / "scripts" / "packaging_build_editable.py", source, out], cwd=tmp_path)
    (wheel,) = out.glob("vkbackend-*.whl")
    pth = (ROOT / "vkbackend" / "tinygrad" / "vkbackend-tinygrad.pth").read_bytes()
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("vkbackend-tinygrad.pth") == pth
        record = zf.read(f"vkbackend-{VERSION}.dist-info/RECORD").decode().splitlines()
    digest = base64.urlsafe_b64encode(hashlib.sha256(pth).digest()).rstrip(b"=").decode()
    assert f"vkbackend-tinygrad.pth,sha256={digest},{len(pth)}" in record, record
    if limited_api_supported():
        assert f"-{LIMITED_API}-abi3-" in wheel.name, wheel.name


def test_setup_py_overrides_no_private_setuptools_method():
    """The commands setup.py customizes override only public methods (``run``), so a setuptools release that renames
    its internals cannot silently drop what they add."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    private = [
        f"{cls.name}.{fn.name}"
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for fn in cls.body
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("_") and not fn.name.endswith("__")
    ]
    assert not private, f"setup.py overrides private methods: {private}"


def _module(dist: Path, where: Path) -> Path:
    with zipfile.ZipFile(_wheel(dist)) as zf:
        (name,) = [n for n in zf.namelist() if n.startswith("vkbackend/_vulkan.") and n.endswith(".so")]
        return Path(zf.extract(name, where))


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs readelf (binutils) to list the module's libraries")
def test_native_module_links_only_the_c_library(dist, tmp_path):
    """What auditwheel asks of a manylinux wheel: nothing but the system's C library, so nothing to bundle."""
    dynamic = subprocess.run(
        ["readelf", "-d", _module(dist, tmp_path)], capture_output=True, text=True, check=True
    ).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert "libc.so.6" in needed, dynamic
    loader = {n for n in needed if n.startswith(("ld-linux", "ld64.so"))}  # the dynamic loader itself
    assert needed - loader <= SYSTEM_LIBRARIES, f"the module links {sorted(needed - loader - SYSTEM_LIBRARIES)}"


@pytest.mark.skipif(
    importlib.util.find_spec("auditwheel") is None,
    reason="needs auditwheel (a release tool: pip install --group wheels, or pip install auditwheel)",
)
def test_auditwheel_finds_no_library_to_bundle(dist):
    """The wheel built here is a manylinux wheel as it is; its tag's glibc is this machine's, where cibuildwheel's
    manylinux_2_28 container would give manylinux_2_28 (not run here: it needs Docker)."""
    proc = _run([sys.executable, "-m", "auditwheel", "show", "--json", _wheel(dist)], cwd=dist)
    report = json.loads(proc.stdout)
    assert report["external_libs"] == {}, report
    assert re.fullmatch(rf"manylinux_2_\d+_{platform.machine()}", report["overall_tag"]), report
    assert set(report["versioned_symbols"]) <= SYSTEM_LIBRARIES, report


@pytest.mark.skipif(not limited_api_supported(), reason="this interpreter has no stable ABI (debug or free-threaded)")
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils) to list the module's symbols")
def test_native_module_uses_only_the_stable_abi_it_claims(dist, tmp_path):
    """Every CPython symbol the module imports belongs to the stable ABI of the version in its tag."""
    abi3info = pytest.importorskip(
        "abi3info", reason="needs abi3info (the stable ABI's symbol list; in the test extra)"
    )
    module = _module(dist, tmp_path)
    assert module.name == "_vulkan.abi3.so"
    symbols = subprocess.run(
        ["nm", "-D", "--undefined-only", module], capture_output=True, text=True, check=True
    ).stdout.split()
    python_symbols = {s for s in symbols if s.startswith(("Py", "_Py"))}
    assert python_symbols, "nm listed no CPython symbols: is this the cffi module?"
    oldest = (int(LIMITED_API[2]), int(LIMITED_API[3:]))
    stable = {symbol.name: member.added for symbol, member in {**abi3info.FUNCTIONS, **abi3info.DATAS}.items()}
    outside = sorted(s for s in python_symbols if s not in stable or (stable[s].major, stable[s].minor) > oldest)
    assert not outside, f"symbols outside the {LIMITED_API} stable ABI: {outside}"


def test_sdist_installs_into_a_fresh_venv_and_runs(dist, device, tmp_path):
    python = _venv_with(_sdist(dist), tmp_path)
    where = _run([python, "-c", "import vkbackend; print(vkbackend.__file__)"], cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), f"imported {where}, not the installed package"
    info = _run([python, "-m", "vkbackend", "info"], cwd=tmp_path)
    assert info.stdout.startswith("device 0: ")


def test_wheel_installs_into_a_fresh_venv_and_runs(dist, device, tmp_path):
    python = _venv_with(_wheel(dist), tmp_path)
    script = python.parent / "vkbackend"
    assert _run([script, "--version"], cwd=tmp_path).stdout == f"vkbackend {VERSION}\n"
    check = _run([python, ROOT / "scripts" / "check-wheel.py"], cwd=tmp_path)  # cibuildwheel's test-command
    assert "imports without a driver" in check.stdout
    demo = _run([script, "demo"], cwd=tmp_path)
    assert "demo: all results match numpy" in demo.stdout
    _run(
        [python, "-c", "from vkbackend.bench import vulkan_ref; assert vulkan_ref.SOURCE.is_file(), vulkan_ref.SOURCE"],
        cwd=tmp_path,
    )  # the bench's C reference finds its source in the installed package
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"], cwd=tmp_path).stdout
    assert (Path(site.strip()) / "vkbackend-tinygrad.pth").is_file(), "the tinygrad hook's .pth is not in site-packages"
