"""Buffer and program ids: one process-wide counter, so no id is ever reused.

Not across ``close()`` and ``devices()`` again, not between devices, not between buffers and programs: a stale id
names nothing. They are odd integers above 2**53, which no float and no bool can equal: the launch fast path finds
ids with a dict lookup, so 1.0 or True can never pass for an id there, and junk always falls to the slow path that
explains it.
"""

from __future__ import annotations

import itertools

__all__ = ["next_id"]

next_id = itertools.count(2**53 + 1, 2).__next__
"""The next id (thread-safe: ``count.__next__`` runs in C under the GIL)."""
