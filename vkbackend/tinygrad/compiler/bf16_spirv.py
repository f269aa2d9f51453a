"""bfloat16 cooperative matrices in SPIR-V, which GLSL cannot spell with glslang 13 (it has no bfloat16 type).

GLSL declares bfloat16 ``A``/``B`` matrices as float16 ones and fills them with bfloat16 bits: the staged tensor
cores by ``coopMatLoad`` (which reinterprets memory as the matrix's component type, whatever the array's element
type), the ones straight from registers component by component, each the bitcast of a 16-bit pattern to float16
(``uint16BitsToFloat16``). :func:`retype_cooperative_matrices` then gives those matrix types a bfloat16 component
(``OpTypeFloat 16 BFloat16KHR``, SPV_KHR_bfloat16) and keeps the bits of what GLSL wrote and read: the pointers
components are reached through become pointers to bfloat16, a float16 value written to a component is bitcast to
bfloat16 first, and a component read is bitcast back to the float16 the GLSL expects (the layout probe reads its
components' bits so: runtime/coopmat_layout.py). So the same bits are bfloat16 and ``OpCooperativeMatrixMulAddKHR``
multiplies bfloat16; nothing else in the module changes. Anything else that reaches those matrices (a constant
matrix, an array of them, one passed to a function by pointer) fails validation, which every kernel passes.
"""

from __future__ import annotations

import struct

from vkbackend.spirv import (
    CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR,
    CAP_BFLOAT16_TYPE_KHR,
    FP_ENCODING_BFLOAT16_KHR,
    MATRIX_USE_A_KHR,
    MATRIX_USE_B_KHR,
    OP_ACCESS_CHAIN,
    OP_BITCAST,
    OP_CAPABILITY,
    OP_CONSTANT,
    OP_EXTENSION,
    OP_IN_BOUNDS_ACCESS_CHAIN,
    OP_LOAD,
    OP_STORE,
    OP_TYPE_COOPERATIVE_MATRIX_KHR,
    OP_TYPE_FLOAT,
    OP_TYPE_POINTER,
    OP_VARIABLE,
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
    """``spirv`` with its float16 ``MatrixUseA``/``MatrixUseB`` cooperative-matrix types made bfloat16, their
    components' writes and reads bitcast (module docstring), and the capabilities and extension that needs. Raises
    ValueError when the module has no such type, ``BackendError(KernelCompilation)`` when it is malformed."""
    words = module_words(spirv)
    walked = list(instructions(words))  # the whole walk first: a malformed module fails before any rewriting
    half = {operands[0] for _, opcode, _, operands in walked if opcode == OP_TYPE_FLOAT and operands[1:] == (16,)}
    constants = {
        operands[1]: operands[2] for _, opcode, count, operands in walked if opcode == OP_CONSTANT and count == 4
    }
    matrices = {
        operands[0]
        for _, opcode, count, operands in walked
        if opcode == OP_TYPE_COOPERATIVE_MATRIX_KHR
        and count == 7
        and operands[1] in half
        and constants.get(operands[5]) in (MATRIX_USE_A_KHR, MATRIX_USE_B_KHR)
    }
    if not matrices:
        raise ValueError("the module has no float16 A or B cooperative-matrix type to make bfloat16")
    # the matrices' variables, and the pointers to their components
    pointers = {
        operands[0] for _, opcode, _, operands in walked if opcode == OP_TYPE_POINTER and operands[2] in matrices
    }
    variables = {operands[1] for _, opcode, _, operands in walked if opcode == OP_VARIABLE and operands[0] in pointers}
    components = {
        operands[1]: operands[0]
        for _, opcode, _, operands in walked
        if opcode in (OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN) and operands[2] in variables
    }
    storage = {operands[0]: operands[1] for _, opcode, _, operands in walked if opcode == OP_TYPE_POINTER}
    bf16 = words[3]  # the module's id bound: the first free id, then one pointer type per storage class
    classes = sorted({storage[pointer] for pointer in components.values()})
    component_pointer = {cls: bf16 + 1 + i for i, cls in enumerate(classes)}
    next_id = bf16 + 1 + len(classes)  # then one per bitcast added
    out: list[list[int]] = []
    declared = False
    for offset, opcode, count, operands in walked:
        ins = list(words[offset : offset + count])
        if opcode == OP_TYPE_COOPERATIVE_MATRIX_KHR and operands[0] in matrices:
            if not declared:  # the new types go before the first matrix retyped
                declared = True
                out.append(_instruction(OP_TYPE_FLOAT, [bf16, 16, FP_ENCODING_BFLOAT16_KHR]))
                out += [_instruction(OP_TYPE_POINTER, [p, cls, bf16]) for cls, p in component_pointer.items()]
            ins[2] = bf16
        elif opcode in (OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN) and operands[1] in components:
            ins[1] = component_pointer[storage[operands[0]]]
        elif opcode == OP_STORE and operands[0] in components:  # the float16 value's bits go in
            out.append(_instruction(OP_BITCAST, [bf16, next_id, operands[1]]))
            ins[2], next_id = next_id, next_id + 1
        elif opcode == OP_LOAD and operands[2] in components:  # the component's bits come out as a float16
            half_type, result = operands[0], operands[1]
            ins[1], ins[2] = bf16, next_id
            out.append(ins)
            ins = _instruction(OP_BITCAST, [half_type, result, next_id])
            next_id += 1
        out.append(ins)
    last_capability = max(i for i, ins in enumerate(out) if ins[0] & 0xFFFF == OP_CAPABILITY)
    out[last_capability + 1 : last_capability + 1] = [
        _instruction(OP_CAPABILITY, [CAP_BFLOAT16_TYPE_KHR]),
        _instruction(OP_CAPABILITY, [CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR]),
        _instruction(OP_EXTENSION, _string("SPV_KHR_bfloat16")),
    ]
    header = [*words[:3], next_id, words[4]]
    body = [w for ins in out for w in ins]
    return struct.pack(f"<{len(header) + len(body)}I", *header, *body)
