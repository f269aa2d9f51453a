"""The bench's outputs: the side-by-side table, the JSON records and the PNG bar chart."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from .spec import CASES, IMPLS, ROUND_TRIPS, Case, Record
from .units import number, rescale

SPREAD_FIELDS = ("value", "min", "p99", "p90", "max")
"""The fields of a record (or a TgRecord) that are figures in its unit."""


def _index(records: Sequence[Record]) -> dict[tuple[str, str], Record]:
    return {(r.case, r.impl): r for r in records}


def _figure(record: Record | None) -> str:
    return "-" if record is None else record.cell()


def ratio(ours: Record | None, peer: Record | None, higher_is_better: bool) -> tuple[float, bool] | None:
    """ours / peer and whether ours is the better figure (lower time, higher bandwidth); None without both."""
    if ours is None or peer is None or not ours.value or not peer.value:
        return None
    value = ours.value / peer.value
    return value, (value > 1) == higher_is_better and value != 1


def speedup(value: float, higher_is_better: bool) -> float:
    """How many times faster ours is than the peer, from ours / peer (below 1: slower)."""
    return value if higher_is_better else 1 / value


def verdict(factor: float) -> str:
    """A speed-up as words: ``"3x faster"``, ``"1.03x slower"``, ``"as fast"`` (within 0.5%)."""
    if abs(math.log(factor)) < 0.005:
        return "as fast"
    return f"{number(factor)}x faster" if factor > 1 else f"{number(1 / factor)}x slower"


def ratio_text(ours: Record | None, peer: Record | None, higher_is_better: bool) -> str:
    """The table's ratio cell, which the plot's labels repeat: ``"0.969 (1.03x slower)"``; "-" without both."""
    r = ratio(ours, peer, higher_is_better)
    if r is None:
        return "-"
    return f"{r[0]:.3g} ({verdict(speedup(r[0], higher_is_better))})"


def scaled(record: Record | None, factor: float) -> Record | None:
    """The record with every figure multiplied by ``factor`` (a change of unit; see ``units.rescale``)."""
    if record is None or factor == 1:
        return record
    changes = {
        name: getattr(record, name) * factor for name in SPREAD_FIELDS if getattr(record, name, None) is not None
    }
    return dataclasses.replace(record, **changes)


def columns(rows: list[list[str]], left: int) -> list[str]:
    """``rows`` (the first is the header) as aligned text: the first ``left`` columns flush left, the rest right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) if i < left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _p99(record: Record | None) -> Record | None:
    """The record with its p99 as its figure: a round-trip case's second row."""
    return None if record is None else dataclasses.replace(record, value=record.p99)


def table(
    records: Sequence[Record],
    notes: Sequence[str] = (),
    cases: Sequence[Case] = CASES,
    impls: Sequence[str] = IMPLS,
    ours_label: str = "ours",
    labels: dict[str, str] | None = None,
) -> str:
    """One row per case (``labels`` may rename a case's row): the unit, chosen per row so that its figures read
    naturally (``units.rescale``), our figure (``impls[0]``), and each peer that ran with our ratio to it. A
    round-trip case has two rows, its median and its p99."""
    by = _index(records)
    labels = labels or {}
    ours_impl = impls[0]
    peers = [impl for impl in impls[1:] if any(r.impl == impl for r in records)]
    header = ["case", "unit", "better", ours_impl]
    for peer in peers:
        header += [peer, f"{ours_label}/{peer}"]
    rows = [header]
    for case in cases:
        name = labels.get(case.name, case.name)
        views = [(name, lambda r: r)]
        if case.name in ROUND_TRIPS:
            views = [(f"{name} median", lambda r: r), (f"{name} p99", _p99)]
        for label, view in views:
            ours = view(by.get((case.name, ours_impl)))
            others = [view(by.get((case.name, peer))) for peer in peers]
            factor, unit = rescale([r.value for r in [ours, *others] if r is not None and r.value], case.unit)
            row = [label, unit, case.better, _figure(scaled(ours, factor))]
            for other in others:
                row += [_figure(scaled(other, factor)), ratio_text(ours, other, case.higher_is_better)]
            rows.append(row)
    lines = columns(rows, 3)
    footer = []
    if any(case.name in ROUND_TRIPS for case in cases):
        footer.append("median, p99: of every round trip, each timed on its own (min and max are in the JSON)")
    if peers:
        footer.append(
            f"{ours_label}/peer: our figure divided by the peer's, then how many times faster or slower ours is"
        )
    footer.append("units: chosen per row; the JSON keeps each case's own unit")
    cold, warm = by.get(("compile_cold", ours_impl)), by.get(("compile_warm", ours_impl))
    if cold and warm and cold.value and warm.value:
        footer.append(
            f"compile_cold / compile_warm = {cold.value / warm.value:.3g} (the speed-up of a filled pipeline cache)"
        )
    if any(not r.correct for r in records):
        footer.append("! or FAILED: the case's correctness check failed, or the case did not run")
    return "\n".join(lines + [""] + footer + list(notes))


def write_json(records: Sequence[Record], path: str | Path) -> None:
    """The records as a JSON list, each its ``to_json()`` ({"case", "impl", "value", "unit", "correct"}, and more:
    a round-trip case's "min", "p99" and "max"), each figure in its case's own unit. ``path`` "-" is stdout."""
    text = json.dumps([r.to_json() for r in records], indent=1) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(path).write_text(text)


def bar_labels(
    records: Sequence[Record], case: Case, impls: Sequence[str] = IMPLS, ours_label: str = "ours"
) -> list[tuple[str, Record, str]]:
    """(impl, record, x label) of each bar of ``case``'s panel: the implementations with a figure, each peer's label
    carrying the table's ratio to it (``ratio_text``)."""
    by = _index(records)
    ours = by.get((case.name, impls[0]))
    bars = []
    for impl in impls:
        r = by.get((case.name, impl))
        if r is None or not r.value:
            continue
        label = impl
        if impl != impls[0] and ratio(ours, r, case.higher_is_better) is not None:
            value, words = ratio_text(ours, r, case.higher_is_better).split(" ", 1)
            label = f"{impl}\n{ours_label}/{impl} {value}\n{words.strip('()')}"
        bars.append((impl, r, label))
    return bars


def speedups(
    records: Sequence[Record], cases: Sequence[Case] = CASES, impls: Sequence[str] = IMPLS
) -> list[tuple[str, str, float]]:
    """(case, peer, how many times faster ours is) for every case where ours and the peer have figures."""
    by = _index(records)
    found = []
    for case in cases:
        for peer in impls[1:]:
            r = ratio(by.get((case.name, impls[0])), by.get((case.name, peer)), case.higher_is_better)
            if r is not None:
                found.append((case.name, peer, speedup(r[0], case.higher_is_better)))
    return found


def figure(
    records: Sequence[Record],
    title: str,
    cases: Sequence[Case] = CASES,
    impls: Sequence[str] = IMPLS,
    ours_label: str = "ours",
    labels: dict[str, str] | None = None,
):
    """The matplotlib Figure ``plot`` saves: one panel per case, and below them one panel of speed-ups.

    A case's bars stand on a linear axis from zero, so their heights compare as the figures do (a log axis makes
    3x and 1.03x look alike); the unit is chosen per panel. The speed-up panel puts every ratio of ours to a peer on
    one log axis centred on 1, where 2x faster and 2x slower are bars of the same length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    labels = labels or {}
    colours = dict(zip(impls, ("#1b7837", "#2166ac", "#d6604d", "#8073ac", "#e08214")))
    impls = [impls[0]] + [impl for impl in impls[1:] if any(r.impl == impl for r in records)]
    gains = speedups(records, cases, impls)
    cols = 4
    rows = -(-len(cases) // cols)
    summary_h = 1.2 + 0.28 * len(gains) if gains else 0
    fig = plt.figure(figsize=(4 * cols, 3.8 * rows + summary_h))
    grid = fig.add_gridspec(rows + bool(gains), cols, height_ratios=[3.8] * rows + ([summary_h] if gains else []))
    for n, case in enumerate(cases):
        ax = fig.add_subplot(grid[n // cols, n % cols])
        bars = bar_labels(records, case, impls, ours_label)
        factor, unit = rescale([r.value for _, r, _ in bars], case.unit)
        heights = [r.value * factor for _, r, _ in bars]
        drawn = ax.bar([label for _, _, label in bars], heights, color=[colours[impl] for impl, _, _ in bars])
        for bar, (_, r, _) in zip(drawn, bars):
            text = number(r.value * factor) + ("" if r.correct else " !")
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=9,
                xytext=(0, 2),
                textcoords="offset points",
            )
        ax.set_ylim(0, max(heights, default=1) * 1.15)
        median = " (median)" if case.name in ROUND_TRIPS else ""
        ax.set_title(f"{labels.get(case.name, case.name)}\n{unit}{median}, {case.better} is better", fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
        if not bars:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, "no figure", ha="center", va="center", transform=ax.transAxes)
    if gains:
        ax = fig.add_subplot(grid[rows, :])
        names = [f"{labels.get(case, case)} vs {peer}" for case, peer, _ in gains]
        factors = [g for _, _, g in gains]
        ax.barh(names, [g - 1 for g in factors], left=1, color=["#1b7837" if g >= 1 else "#d6604d" for g in factors])
        for y, g in enumerate(factors):
            ax.annotate(
                verdict(g),
                (g, y),
                va="center",
                ha="left" if g >= 1 else "right",
                fontsize=8,
                xytext=(3 if g >= 1 else -3, 0),
                textcoords="offset points",
            )
        ax.set_xscale("log", base=2)
        span = max(2.0, max(max(g, 1 / g) for g in factors) ** 1.25)
        ax.set_xlim(1 / span, span)
        ax.axvline(1, color="black", linewidth=0.8)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{number(v)}x"))
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
        ax.set_title(
            f"{ours_label} vs each peer: how many times faster (right, green) or slower (left, red)", fontsize=10
        )
    if any(not r.correct for r in records):
        title += "\n! = the correctness check failed"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def plot(
    records: Sequence[Record],
    path: str | Path,
    title: str,
    cases: Sequence[Case] = CASES,
    impls: Sequence[str] = IMPLS,
    ours_label: str = "ours",
    labels: dict[str, str] | None = None,
) -> str | None:
    """A PNG of ``figure``: one bar group per case and the speed-ups; None on success, else why not."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return "the plot needs matplotlib (pip install matplotlib); no plot written"
    fig = figure(records, title, cases, impls, ours_label, labels)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
