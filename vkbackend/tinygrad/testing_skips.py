"""pytest plugin for running tinygrad's own test suite on ``DEV=VK``: our skip/xfail list, one reason per entry.

Use it from a checkout of tinygrad's tests (see docs/tinygrad.md)::

    DEV=VK python -m pytest -p vkbackend.tinygrad.testing_skips test/test_tiny.py
    DEV=VK python -m pytest -p vkbackend.tinygrad.testing_skips -n 2 test/backend

Loading the plugin also installs the ``tinygrad.runtime.ops_vk`` import hook, so it works from a source checkout
without the .pth file.  It changes nothing unless ``DEV`` names the VK device.

Each entry names tests by ``fnmatch`` pattern over pytest node ids relative to the rootdir, and gives the reason.
Reasons fall in three kinds, kept as small as honesty allows:

* ``LAVAPIPE``: a bug of Mesa's lavapipe (llvmpipe) driver; applied only when the device is lavapipe.
* ``FEATURE``: the device lacks a feature the test needs.
* ``MULTI``: the test needs several physical devices (``VK:1``).
"""

from __future__ import annotations

import fnmatch
import os

import pytest

LAVAPIPE, FEATURE, MULTI = "lavapipe", "feature", "multi"

# (pattern, kind, reason, xfail?)  xfail entries still run and report XPASS if the bug goes away.
# Not listed: lavapipe's loop-iteration limit (test_masked_select), which the renderer keeps kernels under
# (vkbackend.tinygrad.renderer.loop_limit).
ENTRIES: list[tuple[str, str, str, bool]] = []


def _dev() -> str:
    return os.environ.get("DEV", "")


def _active() -> bool:
    return _dev().split(":")[0].split("+")[-1].upper() == "VK"


def _device_info():
    from vkbackend.tinygrad.runtime.ops_vk import vk_device, vk_device_ids  # noqa: PLC0415

    parts = _dev().split("+")[-1].split(":")
    idx = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return vk_device(idx).info if idx < len(vk_device_ids()) else None


def applies(kind: str, info) -> bool:
    if kind == LAVAPIPE:
        return info is not None and "llvmpipe" in info.name.lower()
    return True


def pytest_configure(config):
    import vkbackend.tinygrad  # noqa: F401,PLC0415 - the tinygrad.runtime.ops_vk import hook

    config.addinivalue_line("markers", "vkbackend_skip: listed in vkbackend.tinygrad.testing_skips")


def pytest_report_header(config):
    if not _active():
        return None
    return f"vkbackend.tinygrad.testing_skips: {len(ENTRIES)} entries for DEV={_dev()}"


def pytest_collection_modifyitems(config, items):
    if not _active() or not ENTRIES:
        return
    try:
        info = _device_info()
    except Exception:
        info = None  # noqa: BLE001 - no device: the tests themselves will say so
    entries = [(p, k, r, x) for p, k, r, x in ENTRIES if applies(k, info)]
    for item in items:
        for pattern, kind, reason, xfail in entries:
            if fnmatch.fnmatchcase(item.nodeid, pattern):
                text = f"[{kind}] {reason}"
                item.add_marker(
                    pytest.mark.xfail(reason=text, strict=False) if xfail else pytest.mark.skip(reason=text)
                )
                break
