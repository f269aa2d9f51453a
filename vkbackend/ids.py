"""Buffer and program ids: process-wide counters, so no id is ever reused, and what messages call each id.

Not across ``close()`` and ``devices()`` again, not between devices, not between buffers and programs: a stale id
names nothing. They are odd integers above 2**53, which no float and no bool can equal: the launch fast path finds
ids with a dict lookup, so 1.0 or True can never pass for an id there, and junk always falls to the slow path that
explains it.

Buffers (views included) and programs count apart, in steps of 4 from two starting points, so an id says by itself
which kind it is and how many of its kind the process made before it. Messages, reprs and logs name an id by that,
``buffer #12`` or ``program #3`` (the twelfth buffer or view, the third program this process made), never by its
53-bit value: :func:`label` costs a subtraction and a division, and only where a message is written.
"""

from __future__ import annotations

import itertools
import operator

__all__ = ["BUFFER", "PROGRAM", "kind_of", "label", "misnamed", "next_buffer_id", "next_program_id", "number"]

BUFFER, PROGRAM = "buffer", "program"
_FIRST = 2**53 + 1  # the first buffer id; the first program id is _FIRST + 2
_STEP = 4
_START = {BUFFER: _FIRST, PROGRAM: _FIRST + 2}

_COUNTERS = {kind: itertools.count(start, _STEP) for kind, start in _START.items()}

next_buffer_id = _COUNTERS[BUFFER].__next__
"""The next buffer id (thread-safe: ``count.__next__`` runs in C under the GIL)."""
next_program_id = _COUNTERS[PROGRAM].__next__
"""The next program id (thread-safe, as :data:`next_buffer_id`)."""


def _as_int(value: object) -> int | None:
    """``value`` as an int where it is an integer (a numpy integer included) and not a bool, else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def kind_of(value: object) -> str | None:
    """:data:`BUFFER` or :data:`PROGRAM` where ``value`` has the form of an id of that kind (made or not), else
    None (anything else: a float, a bool, a small int)."""
    as_int = _as_int(value)
    if as_int is None or as_int < _FIRST:
        return None
    for kind, start in _START.items():
        if (as_int - start) % _STEP == 0:
            return kind
    return None


def number(value: object) -> int | None:
    """Where ``value`` has the form of an id: its place among the ids of its kind, from 1; else None."""
    kind = kind_of(value)
    return None if kind is None else (operator.index(value) - _START[kind]) // _STEP + 1  # type: ignore[arg-type]


def label(value: object) -> str | None:
    """``"buffer #12"`` or ``"program #3"`` for a value of an id's form, else None."""
    kind = kind_of(value)
    return None if kind is None else f"{kind} #{number(value)}"


def misnamed(value: object, kind: str, remedy: str) -> str | None:
    """Where ``value`` stands for an id of ``kind`` but is no such id: the message saying what it is (not an id at
    all, or the other kind's id), ending in ``remedy``; None where it has the form of an id of ``kind``."""
    found = kind_of(value)
    if found == kind:
        return None
    if found is None:
        shown = repr(value) if value.__class__ is int else f"{value!r} ({type(value).__name__})"
        return f"{shown} is not a {kind} id; {remedy}"
    return f"{label(value)} is a {found}'s id, not a {kind}'s; {remedy}"
