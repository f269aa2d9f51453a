"""Write docs/api.md, the API reference, from the docstrings of the names in ``vkbackend.__all__``.

``python3 scripts/api_reference.py`` rewrites the page; tests/test_api_reference.py fails when the committed page is
not what this writes, and when a public function or method has no docstring. The page follows ``__all__``, not
module paths, so moving code between modules changes nothing here. For each name: functions with their signatures;
classes with their constructor (unless it takes objects that are not public: the library makes those), dataclass
fields (with their trailing ``#`` comments from the source), enum members, public methods and properties, and
special methods that have a docstring of their own (``__dlpack__``). The output depends on nothing but the source.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"

HEADER = """# API reference

Generated from the docstrings by `scripts/api_reference.py` (run `python3 scripts/api_reference.py` after changing
one; `tests/test_api_reference.py` fails while this page is stale). It lists the names of `vkbackend.__all__`;
`vkbackend.types` holds the type aliases and the `TypedDict`s of `stats()`. [docs/plugin-guide.md](plugin-guide.md)
says how the pieces fit together for a framework.
"""


class _Source(str):
    """An annotation as its source text (they are strings under ``from __future__ import annotations``), without
    the quotes of a forward reference."""

    def __repr__(self) -> str:
        return self.strip("'\"")


def _markdown(doc: str | None) -> str:
    """A docstring as Markdown: reST roles and double backticks become code spans."""
    text = inspect.cleandoc(doc or "")
    text = re.sub(r":(?:class|meth|func|mod|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _signature(function: Callable[..., Any], name: str, bound: bool) -> str:
    """``name(parameters) -> return``, annotations as written; ``bound`` drops the first parameter (self or cls)."""
    sig = inspect.signature(function)
    params = list(sig.parameters.values())[1 if bound else 0 :]
    params = [p.replace(annotation=_Source(p.annotation)) if isinstance(p.annotation, str) else p for p in params]
    ret = sig.return_annotation
    sig = sig.replace(parameters=params, return_annotation=_Source(ret) if isinstance(ret, str) else ret)
    return f"{name}{sig}"


def _public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """(name, raw class attribute) of the methods and properties to document, in definition order."""
    for name, member in vars(cls).items():
        if not (isinstance(member, (property, staticmethod, classmethod)) or inspect.isfunction(member)):
            continue
        special = name.startswith("__") and name.endswith("__") and name != "__init__"
        if not name.startswith("_") or (special and _own_doc(member)):
            yield name, member


def _function_of(member: Any) -> Callable[..., Any]:
    if isinstance(member, property):
        return member.fget  # type: ignore[return-value]
    return member.__func__ if isinstance(member, (staticmethod, classmethod)) else member


def _own_doc(member: Any) -> str | None:
    return _function_of(member).__doc__


def undocumented() -> list[str]:
    """Public functions, methods and properties (by name) without a docstring of their own."""
    import vkbackend

    missing = []
    for name in vkbackend.__all__:
        obj = getattr(vkbackend, name)
        if inspect.isfunction(obj) and not obj.__doc__:
            missing.append(name)
        elif inspect.isclass(obj):
            missing += [
                f"{name}.{attr}"
                for attr, member in _public_members(obj)
                if not attr.startswith("_") and not _own_doc(member)
            ]
    return missing


def _field_comments(cls: type) -> dict[str, str]:
    """The trailing ``# comment`` of each annotated field in the class's source."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    found = (re.match(r"\s+(\w+): [^#]*#\s*(.+)$", line) for line in lines)
    return {m.group(1): m.group(2) for m in found if m}


def _fields(cls: type) -> list[str]:
    comments = _field_comments(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = "" if f.default is dataclasses.MISSING else f" = {f.default!r}"
        comment = f": {comments[f.name]}" if f.name in comments else ""
        out.append(f"- `{f.name}: {_Source(f.type)!r}{default}`{comment}")
    return out


# Classes users get from the library rather than construct, and where from.
MADE_BY = {
    "Device": "`vkbackend.devices()`",
    "MemoryPool": "`Device.memory_pool`",
    "LaunchGraph": "`Device.graph()`",
    "GraphVariables": "`LaunchGraph.bind_variables()`",
}


def _class(name: str, cls: type) -> list[str]:
    out = [f"### {name}", ""]
    if issubclass(cls, BaseException) or issubclass(cls, enum.Enum):
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        out += ["```python", f"class {name}({bases})", "```"]
    elif dataclasses.is_dataclass(cls):
        out += ["```python", f"class {name}", "```"]
    elif name in MADE_BY:
        out += ["```python", f"class {name}", "```", "", f"Made by the library: get one from {MADE_BY[name]}."]
    else:
        out += ["```python", "class " + _signature(cls, name, bound=False).removesuffix(" -> None"), "```"]
    out += ["", _markdown(cls.__doc__), ""]
    if dataclasses.is_dataclass(cls):
        out += ["Fields:", "", *_fields(cls), ""]
    if issubclass(cls, enum.Enum):
        out += ["Members:", "", *(f"- `{m.name}` = `{m.value!r}`" for m in cls), ""]
    for attr, member in _public_members(cls):
        function = _function_of(member)
        if isinstance(member, property):
            code = f"@property\n{attr}: {_Source(inspect.signature(function).return_annotation)!r}"
        else:
            code = _signature(function, attr, bound=not isinstance(member, staticmethod))
            if isinstance(member, (classmethod, staticmethod)):
                code = f"@{type(member).__name__}\n{code}"
        out += [f"#### {name}.{attr}", "", "```python", code, "```", "", _markdown(function.__doc__), ""]
    return out


def render() -> str:
    """The page, as this source documents it."""
    import vkbackend

    objects = [(name, getattr(vkbackend, name)) for name in vkbackend.__all__]
    groups: dict[str, list[str]] = {"Functions": [], "Classes": [], "Enums": [], "Errors": []}
    body: dict[str, list[str]] = {group: [] for group in groups}
    for name, obj in objects:
        if inspect.isfunction(obj):
            group = "Functions"
            lines = [
                f"### {name}",
                "",
                "```python",
                _signature(obj, name, bound=False),
                "```",
                "",
                _markdown(obj.__doc__),
                "",
            ]
        else:
            group = "Errors" if issubclass(obj, BaseException) else "Enums" if issubclass(obj, enum.Enum) else "Classes"
            lines = _class(name, obj)
        groups[group].append(f"[{name}](#{name.lower()})")
        body[group] += lines
    out = [HEADER]
    out += [f"- {group}: {', '.join(links)}" for group, links in groups.items()]
    for group, lines in body.items():
        out += ["", f"## {group}", "", *lines]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's vkbackend, not an installed one
    PAGE.write_text(render())
    print(f"wrote {PAGE.relative_to(ROOT)}")
