"""bfloat16 cooperative matrices in SPIR-V, which GLSL cannot spell with glslang 13 (it has no bfloat16 type).

The tensor-core renderer stages bfloat16 inputs as their 16-bit patterns and loads them into float16 ``A``/``B``
matrices (``coopMatLoad`` reinterprets memory as the matrix's component type, whatever the array's element type).
:func:`retype_cooperative_matrices` then gives those matrix types a bfloat16 component (``OpTypeFloat 16
BFloat16KHR``, SPV_KHR_bfloat16), so the loads read the staged bits as bfloat16 and ``OpCooperativeMatrixMulAddKHR``
multiplies bfloat16. Nothing else in the module changes: no other value has those types.
"""

from __future__ import annotations

import struct

from vkbackend.spirv import (
    CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR,
    CAP_BFLOAT16_TYPE_KHR,
    FP_ENCODING_BFLOAT16_KHR,
    MATRIX_USE_A_KHR,
    MATRIX_USE_B_KHR,
    OP_CAPABILITY,
    OP_CONSTANT,
    OP_EXTENSION,
    OP_TYPE_COOPERATIVE_MATRIX_KHR,
    OP_TYPE_FLOAT,
    instructions,
    module_words,
)

__all__ = ["retype_cooperative_matrices"]


def _instruction(opcode: int, operands: list[int]) -> list[int]:
    return [(len(operands) + 1) << 16 | opcode, *operands]


def _string(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def retype_cooperative_matrices(spirv: bytes) -> bytes:
    """``spirv`` with its float16 ``MatrixUseA``/``MatrixUseB`` cooperative-matrix types made bfloat16, and the
    capabilities and extension that needs. Raises ValueError when the module has no such type,
    ``BackendError(KernelCompilation)`` when it is malformed."""
    words = module_words(spirv)
    walked = list(instructions(words))  # the whole walk first: a malformed module fails before any rewriting
    half = {operands[0] for _, opcode, _, operands in walked if opcode == OP_TYPE_FLOAT and operands[1:] == (16,)}
    constants = {
        operands[1]: operands[2] for _, opcode, count, operands in walked if opcode == OP_CONSTANT and count == 4
    }
    bf16 = words[3]  # the module's id bound: the first free id
    out: list[list[int]] = []
    retyped = 0
    for offset, opcode, count, operands in walked:
        ins = list(words[offset : offset + count])
        # operands: result id, component type, scope, rows, columns, use
        if (
            opcode == OP_TYPE_COOPERATIVE_MATRIX_KHR
            and count == 7
            and operands[1] in half
            and constants.get(operands[5]) in (MATRIX_USE_A_KHR, MATRIX_USE_B_KHR)
        ):
            if not retyped:
                out.append(_instruction(OP_TYPE_FLOAT, [bf16, 16, FP_ENCODING_BFLOAT16_KHR]))
            ins[2] = bf16
            retyped += 1
        out.append(ins)
    if not retyped:
        raise ValueError("the module has no float16 A or B cooperative-matrix type to make bfloat16")
    last_capability = max(i for i, ins in enumerate(out) if ins[0] & 0xFFFF == OP_CAPABILITY)
    out[last_capability + 1 : last_capability + 1] = [
        _instruction(OP_CAPABILITY, [CAP_BFLOAT16_TYPE_KHR]),
        _instruction(OP_CAPABILITY, [CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR]),
        _instruction(OP_EXTENSION, _string("SPV_KHR_bfloat16")),
    ]
    header = [*words[:3], bf16 + 1, words[4]]
    body = [w for ins in out for w in ins]
    return struct.pack(f"<{len(header) + len(body)}I", *header, *body)
