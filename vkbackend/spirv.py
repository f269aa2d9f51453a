"""SPIR-V reflection: what a compute kernel needs from the host, read straight from the word stream.

:func:`reflect` returns a :class:`ProgramInfo`: the workgroup size, the storage buffers of descriptor set 0 with how
each is accessed, the push-constant block's scalar members and the shared memory used. It is pure Python and
deliberately strict: anything the backend cannot bind (images, uniform buffers, other sets, vector push constants)
is refused here with a clear :class:`~vkbackend.errors.BackendError` instead of failing later inside the driver.
Malformed input of any kind (random bytes, truncations) raises ``BackendError(KernelCompilation)`` and nothing else.

:func:`module_words` and :func:`instructions` are the one walk over a module's words, taken by reflection and by every
rewriter of SPIR-V in the package (the tinygrad plugin's tinygrad/compiler/compiler.py and bf16_spirv.py); the
specification's numbers they need are named once, below.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Iterator, NoReturn, Sequence

from vkbackend.errors import BackendError, ErrorStatus

__all__ = ["AddressMember", "BufferBinding", "PushMember", "ProgramInfo", "instructions", "module_words", "reflect"]

MAGIC = 0x07230203
_HEADER_WORDS = 5
_SPIRV_1_4 = 0x00010400  # from 1.4 on, an entry point's interface lists every global variable it uses

# The numbers of the SPIR-V specification (its enumerants, section 3), named once for every reader and rewriter of
# modules in the package: reflection here, the tinygrad plugin's tinygrad/compiler/compiler.py and bf16_spirv.py.

# Opcodes (3.52).
OP_NAME = 5
OP_MEMBER_NAME = 6
OP_EXTENSION = 10
OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_CAPABILITY = 17
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_MATRIX = 24
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_CONSTANT = 43
OP_CONSTANT_COMPOSITE = 44
OP_SPEC_CONSTANT = 50
OP_SPEC_CONSTANT_COMPOSITE = 51
OP_SPEC_CONSTANT_OP = 52
OP_FUNCTION = 54
OP_FUNCTION_END = 56
OP_FUNCTION_CALL = 57
OP_VARIABLE = 59
OP_LOAD = 61
OP_STORE = 62
OP_ACCESS_CHAIN = 65
OP_IN_BOUNDS_ACCESS_CHAIN = 66
OP_DECORATE = 71
OP_MEMBER_DECORATE = 72
OP_DECORATION_GROUP = 73
OP_GROUP_DECORATE = 74
OP_GROUP_MEMBER_DECORATE = 75
OP_BITCAST = 124
OP_LABEL = 248
OP_EXECUTION_MODE_ID = 331
OP_TYPE_COOPERATIVE_MATRIX_KHR = 4456

_TYPE_DESCRIPTIONS = {
    OP_TYPE_VECTOR: "a vector",
    OP_TYPE_MATRIX: "a matrix",
    OP_TYPE_ARRAY: "an array",
    OP_TYPE_RUNTIME_ARRAY: "a runtime array",
    OP_TYPE_STRUCT: "a struct",
    OP_TYPE_POINTER: "a pointer",
}

# Execution model and modes.
MODEL_GLCOMPUTE = 5
MODE_LOCAL_SIZE = 17
MODE_LOCAL_SIZE_ID = 38

# Decorations, and the one built-in read.
DEC_SPEC_ID = 1
DEC_BLOCK = 2
DEC_BUFFER_BLOCK = 3
DEC_BUILTIN = 11
DEC_NON_WRITABLE = 24
DEC_NON_READABLE = 25
DEC_BINDING = 33
DEC_DESCRIPTOR_SET = 34
DEC_OFFSET = 35
BUILTIN_WORKGROUP_SIZE = 25
# Only these are recorded: it keeps group decorations linear (each group carries at most this many).
_READ_DECORATIONS = frozenset(
    {
        DEC_BLOCK,
        DEC_BUFFER_BLOCK,
        DEC_BUILTIN,
        DEC_NON_WRITABLE,
        DEC_NON_READABLE,
        DEC_BINDING,
        DEC_DESCRIPTOR_SET,
        DEC_OFFSET,
    }
)
# Sizes beyond this are not real shared memory; treating them as unknown keeps nested huge arrays from building
# ever larger integers.
_MAX_TYPE_SIZE = 1 << 40

# Storage classes.
SC_UNIFORM_CONSTANT = 0
SC_UNIFORM = 2
SC_WORKGROUP = 4
SC_PUSH_CONSTANT = 9
SC_STORAGE_BUFFER = 12
SC_PHYSICAL_STORAGE_BUFFER = 5349

# bfloat16 (SPV_KHR_bfloat16) and cooperative matrices (SPV_KHR_cooperative_matrix).
CAP_BFLOAT16_TYPE_KHR = 5116
CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR = 5118
FP_ENCODING_BFLOAT16_KHR = 0  # the FPEncoding operand of OpTypeFloat
MATRIX_USE_A_KHR = 0
MATRIX_USE_B_KHR = 1

_INT_FORMATS = {
    (8, True): "b",
    (8, False): "B",
    (16, True): "h",
    (16, False): "H",
    (32, True): "i",
    (32, False): "I",
    (64, True): "q",
    (64, False): "Q",
}
_FLOAT_FORMATS = {16: "e", 32: "f", 64: "d"}
# The struct codes above by the names users know them by (numpy's, and GLSL's sized types').
_TYPE_NAMES = {
    **{code: f"{'' if signed else 'u'}int{bits}" for (bits, signed), code in _INT_FORMATS.items()},
    **{code: f"float{bits}" for bits, code in _FLOAT_FORMATS.items()},
}


@dataclass(frozen=True)
class BufferBinding:
    """A storage buffer in descriptor set 0.

    ``readable``/``writable`` are False when the buffer is decorated NonReadable (GLSL ``writeonly``) or NonWritable
    (GLSL ``readonly``), on the variable or on every member of its block; the submitter derives hazards from them.
    """

    binding: int
    name: str
    readable: bool
    writable: bool


@dataclass(frozen=True)
class PushMember:
    """One scalar member of the push-constant block: where it lives and how to pack it (``format``, a :mod:`struct`
    code; :attr:`type_name` names the type)."""

    name: str
    offset: int
    format: str
    size: int

    @property
    def type_name(self) -> str:
        """The member's type as numpy names it: ``"float32"``, ``"uint32"``, ``"int64"``, ``"float16"``..."""
        return _TYPE_NAMES.get(self.format, self.format)


@dataclass(frozen=True)
class AddressMember:
    """A push-constant member that is a buffer's device address (a GLSL ``buffer_reference``): the launch passes a
    buffer for it, after the bound ones, and the backend writes the address and orders the access like a binding's.

    ``readable``/``writable`` are False when every member of the referenced block is NonReadable (``writeonly``) or
    NonWritable (``readonly``).
    """

    name: str
    offset: int
    readable: bool
    writable: bool


@dataclass(frozen=True)
class ProgramInfo:
    """The host-visible interface of one compute entry point."""

    entry_point: str
    local_size: tuple[int, int, int]
    buffers: tuple[BufferBinding, ...]  # sorted by binding
    push_constants: tuple[PushMember, ...]  # in member order
    push_constant_size: int  # bytes spanned by the block, rounded up to 4
    shared_memory_bytes: int  # best-effort total of Workgroup variables; 0 if unknown
    addresses: tuple[AddressMember, ...] = ()  # device-address members of the push-constant block, by offset
    # The module's OpCapability operands: what it needs of the device rather than its interface, so not compared.
    capabilities: frozenset[int] = field(default=frozenset(), compare=False)


def _fail(message: str) -> NoReturn:
    raise BackendError(ErrorStatus.KernelCompilation, message)


def module_words(spirv: bytes) -> tuple[int, ...]:
    """The module as 32-bit words in host order, header included, after checking the header (byte-swapped modules
    are accepted). Raises ``BackendError(KernelCompilation)`` for anything else: not bytes, no magic number, not
    whole words, shorter than the header."""
    try:
        data = memoryview(spirv).tobytes()
    except TypeError:
        _fail(f"SPIR-V must be a bytes-like object, not {type(spirv).__name__}; pass the compiled module's bytes")
    # The magic number is checked first: GLSL source or text assembly passed by mistake gets the most useful message.
    first = int.from_bytes(data[:4], "little")
    if len(data) >= 4 and first == MAGIC:
        order = "<"
    elif len(data) >= 4 and first == int.from_bytes(MAGIC.to_bytes(4, "little"), "big"):
        order = ">"
    else:
        _fail(
            f"not a SPIR-V module: it starts with {data[:4]!r}, not the magic number {MAGIC:#010x}; "
            "pass the binary produced by glslang (or compile_glsl), not GLSL source or text assembly"
        )
    if len(data) % 4 != 0:
        _fail(f"SPIR-V is {len(data)} bytes, not a whole number of 32-bit words; the module is truncated or corrupt")
    if len(data) < 4 * _HEADER_WORDS:
        _fail(f"SPIR-V is {len(data)} bytes, shorter than its 20-byte header; the module is truncated or empty")
    return struct.unpack(f"{order}{len(data) // 4}I", data)


def instructions(words: Sequence[int]) -> Iterator[tuple[int, int, int, Sequence[int]]]:
    """Walks the instructions of a module's ``words`` (all of them, header included, as :func:`module_words` returns
    them), yielding ``(offset, opcode, word count, operands)`` for each: ``offset`` indexes its first word in
    ``words``, the word count includes that word, and ``operands`` are the words after it (a slice of ``words``).

    Raises ``BackendError(KernelCompilation)`` on reaching an instruction whose word count is zero (the walk would
    never advance) or runs past the end (a truncated module), before yielding it.
    """
    count = len(words)
    index = _HEADER_WORDS
    while index < count:
        word = words[index]
        length, opcode = word >> 16, word & 0xFFFF
        if length == 0 or index + length > count:
            _fail(
                f"malformed SPIR-V: the instruction at word {index} (opcode {opcode}) has word count "
                f"{length} but {count - index} words remain; the module is truncated or corrupt"
            )
        yield index, opcode, length, words[index + 1 : index + length]
        index += length


def _read_string(words: tuple[int, ...], start: int, end: int) -> tuple[str, int]:
    """Decodes a nul-terminated UTF-8 literal from ``words[start:end]``; returns it and the index of the next word."""
    raw = bytearray()
    for index in range(start, end):
        chunk = words[index].to_bytes(4, "little")  # literals pack their first byte in the lowest-order bits
        nul = chunk.find(0)
        if nul >= 0:
            raw += chunk[:nul]
            return raw.decode("utf-8", errors="replace"), index + 1
        raw += chunk
    _fail("malformed SPIR-V: a string literal has no terminating nul; the module is corrupt")


class _Module:
    """The parts of a SPIR-V module that reflection reads, gathered in one pass over the instructions."""

    def __init__(self, words: tuple[int, ...]) -> None:
        self.version = words[1]
        self.entry_points: list[tuple[int, int, str, tuple[int, ...]]] = []  # (model, function id, name, interface)
        self.execution_modes: dict[tuple[int, int], tuple[int, ...]] = {}  # (function id, mode) -> operands
        self.names: dict[int, str] = {}
        self.member_names: dict[tuple[int, int], str] = {}
        self.decorations: dict[int, dict[int, tuple[int, ...]]] = {}
        self.member_decorations: dict[tuple[int, int], dict[int, tuple[int, ...]]] = {}
        self.types: dict[int, tuple[int, tuple[int, ...]]] = {}  # id -> (opcode, operands after the result id)
        self.type_sizes: dict[int, int] = {}  # byte sizes, computed as types are declared (operands come first)
        self.int_constants: dict[int, int] = {}  # OpConstant/OpSpecConstant (default value) of integer type
        self.composites: dict[int, tuple[int, ...]] = {}  # constant composites -> constituent ids
        self.spec_ops: set[int] = set()  # spec-constant expressions: not evaluated here
        self.variables: list[tuple[int, int, int]] = []  # (id, pointer type id, storage class), global or not
        self.capabilities: set[int] = set()
        # Structure, so that a truncated module never reaches the driver (lavapipe segfaults on some): functions
        # with a body, the functions called, and whether the stream ended inside a function.
        self.defined_functions: set[int] = set()
        self.called_functions: set[int] = set()
        self.open_function: int | None = None
        self._parse(words)

    def _parse(self, words: tuple[int, ...]) -> None:
        handlers: dict[int, Callable[[tuple[int, ...], int, int], None]] = {
            OP_NAME: self._on_name,
            OP_MEMBER_NAME: self._on_member_name,
            OP_CAPABILITY: self._on_capability,
            OP_ENTRY_POINT: self._on_entry_point,
            OP_EXECUTION_MODE: self._on_execution_mode,
            OP_EXECUTION_MODE_ID: self._on_execution_mode,
            OP_DECORATE: self._on_decorate,
            OP_MEMBER_DECORATE: self._on_member_decorate,
            OP_GROUP_DECORATE: self._on_group_decorate,
            OP_GROUP_MEMBER_DECORATE: self._on_group_member_decorate,
            OP_CONSTANT: self._on_constant,
            OP_SPEC_CONSTANT: self._on_constant,
            OP_CONSTANT_COMPOSITE: self._on_composite,
            OP_SPEC_CONSTANT_COMPOSITE: self._on_composite,
            OP_SPEC_CONSTANT_OP: self._on_spec_constant_op,
            OP_VARIABLE: self._on_variable,
        }
        for opcode in (
            OP_TYPE_BOOL,
            OP_TYPE_INT,
            OP_TYPE_FLOAT,
            OP_TYPE_VECTOR,
            OP_TYPE_MATRIX,
            OP_TYPE_ARRAY,
            OP_TYPE_RUNTIME_ARRAY,
            OP_TYPE_STRUCT,
            OP_TYPE_POINTER,
        ):
            handlers[opcode] = self._on_type
        for index, opcode, length, _ in instructions(words):
            handler = handlers.get(opcode)
            if handler is not None:
                # Handlers get (words, first operand, end) rather than a slice: strings are decoded in place.
                if length < 2:
                    _fail(f"malformed SPIR-V: opcode {opcode} at word {index} has no operands")
                handler(words, index + 1, index + length)
            elif opcode == OP_FUNCTION or opcode == OP_FUNCTION_END or opcode == OP_LABEL or opcode == OP_FUNCTION_CALL:
                self._on_structure(opcode, words, index, length)

    def _on_structure(self, opcode: int, words: tuple[int, ...], index: int, length: int) -> None:
        if opcode == OP_FUNCTION:
            if self.open_function is not None or length < 5:
                _fail(f"malformed SPIR-V: OpFunction at word {index} inside another function or without operands")
            self.open_function = words[index + 2]
        elif opcode == OP_FUNCTION_END:
            if self.open_function is None:
                _fail(f"malformed SPIR-V: OpFunctionEnd at word {index} outside a function")
            self.open_function = None
        elif opcode == OP_LABEL:
            if self.open_function is not None:
                self.defined_functions.add(self.open_function)
        elif length >= 4:  # OpFunctionCall: result type, result id, function
            self.called_functions.add(words[index + 3])

    @staticmethod
    def _operands(words: tuple[int, ...], start: int, end: int, minimum: int, what: str) -> tuple[int, ...]:
        operands = words[start:end]
        if len(operands) < minimum:
            _fail(f"malformed SPIR-V: {what} has {len(operands)} operands, needs at least {minimum}")
        return operands

    def _on_capability(self, words: tuple[int, ...], start: int, end: int) -> None:
        self.capabilities.add(words[start])

    def _on_name(self, words: tuple[int, ...], start: int, end: int) -> None:
        name, _ = _read_string(words, start + 1, end)
        self.names.setdefault(words[start], name)

    def _on_member_name(self, words: tuple[int, ...], start: int, end: int) -> None:
        self._operands(words, start, end, 3, "OpMemberName")
        name, _ = _read_string(words, start + 2, end)
        self.member_names.setdefault((words[start], words[start + 1]), name)

    def _on_entry_point(self, words: tuple[int, ...], start: int, end: int) -> None:
        self._operands(words, start, end, 3, "OpEntryPoint")
        name, after = _read_string(words, start + 2, end)
        self.entry_points.append((words[start], words[start + 1], name, words[after:end]))

    def _on_execution_mode(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 2, "OpExecutionMode")
        self.execution_modes.setdefault((operands[0], operands[1]), operands[2:])

    def _on_decorate(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 2, "OpDecorate")
        if operands[1] in _READ_DECORATIONS:
            self.decorations.setdefault(operands[0], {}).setdefault(operands[1], operands[2:])

    def _on_member_decorate(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 3, "OpMemberDecorate")
        if operands[2] in _READ_DECORATIONS:
            member = self.member_decorations.setdefault((operands[0], operands[1]), {})
            member.setdefault(operands[2], operands[3:])

    def _on_group_decorate(self, words: tuple[int, ...], start: int, end: int) -> None:
        # Decorations were recorded on the OpDecorationGroup id; copy them onto each target.
        operands = words[start:end]
        group = self.decorations.get(operands[0], {})
        for target in operands[1:]:
            existing = self.decorations.setdefault(target, {})
            for decoration, values in group.items():
                existing.setdefault(decoration, values)

    def _on_group_member_decorate(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = words[start:end]
        group = self.decorations.get(operands[0], {})
        for pair in range(1, len(operands) - 1, 2):
            existing = self.member_decorations.setdefault((operands[pair], operands[pair + 1]), {})
            for decoration, values in group.items():
                existing.setdefault(decoration, values)

    def _on_type(self, words: tuple[int, ...], start: int, end: int) -> None:
        opcode = words[start - 1] & 0xFFFF
        operands = words[start:end]
        result, rest = operands[0], operands[1:]
        self.types.setdefault(result, (opcode, rest))
        size = self._size_of(opcode, rest)
        if size is not None and size <= _MAX_TYPE_SIZE:
            self.type_sizes.setdefault(result, size)

    def _size_of(self, opcode: int, rest: tuple[int, ...]) -> int | None:
        """Byte size of a type from its operands' sizes (None if unknown): a best effort, no padding or alignment."""
        sizes = self.type_sizes
        if opcode in (OP_TYPE_INT, OP_TYPE_FLOAT) and rest:
            return rest[0] // 8
        if opcode == OP_TYPE_BOOL:
            return 4  # not physically storable; drivers keep Workgroup booleans in 32 bits
        if opcode in (OP_TYPE_VECTOR, OP_TYPE_MATRIX) and len(rest) >= 2 and rest[0] in sizes:
            return sizes[rest[0]] * rest[1]
        if opcode == OP_TYPE_ARRAY and len(rest) >= 2 and rest[0] in sizes and rest[1] in self.int_constants:
            return sizes[rest[0]] * max(self.int_constants[rest[1]], 0)
        if opcode == OP_TYPE_STRUCT and all(member in sizes for member in rest):
            return sum(sizes[member] for member in rest)
        return None

    def _on_constant(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 2, "OpConstant")
        type_id, result, value_words = operands[0], operands[1], operands[2:]
        declared = self.types.get(type_id)
        if declared is None or declared[0] != OP_TYPE_INT or len(declared[1]) < 2:
            return  # only integer constants matter (array lengths, workgroup sizes)
        width, signed = declared[1][0], declared[1][1]
        if width not in (8, 16, 32, 64):
            return  # malformed widths are refused where they matter; never shift by an arbitrary width
        value = 0
        for position, word in enumerate(value_words[:2]):
            value |= word << (32 * position)
        value &= (1 << width) - 1
        if signed and value >> (width - 1):
            value -= 1 << width
        self.int_constants.setdefault(result, value)

    def _on_composite(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 2, "OpConstantComposite")
        self.composites.setdefault(operands[1], operands[2:])

    def _on_spec_constant_op(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 2, "OpSpecConstantOp")
        self.spec_ops.add(operands[1])

    def _on_variable(self, words: tuple[int, ...], start: int, end: int) -> None:
        operands = self._operands(words, start, end, 3, "OpVariable")
        self.variables.append((operands[1], operands[0], operands[2]))

    # Lookups used after parsing.

    def decoration(self, target: int, decoration: int) -> tuple[int, ...] | None:
        return self.decorations.get(target, {}).get(decoration)

    def member_decoration(self, struct_id: int, member: int, decoration: int) -> tuple[int, ...] | None:
        return self.member_decorations.get((struct_id, member), {}).get(decoration)

    def pointee(self, pointer_type: int) -> int | None:
        """The type a pointer type points to, or None if ``pointer_type`` is not a well-formed pointer type."""
        declared = self.types.get(pointer_type)
        if declared is None or declared[0] != OP_TYPE_POINTER or len(declared[1]) < 2:
            return None
        return declared[1][1]

    def array_element(self, type_id: int | None) -> int | None:
        """The element type of an array or runtime-array type, else None."""
        declared = self.types.get(type_id) if type_id is not None else None
        if declared is None or declared[0] not in (OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY) or not declared[1]:
            return None
        return declared[1][0]

    def struct_members(self, type_id: int | None) -> tuple[int, ...] | None:
        declared = self.types.get(type_id) if type_id is not None else None
        if declared is None or declared[0] != OP_TYPE_STRUCT:
            return None
        return declared[1]

    def pointee_size(self, pointer_type: int) -> int:
        """Byte size of what a pointer type points to; 0 when unknown."""
        pointee = self.pointee(pointer_type)
        return self.type_sizes.get(pointee, 0) if pointee is not None else 0

    def name_of(self, target: int | None) -> str:
        """The OpName of an id, "" if it has none."""
        return self.names.get(target, "") if target is not None else ""

    def describe(self, variable: int) -> str:
        name = self.name_of(variable)
        return f"'{name}'" if name else f"%{variable}"


def _find_entry_point(module: _Module, entry_point: str) -> tuple[int, tuple[int, ...]]:
    """Returns the GLCompute entry point's function id and interface."""
    for model, function, name, interface in module.entry_points:
        if name == entry_point and model == MODEL_GLCOMPUTE:
            return function, interface
    if any(name == entry_point for _, _, name, _ in module.entry_points):
        _fail(
            f"entry point '{entry_point}' is not a compute shader (GLCompute); compile the kernel as a compute "
            "shader (glslangValidator -S comp)"
        )
    available = sorted({name for model, _, name, _ in module.entry_points if model == MODEL_GLCOMPUTE})
    listing = ", ".join(f"'{name}'" for name in available) if available else "none"
    _fail(
        f"entry point '{entry_point}' not found in the SPIR-V module (compute entry points: {listing}); "
        "pass one of those as entry_point"
    )


def _check_structure(module: _Module, function: int) -> None:
    """A module cut short or missing code fails here: drivers are not required to survive it (lavapipe segfaults)."""
    if module.open_function is not None:
        _fail(
            f"malformed SPIR-V: the module ends inside function %{module.open_function} (no OpFunctionEnd); "
            "it is truncated"
        )
    if function not in module.defined_functions:
        _fail(
            f"malformed SPIR-V: the entry point's function %{function} has no body in the module; it is truncated "
            "or incomplete"
        )
    missing = module.called_functions - module.defined_functions
    if missing:
        _fail(
            f"malformed SPIR-V: calls to function(s) {', '.join(f'%{m}' for m in sorted(missing))} that have no "
            "body in the module; it is truncated or incomplete"
        )


def _resolve_size(module: _Module, constant: int, axis: str) -> int:
    """An integer constant's value, or a spec constant's default value (the size used without specialization)."""
    if constant in module.int_constants:
        return module.int_constants[constant]
    if constant in module.spec_ops:
        _fail(
            f"the workgroup size along {axis} is a specialization-constant expression (OpSpecConstantOp), which "
            "reflection does not evaluate; use a literal local_size or a plain specialization constant"
        )
    _fail(
        f"the workgroup size along {axis} refers to %{constant}, which is not an integer constant; "
        "the module is malformed"
    )


def _local_size(module: _Module, function: int) -> tuple[int, int, int]:
    """The workgroup size: the WorkgroupSize built-in constant overrides the LocalSize/LocalSizeId execution mode."""
    sizes: tuple[int, ...] | None = None
    for target, decorations in module.decorations.items():
        if decorations.get(DEC_BUILTIN, (None,))[:1] == (BUILTIN_WORKGROUP_SIZE,) and target in module.composites:
            constituents = module.composites[target]
            if len(constituents) != 3:
                _fail(f"the WorkgroupSize constant has {len(constituents)} components, expected 3")
            sizes = tuple(_resolve_size(module, constituent, axis) for constituent, axis in zip(constituents, "xyz"))
            break
    if sizes is None:
        literal = module.execution_modes.get((function, MODE_LOCAL_SIZE))
        by_id = module.execution_modes.get((function, MODE_LOCAL_SIZE_ID))
        if literal is not None:
            if len(literal) != 3:
                _fail(f"the LocalSize execution mode has {len(literal)} operands, expected 3")
            sizes = literal
        elif by_id is not None:
            if len(by_id) != 3:
                _fail(f"the LocalSizeId execution mode has {len(by_id)} operands, expected 3")
            sizes = tuple(_resolve_size(module, constant, axis) for constant, axis in zip(by_id, "xyz"))
        else:
            _fail("the compute entry point declares no workgroup size; add layout(local_size_x = N) in; to the kernel")
    if any(size < 1 for size in sizes):
        _fail(f"workgroup size {tuple(sizes)} is not positive on every axis; every local_size must be at least 1")
    x, y, z = sizes
    return x, y, z


def _is_storage_buffer(module: _Module, storage_class: int, block: int | None) -> bool:
    if storage_class == SC_STORAGE_BUFFER:
        return True
    # Before SPIR-V 1.3, storage buffers were Uniform variables whose block is decorated BufferBlock.
    return storage_class == SC_UNIFORM and block is not None and module.decoration(block, DEC_BUFFER_BLOCK) is not None


def _access_denied(module: _Module, variable: int, block: int, member_count: int, decoration: int) -> bool:
    """True when ``decoration`` (NonWritable or NonReadable) is on the variable or on every member of its block."""
    if module.decoration(variable, decoration) is not None:
        return True
    return member_count > 0 and all(
        module.member_decoration(block, index, decoration) is not None for index in range(member_count)
    )


def _buffers(module: _Module) -> tuple[BufferBinding, ...]:
    """Storage buffers of set 0; any other descriptor resource is refused.

    Every global variable in the module counts, not only the entry point's interface: a pipeline layout may declare
    more than a shader uses, and callers pass buffers for every binding their source declares.
    """
    buffers: dict[int, BufferBinding] = {}
    labels: dict[int, str] = {}  # binding -> variable, for the duplicate-binding message
    for variable, pointer_type, storage_class in module.variables:
        set_number = module.decoration(variable, DEC_DESCRIPTOR_SET)
        binding = module.decoration(variable, DEC_BINDING)
        block = module.pointee(pointer_type)
        element = module.array_element(block)  # an array of blocks is still classified by its block
        if not _is_storage_buffer(module, storage_class, block if element is None else element):
            if storage_class in (SC_UNIFORM_CONSTANT, SC_UNIFORM) or set_number is not None or binding is not None:
                kind = {
                    SC_UNIFORM_CONSTANT: "an image, sampler or other opaque resource",
                    SC_UNIFORM: "a uniform buffer (UBO)",
                }.get(storage_class, "a descriptor resource")
                _fail(
                    f"unsupported resource {module.describe(variable)}: {kind}; only storage buffers "
                    "(layout(set = 0, binding = N) buffer ...) are supported, pass other data through storage "
                    "buffers or push constants"
                )
            continue
        name = module.name_of(variable) or module.name_of(block)
        label = f"'{name}'" if name else f"%{variable}"
        if element is not None:
            _fail(
                f"unsupported resource {label}: arrays of storage buffers are not supported; declare one "
                "buffer block per binding"
            )
        members = module.struct_members(block)
        if block is None or members is None:
            _fail(
                f"storage buffer {label} is not a block; declare it as layout(set = 0, binding = N) buffer "
                "Name { ... };"
            )
        if not set_number or not binding:
            _fail(
                f"storage buffer {label} has no descriptor set or binding; declare it with layout(set = 0, binding = N)"
            )
        if set_number[0] != 0:
            _fail(
                f"unsupported resource {label}: it is in descriptor set {set_number[0]}, only set 0 is "
                "supported; declare it with layout(set = 0, binding = N)"
            )
        number = binding[0]
        if number in buffers:
            _fail(
                f"storage buffers {labels[number]} and {label} both use binding {number}; give each buffer "
                "its own binding number"
            )
        labels[number] = label
        buffers[number] = BufferBinding(
            binding=number,
            name=name,
            readable=not _access_denied(module, variable, block, len(members), DEC_NON_READABLE),
            writable=not _access_denied(module, variable, block, len(members), DEC_NON_WRITABLE),
        )
    return tuple(buffers[number] for number in sorted(buffers))


def _in_entry_point(module: _Module, interface: tuple[int, ...]) -> Callable[[int], bool]:
    """A filter for global variables: exact from SPIR-V 1.4 on (interfaces list all globals), all of them before."""
    if module.version >= _SPIRV_1_4:
        members = set(interface)
        return members.__contains__
    return lambda variable: True


def _scalar_format(module: _Module, type_id: int, member_label: str) -> tuple[str, int]:
    """The struct code and size of a push-constant member's type; refuses anything but 8-64 bit ints and floats."""
    declared = module.types.get(type_id)
    if declared is None:
        _fail(f"push-constant member {member_label} has an undeclared type %{type_id}; the module is malformed")
    opcode, operands = declared
    if opcode == OP_TYPE_INT and len(operands) >= 2 and (operands[0], bool(operands[1])) in _INT_FORMATS:
        return _INT_FORMATS[(operands[0], bool(operands[1]))], operands[0] // 8
    if opcode == OP_TYPE_FLOAT and len(operands) == 1 and operands[0] in _FLOAT_FORMATS:
        return _FLOAT_FORMATS[operands[0]], operands[0] // 8
    if opcode == OP_TYPE_BOOL:
        _fail(
            f"push-constant member {member_label} is a bool, which has no size in memory; declare it as int or "
            "uint and pass 0 or 1"
        )
    if opcode in _TYPE_DESCRIPTIONS:
        _fail(
            f"push-constant member {member_label} is {_TYPE_DESCRIPTIONS[opcode]}; only scalar members "
            "(int, uint, float, double, and 8/16/64-bit ints, float16) are supported, split it into scalars"
        )
    _fail(
        f"push-constant member {member_label} has an unsupported type (opcode {opcode}); only 8-64 bit "
        "integers and 16-64 bit floats are supported"
    )


def _address_member(module: _Module, type_id: int, name: str, offset: int) -> AddressMember | None:
    """The member as a device address, if its type is a PhysicalStorageBuffer pointer to a block."""
    declared = module.types.get(type_id)
    if declared is None or declared[0] != OP_TYPE_POINTER or len(declared[1]) < 2:
        return None
    storage_class, block = declared[1][0], declared[1][1]
    if storage_class != SC_PHYSICAL_STORAGE_BUFFER:
        return None
    members = module.struct_members(block)
    if members is None:
        _fail(
            f"push-constant member '{name}' points to something that is not a block; declare the type as "
            "layout(buffer_reference) buffer Name { ... };"
        )

    def denied(decoration: int) -> bool:
        return len(members) > 0 and all(
            module.member_decoration(block, i, decoration) is not None for i in range(len(members))
        )

    return AddressMember(
        name=name, offset=offset, readable=not denied(DEC_NON_READABLE), writable=not denied(DEC_NON_WRITABLE)
    )


def _push_constants(
    module: _Module, in_entry_point: Callable[[int], bool]
) -> tuple[tuple[PushMember, ...], tuple[AddressMember, ...]]:
    """The scalar members of the push-constant block, and its device-address members (sorted by offset)."""
    blocks = [
        (variable, pointer_type)
        for variable, pointer_type, storage_class in module.variables
        if storage_class == SC_PUSH_CONSTANT and in_entry_point(variable)
    ]
    if not blocks:
        return (), ()
    if len(blocks) > 1:
        _fail(f"the entry point uses {len(blocks)} push-constant blocks; a shader may have only one, merge them")
    variable, pointer_type = blocks[0]
    block = module.pointee(pointer_type)
    member_types = module.struct_members(block)
    if block is None or member_types is None:
        _fail(
            f"push constant {module.describe(variable)} is not a block; declare "
            "layout(push_constant) uniform Params { ... } params;"
        )
    members, addresses = [], []
    for index, type_id in enumerate(member_types):
        name = module.member_names.get((block, index)) or f"m{index}"
        offset = module.member_decoration(block, index, DEC_OFFSET)
        if not offset:
            _fail(f"push-constant member '{name}' has no Offset decoration; the module is malformed")
        address = _address_member(module, type_id, name, offset[0])
        if address is not None:
            addresses.append(address)
            continue
        format_code, size = _scalar_format(module, type_id, f"'{name}'")
        members.append(PushMember(name=name, offset=offset[0], format=format_code, size=size))
    return tuple(members), tuple(sorted(addresses, key=lambda a: a.offset))


def _shared_memory_bytes(module: _Module, in_entry_point: Callable[[int], bool]) -> int:
    return sum(
        module.pointee_size(pointer_type)
        for variable, pointer_type, storage_class in module.variables
        if storage_class == SC_WORKGROUP and in_entry_point(variable)
    )


def reflect(spirv: bytes, entry_point: str = "main", *, require_code: bool = False) -> ProgramInfo:
    """Reflects the interface of the compute entry point ``entry_point`` of a SPIR-V module.

    Raises ``BackendError(KernelCompilation)`` for malformed modules (bad magic, truncated, corrupt instructions),
    a missing entry point, and interfaces the backend cannot bind: resources other than storage buffers in
    descriptor set 0, duplicate bindings, and push-constant members that are not 8-64 bit scalars.
    ``require_code`` (set by ``Device.compile``, before anything reaches the driver) also refuses modules whose entry
    point or called functions have no body, or that end inside a function: truncated modules crash some drivers.
    """
    try:
        return _reflect(spirv, entry_point, require_code)
    except (IndexError, KeyError, ValueError, TypeError, OverflowError, struct.error) as error:
        # Defence in depth: the parser checks operand counts explicitly (and is fuzzed), but a corrupt module that
        # still reaches an unchecked path must surface as a compilation error, never as a raw Python exception.
        raise BackendError(
            ErrorStatus.KernelCompilation,
            f"malformed SPIR-V: reflection failed ({type(error).__name__}: {error}); the module is "
            "corrupt, recompile it (if spirv-val accepts it, this is a vkbackend bug)",
        ) from error


def _reflect(spirv: bytes, entry_point: str, require_code: bool = False) -> ProgramInfo:
    module = _Module(module_words(spirv))
    function, interface = _find_entry_point(module, entry_point)
    if require_code:
        _check_structure(module, function)
    in_entry_point = _in_entry_point(module, interface)
    push_constants, addresses = _push_constants(module, in_entry_point)
    span = max(
        [member.offset + member.size for member in push_constants] + [a.offset + 8 for a in addresses], default=0
    )
    return ProgramInfo(
        entry_point=entry_point,
        local_size=_local_size(module, function),
        buffers=_buffers(module),
        push_constants=push_constants,
        push_constant_size=(span + 3) // 4 * 4,
        shared_memory_bytes=_shared_memory_bytes(module, in_entry_point),
        addresses=addresses,
        capabilities=frozenset(module.capabilities),
    )
