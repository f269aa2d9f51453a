"""The tensor-core layout probe's answers kept on disk (vkbackend/tinygrad/runtime/layout_cache.py): a process on a
GPU and driver probed before skips the probe; anything that does not hold for this process is ignored and probed
anew. The probe is faked here (lavapipe has no cooperative matrices); the device's opening calls ``_tc_layout``."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from vkbackend.errors import BackendError, ErrorStatus
from vkbackend.tinygrad.renderer.caps import DeviceCaps, TCShape
from vkbackend.tinygrad.runtime import layout_cache, ops_vk
from vkbackend.tinygrad.runtime.coopmat_layout import Probed

F16 = TCShape(16, 16, 16, "f16", "f32")
F16_8 = TCShape(16, 8, 16, "f16", "f32")
BF16 = TCShape(16, 16, 16, "bf16", "f32")
CAPS = DeviceCaps(f16=True, tc_threads=32, tc_shapes=(F16, F16_8, BF16))
NV = Probed("nv", (F16, F16_8, BF16))


class FakeDevice:
    """What ``_tc_layout`` uses of a vkbackend.Device, on a pretend NVIDIA GPU."""

    def __init__(self, driver_version: int = 0x91000000) -> None:
        self.index = 0
        self.info = SimpleNamespace(
            name="fake H200", pipeline_cache_uuid="ab" * 16, vendor_id=0x10DE, device_id=0x2335,
            driver_version=driver_version, local_mem_size=49152,
        )  # fmt: skip
        self.syncs = 0

    def sync(self) -> None:
        self.syncs += 1


@pytest.fixture
def probes(monkeypatch, tmp_path) -> list:
    """Each run of the (fake) probe, answering what ``probes.answer`` holds; a new process each ``_tc_layout`` call
    (the in-process answers cleared), and an empty cache folder."""
    monkeypatch.setenv("VKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    ran: list = []
    answer = [NV]

    def probe(device, caps):
        ran.append(device.info.driver_version)
        if isinstance(answer[0], Exception):
            raise answer[0]
        return answer[0]

    monkeypatch.setattr(ops_vk, "probe_layout", probe)
    monkeypatch.setattr(ops_vk, "_tc_layouts", {})
    probes = SimpleNamespace(ran=ran, answer=answer, folder=tmp_path / "cache", compiles=True, compiled=[])

    def compiles(shapes, shared_max):
        probes.compiled.append(tuple(shapes))
        return probes.compiles

    monkeypatch.setattr(ops_vk, "probe_compiles", compiles)

    def layout(device, caps=CAPS):
        ops_vk._tc_layouts.clear()  # as in a new process
        return ops_vk._tc_layout(device, caps)

    probes.layout = layout
    return probes


def test_a_later_process_on_the_same_driver_skips_the_probe(probes):
    device = FakeDevice()
    assert probes.layout(device) == NV and probes.ran == [0x91000000] and device.syncs == 1
    assert len(list(probes.folder.glob("tc-layout-*.json"))) == 1
    again = FakeDevice()
    kept = probes.layout(again)
    assert kept == NV and kept.shapes == NV.shapes and probes.ran == [0x91000000]  # from disk, not probed
    assert again.syncs == 0 and probes.compiled == [NV.shapes]  # nothing ran on the device; the probe compiles here
    probes.compiles = False  # this process cannot compile the probe (no glslang 13): nor its tensor-core kernels
    assert probes.layout(again) == NV and len(probes.ran) == 2  # so the probe runs (and, really, fails: staged)
    probes.compiles = True
    assert probes.layout(FakeDevice(driver_version=0x92000000)) == NV
    assert probes.ran == [0x91000000, 0x91000000, 0x92000000]  # another driver: probed anew


def test_an_answer_that_does_not_hold_for_this_process_is_probed_anew(probes, monkeypatch, caplog):
    device = FakeDevice()
    probes.layout(device)
    more = DeviceCaps(f16=True, tc_threads=32, tc_shapes=(*CAPS.tc_shapes, TCShape(16, 8, 8, "f16", "f16")))
    assert probes.layout(device, more) == NV  # a shape more offered, which the kept answer never probed
    assert len(probes.ran) == 2
    (path,) = probes.folder.glob("tc-layout-*.json")
    digest = layout_cache._probe_digest
    monkeypatch.setattr(layout_cache, "_probe_digest", lambda: "another probe")
    probes.layout(device, more)
    assert len(probes.ran) == 3  # the probe or the layouts changed
    monkeypatch.setattr(layout_cache, "_probe_digest", digest)
    path.write_text('{"probe": ')
    with caplog.at_level(logging.INFO, logger="vkbackend"):
        assert probes.layout(device, more) == NV
    assert len(probes.ran) == 4 and "ignoring the tensor-core layout kept" in caplog.text
    kept = json.loads(path.read_text())  # written anew
    kept["shapes"].append("m8.8.8.f16.f32")  # a shape the device does not offer, signed as this user's
    kept["mac"] = layout_cache._mac(layout_cache.cache_key.read_or_create(probes.folder), path, kept)
    path.write_text(json.dumps(kept))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="vkbackend"):
        probes.layout(device, more)
    assert len(probes.ran) == 5 and "KeyError('m8.8.8.f16.f32')" in caplog.text


@pytest.mark.parametrize("content", ["[" * 100_000, "{}" + " " * (1 << 17), "link"])
def test_a_file_that_is_no_kept_answer_never_stops_the_device_opening(probes, content):
    """Deeply nested JSON, an oversized file, a link: ignored (logged), the probe runs."""
    device = FakeDevice()
    probes.layout(device)
    (path,) = probes.folder.glob("tc-layout-*.json")
    if content == "link":
        target = probes.folder / "elsewhere.json"
        target.write_text(path.read_text())
        path.unlink()
        path.symlink_to(target)
    else:
        path.write_text(content)
    assert probes.layout(device) == NV and len(probes.ran) == 2


@pytest.mark.parametrize(
    "answer",
    [
        Probed("chunk", (F16, F16_8, BF16)),  # no layout the renderer knows: staged, probed each time
        Probed("nv", (F16, F16_8), settled=False),  # a bfloat16 probe did not compile: another glslang might
        BackendError(ErrorStatus.DeviceLost, "the probe failed"),
    ],
)
def test_only_a_settled_known_layout_is_kept(probes, answer):
    probes.answer[0] = answer
    first = probes.layout(FakeDevice())
    assert first == (answer if isinstance(answer, Probed) else Probed("chunk", CAPS.tc_shapes))
    assert not list(probes.folder.glob("tc-layout-*.json"))
    probes.layout(FakeDevice())
    assert len(probes.ran) == 2


def test_a_folder_that_cannot_be_written_costs_only_the_next_probe(probes, caplog):
    probes.folder.parent.mkdir(parents=True, exist_ok=True)
    probes.folder.write_text("a file where the folder would be")
    with caplog.at_level(logging.WARNING, logger="vkbackend"):
        assert probes.layout(FakeDevice()) == NV
    assert "could not keep the tensor-core layout" in caplog.text
    assert probes.layout(FakeDevice()) == NV and len(probes.ran) == 2


def test_an_answer_not_signed_by_this_users_key_is_not_trusted(probes, caplog):
    """A file that claims a layout without this user's key (written by someone else, copied from another machine, or
    with the key readable by others) is ignored: the probe runs, and a wrong answer never reaches the renderer."""
    device = FakeDevice()
    probes.layout(device)
    (path,) = probes.folder.glob("tc-layout-*.json")
    kept = json.loads(path.read_text())
    kept["mac"] = layout_cache.cache_key.sign(b"k" * 32, "another machine's")
    path.write_text(json.dumps(kept))
    with caplog.at_level(logging.INFO, logger="vkbackend"):
        assert probes.layout(device) == NV
    assert len(probes.ran) == 2 and "not signed by this user's key" in caplog.text
    assert probes.layout(device) == NV and len(probes.ran) == 2  # signed again by the probe's run
    (probes.folder / layout_cache.cache_key.KEY_NAME).chmod(0o644)  # a key others can read signs nothing
    probes.layout(device)
    probes.layout(device)
    assert len(probes.ran) == 4


def test_whether_the_probe_compiles_here(monkeypatch):
    """A refused compile of any module means no; any other error is raised."""
    from vkbackend.tinygrad.runtime import coopmat_layout

    def compiled(shapes):
        if shapes[0].dtype_in == "bf16":
            raise BackendError(ErrorStatus.KernelCompilation, "no bfloat16 cooperative matrices in this glslang")
        return b""

    monkeypatch.setattr(coopmat_layout, "_compiled", compiled)
    assert coopmat_layout.probe_compiles((F16, F16_8), 49152)
    assert not coopmat_layout.probe_compiles((F16, F16_8, BF16), 49152)

    def lost(shapes):
        raise BackendError(ErrorStatus.DeviceLost, "lost")

    monkeypatch.setattr(coopmat_layout, "_compiled", lost)
    with pytest.raises(BackendError, match="lost"):
        coopmat_layout.probe_compiles((F16,), 49152)
