"""Declarative file schemas: parsed TOML tables into msgspec ``Struct`` s, with messages a
reader can act on.

A file kind declares its tables as ``msgspec.Struct`` classes (constraints with
``msgspec.Meta``: ``ge``, ``gt``, ``min_length``, ``max_length``; a field's
``Meta(description=...)`` says in words what the key holds and is quoted in messages;
``Meta(extra={"noun": "kind"})`` on a ``Literal`` field names one value of it, for
``unknown kind 'x'; expected one of ...``) and
loads with :func:`convert`. Unknown keys are not rejected by the struct: the loader asks
:func:`unknown_keys` and decides, per file kind, whether they are errors (rubrics,
keymaps: a typo must not be silently ignored) or warnings (task.toml, queue.toml, records:
files written against a later format version still load).

Messages follow the shape kws has always used: ``expected a number, got a string 'abc'``,
``missing required key (the task id)``, ``unknown value 'foo'; expected one of a, b``,
``must be >= 0, got -1``.
"""

from __future__ import annotations

import functools
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec
from msgspec import inspect as mi

from workstation.schema.problem import Problem

T = TypeVar("T")

_TYPE_WORDS = {
    "str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
    "array": "an array", "object": "a table", "null": "nothing", "list": "an array",
    "dict": "a table", "tuple": "an array",
}


@functools.lru_cache(maxsize=256)
def _info(type_: Any) -> mi.Type:
    """msgspec's type info of ``type_``, cached (building it costs ~0.5 ms per struct type)."""
    return mi.type_info(type_)


_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def toml_type(value: Any) -> str:
    """``"a string"``, ``"an integer"``, ``"a table"``... for a parsed TOML value."""
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def _segments(path: str) -> list[str | int]:
    """``".cases[2].N"`` -> ``["cases", 2, "N"]``; ``[...]`` (a dict value) stays ``"..."``."""
    out: list[str | int] = []
    for m in re.finditer(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]", path):
        if m.group(1) is not None:
            out.append(m.group(1))
        else:
            out.append(int(m.group(2)) if m.group(2).isdigit() else "...")
    return out


def dotted(segments: list[str | int], prefix: str = "") -> str:
    """``["cases", 2, "N"]`` -> ``"cases[2].N"`` (after ``prefix``)."""
    key = prefix
    for s in segments:
        if isinstance(s, int):
            key += f"[{s}]"
        else:
            key = f"{key}.{s}" if key else str(s)
    return key


def _value_at(data: Any, segs: list[str | int]) -> tuple[Any, list[str | int]]:
    """The value at ``segs`` (None where the path leaves ``data``) and the segments that
    resolved."""
    cur, resolved = data, list[str | int]()
    for s in segs:
        if isinstance(s, int) and isinstance(cur, list) and s < len(cur):
            resolved.append(s)
            cur = cur[s]
        elif isinstance(s, str) and isinstance(cur, dict) and s in cur:
            resolved.append(s)
            cur = cur[s]
        else:
            return None, resolved
    return cur, resolved


def _unwrap(t: mi.Type) -> tuple[mi.Type, str]:
    """(the type under any Metadata wrapper, its description or "")."""
    desc = ""
    while isinstance(t, mi.Metadata):
        desc = desc or str((t.extra_json_schema or {}).get("description", ""))
        t = t.type
    return t, desc


def _noun(t: mi.Type | None) -> str:
    """The ``Meta(extra={"noun": ...})`` of a field: what one value of it is called in
    ``unknown <noun> 'x'`` messages (``"kind"``, ``"dtype"``)."""
    while isinstance(t, mi.Metadata):
        noun = (t.extra or {}).get("noun")
        if noun:
            return str(noun)
        t = t.type
    return ""


def _field_type(t: mi.Type, seg: str | int) -> mi.Type | None:
    t, _ = _unwrap(t)
    if isinstance(t, mi.UnionType):
        for u in t.types:
            got = _field_type(u, seg)
            if got is not None:
                return got
        return None
    if isinstance(t, mi.StructType) and isinstance(seg, str):
        return next((f.type for f in t.fields if f.encode_name == seg), None)
    if isinstance(t, mi.DictType):
        return t.value_type
    if isinstance(t, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType) and isinstance(seg, int):
        return t.item_type
    return None


def _annotation_at(root: type, segs: list[str | int]) -> Any:
    """The Python annotation at ``segs`` below the struct ``root`` (None when unknown)."""
    tp: Any = root
    for s in segs:
        tp = _strip(tp)
        info = _info(tp) if isinstance(tp, type) and issubclass(tp, msgspec.Struct) else None
        if isinstance(info, mi.StructType) and isinstance(s, str):
            hints = typing.get_type_hints(tp, include_extras=True)
            name = next((f.name for f in info.fields if f.encode_name == s), s)
            tp = hints.get(name)
        elif typing.get_origin(tp) in (list, tuple, dict) and typing.get_args(tp):
            tp = typing.get_args(tp)[-1]
        else:
            return None
    return tp


def _literal_order(root: type, segs: list[str | int]) -> tuple[Any, ...]:
    """The values of the ``Literal`` annotation at ``segs`` in declaration order (msgspec's
    own type info sorts them), or ``()``."""
    tp = _strip(_annotation_at(root, segs))
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else ()


def _bad_dict_key(root: type, segs: list[str | int], table: dict[str, Any]) -> str | None:
    """The first key of ``table`` (the dict at ``segs``) whose value does not convert to the
    dict's value type (msgspec reports a dict value's path as ``[...]``)."""
    tp = _strip(_annotation_at(root, segs))
    args = typing.get_args(tp) if typing.get_origin(tp) is dict else ()
    if len(args) != 2:
        return None
    for k, v in table.items():
        try:
            msgspec.convert(v, args[1], strict=True)
        except msgspec.ValidationError:
            return k
    return None


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and ``| None`` wrappers."""
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _type_at(root: type, segs: list[str | int]) -> mi.Type | None:
    t: mi.Type | None = _info(root)
    for s in segs:
        if t is None:
            return None
        t = _field_type(t, s)
    return t


def _expected_words(t: mi.Type | None) -> str:
    if t is None:
        return ""
    t, desc = _unwrap(t)
    if desc:
        return desc
    if isinstance(t, mi.UnionType):
        return " or ".join(w for w in (_expected_words(u) for u in t.types if not isinstance(u, mi.NoneType)) if w)
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(map(str, t.values))
    name = type(t).__name__.removesuffix("Type").lower()
    if isinstance(t, mi.StructType):
        return "a table"
    return _TYPE_WORDS.get(name, name)


def _constraint_text(msg: str) -> str:
    """``"Expected `int` >= 0"`` -> ``">= 0"``; ``"Expected `str` of length <= 200"`` ->
    ``"at most 200 characters long"``."""
    m = re.search(r"Expected `[^`]+` (.+)$", msg)
    if not m:
        return ""
    c = m.group(1)
    c = re.sub(r"of length <= (\d+)", r"at most \1 characters long", c)
    c = re.sub(r"of length >= (\d+)", r"at least \1 characters long", c)
    c = re.sub(r"^(>=|<=|>|<) (\S+?)(\.0)?$", r"\1 \2", c)
    return c


def problem_of(err: msgspec.ValidationError, data: Any, root: type, file: Path | str, prefix: str = "") -> Problem:
    """A :class:`Problem` (dotted key, readable sentence) for msgspec's validation error."""
    msg = str(err)
    m = _PATH_RE.search(msg)
    head = msg[: m.start()] if m else msg
    segs = _segments(m.group("path") if m else "")
    if "..." in segs:  # a dict value: find which key holds the value that fails
        at = segs.index("...")
        table, _ = _value_at(data, segs[:at])
        bad = _bad_dict_key(root, segs[:at], table) if isinstance(table, dict) else None
        segs = segs[:at] + ([bad] if bad is not None else []) + (segs[at + 1:] if bad is not None else [])
    if (mm := re.match(r"Object missing required field `([^`]+)`", head)) is not None:
        what = _expected_words(_type_at(root, [*segs, mm.group(1)]))
        return Problem(file, dotted([*segs, mm.group(1)], prefix), "missing required key" + (f" ({what})" if what else ""))
    if (mm := re.match(r"Object contains unknown field `([^`]+)`", head)) is not None:
        return Problem(file, dotted([*segs, mm.group(1)], prefix), "unknown key")
    value, _resolved = _value_at(data, segs)
    return Problem(file, dotted(segs, prefix), _value_problem(head, root, segs, value))


def _value_problem(head: str, root: type, segs: list[str | int], value: Any) -> str:
    """What is wrong with ``value``, the value at ``segs`` below ``root``, as one sentence
    from msgspec's message ``head`` (its path removed)."""
    t = _type_at(root, segs)
    expected = _expected_words(t)
    if head.startswith("Invalid enum value"):
        return _enum_problem(t, root, segs, value, expected)
    if re.match(r"Expected `[^`]+`, got `", head):
        got = toml_type(value) if value is not None else head.rsplit("got `", 1)[1].rstrip("`")
        if isinstance(value, bool):
            return f"expected {expected or 'another type'}, got a boolean"
        shown = f" {value!r}" if isinstance(value, str | int | float) and len(repr(value)) <= 80 else ""
        return f"expected {expected or 'another type'}, got {got}{shown}"
    constraint = _constraint_text(head)
    if constraint:
        if isinstance(value, float) and math.isnan(value):
            return f"must be a number {constraint}, got nan"
        if isinstance(value, str):
            return f"must be {constraint}, got {len(value)} characters"
        return f"must be {constraint}, got {value!r}"
    if head.startswith("Invalid RFC3339"):
        return f"not an RFC 3339 date-time: {value!r}"
    text = head[:1].lower() + head[1:]
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text += f", got {value!r}"
    return text


def _enum_problem(t: mi.Type | None, root: type, segs: list[str | int], value: Any, expected: str) -> str:
    """The sentence for a value that is not one of a ``Literal`` field's values: its noun
    (``unknown kind 'x'; expected one of ...``), else its description, else the values."""
    inner, desc = _unwrap(t) if t is not None else (None, "")
    order = _literal_order(root, segs) or (inner.values if isinstance(inner, mi.LiteralType) else ())
    allowed = ", ".join(map(str, order)) if order else expected
    noun = _noun(t)
    if noun:
        return f"unknown {noun} {value!r}; expected one of {allowed}"
    if desc:
        return f"expected {desc}, got {value!r}"
    return f"unknown value {value!r}; expected one of {allowed}"


def convert(data: Any, type_: type[T], *, file: Path | str, prefix: str = "") -> T:
    """``data`` (a parsed TOML table) as an instance of ``type_`` (a msgspec Struct).

    Raises:
        Problem: the first value that does not fit the schema, naming the dotted key
            (``prefix`` prepended) and the value.
    """
    try:
        return msgspec.convert(data, type_, strict=True)
    except msgspec.ValidationError as e:
        raise problem_of(e, data, type_, file, prefix) from None


def unknown_keys(data: Any, type_: type, prefix: str = "") -> list[str]:
    """Dotted keys in ``data`` that no field of ``type_`` (and its nested structs) names.
    Dict-typed fields take any key; their values are checked against the value type."""
    out: list[str] = []
    stack: list[tuple[Any, mi.Type, list[str | int]]] = [(data, _info(type_), [])]
    while stack:
        value, t, segs = stack.pop()
        t, _ = _unwrap(t)
        if isinstance(t, mi.UnionType):
            branch = _union_branch(t, value)
            if branch is not None:
                stack.append((value, branch, segs))
        elif isinstance(t, mi.StructType) and isinstance(value, dict):
            fields = {f.encode_name: f.type for f in t.fields}
            for k, v in value.items():
                if k not in fields:
                    out.append(dotted([*segs, k], prefix))
                else:
                    stack.append((v, fields[k], [*segs, k]))
        elif isinstance(t, mi.DictType) and isinstance(value, dict):
            stack.extend((v, t.value_type, [*segs, k]) for k, v in value.items())
        elif isinstance(t, mi.ListType | mi.VarTupleType) and isinstance(value, list):
            stack.extend((v, t.item_type, [*segs, i]) for i, v in enumerate(value))
    return sorted(out, key=_natural)


def _union_branch(t: mi.UnionType, value: Any) -> mi.Type | None:
    """The member of the union ``t`` whose keys a table (or items an array) ``value`` is
    walked against: its first struct or dict type (list or tuple type), else None."""
    if isinstance(value, dict):
        kinds: tuple[type, ...] = (mi.StructType, mi.DictType)
    elif isinstance(value, list):
        kinds = (mi.ListType, mi.VarTupleType)
    else:
        return None
    return next((u for u in t.types if isinstance(_unwrap(u)[0], kinds)), None)


def _natural(key: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]


def literal_values(tp: Any) -> tuple[Any, ...]:
    """The values of a ``Literal[...]`` annotation (for docs and messages)."""
    return typing.get_args(tp)
