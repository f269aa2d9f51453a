"""What the renderer knows about a device (DeviceCaps), and how it travels in tinygrad's ``Target.arch``.

tinygrad pickles renderers to its compile workers keeping only the ``Target``, so everything the renderer needs to
know about a device is written into ``target.arch`` (:func:`make_arch`) and read back there (:func:`parse_arch`).
:mod:`vkbackend.tinygrad.runtime.device_caps` reads the caps from a Vulkan device.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DeviceCaps", "TCShape", "make_arch", "parse_arch"]

TC_INPUTS, TC_OUTPUTS = ("f16", "bf16"), ("f32", "f16")  # tensor-core types the renderer can render, by arch name
TC_LAYOUTS = ("chunk", "nv")  # register layouts of tensor cores (tensor_cores.register_layout); chunk has no token


@dataclass(frozen=True)
class TCShape:
    """One tensor-core shape: ``D (m x n) = A (m x k) * B (k x n) + C``, with the input and output types by their arch
    names (``f16``, ``bf16``; ``f32``, ``f16``). See :mod:`vkbackend.tinygrad.renderer.tensor_cores`."""

    m: int
    n: int
    k: int
    dtype_in: str
    dtype_out: str

    def token(self) -> str:
        """Its spelling in ``Target.arch``, e.g. ``m16.16.16.f16.f32``."""
        return f"m{self.m}.{self.n}.{self.k}.{self.dtype_in}.{self.dtype_out}"

    @staticmethod
    def parse(token: str) -> "TCShape | None":
        """The shape a :meth:`token` spells, else None."""
        parts = token[1:].split(".") if token.startswith("m") else []
        if len(parts) != 5 or not all(p.isdigit() for p in parts[:3]):
            return None
        if parts[3] not in TC_INPUTS or parts[4] not in TC_OUTPUTS:
            return None
        return TCShape(int(parts[0]), int(parts[1]), int(parts[2]), parts[3], parts[4])


@dataclass(frozen=True)
class DeviceCaps:
    """What the renderer needs to know about a device.  Serialised into ``Target.arch`` (see :func:`make_arch`)."""

    f16: bool = False
    f64: bool = False
    i8: bool = False
    i16: bool = False
    i64: bool = False
    global_max: tuple[int, int, int] = (65535, 65535, 65535)
    local_max: tuple[int, int, int] = (1024, 1024, 64)
    local_threads: int = 128
    shared_max: int = 16384
    addresses: bool = False  # buffer device addresses: arguments past storage_range are reached by address
    storage_range: int = 1 << 27  # maxStorageBufferRange (Vulkan's minimum: 128 MiB)
    # arguments reached by address from this many bytes on are reached by 64-bit address arithmetic (renderer.py)
    wide_bytes: int = 1 << 31
    # float widths whose infinities, NaNs and signed zeros a kernel can ask the driver to keep
    # (SignedZeroInfNanPreserve)
    preserve_widths: tuple[int, ...] = ()
    # loop iterations one invocation may run, all loops together (0: no limit); lavapipe leaves loops silently past
    # 65,535 (see vkbackend.tinygrad.renderer.loop_limit)
    loop_limit: int = 0
    # 32-bit signed integers widened to 64 bits by arithmetic, not by the conversion (glsl_types.cast): Mesa's lavapipe
    # compares such a value with a constant, and shifts it, as if its upper half were zero
    sext64: bool = False
    # lanes of global loads the unrolled copies of one innermost loop may issue (0: loops as tinygrad wrote them; see
    # vkbackend.tinygrad.renderer.unroll)
    unroll_lanes: int = 0
    # invocations of one subgroup (warp) that the layout of the local dimensions is chosen for (0: tinygrad's layout,
    # lidx0 on x; see vkbackend.tinygrad.renderer.local_layout)
    warp_lanes: int = 0
    # invocations of one subgroup (warp) for which loads whose lanes each walk a run of their own are staged through
    # shared memory (0: not staged; see vkbackend.tinygrad.renderer.stream_staging)
    stage_lanes: int = 0
    # tensor cores (where the device has cooperative matrices and VKBACKEND_TINYGRAD_TC allows: tensor_cores.tc_mode,
    # coopmat_layout.with_tensor_cores): the invocations of one warp (``w32``), the shapes (``m16.16.16.f16.f32``),
    # ``tcemu``: WMMA in scalar code, not cooperative matrices (to check the layout on devices without them), and
    # ``tcnv``: the registers are laid out as NVIDIA's cooperative matrices are (probed on the device), else in
    # row-major chunks (tensor_cores.register_layout)
    tc_threads: int = 0
    tc_shapes: tuple[TCShape, ...] = ()
    tc_emulate: bool = False
    tc_layout: str = "chunk"


_FLAGS = ("f16", "f64", "i8", "i16", "i64", "addresses", "sext64")


def make_arch(caps: DeviceCaps) -> str:
    """``DeviceCaps`` -> a compact arch string such as
    ``f16,i8,i16,i64,f64,addresses,g65535/65535/65535,l1024/1024/64,t1024,s32768,r134217728,p16/32/64``.

    It contains no ``:`` or ``+`` (tinygrad's target separators), so ``DEV=VK::<arch>`` can also override it."""
    toks = [f for f in _FLAGS if getattr(caps, f)]
    toks += [
        "g" + "/".join(map(str, caps.global_max)),
        "l" + "/".join(map(str, caps.local_max)),
        f"t{caps.local_threads}",
        f"s{caps.shared_max}",
        f"r{caps.storage_range}",
        *([f"p{'/'.join(map(str, caps.preserve_widths))}"] if caps.preserve_widths else []),
        *([f"loops{caps.loop_limit}"] if caps.loop_limit else []),
        *([f"unroll{caps.unroll_lanes}"] if caps.unroll_lanes else []),
        *([f"lanes{caps.warp_lanes}"] if caps.warp_lanes else []),
        *([f"stage{caps.stage_lanes}"] if caps.stage_lanes else []),
        *([f"wide{caps.wide_bytes}"] if caps.wide_bytes != DeviceCaps.wide_bytes else []),
    ]
    if caps.tc_threads and caps.tc_shapes:
        toks += [f"w{caps.tc_threads}", *(shape.token() for shape in caps.tc_shapes)]
        toks += ["tcemu"] if caps.tc_emulate else []
        if caps.tc_layout not in TC_LAYOUTS:
            raise ValueError(f"unknown tensor-core register layout {caps.tc_layout!r}; known: {', '.join(TC_LAYOUTS)}")
        toks += [f"tc{caps.tc_layout}"] if caps.tc_layout != "chunk" else []
    return ",".join(toks)


def parse_arch(arch: str) -> DeviceCaps:
    """Inverse of :func:`make_arch`; unknown tokens are ignored, missing ones keep the Vulkan-minimum defaults."""
    kw: dict = {}
    shapes: list[TCShape] = []
    for tok in (t.strip() for t in (arch or "").split(",")):
        if not tok:
            continue
        if tok in _FLAGS:
            kw[tok] = True
        elif tok[0] == "p" and all(w.isdigit() for w in tok[1:].split("/")):
            kw["preserve_widths"] = tuple(int(w) for w in tok[1:].split("/"))
        elif tok.startswith("loops") and tok[5:].isdigit():
            kw["loop_limit"] = int(tok[5:])
        elif tok.startswith("unroll") and tok[6:].isdigit():
            kw["unroll_lanes"] = int(tok[6:])
        elif tok.startswith("lanes") and tok[5:].isdigit():
            kw["warp_lanes"] = int(tok[5:])
        elif tok.startswith("stage") and tok[5:].isdigit():
            kw["stage_lanes"] = int(tok[5:])
        elif tok.startswith("wide") and tok[4:].isdigit():
            kw["wide_bytes"] = int(tok[4:])
        elif tok == "tcemu":
            kw["tc_emulate"] = True
        elif tok.startswith("tc") and tok[2:] in TC_LAYOUTS:
            kw["tc_layout"] = tok[2:]
        elif tok[0] == "w" and tok[1:].isdigit():
            kw["tc_threads"] = int(tok[1:])
        elif (shape := TCShape.parse(tok)) is not None:
            shapes.append(shape)
        elif tok[0] in "gl" and "/" in tok:
            vals = tuple(int(x) for x in tok[1:].split("/"))
            if len(vals) == 3:
                kw["global_max" if tok[0] == "g" else "local_max"] = vals
        elif tok[0] in "tsr" and tok[1:].isdigit():
            kw[{"t": "local_threads", "s": "shared_max", "r": "storage_range"}[tok[0]]] = int(tok[1:])
    return DeviceCaps(**kw, tc_shapes=tuple(shapes))
