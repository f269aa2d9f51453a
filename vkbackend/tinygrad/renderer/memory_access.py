"""How the renderer reads and writes buffers: indices, loads and stores, pointer views and vector accesses.

Global buffers are storage buffers indexed through ``VK_I<slot>_<size>`` macros (which add a view's offset in the
``VK_VIEWS=1`` variant of a kernel); bool buffers hold one byte per element.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from tinygrad.dtype import AddrSpace, DType, dtypes
from tinygrad.helpers import strip_parens
from tinygrad.uop.ops import Ops, UOp

from vkbackend.tinygrad.renderer.glsl_types import (
    TYPE_MAP,
    UINT_OF_SIZE,
    as_uint,
    bitcast,
    storage_dtype,
    value_type,
    vec_type,
)
from vkbackend.tinygrad.renderer.uop_lists import constant_value

__all__ = [
    "GlobalArg",
    "KernelMemory",
    "RenderContext",
    "base_buffer",
    "global_load_lanes",
    "global_param_access",
    "plan_vector_widths",
    "compose_load",
    "compose_store",
    "render_index",
    "render_load",
    "render_store",
    "global_vector_macros",
]


@dataclass(frozen=True)
class GlobalArg:
    """How a kernel reaches one global argument: bound as a storage buffer, or by device address (a buffer past the
    device's maxStorageBufferRange), and for 2 GiB or more by 64-bit address arithmetic (wide)."""

    name: str
    slot: int
    key: str  # "<slot>_<element size>": names the argument's index macro VK_I<key>
    by_address: bool = False
    wide: bool = False

    def element(self, index: str) -> str:
        """The lvalue of element ``index`` of the argument as declared."""
        return f"VK_E{self.slot}({index})" if self.wide else f"{self.name}[{index}]"

    def index(self, i: str, dtype: DType) -> str:
        """An index into the argument: GLSL arrays take 32-bit indices (tinygrad may index with int64 from loaded
        data); a wide argument is reached by 64-bit address arithmetic instead."""
        if self.wide:
            return i if dtype in (dtypes.int64, dtypes.uint64) else f"int64_t({i})"
        return _int_index(i, dtype)


@dataclass
class KernelMemory:
    """How one kernel reaches memory: its global arguments by name and the lanes each buffer is declared with (planned
    before the body is rendered), and the vector macros the body used (filled while it is rendered)."""

    globals: dict[str, GlobalArg] = field(default_factory=dict)
    declared: dict[UOp, int] = field(default_factory=dict)
    vector_macros: set[tuple[UOp, int, bool]] = field(default_factory=set)  # (global argument, lanes, store)


class RenderContext(Protocol):
    """What the functions here need of the renderer that calls them: the kernel's memory plan, and the rendered name
    of a UOp (``ctx[u]``)."""

    memory: KernelMemory

    def __getitem__(self, u: UOp) -> str: ...


# ---------------------------------------------------------------------------------------------------------------------
# pointer views
# ---------------------------------------------------------------------------------------------------------------------


def _bitcast_param(bc: UOp) -> tuple[UOp, UOp | None]:
    """``BITCAST(PARAM | SHRINK(PARAM, start, n))`` (through AFTERs) -> (param, start or None)."""
    src, start = base_buffer(bc.src[0]), None
    if src.op is Ops.SHRINK:
        src, start = base_buffer(src.src[0]), src.src[1]
    if src.op is not Ops.PARAM:
        raise RuntimeError(f"VK renderer: pointer bitcast of {src.op} is not supported")
    return src, start


def _is_ptr_view(buf: UOp) -> bool:
    """A pointer bitcast of a global argument (a view of it as another element type)."""
    return buf.op is Ops.BITCAST and buf.addrspace is AddrSpace.GLOBAL


def _ptr_view(bidx: UOp):
    """``INDEX(BITCAST(PARAM | SHRINK(PARAM, start, n)), idx)`` -> (param, start, idx, view dtype); else None.

    GLSL has no pointer casts, and an aliased declaration of the binding cannot express a view whose start is not a
    multiple of the new element size, so such accesses are composed from (or split into) the buffer's own elements."""
    if bidx.op is not Ops.INDEX or not _is_ptr_view(bc := bidx.src[0]):
        return None
    param, start = _bitcast_param(bc)
    return param, start, bidx.src[1], bc.dtype


def _view_access(ctx: RenderContext, param: UOp, start: UOp | None, idx: UOp):
    """(element expression for the buffer's element index ``e``, S, start string, idx string)."""
    sdt = storage_dtype(param.dtype)
    arg = ctx.memory.globals[ctx[param]]
    cast = "int64_t" if arg.wide else "int"
    return (lambda e: arg.element(f"VK_I{arg.key}({cast}({e}))")), sdt, ("0" if start is None else ctx[start]), ctx[idx]


def _render_view_load(ctx: RenderContext, bidx: UOp) -> str | None:
    if (pv := _ptr_view(bidx)) is None:
        return None
    param, start, idx, tdt = pv
    elem, sdt, st, i = _view_access(ctx, param, start, idx)
    ut = UINT_OF_SIZE[tdt.itemsize]
    if tdt.itemsize >= sdt.itemsize:
        k = tdt.itemsize // sdt.itemsize
        parts = [
            f"({TYPE_MAP[ut]}({as_uint(sdt, elem(f'{st}+({i})*{k}+{j}'))})<<{j * sdt.itemsize * 8})" for j in range(k)
        ]
        return bitcast(tdt, ut, "(" + "|".join(parts) + ")")
    k = sdt.itemsize // tdt.itemsize
    word = as_uint(sdt, elem(f"{st}+({i})/{k}"))
    return bitcast(tdt, ut, f"{TYPE_MAP[ut]}({word}>>((({i})%{k})*{tdt.itemsize * 8}))")


def _render_view_store(ctx: RenderContext, bidx: UOp, var: UOp) -> str | None:
    if (pv := _ptr_view(bidx)) is None:
        return None
    param, start, idx, tdt = pv
    elem, sdt, st, i = _view_access(ctx, param, start, idx)
    if tdt.itemsize < sdt.itemsize:
        raise RuntimeError(
            f"VK renderer: a store through a {tdt} view of a {sdt} buffer would race with its neighbours"
        )
    k, ut, us = tdt.itemsize // sdt.itemsize, UINT_OF_SIZE[tdt.itemsize], UINT_OF_SIZE[sdt.itemsize]
    lines = [f"{{ {TYPE_MAP[ut]} vk_bits = {as_uint(tdt, ctx[var])};"]
    for j in range(k):
        part = bitcast(sdt, us, f"{TYPE_MAP[us]}(vk_bits>>{j * sdt.itemsize * 8})")
        lines.append(f"  {elem(f'{st}+({i})*{k}+{j}')} = {part}; ")
    return "\n".join(lines) + "}"


# ---------------------------------------------------------------------------------------------------------------------
# vector accesses
# ---------------------------------------------------------------------------------------------------------------------
# With ``supports_float4`` tinygrad's memory coalescing (codegen/late/coalesce.py) turns runs of 2 or 4 consecutive
# float/half/int/uint accesses (8 halves with ALLOW_HALF8) into LOAD/STORE of SHRINK(buffer, idx, n), with idx a
# multiple of n counted from the start of the buffer, and reads lanes back with INDEX(vector, lane).  GLSL has no
# pointer casts, and vkbackend refuses two declarations of one binding, so every buffer is declared once, with the
# widest element every access to it in the kernel can use (its *declared width*): a buffer only ever accessed 4 at a
# time is a ``vec4`` array; one also accessed 2 at a time a ``vec2`` array (a 4-wide access is then two ``vec2``); one
# also accessed element-wise stays scalar, and its vector accesses are composed lane by lane.  A kernel's VK_VIEWS=1
# variant (a view at an unaligned byte offset, where idx + offset is no longer a multiple of n) declares every global
# buffer scalar.  Global vector accesses go through macros (``VK_V<slot>_<n>`` loads, ``VK_S<slot>_<n>`` stores)
# that differ between the two variants.


def base_buffer(u: UOp) -> UOp:
    """The buffer an access is made through, past the AFTERs that order it."""
    while u.op is Ops.AFTER:
        u = u.src[0]
    return u


def _is_global_param(buf: UOp) -> bool:
    return buf.op is Ops.PARAM and buf.addrspace is AddrSpace.GLOBAL


def _is_local_buffer(buf: UOp) -> bool:
    return buf.op is Ops.BUFFER and buf.addrspace is AddrSpace.LOCAL


def _declared_width(buf: UOp, widths: set[int]) -> int:
    """The element width (in lanes) ``buf`` is declared with, given the widths of all its accesses (see above)."""
    dw = min(widths)
    if dw == 1 or any(w % dw for w in widths):
        return 1
    dw = min(dw, 4)  # GLSL vectors have 2-4 lanes: 8 halves are two f16vec4
    dt = storage_dtype(buf.dtype)
    if dt == dtypes.bool or vec_type(dt, dw) is None or (_is_local_buffer(buf) and buf.max_numel() % dw):
        return 1
    return dw


def _lanes(mop: UOp) -> int:
    """The lanes an access through ``mop`` (an INDEX or a SHRINK) moves. A SHRINK's constant length is read as it is:
    its shape would check the range against the buffer's, simplifying the whole index expression (milliseconds for a
    SHRINK the renderer built, whose shape tinygrad has not computed and kept)."""
    if mop.op is not Ops.SHRINK:
        return 1
    size = constant_value(mop.src[2])
    return size if size is not None else mop.max_numel()


def global_load_lanes(u: UOp) -> int:
    """How many lanes ``u`` reads from a global argument: a LOAD's width, 0 for any other op or memory."""
    if u.op is not Ops.LOAD or u.src[0].op not in (Ops.INDEX, Ops.SHRINK):
        return 0
    mop = u.src[0]
    buf = base_buffer(mop.src[0])
    if not (_is_global_param(buf) or _is_ptr_view(buf)):
        return 0
    return _lanes(mop)


def global_param_access(u: UOp) -> tuple[UOp, UOp, int] | None:
    """A LOAD or STORE of a global argument itself: ``(argument, element index, lanes)``; None for any other op or
    memory, and for a pointer view of an argument (read and written element by element)."""
    if u.op not in (Ops.LOAD, Ops.STORE) or u.src[0].op not in (Ops.INDEX, Ops.SHRINK):
        return None
    mop = u.src[0]
    buf = base_buffer(mop.src[0])
    return (buf, mop.src[1], _lanes(mop)) if _is_global_param(buf) else None


def plan_vector_widths(uops: list[UOp]) -> dict[UOp, int]:
    """Declared width of every global argument and local buffer that a LOAD or STORE reads or writes (1: scalar)."""
    widths: dict[UOp, set[int]] = {}
    for u in uops:
        if u.op not in (Ops.LOAD, Ops.STORE) or u.src[0].op not in (Ops.INDEX, Ops.SHRINK):
            continue
        mop = u.src[0]
        buf = base_buffer(mop.src[0])
        if _is_ptr_view(buf):
            widths.setdefault(_bitcast_param(buf)[0], set()).add(1)  # composed from the buffer's own elements
        elif _is_global_param(buf) or _is_local_buffer(buf):
            widths.setdefault(buf, set()).add(_lanes(mop))
    return {buf: _declared_width(buf, ws) for buf, ws in widths.items()}


def _piece_index(i: str, dw: int, p: int) -> str:
    """Index of the ``p``-th ``dw``-lane element of an access starting at lane index ``i`` (a multiple of ``dw``)."""
    if dw == 1:
        return f"({i})+{p}" if p else i
    base = f"({i})>>{int(math.log2(dw))}"
    return f"({base})+{p}" if p else base


def compose_load(dt: DType, w: int, dw: int, piece) -> str:
    """A ``w``-lane value read as ``w/dw`` pieces of ``dw`` lanes; ``piece(p)`` is the expression of the p-th."""
    if w == dw:
        return piece(0)
    if vec_type(dt, w) is not None:  # vector constructors take vectors and scalars alike: vec4(vec2, vec2)
        return f"{value_type(dt, w)}({', '.join(piece(p) for p in range(w // dw))})"
    lanes = [piece(e) if dw == 1 else f"{piece(e // dw)}[{e % dw}]" for e in range(w)]
    return f"{value_type(dt, w)}({', '.join(lanes)})"


def compose_store(dt: DType, w: int, dw: int, piece, val: str) -> str:
    """A store of the ``w``-lane value ``val`` as ``w/dw`` pieces of ``dw`` lanes; ``piece(p)`` is the p-th lvalue."""
    if w == dw:
        return f"{piece(0)} = {val};"
    out = [f"{{ {value_type(dt, w)} vk_t = {val};"]
    for p in range(w // dw):
        lanes = [f"vk_t[{p * dw + j}]" for j in range(dw)]
        out.append(f" {piece(p)} = {lanes[0] if dw == 1 else value_type(dt, dw) + '(' + ', '.join(lanes) + ')'};")
    return "".join(out) + " }"


def global_vector_macros(arg: GlobalArg, dt: DType, dw: int, w: int, store: bool) -> list[str]:
    """``#define`` lines of the load (or store) macro of ``w`` lanes of one global argument, for both variants."""

    def define(dwv: int) -> str:
        if dwv == 1:  # scalar declaration: the index macro adds the view offset in the VK_VIEWS=1 variant
            piece = lambda p: arg.element(f"VK_I{arg.key}({_piece_index('i', 1, p)})")  # noqa: E731
        else:
            piece = lambda p: arg.element(_piece_index("i", dwv, p))  # noqa: E731
        if store:
            return f"#define VK_S{arg.slot}_{w}(i, v) {compose_store(dt, w, dwv, piece, '(v)')}"
        return f"#define VK_V{arg.slot}_{w}(i) ({compose_load(dt, w, dwv, piece)})"

    if dw == 1:
        return [define(1)]
    return ["#if VK_VIEWS", define(1), "#else", define(dw), "#endif"]


def _render_vector_load(ctx: RenderContext, mop: UOp) -> str:
    """LOAD(SHRINK(buffer, idx, n)): ``n`` lanes from element ``idx`` on."""
    buf, w, i = base_buffer(mop.src[0]), _lanes(mop), _index_str(ctx, mop.src[1])
    if _is_global_param(buf):
        ctx.memory.vector_macros.add((buf, w, False))
        return f"VK_V{buf.arg.slot}_{w}({_global_index(ctx, buf, mop.src[1])})"
    if _is_local_buffer(buf):
        dw = ctx.memory.declared.get(buf, 1)
        return compose_load(buf.dtype, w, dw, lambda p: f"{ctx[buf]}[{_piece_index(i, dw, p)}]")
    # (tinygrad's UOp spec has no SHRINK of a pointer bitcast: views are read element by element)
    raise RuntimeError(f"VK renderer: vector load from {buf.op} {buf.addrspace}")


def _render_vector_store(ctx: RenderContext, mop: UOp, var: UOp) -> str:
    """STORE(SHRINK(buffer, idx, n), value): ``n`` lanes from element ``idx`` on."""
    buf, w, i = base_buffer(mop.src[0]), _lanes(mop), _index_str(ctx, mop.src[1])
    if _is_global_param(buf):
        ctx.memory.vector_macros.add((buf, w, True))
        return f"VK_S{buf.arg.slot}_{w}({_global_index(ctx, buf, mop.src[1])}, {ctx[var]});"
    if _is_local_buffer(buf):
        dw = ctx.memory.declared.get(buf, 1)
        return compose_store(buf.dtype, w, dw, lambda p: f"{ctx[buf]}[{_piece_index(i, dw, p)}]", ctx[var])
    raise RuntimeError(f"VK renderer: vector store to {buf.op} {buf.addrspace}")


def _int_index(i: str, dtype: DType) -> str:
    return i if dtype in (dtypes.int32, dtypes.uint32) else f"int({i})"


def _index_str(ctx: RenderContext, idx: UOp) -> str:
    """An index expression; GLSL indexes with 32-bit integers only (tinygrad may index with int64 from loaded data)."""
    return _int_index(strip_parens(ctx[idx]), idx.dtype)


def _global_index(ctx: RenderContext, buf: UOp, idx: UOp) -> str:
    return ctx.memory.globals[ctx[buf]].index(strip_parens(ctx[idx]), idx.dtype)


def render_index(ctx: RenderContext, buf: UOp, idx: UOp) -> str:
    if buf.op is Ops.BITCAST and buf.addrspace is AddrSpace.GLOBAL:
        return "/* pointer bitcast */"  # see _ptr_view
    name = ctx[buf]
    if buf.addrspace is AddrSpace.GLOBAL and (arg := ctx.memory.globals.get(name)) is not None:
        return arg.element(f"VK_I{arg.key}({arg.index(strip_parens(ctx[idx]), idx.dtype)})")
    return f"{name}[{_index_str(ctx, idx)}]"


def render_load(ctx: RenderContext, bidx: UOp) -> str:
    if bidx.op is Ops.SHRINK:
        return _render_vector_load(ctx, bidx)
    if (view := _render_view_load(ctx, bidx)) is not None:
        return view
    acc = ctx[bidx]
    if bidx.dtype == dtypes.bool and bidx.addrspace is AddrSpace.GLOBAL:
        return f"(uint({acc})!=0u)"
    return acc


def render_store(ctx: RenderContext, bidx: UOp, var: UOp) -> str:
    if bidx.op is Ops.SHRINK:
        return _render_vector_store(ctx, bidx, var)
    if (view := _render_view_store(ctx, bidx, var)) is not None:
        return view
    val = ctx[var]
    if var.dtype == dtypes.bool and bidx.addrspace is AddrSpace.GLOBAL:
        val = f"uint8_t({val}?1u:0u)"
    return f"{ctx[bidx]} = {val};"
