"""The peers: the same cases on a raw-Vulkan C program, on wgpu-py and on PyTorch CUDA, each in a child process.

The C reference (``vulkan_ref``) runs the launch and transfer cases as a plain Vulkan program would, and is skipped
without a C compiler or the Vulkan headers. wgpu-py records tiny launches into one compute pass, torch launches them
eagerly, each with one sync at the end; for both, ``c = a + b`` is the wall time of 20 back-to-back launches and the
transfers move ordinary (pageable) host memory. A Python peer that is not importable, or (torch) has no CUDA device,
is skipped with a reason. None has a persistent pipeline cache we could fill, so none runs the compile cases. The
round-trip cases (sync_idle, launch_sync, readback_small) run on the C reference and torch; wgpu-py skips them.

``python -m vkbackend.bench.peers vulkan-c|wgpu|torch --sizes JSON [--device-name NAME]`` is the child; ``run_peer``
starts it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import json
from collections.abc import Callable, Sequence

import numpy as np

from . import vulkan_ref
from .cases import CaseSet, Plan, Skip
from .child import emit, run_module
from .spec import Record, Sizes
from .timing import best_of, round_trips, wall

PEERS = (vulkan_ref.IMPL, "wgpu", "torch")
PYTHON_PEERS = ("wgpu", "torch")
"""The peers that are Python packages of that name: one that is not importable is skipped without a child."""
ADD_REPEAT = 20  # launches per add_bw sample, as wgpu's and torch's reference scripts did

NOTES = {
    vulkan_ref.IMPL: vulkan_ref.NOTE,
    "wgpu": "wgpu: launches recorded into one compute pass (one submit); add_bw = wall time of 20 dispatches in one "
    "pass; upload/download = queue.write_buffer / queue.read_buffer; no round-trip cases",
    "torch": "torch: eager add_(1) launches; add_bw = wall time of 20 torch.add; upload/download from/into a "
    "pageable numpy array (torch.from_numpy); sync_idle = torch.cuda.synchronize(), launch_sync = add_(1) "
    "then synchronize, readback_small = add_(1)[0].item()",
}
"""How each peer measures, where it differs from ours, for the report's footnotes."""


# ----- wgpu ---------------------------------------------------------------------------------------------------------
WGSL_INC = """
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i < arrayLength(&y)) { y[i] = y[i] + 1.0; }
}
"""

WGSL_ADD = """
@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i < arrayLength(&c)) { c[i] = a[i] + b[i]; }
}
"""


class WgpuCases(CaseSet):
    """wgpu-py on the adapter named like our device (else the high-performance one)."""

    impl = "wgpu"

    def __init__(self, sizes: Sizes, device_name: str | None) -> None:
        import wgpu

        self.wgpu, self.sizes = wgpu, sizes
        adapter = self._adapter(device_name)
        limits = adapter.limits
        self.max_binding = min(limits["max-storage-buffer-binding-size"], limits["max-buffer-size"])
        self.max_groups = limits["max-compute-workgroups-per-dimension"]
        self.device = adapter.request_device_sync(
            required_limits={
                "max-storage-buffer-binding-size": self.max_binding,
                "max-buffer-size": limits["max-buffer-size"],
            }
        )
        info = dict(adapter.info)
        emit(info=f"wgpu: wgpu-py {wgpu.__version__} on {info.get('device')} ({info.get('backend_type')})")
        self.inc = self._pipeline(WGSL_INC)
        self.sync_buf = self._buffer(16)

    def _adapter(self, device_name: str | None):
        gpu = self.wgpu.gpu
        adapters = gpu.enumerate_adapters_sync() if hasattr(gpu, "enumerate_adapters_sync") else []
        for adapter in adapters:
            info = dict(adapter.info)
            if info.get("device") == device_name and str(info.get("backend_type", "")).lower() == "vulkan":
                return adapter
        adapter = gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise Skip("wgpu found no adapter")
        return adapter

    def plan(self) -> Plan:
        return [
            (("launch_chain",), self.launch_chain),
            (("launch_independent",), self.launch_independent),
            (("add_bw", "upload", "download"), self.arrays),
            (("alloc_release",), self.alloc_release),
        ]

    def _buffer(self, nbytes: int):
        u = self.wgpu.BufferUsage
        return self.device.create_buffer(size=nbytes, usage=u.STORAGE | u.COPY_SRC | u.COPY_DST)

    def _pipeline(self, source: str):
        module = self.device.create_shader_module(code=source)
        return self.device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})

    def _bind(self, pipeline, buffers: list):
        return self.device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)
            ],
        )

    def _sync(self) -> None:
        self.device.queue.read_buffer(self.sync_buf, 0, 4)  # maps after everything submitted before it

    def _read(self, buf) -> np.ndarray:
        return np.frombuffer(self.device.queue.read_buffer(buf), np.float32)

    def _tiny_launches(self, case: str, n_buffers: int) -> list[Record]:
        s = self.sizes
        zeros = np.zeros(s.small_floats, np.float32)
        bufs = [self._buffer(s.small_floats * 4) for _ in range(n_buffers)]
        groups = [self._bind(self.inc, [b]) for b in bufs]

        def reset() -> None:
            for b in bufs:
                self.device.queue.write_buffer(b, 0, zeros)
            self._sync()

        def run() -> None:
            encoder = self.device.create_command_encoder()
            cp = encoder.begin_compute_pass()
            cp.set_pipeline(self.inc)
            if n_buffers == 1:
                cp.set_bind_group(0, groups[0])
            for group in itertools.islice(itertools.cycle(groups), s.launches):
                if n_buffers > 1:
                    cp.set_bind_group(0, group)
                cp.dispatch_workgroups(1, 1, 1)
            cp.end()
            self.device.queue.submit([encoder.finish()])
            self._sync()

        seconds = best_of(wall(run), s.reps, setup=reset)
        expected = [s.launches // n_buffers + (1 if i < s.launches % n_buffers else 0) for i in range(n_buffers)]
        correct = all(np.all(self._read(b) == want) for b, want in zip(bufs, expected))
        for b in bufs:
            b.destroy()
        return [Record.of(case, self.impl, seconds / s.launches * 1e6, correct)]

    def launch_chain(self) -> list[Record]:
        return self._tiny_launches("launch_chain", 1)

    def launch_independent(self) -> list[Record]:
        return self._tiny_launches("launch_independent", self.sizes.buffers)

    def arrays(self) -> list[Record]:
        """add_bw, upload and download on the same arrays (shrunk to the adapter's binding limit if need be)."""
        s = self.sizes
        n = min(s.elems, self.max_binding // 4) // 4 * 4
        nbytes = n * 4
        if n < s.elems:
            self.log(f"wgpu: add_bw, upload, download on {nbytes >> 20} MiB arrays, the most the adapter can bind")
        rng = np.random.default_rng(0)
        a_h, b_h = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        a, b, c = self._buffer(nbytes), self._buffer(nbytes), self._buffer(nbytes)
        queue = self.device.queue
        up = best_of(wall(lambda: (queue.write_buffer(a, 0, a_h), self._sync())), s.reps)
        up_ok = np.array_equal(self._read(a), a_h)
        queue.write_buffer(b, 0, b_h)
        add = self._pipeline(WGSL_ADD)
        group = self._bind(add, [a, b, c])
        blocks = -(-n // 4 // 256)
        gx = min(blocks, self.max_groups)
        gy = -(-blocks // gx)

        def run_add() -> None:
            encoder = self.device.create_command_encoder()
            cp = encoder.begin_compute_pass()
            cp.set_pipeline(add)
            cp.set_bind_group(0, group)
            for _ in range(ADD_REPEAT):
                cp.dispatch_workgroups(gx, gy, 1)
            cp.end()
            queue.submit([encoder.finish()])
            self._sync()

        add_s = best_of(wall(run_add), s.reps) / ADD_REPEAT
        out: list[np.ndarray] = []
        down = best_of(wall(lambda: out.append(self._read(c))), s.reps, setup=out.clear)
        add_ok = np.array_equal(out[-1], a_h + b_h)
        for buf in (a, b, c):
            buf.destroy()
        return [
            Record.of("add_bw", self.impl, 3 * nbytes / add_s / 1e9, add_ok),
            Record.of("upload", self.impl, nbytes / up / 1e9, up_ok),
            Record.of("download", self.impl, nbytes / down / 1e9, add_ok),
        ]

    def alloc_release(self) -> list[Record]:
        s = self.sizes
        u = self.wgpu.BufferUsage

        def cycle() -> None:
            create = self.device.create_buffer
            for _ in range(s.allocs):
                create(size=s.alloc_bytes, usage=u.STORAGE | u.COPY_DST).destroy()

        seconds = best_of(wall(cycle), s.reps)
        return [Record.of("alloc_release", self.impl, seconds / s.allocs * 1e6, True)]


# ----- torch --------------------------------------------------------------------------------------------------------
class TorchCases(CaseSet):
    """PyTorch CUDA, on the CUDA device named like ours (else cuda:0)."""

    impl = "torch"

    def __init__(self, sizes: Sizes, device_name: str | None) -> None:
        import torch

        if not torch.cuda.is_available():
            raise Skip(f"torch {torch.__version__} has no CUDA device")
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        index = names.index(device_name) if device_name in names else 0
        self.torch, self.sizes, self.dev = torch, sizes, f"cuda:{index}"
        emit(info=f"torch: torch {torch.__version__} on {names[index]} ({self.dev})")

    def plan(self) -> Plan:
        return [
            (("launch_chain",), self.launch_chain),
            (("launch_independent",), self.launch_independent),
            (("add_bw",), self.add_bw),
            (("upload", "download"), self.transfers),
            (("alloc_release",), self.alloc_release),
            (("sync_idle",), self.sync_idle),
            (("launch_sync",), self.launch_sync),
            (("readback_small",), self.readback_small),
        ]

    def _sync(self) -> None:
        self.torch.cuda.synchronize(self.dev)

    def _tiny_launches(self, case: str, n_buffers: int) -> list[Record]:
        s = self.sizes
        ys = [self.torch.zeros(s.small_floats, device=self.dev) for _ in range(n_buffers)]

        def reset() -> None:
            for y in ys:
                y.zero_()
            self._sync()

        def run() -> None:
            for y in itertools.islice(itertools.cycle(ys), s.launches):
                y.add_(1.0)
            self._sync()

        seconds = best_of(wall(run), s.reps, setup=reset)
        expected = [s.launches // n_buffers + (1 if i < s.launches % n_buffers else 0) for i in range(n_buffers)]
        correct = all(bool((y == want).all()) for y, want in zip(ys, expected))
        return [Record.of(case, self.impl, seconds / s.launches * 1e6, correct)]

    def launch_chain(self) -> list[Record]:
        return self._tiny_launches("launch_chain", 1)

    def launch_independent(self) -> list[Record]:
        return self._tiny_launches("launch_independent", self.sizes.buffers)

    def add_bw(self) -> list[Record]:
        s, torch = self.sizes, self.torch
        rng = np.random.default_rng(0)
        a_h, b_h = rng.random(s.elems, dtype=np.float32), rng.random(s.elems, dtype=np.float32)
        a, b = torch.from_numpy(a_h).to(self.dev), torch.from_numpy(b_h).to(self.dev)
        c = torch.empty_like(a)

        def run() -> None:
            for _ in range(ADD_REPEAT):
                torch.add(a, b, out=c)
            self._sync()

        seconds = best_of(wall(run), s.reps) / ADD_REPEAT
        correct = np.array_equal(c.cpu().numpy(), a_h + b_h)
        return [Record.of("add_bw", self.impl, 3 * s.array_bytes / seconds / 1e9, correct)]

    def transfers(self) -> list[Record]:
        s, torch = self.sizes, self.torch
        src = np.random.default_rng(0).random(s.elems, dtype=np.float32)
        dst = np.zeros(s.elems, np.float32)
        on_device: list = []

        def upload() -> None:
            on_device[:] = [torch.from_numpy(src).to(self.dev)]
            self._sync()

        def download() -> None:
            torch.from_numpy(dst).copy_(on_device[0])
            self._sync()

        up = best_of(wall(upload), s.reps)
        down = best_of(wall(download), s.reps, setup=lambda: dst.fill(0))
        correct = np.array_equal(dst, src)
        gb = s.array_bytes / 1e9
        return [Record.of("upload", self.impl, gb / up, correct), Record.of("download", self.impl, gb / down, correct)]

    def alloc_release(self) -> list[Record]:
        s, torch = self.sizes, self.torch
        floats = s.alloc_bytes // 4

        def cycle() -> None:
            for _ in range(s.allocs):
                torch.empty(floats, device=self.dev)
            self._sync()

        seconds = best_of(wall(cycle), s.reps)
        return [Record.of("alloc_release", self.impl, seconds / s.allocs * 1e6, True)]

    def _timed_trips(self, trip: Callable[[], object]) -> list[float]:
        return round_trips(trip, self.sizes.roundtrips, self.sizes.roundtrip_warmup)

    def sync_idle(self) -> list[Record]:
        """``torch.cuda.synchronize()`` with nothing queued; correct when the one add_(1) before them counted once."""
        y = self.torch.zeros(self.sizes.small_floats, device=self.dev)
        y.add_(1.0)
        self._sync()
        samples = self._timed_trips(self._sync)
        return [Record.of_round_trips("sync_idle", self.impl, samples, bool((y == 1).all()))]

    def launch_sync(self) -> list[Record]:
        """``y.add_(1)`` then ``torch.cuda.synchronize()``; correct when y counted every launch."""
        s = self.sizes
        y = self.torch.zeros(s.small_floats, device=self.dev)
        self._sync()

        def trip() -> None:
            y.add_(1.0)
            self._sync()

        samples = self._timed_trips(trip)
        correct = bool((y == s.roundtrip_warmup + s.roundtrips).all())
        return [Record.of_round_trips("launch_sync", self.impl, samples, correct)]

    def readback_small(self) -> list[Record]:
        """``x.add_(1)[0].item()`` (the launch, then a 4-byte copy to the host that waits for it); correct when every
        read-back brought the count so far."""
        s = self.sizes
        x = self.torch.zeros(s.small_floats, device=self.dev)
        self._sync()
        seen: list[float] = []
        samples = self._timed_trips(lambda: seen.append(x.add_(1.0)[0].item()))
        correct = seen == [float(i + 1) for i in range(s.roundtrip_warmup + s.roundtrips)]
        return [Record.of_round_trips("readback_small", self.impl, samples, correct)]


PEER_CLASSES: dict[str, Callable[[Sizes, str | None], CaseSet]] = {
    vulkan_ref.IMPL: vulkan_ref.VulkanRefCases,
    "wgpu": WgpuCases,
    "torch": TorchCases,
}


# ----- the parent's side --------------------------------------------------------------------------------------------
def run_peer(
    peer: str, sizes: Sizes, device_name: str, log: Callable[[str], None], only: Sequence[str] | None = None
) -> list[Record]:
    """The peer's records (of the cases in ``only``, when given), from a child process; none (and a logged reason)
    when it is skipped or fails."""
    if peer in PYTHON_PEERS and importlib.util.find_spec(peer) is None:
        log(f"{peer}: skipped, not importable")
        return []
    log(f"{peer}: running in a child process")
    args = [peer, "--sizes", json.dumps(dataclasses.asdict(sizes)), "--device-name", device_name]
    if only is not None:
        args += ["--cases", ",".join(only)]
    result = run_module("vkbackend.bench.peers", args, timeout_s=900)
    records = []
    for line in result.lines:
        if "skip" in line:
            log(f"{peer}: skipped, {line['skip']}")
        elif "info" in line:
            log(line["info"])
        elif "case" in line:
            records.append(Record.from_json(line))
    if result.error:
        log(f"{peer}: {result.error}")
    return records


# ----- the child's side ---------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkbackend.bench.peers")
    parser.add_argument("peer", choices=PEERS)
    parser.add_argument("--sizes", required=True, help="Sizes as JSON")
    parser.add_argument("--device-name", default=None)
    parser.add_argument("--cases", default=None, help="only these cases, comma-separated")
    args = parser.parse_args(argv)
    sizes = Sizes(**json.loads(args.sizes))
    try:
        cases = PEER_CLASSES[args.peer](sizes, args.device_name)
    except Skip as reason:
        emit(skip=str(reason))
        return 0
    only = None if args.cases is None else args.cases.split(",")
    for record in cases.run(lambda message: emit(info=message), only):
        emit(**record.to_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
