"""bfloat16 cooperative matrices in SPIR-V, which GLSL cannot spell with glslang 13 (it has no bfloat16 type).

The tensor-core renderer stages bfloat16 inputs as their 16-bit patterns and loads them into float16 ``A``/``B``
matrices (``coopMatLoad`` reinterprets memory as the matrix's component type, whatever the array's element type).
:func:`retype_cooperative_matrices` then gives those matrix types a bfloat16 component (``OpTypeFloat 16
BFloat16KHR``, SPV_KHR_bfloat16), so the loads read the staged bits as bfloat16 and ``OpCooperativeMatrixMulAddKHR``
multiplies bfloat16. Nothing else in the module changes: no other value has those types.
"""

from __future__ import annotations

import struct

__all__ = ["retype_cooperative_matrices"]

_OP_EXTENSION, _OP_CAPABILITY, _OP_TYPE_FLOAT, _OP_CONSTANT = 10, 17, 22, 43
_OP_TYPE_COOPERATIVE_MATRIX = 4456
_CAP_BFLOAT16_TYPE, _CAP_BFLOAT16_COOPERATIVE_MATRIX = 5116, 5118
_ENCODING_BFLOAT16 = 0  # the FPEncoding operand of OpTypeFloat
_USE_A, _USE_B = 0, 1


def _instruction(opcode: int, operands: list[int]) -> list[int]:
    return [(len(operands) + 1) << 16 | opcode, *operands]


def _string(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def retype_cooperative_matrices(spirv: bytes) -> bytes:
    """``spirv`` with its float16 ``MatrixUseA``/``MatrixUseB`` cooperative-matrix types made bfloat16, and the
    capabilities and extension that needs. Raises ValueError when the module has no such type."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    instructions: list[list[int]] = []
    pos = 5
    while pos < len(words):
        count = words[pos] >> 16
        if count == 0:
            raise ValueError("not a SPIR-V module: an instruction of zero words")
        instructions.append(words[pos : pos + count])
        pos += count
    half = {ins[1] for ins in instructions if ins[0] & 0xFFFF == _OP_TYPE_FLOAT and ins[2:] == [16]}
    constants = {ins[2]: ins[3] for ins in instructions if ins[0] & 0xFFFF == _OP_CONSTANT and len(ins) == 4}
    bf16 = words[3]  # the module's id bound: the first free id
    out: list[list[int]] = []
    retyped = 0
    for ins in instructions:
        opcode = ins[0] & 0xFFFF
        if opcode == _OP_TYPE_COOPERATIVE_MATRIX and ins[2] in half and constants.get(ins[6]) in (_USE_A, _USE_B):
            if not retyped:
                out.append(_instruction(_OP_TYPE_FLOAT, [bf16, 16, _ENCODING_BFLOAT16]))
            ins = [ins[0], ins[1], bf16, *ins[3:]]
            retyped += 1
        out.append(ins)
    if not retyped:
        raise ValueError("the module has no float16 A or B cooperative-matrix type to make bfloat16")
    last_capability = max(i for i, ins in enumerate(out) if ins[0] & 0xFFFF == _OP_CAPABILITY)
    out[last_capability + 1 : last_capability + 1] = [_instruction(_OP_CAPABILITY, [_CAP_BFLOAT16_TYPE]),
                                                      _instruction(_OP_CAPABILITY, [_CAP_BFLOAT16_COOPERATIVE_MATRIX]),
                                                      _instruction(_OP_EXTENSION, _string("SPV_KHR_bfloat16"))]
    header = [*words[:3], bf16 + 1, words[4]]
    body = [w for ins in out for w in ins]
    return struct.pack(f"<{len(header) + len(body)}I", *header, *body)
