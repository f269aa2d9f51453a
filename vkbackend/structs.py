"""Vulkan structs built in one place: ``sType`` from the struct's name, nested data made cdata and kept alive.

``new_struct("VkBufferCreateInfo", size=n, ...)`` returns a zeroed ``VkBufferCreateInfo*`` with ``sType`` set to the
compiled module's ``VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO``. A pointer field may be given Python data, which becomes
cdata here: a ``str`` or ``bytes`` for a ``char*`` (a NUL-terminated copy), a ``dict`` for a pointer to a struct (one
struct, its ``sType`` filled too), a list or tuple for a pointer to an array (of dicts for structs, of strings for
``char**``), any other bytes-like object for a pointer to numbers or ``void`` (its memory, not a copy), ``None`` for
NULL. A ``dict`` for a struct held by value is filled the same way. Everything so made, and every cdata given, lives
as long as the returned struct (a struct field alone keeps nothing alive in cffi), so callers keep no locals for it.

Meant for structs made at creation time (devices, pipelines, memory); per-launch and per-batch paths keep structs
they made once instead.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from ._ffi import ffi, lib
from .errors import ErrorStatus, check, vk_error

__all__ = ["IRREGULAR", "chain", "listed", "new_array", "new_struct", "structure_type_name"]

_T = TypeVar("_T")
LIST_COUNTS = 8  # listed(): how many times the count is asked while the driver's list keeps growing

# Structs whose VK_STRUCTURE_TYPE_ name the rule of structure_type_name does not give (the registry keeps a number
# joined to its word: BFLOAT16, not BFLOAT_16).
IRREGULAR = {
    "VkPhysicalDeviceShaderBfloat16FeaturesKHR": "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR",
}

# The words of a struct's name: acronyms (ID, KHR), capitalised words, numbers; a core version's digits each stand
# alone (Vulkan12 -> VULKAN_1_2).
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z][a-z]*|(?<=Vulkan)[0-9]|[0-9]+")

# What each cdata made here keeps alive: keyed weakly, so an entry goes with its struct.
_kept: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


class _Layout(NamedTuple):
    name: str
    pointer: Any  # the ctype ``name*``
    stype: int | None  # None: the struct has no sType
    fields: dict[str, Any]  # field name -> ctype


_layouts: dict[Any, _Layout] = {}  # by name and by ctype


def structure_type_name(name: str) -> str:
    """The ``VK_STRUCTURE_TYPE_`` constant's name of the struct ``name`` (``VkBufferCreateInfo`` ->
    ``VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO``): :data:`IRREGULAR`'s entry, else its words in capitals joined by ``_``."""
    if name in IRREGULAR:
        return IRREGULAR[name]
    return "VK_STRUCTURE_TYPE_" + "_".join(word.upper() for word in _WORD.findall(name.removeprefix("Vk")))


def _layout(key: Any) -> _Layout:
    layout = _layouts.get(key)
    if layout is not None:
        return layout
    ctype = ffi.typeof(key) if isinstance(key, str) else key
    if ctype.kind != "struct":
        raise TypeError(f"{ctype.cname} is not a struct")
    ffi.sizeof(ctype)  # completes the struct: reading .fields of one cffi has not laid out yet aborts the process
    fields = dict((field, info.type) for field, info in ctype.fields)
    stype = None
    if "sType" in fields:
        constant = structure_type_name(ctype.cname)
        stype = getattr(lib, constant, None)
        if stype is None:
            raise LookupError(
                f"{ctype.cname}: vkbackend._vulkan has no {constant}; declare it in vkbackend/decl/*.h (#define "
                f"{constant} ...), or add the registry's name to vkbackend.structs.IRREGULAR"
            )
    layout = _Layout(ctype.cname, ffi.getctype(ctype, "*"), stype, fields)
    _layouts[key] = _layouts[ctype] = layout
    return layout


def new_struct(name: str, /, **fields: Any) -> Any:
    """A new zeroed ``name*`` (owning cdata) with ``sType`` filled from the name and ``fields`` set (see the module's
    docstring for the Python data a pointer field takes); what it points to lives as long as it does.

    A field the struct lacks, or ``sType`` given, raises ``TypeError``; a struct whose ``VK_STRUCTURE_TYPE_``
    constant the module lacks raises ``LookupError``."""
    return _new(_layout(name), fields)


def new_array(name: str, items: Sequence[Any]) -> Any:
    """A new ``name[len(items)]`` (owning cdata): for a struct, each item a dict of its fields (as for
    :func:`new_struct`, ``sType`` filled); else the items themselves (numbers, handles, strings for ``char*``)."""
    return _array(ffi.typeof(name), items)


def listed(
    call: Callable[..., int],
    name: str,
    convert: Callable[[Any], _T],
    *args: Any,
    what: str | None = None,
    status: ErrorStatus | None = None,
) -> list[_T]:
    """Vulkan's two-call enumeration into structs that carry their ``sType`` (``discovery._enumerate`` fills plain
    ones): ``call(*args, count, NULL)`` for the count, then ``call(*args, count, items)`` into ``name`` structs with
    their ``sType`` filled, asked again while the driver answers VK_INCOMPLETE (its list grew in between), at most
    :data:`LIST_COUNTS` times; each entry passed through ``convert`` while the array lives. A failure raises the call's
    typed error, saying ``what`` (the call's name where not given; its first word must be that name) and
    ``status`` overriding its status where given."""
    what = what or call.__name__
    for _ in range(LIST_COUNTS):
        count = ffi.new("uint32_t*")
        check(call(*args, count, ffi.NULL), f"{what} (count)", status)
        items = new_array(name, [{}] * count[0])
        result = call(*args, count, items)
        if result != lib.VK_INCOMPLETE:
            check(result, what, status)
            return [convert(items[i]) for i in range(count[0])]
    raise vk_error(lib.VK_INCOMPLETE, f"{what} still listed more after {LIST_COUNTS} counts (a broken driver)", status)


def chain(head: Any, *links: Any) -> None:
    """Link ``head`` and ``links`` through ``pNext``, in order (the last one's ``pNext`` is left as it is); the links
    then live as long as ``head`` does."""
    node = head
    for link in links:
        node.pNext = link
        node = link
    _kept.setdefault(head, []).extend(links)


def _new(layout: _Layout, fields: dict[str, Any]) -> Any:
    keep: list[Any] = []
    struct = ffi.new(layout.pointer, _init(layout, fields, keep))
    if keep:
        _kept[struct] = keep
    return struct


def _init(layout: _Layout, fields: dict[str, Any], keep: list[Any]) -> dict[str, Any]:
    """cffi's initializer of a struct of ``layout``: ``fields`` made cdata where they are Python data, the cdata
    appended to ``keep``."""
    init = {}
    for field, value in fields.items():
        ctype = layout.fields.get(field)
        if ctype is None:
            raise TypeError(f"{layout.name} has no field {field!r} (its fields: {', '.join(layout.fields)})")
        if field == "sType":
            raise TypeError(f"{layout.name}: sType is filled from the struct's name, not given")
        try:
            init[field] = _value(ctype, value, keep)
        except TypeError as error:  # where in the struct, for an error of nested data
            raise TypeError(f"{layout.name}.{field}: {error}") from None
    if layout.stype is not None:
        init["sType"] = layout.stype
    return init


def _value(ctype: Any, value: Any, keep: list[Any]) -> Any:
    """``value`` as cffi takes it for a field (or array item) of type ``ctype``."""
    kind = ctype.kind
    if kind == "struct":
        return _init(_layout(ctype), value, keep) if isinstance(value, dict) else value
    if kind != "pointer":
        return value
    if value is None:
        return ffi.NULL
    if isinstance(value, ffi.CData):
        keep.append(value)
        return value
    item = ctype.item
    if isinstance(value, (str, bytes)) and item.cname == "char":
        made = ffi.new("char[]", value.encode() if isinstance(value, str) else value)
    elif isinstance(value, dict) and item.kind == "struct":
        made = _new(_layout(item), value)
    elif isinstance(value, (list, tuple)):
        made = _array(item, value)
    elif item.kind in ("primitive", "void") and not isinstance(value, (str, dict)):
        try:
            made = ffi.from_buffer("char[]" if item.kind == "void" else ffi.getctype(item, "[]"), value)
        except TypeError:  # not bytes-like
            raise TypeError(f"a {ctype.cname} cannot be made from {value!r:.60}") from None
    else:
        raise TypeError(f"a {ctype.cname} cannot be made from {value!r:.60}")
    keep.append(made)
    return made


def _array(item: Any, values: Sequence[Any]) -> Any:
    keep: list[Any] = []
    array = ffi.new(ffi.getctype(item, "[]"), [_value(item, value, keep) for value in values])
    if keep:
        _kept[array] = keep
    return array
