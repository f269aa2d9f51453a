"""The tensor-core layout probe's answers, kept on disk beside the pipeline caches (``vkbackend.config.cache_dir``),
so that a process on a GPU and driver probed before opens without running the probe again (110-260 ms of tinygrad's
``VK`` device's opening on an H200).

A file is named by the device as its pipeline cache is (pipeline-cache UUID, vendor, device and driver version) and
holds the tensor-core shapes the device offered, a digest of the probe and of the layouts it is matched against (the
source of ``coopmat_layout.py`` and of the renderer's ``tensor_cores.py``), and the answer, signed with the cache
folder's key (:mod:`vkbackend.cache_key`: a file written by anyone else, or copied from elsewhere, is not trusted). It
is used only where all of them are this process's; anything else (another driver, a changed probe, a file that does
not parse or is not signed) is ignored and the probe runs. Only a layout the renderer knows is kept, and only where
no shape was left out for a probe that did not compile: a device whose matrices stage is probed each time, so a probe
that could not run (no glslang 13 to compile it, say) is not remembered as the device's answer.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
from pathlib import Path

from vkbackend import cache_key
from vkbackend.config import cache_dir
from vkbackend.tinygrad.renderer import tensor_cores
from vkbackend.tinygrad.renderer.caps import DeviceCaps
from vkbackend.tinygrad.runtime import coopmat_layout
from vkbackend.tinygrad.runtime.coopmat_layout import FAMILIES, Probed

__all__ = ["load", "store"]

log = logging.getLogger("vkbackend")


def load(info, caps: DeviceCaps) -> Probed | None:
    """The answer kept for the device ``info`` describes (a :class:`vkbackend.DeviceInfo`) with tensor-core shapes
    ``caps.tc_shapes``, or None where none is kept that holds for this process."""
    path = _path(info)
    try:
        kept = json.loads(path.read_text())
        offered = [shape.token() for shape in caps.tc_shapes]
        if kept["probe"] != _probe_digest() or kept["offered"] != offered or kept["family"] not in FAMILIES:
            return None
        key = cache_key.read_or_create(path.parent)
        if key is None or not hmac.compare_digest(kept["mac"], _mac(key, path, kept)):
            log.info("vkbackend: ignoring the tensor-core layout kept in %s: not signed by this user's key", path)
            return None
        by_token = {shape.token(): shape for shape in caps.tc_shapes}
        return Probed(kept["family"], tuple(by_token[token] for token in kept["shapes"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.info("vkbackend: ignoring the tensor-core layout kept in %s (%s)", path, error)
        return None


def store(info, caps: DeviceCaps, probed: Probed) -> None:
    """Keep ``probed`` for the device ``info`` describes, written atomically; only a settled answer of a layout the
    renderer knows (see the module's doc). A failure to write is logged: it costs the next process the probe."""
    if probed.family not in FAMILIES or not probed.settled:
        return
    path = _path(info)
    kept = {
        "probe": _probe_digest(),
        "offered": [shape.token() for shape in caps.tc_shapes],
        "family": probed.family,
        "shapes": [shape.token() for shape in probed.shapes],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = cache_key.read_or_create(path.parent)
        if key is None:
            log.debug("vkbackend: the tensor-core layout is not kept: %s is not this user's private key", path.parent)
            return
        kept["mac"] = _mac(key, path, kept)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(kept))
        os.replace(tmp, path)
    except OSError as error:
        log.warning("vkbackend: could not keep the tensor-core layout in %s: %s", path, error)


def _path(info) -> Path:
    return cache_dir() / (
        f"tc-layout-{info.pipeline_cache_uuid}-{info.vendor_id:04x}-{info.device_id:04x}-{info.driver_version:08x}.json"
    )


def _mac(key: bytes, path: Path, kept: dict) -> str:
    """The signature of an answer: its fields and the device its file is named for."""
    fields = {name: kept[name] for name in ("probe", "offered", "family", "shapes")}
    return cache_key.sign(key, f"{path.name} {json.dumps(fields, sort_keys=True)}")


@functools.cache
def _probe_digest() -> str:
    """A digest of the probe and of the layouts it tells apart: a change to either makes the kept answers stale."""
    digest = hashlib.sha256()
    for module in (coopmat_layout, tensor_cores):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()
