"""The tensor-core layout probe's answers, kept on disk beside the pipeline caches (``vkbackend.config.cache_dir``),
so that a process on a GPU and driver probed before opens without running the probe again (110-260 ms of tinygrad's
``VK`` device's opening on an H200).

A file is named by the device as its pipeline cache is (pipeline-cache UUID, vendor, device and driver version) and
holds the tensor-core shapes the device offered, a digest of the probe and of the layouts it is matched against (the
source of ``coopmat_layout.py``, of the bfloat16 retyping in ``bf16_spirv.py`` and of the renderer's
``tensor_cores.py``), and the answer, signed with the cache folder's key (:mod:`vkbackend.cache_key`: a file written
by anyone else, or copied from elsewhere, is not trusted). It is used only where all of them are this process's;
anything else (another driver, a changed probe, a file that does not parse or is not signed) is ignored and the
probe runs, and a kept file is never a reason for the device not to open. Whether this process can compile the probe
(glslang 13) is the caller's check (ops_vk.py). Only a layout the renderer knows is kept, and only where no shape was
left out for a probe that did not compile: a device whose matrices stage is probed each time, so a probe that could
not run is not remembered as the device's answer.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from vkbackend import cache_key
from vkbackend.cache_files import device_stem, read_regular, write_atomically
from vkbackend.config import cache_dir
from vkbackend.tinygrad.compiler import bf16_spirv
from vkbackend.tinygrad.renderer import tensor_cores
from vkbackend.tinygrad.renderer.caps import DeviceCaps
from vkbackend.tinygrad.runtime import coopmat_layout
from vkbackend.tinygrad.runtime.coopmat_layout import FAMILIES, Probed

if TYPE_CHECKING:
    from vkbackend.discovery import DeviceInfo

__all__ = ["load", "store"]

log = logging.getLogger("vkbackend")

MAX_BYTES = 1 << 16  # a kept answer is a few hundred bytes: anything larger is not one


def load(info: DeviceInfo, caps: DeviceCaps) -> Probed | None:
    """The answer kept for the device ``info`` describes with tensor-core shapes ``caps.tc_shapes``, or None where
    none is kept that holds for this process (the reason logged)."""
    path = _path(info)
    try:
        kept = json.loads(_read(path))
        offered = [shape.token() for shape in caps.tc_shapes]
        if kept["probe"] != _probe_digest() or kept["offered"] != offered or kept["family"] not in FAMILIES:
            log.info("vkbackend: the tensor-core layout kept in %s is not this process's probe or shapes", path)
            return None
        key = cache_key.read_or_create(path.parent)
        if key is None or not hmac.compare_digest(str(kept["mac"]), _mac(key, path, kept)):
            log.info("vkbackend: ignoring the tensor-core layout kept in %s: not signed by this user's key", path)
            return None
        by_token = {shape.token(): shape for shape in caps.tc_shapes}
        return Probed(kept["family"], tuple(by_token[token] for token in kept["shapes"]))
    except FileNotFoundError:
        return None
    except Exception as error:  # noqa: BLE001 - whatever the file holds, the device opens and probes
        log.info("vkbackend: ignoring the tensor-core layout kept in %s (%r)", path, error)
        return None


def store(info: DeviceInfo, caps: DeviceCaps, probed: Probed) -> None:
    """Keep ``probed`` for the device ``info`` describes, written atomically; only a settled answer of a layout the
    renderer knows (see the module's doc). A failure is logged: it costs the next process the probe."""
    if probed.family not in FAMILIES or not probed.settled:
        return
    path = _path(info)
    try:
        kept = {
            "probe": _probe_digest(),
            "offered": [shape.token() for shape in caps.tc_shapes],
            "family": probed.family,
            "shapes": [shape.token() for shape in probed.shapes],
        }
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = cache_key.read_or_create(path.parent)
        if key is None:
            log.debug("vkbackend: the tensor-core layout is not kept: %s has no private key of this user", path.parent)
            return
        kept["mac"] = _mac(key, path, kept)
        write_atomically(path, json.dumps(kept).encode())
    except Exception as error:  # noqa: BLE001 - keeping the answer is never a reason for the device not to open
        log.warning("vkbackend: could not keep the tensor-core layout in %s: %r", path, error)


def _path(info: DeviceInfo) -> Path:
    return cache_dir() / f"tc-layout-{device_stem(info)}.json"


def _read(path: Path) -> str:
    """The file's text, if it is a regular file (not followed through a link) of at most MAX_BYTES."""
    data, st = read_regular(path, MAX_BYTES)
    if st.st_size > MAX_BYTES:
        raise ValueError("larger than a kept answer")
    return data.decode()


def _mac(key: bytes, path: Path, kept: dict) -> str:
    """The signature of an answer: its fields and the device its file is named for."""
    fields = {name: kept[name] for name in ("probe", "offered", "family", "shapes")}
    return cache_key.sign(key, f"{path.name} {json.dumps(fields, sort_keys=True)}")


@functools.cache
def _probe_digest() -> str:
    """A digest of the probe and of the layouts it tells apart: a change to either makes the kept answers stale."""
    digest = hashlib.sha256()
    for module in (coopmat_layout, bf16_spirv, tensor_cores):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()
