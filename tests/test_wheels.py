"""The manylinux wheel recipe: pyproject.toml's [tool.cibuildwheel], the pinned Vulkan headers it installs
(scripts/fetch-vulkan-headers.sh) and what docs/packaging.md says of them agree; cibuildwheel accepts the configuration;
the header script installs only what matches its checksum, here with local tarballs. Fast: nothing is downloaded
or built (tests/test_packaging.py builds the wheel and checks what auditwheel would).

What cannot run here: cibuildwheel's builds themselves, which need Docker or Podman and the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport, which build and mypy (the test extra) bring
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fetch-vulkan-headers.sh"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONFIG = PYPROJECT["tool"]["cibuildwheel"]
_spec = importlib.util.spec_from_file_location("build_vulkan", ROOT / "build_vulkan.py")
assert _spec is not None and _spec.loader is not None
build_vulkan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_vulkan)

needs_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("bash", "curl", "sha256sum", "tar")), reason="needs bash, curl, sha256sum and tar"
)


def _pins() -> dict[str, str]:
    """The versions the header script pins, and their sums."""
    return dict(re.findall(r"^\s+([0-9.]+)\) echo ([0-9a-f]{64}) ;;$", SCRIPT.read_text(), re.M))


def _before_all() -> tuple[str, str]:
    """(version, prefix) that before-all hands the header script."""
    words = shlex.split(CONFIG["before-all"])
    assert words[:2] == ["bash", "{project}/scripts/fetch-vulkan-headers.sh"] and len(words) == 4, words
    return words[2], words[3]


def test_the_recipe_installs_a_pinned_header_release_where_the_build_looks():
    version, prefix = _before_all()
    assert version in _pins(), f"before-all asks for Vulkan-Headers {version}, which the script does not pin"
    assert CONFIG["environment"] == {"VULKAN_SDK": prefix}  # build_vulkan.py reads $VULKAN_SDK/include first


def test_the_packaging_page_names_the_pinned_release_and_its_sum():
    version, _ = _before_all()
    page = (ROOT / "docs" / "packaging.md").read_text()
    assert f"Vulkan-Headers {version}" in page and _pins()[version] in page
    assert "docs/packaging.md" in (ROOT / "README.md").read_text()


def test_one_abi3_wheel_per_architecture_is_built_and_tested_on_every_later_python():
    selected = CONFIG["build"].split()
    assert selected[0] == f"{build_vulkan.LIMITED_API}-*"  # built once, with the oldest CPython of the stable ABI
    assert all(re.fullmatch(r"cp3\d+-\*", s) for s in selected), selected  # no free-threaded (cp3xt) builds
    assert CONFIG["linux"]["archs"] == ["x86_64", "aarch64"] and "musllinux" in CONFIG["skip"]
    test = shlex.split(CONFIG["test-command"])
    assert test == ["python", "{project}/scripts/check-wheel.py"] and (ROOT / test[1].split("/", 1)[1]).is_file()


def test_the_platforms_named_are_the_platforms_built():
    """Linux only, in the classifiers, the wheel recipe and the docs, which also say what macOS and Windows lack."""
    systems = [c for c in PYPROJECT["project"]["classifiers"] if c.startswith("Operating System ::")]
    assert systems == ["Operating System :: POSIX :: Linux"], systems
    assert not {"macos", "windows", "ios", "pyodide"} & set(CONFIG), "the recipe configures a platform besides Linux"
    page = (ROOT / "docs" / "packaging.md").read_text()
    platforms = page.split("\n## Platforms\n", 1)[1].split("\n## ", 1)[0]
    for name in ("Linux", "x86_64", "aarch64", "macOS", "Windows", "not supported"):
        assert name in platforms, f"docs/packaging.md's Platforms section does not name {name}"
    assert "docs/packaging.md" in (ROOT / "README.md").read_text() and "macOS" in (ROOT / "README.md").read_text()


def test_release_tools_are_a_dependency_group_not_an_extra():
    """cibuildwheel and auditwheel are for building wheels, not for using or testing the package: they are in the
    `wheels` dependency group (PEP 735), which is not in the package's metadata, and in no extra."""
    group = " ".join(PYPROJECT["dependency-groups"]["wheels"])
    extras = " ".join(" ".join(e) for e in PYPROJECT["project"]["optional-dependencies"].values())
    for tool in ("cibuildwheel", "auditwheel"):
        assert tool in group and tool not in extras, tool
    # CI runs the README's test set-up, `scripts/setup.sh test,tinygrad`, which installs the group: the recipe's checks
    # still run there
    assert '["dependency-groups"]["wheels"]' in (ROOT / "scripts" / "setup.sh").read_text()


@pytest.mark.skipif(
    importlib.util.find_spec("cibuildwheel") is None,
    reason="needs cibuildwheel (a release tool: pip install --group wheels, or pip install cibuildwheel)",
)
def test_cibuildwheel_accepts_the_configuration():
    """cibuildwheel rejects unknown options; listing the builds reads the configuration and needs no Docker."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cibuildwheel",
            "--print-build-identifiers",
            "--platform",
            "linux",
            "--archs",
            "x86_64,aarch64",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    built = proc.stdout.split()
    versions = [s.split("-")[0] for s in CONFIG["build"].split()]
    assert built == [f"{v}-manylinux_{arch}" for arch in ("x86_64", "aarch64") for v in versions], built


def _tarball(where: Path, version: str, header_version: str) -> tuple[str, str]:
    """A local tarball laid out as a Vulkan-Headers release (one top folder, include/vulkan, include/vk_video);
    its file:// URL and sha256."""
    top = where / f"Vulkan-Headers-{version}"
    (top / "include" / "vulkan").mkdir(parents=True)
    (top / "include" / "vk_video").mkdir()
    (top / "include" / "vulkan" / "vulkan_core.h").write_text(f"#define VK_HEADER_VERSION {header_version}\n")
    (top / "include" / "vk_video" / "vulkan_video_codecs_common.h").write_text("/* codec types */\n")
    path = where / f"v{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return path.as_uri(), hashlib.sha256(path.read_bytes()).hexdigest()


def _fetch(version: str, prefix: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), version, str(prefix)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


@needs_tools
def test_a_tarball_with_the_right_sum_is_installed_where_build_vulkan_finds_it(tmp_path, monkeypatch):
    url, digest = _tarball(tmp_path, "0.0.7", "7")
    proc = _fetch("0.0.7", tmp_path / "sdk", VULKAN_HEADERS_URL=url, VULKAN_HEADERS_SHA256=digest)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "sdk" / "include" / "vk_video" / "vulkan_video_codecs_common.h").is_file()
    monkeypatch.setenv("VULKAN_SDK", str(tmp_path / "sdk"))
    assert build_vulkan.find_vulkan_header() == tmp_path / "sdk" / "include"


@needs_tools
@pytest.mark.parametrize(
    "case", ["wrong sum", "pinned version, other tarball", "pin overridden", "not pinned", "other header version"]
)
def test_nothing_is_installed_unless_the_tarball_is_the_one_pinned(tmp_path, case):
    url, digest = _tarball(tmp_path, "0.0.7", "7")
    pinned = next(iter(_pins()))
    version, env, message = {
        "wrong sum": ("0.0.7", {"VULKAN_HEADERS_SHA256": "0" * 64}, "sha256 mismatch"),
        # a mirror's URL cannot change what a pinned release must hash to, nor can the sum variable
        "pinned version, other tarball": (pinned, {}, "sha256 mismatch"),
        "pin overridden": (pinned, {"VULKAN_HEADERS_SHA256": digest}, "cannot change that"),
        "not pinned": ("0.0.7", {}, "not pinned here"),
        "other header version": ("0.0.8", {"VULKAN_HEADERS_SHA256": digest}, "VK_HEADER_VERSION 7, not 8"),
    }[case]
    proc = _fetch(version, tmp_path / "sdk", VULKAN_HEADERS_URL=url, **env)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "sdk").exists()
