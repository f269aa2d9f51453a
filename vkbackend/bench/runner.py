"""The bench's driver: open the device, run our cases and the peers', print and write the results."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

from ..config import VulkanConfig, validation_enabled
from ..device import devices
from ..discovery import validation_messages
from ..errors import BackendError
from . import report
from .cases import OurCases
from .peers import NOTES, PEERS, run_peer
from .spec import CASE_BY_NAME, CASES, OURS, Record, Sizes, select


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(
    device: int = 0,
    json_path: str | None = None,
    plot_path: str | None = None,
    quick: bool = False,
    cases: Sequence[str] | None = None,
) -> int:
    """Run every case (or those named in ``cases``, see ``spec.select``) on device ``device`` and on each importable
    peer; print the table; write the JSON and plot.

    Progress goes to stderr, the table to stdout (to stderr when the JSON goes to stdout, ``json_path`` "-").
    Returns 0 when every one of our cases ran and passed its correctness check (and, under
    ``VKBACKEND_VALIDATION=1``, the validation layer said nothing), 1 when not, 2 when the device could not be opened
    or a case name is unknown.
    """
    try:
        names = select(cases)
    except ValueError as error:
        print(f"vkbackend bench: {error}", file=sys.stderr)
        return 2
    only = None if len(names) == len(CASES) else names
    shown = [CASE_BY_NAME[name] for name in names]
    sizes = Sizes.quick() if quick else Sizes.full()
    try:
        dev = devices(dataclasses.replace(VulkanConfig.from_env(), device_ids=[device]))[0]
    except BackendError as error:
        print(f"vkbackend bench: cannot open device {device}: {error}", file=sys.stderr)
        return 2
    title = f"vkbackend bench on {dev.info.name} (device {device}){' --quick' if quick else ''}"
    if only:
        title += f" --cases {','.join(only)}"
    _log(f"{title}: {sizes.describe()}")
    records: list[Record] = list(OurCases(dev, device, sizes).run(_log, only))
    for peer in PEERS:
        records += run_peer(peer, sizes, dev.info.name, _log, only)
    ran = {r.impl for r in records}
    out = sys.stderr if json_path == "-" else sys.stdout
    print(f"{title}\n{sizes.describe()}\n", file=out)
    print(report.table(records, [NOTES[peer] for peer in PEERS if peer in ran], shown), file=out)
    if json_path:
        report.write_json(records, json_path)
        if json_path != "-":
            _log(f"wrote {json_path}")
    if plot_path:
        why_not = report.plot(records, plot_path, f"{title}\n{sizes.describe()}", shown)
        _log(why_not or f"wrote {plot_path}")
    ours = [r for r in records if r.impl == OURS]
    clean = True
    if validation_enabled():  # VKBACKEND_VALIDATION=1 (the test suite's default): anything the layer said fails
        messages = validation_messages()
        clean = not messages
        if messages:
            _log(f"validation layer messages:\n{messages}")
    return 0 if ours and all(r.correct for r in ours) and clean else 1
