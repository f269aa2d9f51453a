"""Figures as people read them: a unit chosen per figure (1.28 GFLOP/s rather than 0.001276 TFLOP/s, 128 MiB rather
than 0.1 GiB, 64 Ki floats rather than 0.0625 Mi floats). The bench's JSON records keep each case's fixed unit; only
text is rescaled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

LADDERS: tuple[tuple[tuple[str, int], ...], ...] = (
    (("ns", -9), ("us", -6), ("ms", -3), ("s", 0)),
    (("kB/s", 3), ("MB/s", 6), ("GB/s", 9), ("TB/s", 12)),
    (("kFLOP/s", 3), ("MFLOP/s", 6), ("GFLOP/s", 9), ("TFLOP/s", 12), ("PFLOP/s", 15)),
)
"""The units a figure may move between, smallest first, each with its size in the ladder's base unit as a power of
ten (exact, where a ratio of float sizes is not). Units outside them (tokens/s, images/s) are never rescaled."""
BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi")


def rescale(values: Sequence[float], unit: str) -> tuple[float, str]:
    """(factor, unit) for showing ``values`` (in ``unit``) together: ``unit`` itself while the largest magnitude is
    from 1 to 9999 in it (4292 GB/s reads as well as 4.29 TB/s), else the largest unit of ``unit``'s ladder in which
    it is at least 1 (the smallest unit when none is), so the figures carry no exponent. (1.0, ``unit``) for a unit of
    no ladder or no finite value."""
    ladder = next((ladder for ladder in LADDERS if any(name == unit for name, _ in ladder)), None)
    finite = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    if ladder is None or not finite:
        return 1.0, unit
    size = dict(ladder)[unit]
    if 1 <= max(finite) < 1e4:
        return 1.0, unit
    top = max(finite) * 10.0**size
    name, step = next(((name, step) for name, step in reversed(ladder) if top >= 10.0**step), ladder[0])
    return float(10 ** (size - step)) if size >= step else 1 / 10 ** (step - size), name


def quantity(value: float, unit: str, digits: int = 3) -> str:
    """``value`` in ``unit`` as text in the unit that fits it, to ``digits`` significant digits: ``quantity(0.001276,
    "TFLOP/s")`` is ``"1.28 GFLOP/s"``."""
    factor, name = rescale([value], unit)
    return f"{number(value * factor, digits)} {name}"


def number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without an exponent for magnitudes below 10**(digits + 3)."""
    if value != 0 and math.isfinite(value) and abs(value) >= 10**digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def binary(n: float, unit: str) -> str:
    """A count or size with a binary prefix: ``binary(65536, " floats")`` is ``"64 Ki floats"``, ``binary(134217728,
    "B")`` is ``"128 MiB"``, ``binary(512, "B")`` is ``"512 B"``."""
    step = 0
    while abs(n) >= 1024 and step < len(BINARY) - 1:
        n /= 1024
        step += 1
    prefix = BINARY[step]
    if unit.startswith(" "):  # a noun ("floats"): the prefix stands alone, "64 Ki floats"
        return f"{number(n)} {prefix}{unit}" if prefix else f"{number(n)}{unit}"
    return f"{number(n)} {prefix}{unit}"


def duration(seconds: float) -> str:
    """Elapsed time for a progress line: ``"42 s"``, ``"3 min 05 s"``, ``"1 h 02 min"``."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"
