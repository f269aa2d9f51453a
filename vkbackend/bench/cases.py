"""Our cases: each runs through vkbackend's public API on one open device, checks its result, and gives records."""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..device import Device
from . import kernels
from .child import run_module
from .compile_probe import DRIVER_CACHES_OFF
from .spec import OURS, Record, Sizes
from .timing import best_of, round_trips, wall

Plan = list[tuple[tuple[str, ...], Callable[[], list[Record]]]]
"""(case names, method) in the order they run; a method returns one record per name, in that order."""


class CaseError(Exception):
    """A case could not produce a figure (a child process failed, say); the message says why."""


class Skip(Exception):
    """A peer cannot run here (no adapter, no CUDA, no C compiler); the message says why."""


class CaseSet:
    """The cases of one implementation: ``plan`` names them, ``run`` runs them in order."""

    impl = ""
    log: Callable[[str], None] = print  # replaced by run's
    only: frozenset[str] | None = None  # replaced by run's

    def plan(self) -> Plan:
        """The cases this implementation runs."""
        raise NotImplementedError

    def selected(self, names: Sequence[str]) -> tuple[str, ...]:
        """Those of ``names`` that this run runs (all of them unless ``run`` was given ``only``)."""
        return tuple(name for name in names if self.only is None or name in self.only)

    def run(self, log: Callable[[str], None], only: Collection[str] | None = None) -> Iterator[Record]:
        """Every case's records as they come (only those of the cases in ``only``, when given: a method that also
        gives others runs, but their records are dropped); a case that raises gives records with no value and
        correct false."""
        self.log = log
        self.only = None if only is None else frozenset(only)
        for names, method in self.plan():
            if not self.selected(names):
                continue
            what = f"{self.impl}: {', '.join(self.selected(names))}"
            start = time.perf_counter()
            try:
                records = method()
            except Exception as error:  # noqa: BLE001 - one broken case must not hide the others' figures
                log(f"{what} failed: {type(error).__name__}: {error}")
                records = [Record.of(name, self.impl, None, False) for name in names]
            else:
                log(f"{what} ({time.perf_counter() - start:.1f} s)")
            yield from (record for record in records if self.only is None or record.case in self.only)


class OurCases(CaseSet):
    """The benchmark cases on ``dev`` (device index ``index``), at ``sizes``."""

    impl = OURS

    def __init__(self, dev: Device, index: int, sizes: Sizes) -> None:
        self.dev = dev
        self.index = index
        self.sizes = sizes
        self.pool = dev.memory_pool
        self.rng = np.random.default_rng(0)

    def plan(self) -> Plan:
        return [
            (("launch_chain",), self.launch_chain),
            (("launch_independent",), self.launch_independent),
            (("add_bw",), self.add_bw),
            (("upload", "download"), self.transfers),
            (("compile_cold", "compile_warm"), self.compile),
            (("alloc_release",), self.alloc_release),
            (("sync_idle",), self.sync_idle),
            (("launch_sync",), self.launch_sync),
            (("readback_small",), self.readback_small),
        ]

    def run(self, log: Callable[[str], None], only: Collection[str] | None = None) -> Iterator[Record]:
        """Warm the device first, then every case (those in ``only``, when given)."""
        log(f"warming {self.dev.info.name} for {self.sizes.warmup_s:g} s")
        self.warm_up()
        yield from super().run(log, only)

    # ----- helpers ------------------------------------------------------------------------------------------------
    @contextmanager
    def _buffers(self, *nbytes: int) -> Iterator[list[int]]:
        """Device buffers of the given sizes, released on exit."""
        ids: list[int] = []
        try:
            for n in nbytes:
                ids.append(self.pool.allocate(n))
            yield ids
        finally:
            for buf in ids:
                self.pool.release(buf)

    def _upload(self, array: np.ndarray, buf: int) -> None:
        self.pool.host_to_pool(array, buf)
        self.dev.sync()

    def _download(self, buf: int, count: int) -> np.ndarray:
        out = np.empty(count, np.float32)
        self.pool.pool_to_host(buf, out)
        return out

    def _launch_loop(self, prog: int, bindings: Sequence[list[int]], scalars: tuple, count: int) -> Callable[[], None]:
        """A procedure that launches ``prog`` ``count`` times (1 work group each), cycling through ``bindings``,
        then syncs once: the body of both launch cases."""
        launch, sync, grid = self.dev.launch, self.dev.sync, (1, 1, 1)

        def run() -> None:
            for bufs in itertools.islice(itertools.cycle(bindings), count):
                launch(prog, bufs, scalars, grid)
            sync()

        return run

    # ----- the cases ----------------------------------------------------------------------------------------------
    def warm_up(self) -> None:
        """About ``warmup_s`` of back-to-back add kernels, so clocks and caches are up before anything is timed."""
        n = min(self.sizes.elems, 4 << 20)
        prog = self.dev.compile(kernels.add_vec4())
        grid = kernels.add_grid(n // 4, self.dev.info.max_global_work_dims[0])
        with self._buffers(n * 4, n * 4, n * 4) as bufs:
            deadline = time.perf_counter() + self.sizes.warmup_s
            while time.perf_counter() < deadline:
                for _ in range(8):
                    self.dev.launch(prog, bufs, (n // 4,), grid)
                self.dev.sync()

    def _tiny_launches(self, case: str, n_buffers: int) -> list[Record]:
        """``launches`` tiny ``y += 1`` launches round robin over ``n_buffers`` buffers: us per launch."""
        s = self.sizes
        prog = self.dev.compile(kernels.inc())
        zeros = np.zeros(s.small_floats, np.float32)
        with self._buffers(*[s.small_floats * 4] * n_buffers) as bufs:

            def reset() -> None:
                for buf in bufs:
                    self.pool.host_to_pool(zeros, buf)
                self.dev.sync()

            run = self._launch_loop(prog, [[buf] for buf in bufs], (s.small_floats,), s.launches)
            seconds = best_of(wall(run), s.reps, setup=reset)
            expected = [s.launches // n_buffers + (1 if i < s.launches % n_buffers else 0) for i in range(n_buffers)]
            correct = all(np.all(self._download(buf, s.small_floats) == want) for buf, want in zip(bufs, expected))
        return [Record.of(case, OURS, seconds / s.launches * 1e6, correct)]

    def launch_chain(self) -> list[Record]:
        """Dependent launches on one buffer (each must see the last one's write)."""
        return self._tiny_launches("launch_chain", 1)

    def launch_independent(self) -> list[Record]:
        """Launches round robin over ``buffers`` buffers, so neighbours need no barrier between them."""
        return self._tiny_launches("launch_independent", self.sizes.buffers)

    def add_bw(self) -> list[Record]:
        """``c = a + b``, timed on the GPU (``launch_timed``): GB/s counting the 3 arrays once each.

        Arrays larger than the device can bind (maxStorageBufferRange, 128 MiB on lavapipe) are shrunk to fit.
        """
        s = self.sizes
        n = min(s.elems, self.dev.info.max_storage_buffer_range // 4) // 4 * 4
        if n < s.elems:
            self.log(f"vkbackend: add_bw on {n * 4 >> 20} MiB arrays, the most {self.dev.info.name} can bind")
        n4, nbytes = n // 4, n * 4
        prog = self.dev.compile(kernels.add_vec4())
        grid = kernels.add_grid(n4, self.dev.info.max_global_work_dims[0])
        a_h = self.rng.random(n, dtype=np.float32)
        b_h = self.rng.random(n, dtype=np.float32)
        with self._buffers(nbytes, nbytes, nbytes) as (a, b, c):
            self._upload(a_h, a)
            self._upload(b_h, b)
            seconds = best_of(lambda: self.dev.launch_timed(prog, [a, b, c], (n4,), grid) * 1e-9, s.kernel_reps)
            correct = np.array_equal(self._download(c, n), a_h + b_h)
        return [Record.of("add_bw", OURS, 3 * nbytes / seconds / 1e9, correct)]

    def transfers(self) -> list[Record]:
        """A float32 numpy array to a device buffer and back (wall clock, until the data is where it goes): GB/s.

        Both host arrays are allocated and touched once beforehand, so no sample pays for first-touch page faults.
        """
        s = self.sizes
        src = self.rng.random(s.elems, dtype=np.float32)
        dst = np.zeros(s.elems, np.float32)
        with self._buffers(s.array_bytes) as (buf,):
            up = best_of(wall(lambda: self._upload(src, buf)), s.reps)
            down = best_of(wall(lambda: self.pool.pool_to_host(buf, dst)), s.reps, setup=lambda: dst.fill(0))
            correct = np.array_equal(dst, src)
        gb = s.array_bytes / 1e9
        return [Record.of("upload", OURS, gb / up, correct), Record.of("download", OURS, gb / down, correct)]

    def compile(self) -> list[Record]:
        """``kernels`` distinct kernels compiled in a fresh process with an empty pipeline cache (cold), then in
        fresh processes seeded with the cache a cold run saved (warm): ms for all of them, device bring-up excluded.
        Each is the best of ``compile_reps`` processes.

        glslang runs here, beforehand: the children read SPIR-V files and time only ``Device.compile``. The cold
        children also time compiling the kernels' GLSL (``compile_glsl``, in-process or glslangValidator), which is
        logged, not recorded.
        """
        modules = kernels.compile_set(self.sizes.kernels)
        with tempfile.TemporaryDirectory(prefix="vkbackend-bench-") as tmp:
            spv_dir = Path(tmp, "spv")
            spv_dir.mkdir()
            for i, spirv in enumerate(modules):
                (spv_dir / f"k{i:03d}.spv").write_bytes(spirv)
            caches = (Path(tmp, f"cache{i}") for i in itertools.count())
            cache = Path(tmp, "unused")
            checks: dict[str, list[bool]] = {"cold": [], "warm": []}
            glsl: list[tuple[float, bool]] = []  # (ms, in-process) of each cold child

            def probe(what: str) -> float:
                glsl_args = ["--glsl", str(len(modules))] if what == "cold" else []
                result = run_module(
                    "vkbackend.bench.compile_probe",
                    ["--device", str(self.index), *glsl_args, str(spv_dir)],
                    {"VKBACKEND_CACHE_DIR": str(cache), **DRIVER_CACHES_OFF},
                    timeout_s=300,
                )
                if not result.ok or not result.lines:
                    raise CaseError(f"compile_{what}: {result.error or 'the probe printed nothing'}")
                line = result.lines[-1]
                if "glsl_ms" in line:
                    glsl.append((line["glsl_ms"], line["glsl_in_process"]))
                seeded = line["cache_bytes"] > 0
                checks[what].append(line["programs"] == len(modules) and seeded == (what == "warm"))
                return line["ms"] / 1e3

            def empty_cache() -> None:
                nonlocal cache
                cache = next(caches)
                cache.mkdir()

            cold = best_of(lambda: probe("cold"), self.sizes.compile_reps, warmup=0, setup=empty_cache)
            warm = best_of(lambda: probe("warm"), self.sizes.compile_reps, warmup=0)
            saved = sum(p.stat().st_size for p in cache.glob("*.bin"))
        if glsl:
            best, in_process = min(glsl)
            self.log(
                f"vkbackend: GLSL to SPIR-V of the {len(modules)} kernels took {best:.1f} ms in a fresh process "
                f"({'libglslang, in-process' if in_process else 'glslangValidator: libglslang could not be opened'})"
            )
        self.log(
            f"vkbackend: the pipeline cache a cold run saved holds {saved} bytes"
            + (" (a header only: this driver caches nothing)" if saved <= 32 else "")
        )
        return [
            Record.of("compile_cold", OURS, cold * 1e3, all(checks["cold"])),
            Record.of("compile_warm", OURS, warm * 1e3, all(checks["warm"])),
        ]

    def alloc_release(self) -> list[Record]:
        """``allocate`` + ``release`` of one small buffer, ``allocs`` times per sample: us per pair."""
        s = self.sizes
        before = self.pool.stats()["live_buffers"]

        def cycle() -> None:
            allocate, release = self.pool.allocate, self.pool.release
            for _ in range(s.allocs):
                release(allocate(s.alloc_bytes))

        seconds = best_of(wall(cycle), s.reps)
        correct = self.pool.stats()["live_buffers"] == before
        return [Record.of("alloc_release", OURS, seconds / s.allocs * 1e6, correct)]

    # ----- round trips: each timed on its own -----------------------------------------------------------------------
    def _timed_trips(self, trip: Callable[[], object]) -> list[float]:
        return round_trips(trip, self.sizes.roundtrips, self.sizes.roundtrip_warmup)

    def sync_idle(self) -> list[Record]:
        """``dev.sync()`` with nothing queued: correct when every sync returned (a sync raises any asynchronous
        error) and the one launch before them counted once."""
        s = self.sizes
        prog = self.dev.compile(kernels.inc())
        with self._buffers(s.small_floats * 4) as (buf,):
            self._upload(np.zeros(s.small_floats, np.float32), buf)
            self.dev.launch(prog, [buf], (s.small_floats,), (1, 1, 1))
            self.dev.sync()
            samples = self._timed_trips(self.dev.sync)
            correct = bool(np.all(self._download(buf, s.small_floats) == 1))
        return [Record.of_round_trips("sync_idle", OURS, samples, correct)]

    def launch_sync(self) -> list[Record]:
        """One one-group ``y += 1`` launch, then ``dev.sync()``: correct when the buffer counted every launch."""
        s = self.sizes
        prog = self.dev.compile(kernels.inc())
        launch, sync, scalars, grid = self.dev.launch, self.dev.sync, (s.small_floats,), (1, 1, 1)
        with self._buffers(s.small_floats * 4) as (buf,):
            self._upload(np.zeros(s.small_floats, np.float32), buf)
            bound = [buf]

            def trip() -> None:
                launch(prog, bound, scalars, grid)
                sync()

            samples = self._timed_trips(trip)
            want = s.roundtrip_warmup + s.roundtrips
            correct = bool(np.all(self._download(buf, s.small_floats) == want))
        return [Record.of_round_trips("launch_sync", OURS, samples, correct)]

    def readback_small(self) -> list[Record]:
        """One one-group ``y += 1`` launch, then ``pool_to_host`` of its buffer's first float (4 bytes, a sync
        point): correct when every read-back brought the count so far."""
        s = self.sizes
        prog = self.dev.compile(kernels.inc())
        launch, pool_to_host, scalars, grid = self.dev.launch, self.pool.pool_to_host, (s.small_floats,), (1, 1, 1)
        out = np.zeros(1, np.float32)
        seen: list[float] = []
        with self._buffers(s.small_floats * 4) as (buf,):
            self._upload(np.zeros(s.small_floats, np.float32), buf)
            bound = [buf]

            def trip() -> None:
                launch(prog, bound, scalars, grid)
                pool_to_host(buf, out)
                seen.append(float(out[0]))

            samples = self._timed_trips(trip)
        correct = seen == [float(i + 1) for i in range(s.roundtrip_warmup + s.roundtrips)]
        return [Record.of_round_trips("readback_small", OURS, samples, correct)]
