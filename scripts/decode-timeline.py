#!/usr/bin/env python3
"""The timeline of a few GPT-2 decode tokens on VK: the caller's replays of the JIT's graphs, their hand-over to the
worker (where polling pays: a GPU's, not lavapipe's), the worker's submits and the GPU's own start and end of each
batch, in microseconds from each token's start, under ``VKBACKEND_TRACE`` (``bench --tinygrad``'s gpt2_decode workload
after two untimed passes). It shows where the GPU waits for the host within a token. The whole trace is written at
exit to ``VKBACKEND_TRACE`` where it is set, else to a temporary file whose name is printed.

    python3 scripts/decode-timeline.py
    python3 scripts/decode-timeline.py --quick --show 2

Tracing fences every batch and costs the caller a little at each event, so the times are longer than untraced ones;
the order of events is what it shows. GPU times are placed on the host's clock through
``VK_EXT_calibrated_timestamps`` where the device has it. Run it from a checkout (tinygrad 0.14.0 installed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=48, help="tokens decoded after the warm passes (default 48)")
    parser.add_argument("--show", type=int, default=3, help="tokens printed, the last ones (default 3)")
    parser.add_argument("--quick", action="store_true", help="the small model of bench --tinygrad --quick")
    args = parser.parse_args(argv)
    if not 1 <= args.show < args.tokens:
        parser.error("--show must be at least 1 and less than --tokens")
    os.environ["DEV"] = "VK"
    if not os.environ.get("VKBACKEND_TRACE"):
        os.environ["VKBACKEND_TRACE"] = os.path.join(tempfile.mkdtemp(), "trace.json")
        print(f"the whole trace goes to {os.environ['VKBACKEND_TRACE']} at exit")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tinygrad import Device

    import vkbackend.tinygrad  # noqa: F401 - the VK device, for a checkout that was never installed
    from vkbackend import trace
    from vkbackend.bench.tinygrad.cases import graph_runner_types, warm_gpt2_decoder

    token, seeded = warm_gpt2_decoder("VK", args.quick)
    for cls in graph_runner_types():
        _mark(cls, "__call__", "replay", "replayed", lambda runner: len(runner.calls), trace)
    _mark(type(Device["VK"].allocator), "_copyout", "copyout", None, lambda _: 0, trace)
    trace.clear()
    for k in range(args.tokens):
        trace.event("TOKEN", k)
        token(k % len(seeded), seeded[k % len(seeded)])
    trace.event("TOKEN", args.tokens)
    events = trace.events()
    starts = {serial: ns for ns, _, name, serial in events if name == "TOKEN"}
    print("us from the token's start, thread, event, serial (a batch's; a replay's: its graph's kernels)")
    for k in range(args.tokens - args.show, args.tokens):
        start, end = starts[k], starts[k + 1]
        print(f"--- token {k}: {(end - start) / 1e3:.1f} us")
        for ns, thread, name, serial in events:
            if start <= ns < end and name != "TOKEN":
                print(f"  {(ns - start) / 1e3:9.1f}  {thread[:18]:18s} {name:20s} {serial}")
    return 0


def _mark(owner, name: str, before: str, after: str | None, serial_of, trace) -> None:
    """Wrap ``owner.name`` with trace events before (and after) each call."""
    fn = getattr(owner, name)

    def wrapper(self, *args, **kwargs):
        trace.event(before, serial_of(self))
        try:
            return fn(self, *args, **kwargs)
        finally:
            if after is not None:
                trace.event(after, serial_of(self))

    setattr(owner, name, wrapper)


if __name__ == "__main__":
    sys.exit(main())
