"""The bench's outputs: the side-by-side table, the JSON records and the PNG bar chart."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from .spec import CASES, IMPLS, ROUND_TRIPS, Case, Record


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


def columns(rows: list[list[str]], left: int) -> list[str]:
    """``rows`` (the first is the header) as aligned text: the first ``left`` columns flush left, the rest right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i < left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _p99(record: Record | None) -> Record | None:
    """The record with its p99 as its figure: a round-trip case's second row."""
    return None if record is None else dataclasses.replace(record, value=record.p99)


def table(records: Sequence[Record], notes: Sequence[str] = (), cases: Sequence[Case] = CASES,
          impls: Sequence[str] = IMPLS, ours_label: str = "ours") -> str:
    """One row per case: its unit, our figure (``impls[0]``), and each peer that ran, with our ratio to it. A
    round-trip case has two rows, its median and its p99."""
    by = _index(records)
    ours_impl = impls[0]
    peers = [impl for impl in impls[1:] if any(r.impl == impl for r in records)]
    header = ["case", "unit", "better", ours_impl]
    for peer in peers:
        header += [peer, f"{ours_label}/{peer}"]
    rows = [header]
    for case in cases:
        views = [(case.name, lambda r: r)]
        if case.name in ROUND_TRIPS:
            views = [(f"{case.name} median", lambda r: r), (f"{case.name} p99", _p99)]
        for label, view in views:
            ours = view(by.get((case.name, ours_impl)))
            row = [label, case.unit, case.better, _figure(ours)]
            for peer in peers:
                other = view(by.get((case.name, peer)))
                r = ratio(ours, other, case.higher_is_better)
                row += [_figure(other), "-" if r is None else f"{r[0]:.3g} {'better' if r[1] else 'worse'}"]
            rows.append(row)
    lines = columns(rows, 3)
    footer = []
    if any(case.name in ROUND_TRIPS for case in cases):
        footer.append("median, p99: of every round trip, each timed on its own (min and max are in the JSON)")
    if peers:
        footer.append(f"{ours_label}/peer: our figure divided by the peer's; 'better' when ours wins "
                      "(lower us/ms, higher GB/s, TFLOP/s, tokens/s, images/s)")
    cold, warm = by.get(("compile_cold", ours_impl)), by.get(("compile_warm", ours_impl))
    if cold and warm and cold.value and warm.value:
        footer.append(f"compile_cold / compile_warm = {cold.value / warm.value:.3g} "
                      "(the speed-up of a filled pipeline cache)")
    if any(not r.correct for r in records):
        footer.append("! or FAILED: the case's correctness check failed, or the case did not run")
    return "\n".join(lines + [""] + footer + list(notes))


def write_json(records: Sequence[Record], path: str | Path) -> None:
    """The records as a JSON list, each its ``to_json()`` ({"case", "impl", "value", "unit", "correct"}, and more:
    a round-trip case's "min", "p99" and "max")."""
    Path(path).write_text(json.dumps([r.to_json() for r in records], indent=1) + "\n")


def plot(records: Sequence[Record], path: str | Path, title: str, cases: Sequence[Case] = CASES,
         impls: Sequence[str] = IMPLS) -> str | None:
    """A PNG with one log-scale bar group per case (its own unit and axis); None on success, else why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        return "the plot needs matplotlib (pip install matplotlib); no plot written"
    by = _index(records)
    ours_impl = impls[0]
    colours = dict(zip(impls, ("#1b7837", "#2166ac", "#d6604d", "#8073ac", "#e08214")))
    impls = [impl for impl in impls if any(r.impl == impl for r in records)]
    cols = 4
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.6 * rows), squeeze=False)
    for ax, case in zip(axes.flat, cases):
        ran = [(impl, by[(case.name, impl)]) for impl in impls if by.get((case.name, impl)) is not None]
        shown = [(impl, r) for impl, r in ran if r.value]
        ours = by.get((case.name, ours_impl))
        labels = []
        for impl, r in shown:
            vs = ratio(ours, r, case.higher_is_better) if impl != ours_impl else None
            labels.append(impl if vs is None else
                          f"{impl}\nours {max(vs[0], 1 / vs[0]):.2g}x {'better' if vs[1] else 'worse'}")
        bars = ax.bar(labels, [r.value for _, r in shown], color=[colours[impl] for impl, _ in shown])
        for bar, (impl, r) in zip(bars, shown):
            label = f"{r.value:.3g}" + ("" if r.correct else " !")
            ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=9, xytext=(0, 2), textcoords="offset points")
        ax.set_yscale("log")
        if shown:  # a fixed span around the figures, so near-equal bars look near-equal on the log axis
            values = [r.value for _, r in shown]
            ax.set_ylim(min(values) / 10, max(values) * 4)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        median = " (median)" if case.name in ROUND_TRIPS else ""
        ax.set_title(f"{case.name}\n{case.unit}{median}, {case.better} is better", fontsize=10)
        ax.tick_params(axis="x", labelsize=9)
        if not shown:
            ax.text(0.5, 0.5, "no figure", ha="center", va="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    if any(not r.correct for r in records):
        title += "\n! = the correctness check failed"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
