"""Every record the recorder reads (csrc/recorder.c; their layouts are in decl/vkb.h), packed here by name.

A record is a run of little-endian uint32 words: a kind, then its operands. Launches are packed in the caller's
thread (the caller already holds the arguments, and it leaves the worker an append per launch), copies by the
memory pool's transfers, timestamps by the submitter's timed runs.
"""

from __future__ import annotations

import linecache
import struct
from collections.abc import Callable, Sequence
from typing import Optional

from ._ffi import lib
from .errors import BackendError, ErrorStatus
from .spirv import ProgramInfo
from .types import Grid, Scalar

__all__ = [
    "DISPATCH",
    "COPY",
    "TIMESTAMP",
    "RESET_QUERIES",
    "push_items",
    "dispatch_format",
    "push_at",
    "dispatch",
    "copy",
    "timestamp",
    "reset_queries",
    "dispatch_packer",
    "scalar_writer",
    "ScalarWriter",
    "variable_slot",
    "REFUSED",
    "forget_packer",
]

DISPATCH, COPY = lib.VKB_RECORD_DISPATCH, lib.VKB_RECORD_COPY
TIMESTAMP, RESET_QUERIES = lib.VKB_RECORD_TIMESTAMP, lib.VKB_RECORD_RESET_QUERIES

_DISPATCH_HEADER = "<5I"  # kind, program index, gx, gy, gz; then slots (bound, then addressed), push constants
_COPY = struct.Struct("<9I")  # kind, src slot, dst slot, src offset, dst offset, size (64-bit values as lo, hi)
_TIMESTAMP = struct.Struct("<2I")  # kind, query
_RESET_QUERIES = struct.Struct("<3I")  # kind, first, count


def push_items(info: ProgramInfo) -> list[tuple[str, int]]:
    """The push-constant block's members in offset order, each as (kind, index): ``("scalar", i)`` is the launch's
    scalar i, ``("address", j)`` the device address of its j-th buffer reached by address."""
    items = [(m.offset, "scalar", i) for i, m in enumerate(info.push_constants)]
    items += [(a.offset, "address", j) for j, a in enumerate(info.addresses)]
    return [(kind, index) for _, kind, index in sorted(items)]


def push_format(info: ProgramInfo) -> str:
    """struct format of a program's push-constant block: members at their offsets, padded to whole words."""
    fmt, pos = "", 0
    for kind, index in push_items(info):
        member = info.push_constants[index] if kind == "scalar" else info.addresses[index]
        code, size = (member.format, member.size) if kind == "scalar" else ("Q", 8)  # type: ignore[union-attr]
        if member.offset < pos:
            raise BackendError(ErrorStatus.KernelCompilation, f"push-constant member {member.name} overlaps another")
        fmt += "x" * (member.offset - pos) + code
        pos = member.offset + size
    size = (info.push_constant_size + 3) // 4 * 4
    return fmt + "x" * (size - pos)


def dispatch_format(info: ProgramInfo) -> struct.Struct:
    """The layout of a dispatch record of the program ``info`` describes (packed with DISPATCH first): a slot per
    bound buffer, then per buffer reached by address, then the push constants."""
    return struct.Struct(_DISPATCH_HEADER + "I" * (len(info.buffers) + len(info.addresses)) + push_format(info))


def push_at(info: ProgramInfo) -> int:
    """The byte offset of the push constants in a dispatch record of the program ``info`` describes: after the header
    and a slot per buffer (bound, then reached by address), as :func:`dispatch_format` lays it out."""
    return struct.calcsize(_DISPATCH_HEADER) + 4 * (len(info.buffers) + len(info.addresses))


def dispatch(
    record: struct.Struct,
    items: list[tuple[str, int]],
    index: int,
    grid: tuple[int, int, int],
    slots: list[int],
    addressed: list,
    scalars,
) -> bytes:
    """One dispatch record of program ``index`` (the slow path's; the packer below is the fast one): ``slots`` of
    its bound buffers, ``addressed`` the pool's records (``slot``, ``address``) of its buffers reached by address,
    ``items`` its :func:`push_items`."""
    push = [scalars[i] if kind == "scalar" else addressed[i].address for kind, i in items]
    return record.pack(DISPATCH, index, *grid, *slots, *(e.slot for e in addressed), *push)


def copy(src_slot: int, dst_slot: int, src_offset: int, dst_offset: int, nbytes: int) -> bytes:
    """A copy of ``nbytes`` from byte ``src_offset`` of slot ``src_slot`` to byte ``dst_offset`` of ``dst_slot``."""
    return _COPY.pack(
        COPY,
        src_slot,
        dst_slot,
        src_offset & 0xFFFFFFFF,
        src_offset >> 32,
        dst_offset & 0xFFFFFFFF,
        dst_offset >> 32,
        nbytes & 0xFFFFFFFF,
        nbytes >> 32,
    )


def timestamp(query: int) -> bytes:
    """A timestamp into ``query`` of the device's query pool: top of pipe for even queries, bottom for odd ones."""
    return _TIMESTAMP.pack(TIMESTAMP, query)


def reset_queries(first: int, count: int) -> bytes:
    """A reset of queries ``first`` to ``first + count - 1``."""
    return _RESET_QUERIES.pack(RESET_QUERIES, first, count)


# The launch fast path, specialised per program with its argument counts unrolled: unpacking fixed-size sequences,
# a few comparisons, one struct.pack and one append. It is the whole per-launch cost in the caller's thread.
# Anything unusual (a wrong count, an unknown buffer, a GridArg, a short grid, a scalar out of range, a device that is
# not ctx.usable) raises KeyError/ValueError/TypeError/struct.error before queueing anything, and the Launcher
# (launch.py) then takes the slow path, which explains the problem, handles the case or waits for room. Strictness
# costs little here
# (about 20 ns a launch on lavapipe, measured): no float or bool equals a buffer id (ids.py), struct refuses floats
# for integers, of the bools only True could pass the grid's range check and it is looked for, buffers are indexed
# once, which a set (bound in its hash order), a dict's keys or a generator cannot be, and scalars must be a list or a
# tuple: unpacking would take any iterable, and a dict keyed 0, 1, ... could be indexed too (the slow path takes the
# other sequences, numpy arrays among them). That look-up costs 10 to 20 ns of a pack's 245 ns (a 3-scalar program on
# lavapipe's 2-core host, best of 20 rounds of 100,000); indexing the first scalar would cost about half as much but
# lets a dict keyed 0, 1, ... through.
_ORDERED = {list: None, tuple: None}  # the scalars' types the fast path takes: anything else is a KeyError
# What a generated packer or scalar writer raises for anything it does not take: its caller then takes the slow path,
# which explains or handles it.
REFUSED = (KeyError, ValueError, TypeError, OverflowError, struct.error)
# The grid check both generated functions make: every entry in 1..the device's maximum, and none of them True.
_GRID_IN_RANGE = (
    "0 < gx <= {} and 0 < gy <= {} and 0 < gz <= {} and gx is not True and gy is not True and gz is not True"
)
_PACKER = """\
def pack(buffers, scalars, grid):
    [{buffers}] = buffers
    [{scalars}] = scalars
    ORDERED[scalars.__class__]
    gx, gy, gz = grid
{indexed}{addressed}\
    if {in_range} and ctx.usable:
        {emit}
    raise ValueError("grid out of range, or the device not usable now")
"""


def dispatch_packer(
    name: str,
    index: int,
    info: ProgramInfo,
    record: struct.Struct,
    slot_of: dict,
    entries: dict,
    max_grid: tuple[int, int, int],
    ctx,
    append: Callable[[bytes], None] | None,
) -> Callable:
    """A function ``(buffers, scalars, grid)`` that checks and packs one dispatch of program ``index`` and queues it
    with ``append`` (with ``append=None`` it returns the record: a LaunchGraph's). Bound buffers are found in the
    pool's ``slot_of``, buffers reached by address in its ``entries``. Its source is registered with linecache
    under ``<launch packer of NAME>``, so tracebacks through it show its lines."""
    n_bound = len(info.buffers)
    bufs = [f"b{i}" for i in range(n_bound + len(info.addresses))]
    scalars = [f"s{i}" for i in range(len(info.push_constants))]
    push = [f"s{i}" if kind == "scalar" else f"e{n_bound + i}.address" for kind, i in push_items(info)]
    args = ", ".join(
        [
            f"DISPATCH, {int(index)}, gx, gy, gz",
            *(f"slot_of[{b}]" for b in bufs[:n_bound]),
            *(f"e{n_bound + j}.slot" for j in range(len(info.addresses))),
            *push,
        ]
    )
    source = _PACKER.format(
        buffers=", ".join(bufs),
        scalars=", ".join(scalars),
        in_range=_grid_in_range(max_grid),
        indexed="    buffers[0]\n" if bufs else "",
        addressed="".join(f"    e{j} = entries[b{j}]\n" for j in range(n_bound, len(bufs))),
        emit=f"return record({args})" if append is None else f"return append(record({args}))",
    )
    namespace = {
        "record": record.pack,
        "slot_of": slot_of,
        "entries": entries,
        "ctx": ctx,
        "append": append,
        "DISPATCH": DISPATCH,
        "ORDERED": _ORDERED,
    }
    return _define(source, _packer_filename(name, append is None), namespace, "pack")


# A graph's cheap update: a launch's scalars (and grid) written over its record where it lies in the graph's joined
# records, checked as the packer checks them; its program, buffers and record length stay. Everything is packed
# before anything is written, so a launch that raises leaves the record as it was.
_WRITER = """\
def write(blob, start, scalars, grid):
    [{scalars}] = scalars
    ORDERED[scalars.__class__]
    push = PUSH({push})
    if grid is not None:
        gx, gy, gz = grid
        if not ({in_range}):
            raise ValueError("grid out of range")
        blob[start + {grid_at} : start + {grid_end}] = GRID(gx, gy, gz)
    blob[start + {offset} : start + {end}] = push
"""
_GRID = struct.Struct("<3I")  # the grid in a dispatch record: words 2 to 4 (_DISPATCH_HEADER), after kind and index
_GRID_AT = struct.calcsize("<2I")
# (blob, start, scalars, grid): what scalar_writer makes
ScalarWriter = Callable[[bytearray, int, Sequence[Scalar], Optional[Grid]], None]


def scalar_writer(name: str, info: ProgramInfo, max_grid: tuple[int, int, int]) -> ScalarWriter | None:
    """A function ``(blob, start, scalars, grid)`` that writes a launch's scalars, and its grid unless ``grid`` is
    None, over the dispatch record of program ``info`` at byte ``start`` of ``blob``, raising ValueError, TypeError,
    KeyError or struct.error for anything the packer would not take. None for a program that reaches buffers by
    address: their addresses share the push constants, so its scalars are repacked with them."""
    if info.addresses:
        return None
    push = [f"s{i}" for _, i in push_items(info)]
    push_struct = struct.Struct("<" + push_format(info))
    offset = push_at(info)
    source = _WRITER.format(
        scalars=", ".join(f"s{i}" for i in range(len(info.push_constants))),
        in_range=_grid_in_range(max_grid),
        grid_at=_GRID_AT,
        grid_end=_GRID_AT + _GRID.size,
        offset=offset,
        end=offset + push_struct.size,
        push=", ".join(push),
    )
    namespace = {"GRID": _GRID.pack, "PUSH": push_struct.pack, "ORDERED": _ORDERED}
    writer: ScalarWriter = _define(source, _writer_filename(name), namespace, "write")
    return writer


# The integer push-constant members a graph's variables can feed (csrc/scalars.c), by struct code.
_VARIABLE_KINDS = {"i": lib.VKB_SCALAR_I32, "I": lib.VKB_SCALAR_U32, "q": lib.VKB_SCALAR_I64, "Q": lib.VKB_SCALAR_U64}


def variable_slot(info: ProgramInfo, scalar: int) -> tuple[int, int, str] | None:
    """Where scalar ``scalar`` of a dispatch record of program ``info`` lies, as (byte offset in the record, its
    csrc/scalars.c kind, its type's name), for a 32- or 64-bit integer member; None for any other (a float, a
    narrower integer)."""
    member = info.push_constants[scalar]
    kind = _VARIABLE_KINDS.get(member.format)
    if kind is None:
        return None
    return push_at(info) + member.offset, kind, member.type_name


def forget_packer(name: str) -> None:
    """Drop the sources of a released program's packers and scalar writer from linecache."""
    for returning in (False, True):
        linecache.cache.pop(_packer_filename(name, returning), None)
    linecache.cache.pop(_writer_filename(name), None)


def _grid_in_range(max_grid: tuple[int, int, int]) -> str:
    """The grid check of the generated functions, for a device whose grid entries reach ``max_grid``."""
    return _GRID_IN_RANGE.format(*(int(m) for m in max_grid))


def _define(source: str, filename: str, namespace: dict, function: str) -> Callable:
    """``function`` as defined by ``source`` in ``namespace``, its source registered with linecache under
    ``filename`` so that tracebacks through it show its lines."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[function]


def _packer_filename(name: str, returning: bool) -> str:
    return f"<launch packer of {name}{' (graph)' if returning else ''}>"


def _writer_filename(name: str) -> str:
    return f"<scalar writer of {name}>"
