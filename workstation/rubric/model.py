"""Rubric files: the fields a verdict fills, loaded and validated through the schema layer.

A rubric is a TOML file (format: ``docs/rubrics.md``; the default is
``rubrics/kernel-review.toml``): an id, a title, an integer version and a list of fields. A
``choice`` field lists its allowed values, each with the one keyboard character that picks
it; a ``text`` field holds free text (the rationale). Where a field is ``ordered`` its values
are listed **worst first** (the last is the best); a value marked ``outside_order`` (such as
"not-applicable") sits outside that scale. ``rationale_for`` lists the values that need a
written rationale; ``informed_by`` names the check ids (task format v1, "Check ids") whose
findings feed the field's suggestion, and ``suggest`` maps the worst outcome among those
checks to a value (see :data:`OUTCOMES`; the suggestions are :mod:`workstation.rubric.suggest`).

This module is pure data handling: it imports neither torch nor triton and never runs task
code, so the TUI may call it on every keystroke.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

import workstation
from workstation import settings
from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import parse_toml_bytes, read_toml

__all__ = [
    "OUTCOMES",
    "OVERALL_VALUES",
    "QUEUE_RUBRICS",
    "Rubric",
    "RubricField",
    "RubricValue",
    "find_rubric",
    "load_rubric",
    "parse_rubric",
    "queue_rubric",
    "rubric_in_commit",
    "rubric_search_path",
    "validate_values",
]

#: The outcome classes a ``suggest`` rule maps, from the informing checks of one field:
#: ``fail``: some informing check has a ``fail`` finding (or status);
#: ``warn``: none fails, some has a ``warn`` finding (or status);
#: ``not-judged``: none warns or fails, but an informing check could not look (the report's
#: ``not_judged``, wholly or in part, or status ``error``): never a passing value, so with no
#: rule it falls back to ``not-run``;
#: ``clean``: at least one informing check ran (status pass/warn/fail) and none warns or fails;
#: ``skipped``: every informing check in the report has status ``skip`` (no rule: ``not-run``);
#: ``not-run``: no informing check ran (absent from the report).
OUTCOMES: tuple[str, ...] = ("fail", "warn", "not-judged", "clean", "skipped", "not-run")

#: The values a verdict's ``overall`` takes (walking-skeleton issue, "Verdict").
OVERALL_VALUES: frozenset[str] = frozenset({"accept", "reject", "needs-work"})

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
#: The folder of a queue's own rubrics, relative to the queue root.
QUEUE_RUBRICS = "rubrics"




@dataclass(frozen=True)
class RubricValue:
    """One allowed value of a choice field.

    ``key`` is the single keyboard character that picks it (unique within its field);
    ``outside_order`` marks a value outside an ordered field's scale ("not-applicable"):
    calibration treats it as a missing rating on the ordinal scale.
    """

    value: str
    key: str
    label: str
    help: str = ""
    outside_order: bool = False


@dataclass(frozen=True)
class RubricField:
    """One rubric field.

    ``kind`` is ``"choice"`` or ``"text"``. For an ordered choice field, ``values`` run worst
    first. ``suggest`` maps an outcome class (:data:`OUTCOMES`) to one of ``values``.
    """

    key: str
    label: str
    help: str
    kind: str
    values: tuple[RubricValue, ...] = ()
    ordered: bool = False
    required: bool = False
    rationale_for: tuple[str, ...] = ()
    informed_by: tuple[str, ...] = ()
    suggest: Mapping[str, str] = field(default_factory=dict)
    #: the informing checks whose subject the field judges (``subject`` in the file, a subset
    #: of ``informed_by``): when every one of them present skipped (its subject is not in the
    #: task: no benchmark, no claim) and no informing check warns or fails, the outcome is
    #: ``skipped`` however the others ran (:func:`workstation.rubric.suggest.suggest`).
    subject: tuple[str, ...] = ()

    @property
    def is_choice(self) -> bool:
        return self.kind == "choice"

    @property
    def allowed(self) -> tuple[str, ...]:
        """The allowed values in file order (worst first where ordered)."""
        return tuple(v.value for v in self.values)

    def value(self, value: str) -> RubricValue | None:
        """The :class:`RubricValue` named ``value``, or None."""
        for v in self.values:
            if v.value == value:
                return v
        return None

    def by_key(self, char: str) -> RubricValue | None:
        """The value picked by the keyboard character ``char``, or None."""
        for v in self.values:
            if v.key == char:
                return v
        return None

    def scale(self) -> tuple[str, ...]:
        """The ordered scale, worst first: the values without ``outside_order``."""
        return tuple(v.value for v in self.values if not v.outside_order)

    def rank(self, value: str) -> int | None:
        """Position of ``value`` on the scale (0 = worst); None off the scale or unordered."""
        if not self.ordered:
            return None
        scale = self.scale()
        return scale.index(value) if value in scale else None


@dataclass(frozen=True)
class Rubric:
    """A loaded, validated rubric. ``fields`` keep the file's order."""

    id: str
    title: str
    version: int
    fields: tuple[RubricField, ...]
    rationale_field: str
    path: Path

    def field(self, key: str) -> RubricField | None:
        for f in self.fields:
            if f.key == key:
                return f
        return None

    def __getitem__(self, key: str) -> RubricField:
        f = self.field(key)
        if f is None:
            raise KeyError(key)
        return f

    @property
    def choice_fields(self) -> tuple[RubricField, ...]:
        return tuple(f for f in self.fields if f.kind == "choice")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f.key for f in self.fields)


# --------------------------------------------------------------------------------------------
# loading


class RubricValueTable(Struct, frozen=True):
    """One ``[[fields.values]]`` table."""

    value: Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="a value name ([a-z0-9][a-z0-9._-]*)")]
    key: Annotated[str, Meta(description="one printable, non-space character")]
    label: Annotated[str, Meta(description="a string")]
    help: Annotated[str, Meta(description="a string")] = ""
    outside_order: Annotated[bool, Meta(description="true or false")] = False


class RubricFieldTable(Struct, frozen=True):
    """One ``[[fields]]`` table (``values`` .. ``suggest`` only on a choice field)."""

    key: Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_]*$", description="a field key ([a-z][a-z0-9_]*)")]
    label: Annotated[str, Meta(description="a string")]
    kind: Annotated[Literal["choice", "text"], Meta(extra={"noun": "field kind"})]
    help: Annotated[str, Meta(description="a string")] = ""
    required: Annotated[bool, Meta(description="true or false")] = False
    values: Annotated[list[RubricValueTable], Meta(description="an array of value tables")] | None = None
    ordered: Annotated[bool, Meta(description="true or false")] | None = None
    rationale_for: Annotated[list[str], Meta(description="an array of value names")] | None = None
    informed_by: Annotated[list[str], Meta(description="an array of check ids")] | None = None
    suggest: Annotated[dict[str, str], Meta(description="a table of outcome = value")] | None = None
    subject: Annotated[list[str], Meta(description="an array of check ids (a subset of informed_by)")] | None = None


class RubricFile(Struct, frozen=True):
    """A rubric file (format: ``docs/rubrics.md``)."""

    id: Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9._-]*$", description="a rubric id ([a-z0-9][a-z0-9._-]*)")]
    title: Annotated[str, Meta(description="a string")]
    version: Annotated[int, Meta(ge=1, description="a positive integer")]
    fields: Annotated[list[RubricFieldTable], Meta(min_length=1, description="at least one [[fields]] table")]
    schema: Annotated[int, Meta(description="the rubric schema, 1")] = 1
    rationale_field: Annotated[str, Meta(description="a field key")] = "rationale"


def load_rubric(path: Path | str) -> Rubric:
    """Load and validate the rubric file at ``path``.

    Raises:
        Problem: (file, key, problem) for an unreadable file or TOML, a missing or mistyped
            key, an unknown key (typos are not silently ignored), duplicate field keys,
            value keys or keyboard characters, a ``rationale_for``/``suggest`` value that
            is not an allowed value, a check id in ``informed_by`` that no registered check
            has, a missing ``overall`` field with exactly the values accept / reject /
            needs-work, or a ``rationale_field`` that does not name a text field.
    """
    path = Path(path)
    return _rubric(read_toml(path), path)


def parse_rubric(raw: bytes, file: Path | str) -> Rubric:
    """The rubric in ``raw``, the bytes of a rubric file (a git blob of a commit's tree)
    named ``file`` (its name must be ``<id>.toml``), read under the schema layer's guards.

    Raises:
        Problem: as :func:`load_rubric`.
    """
    file = Path(file)
    return _rubric(parse_toml_bytes(raw, file), file)


def _rubric(data: dict[str, Any], path: Path) -> Rubric:
    """The validated rubric of ``data``, the parsed rubric file ``path`` (:func:`load_rubric`)."""
    schema = data.get("schema", 1)
    if type(schema) is not int or schema != 1:
        raise Problem(path, "schema", f"unsupported rubric schema {schema!r} (this kws reads schema 1)")
    unknown = unknown_keys(data, RubricFile)
    if unknown:
        raise Problem(path, unknown[0], "unknown key")
    doc = convert(data, RubricFile, file=path)
    if path.suffix == ".toml" and path.stem != doc.id:
        raise Problem(path, "id", f"{doc.id!r} differs from the file name {path.name!r} (expected {doc.id}.toml)")
    from workstation.engine.check import known_check_ids

    known_checks = known_check_ids()
    fields: list[RubricField] = []
    for i, raw in enumerate(doc.fields):
        f = _field(path, f"fields[{i}]", raw, known_checks)
        if any(g.key == f.key for g in fields):
            raise Problem(path, f"fields[{i}].key", f"duplicate field key {f.key!r}")
        fields.append(f)
    by_key = {f.key: f for f in fields}
    overall = by_key.get("overall")
    if overall is None or overall.kind != "choice":
        raise Problem(path, "fields", "needs a choice field with key 'overall' (accept / reject / needs-work)")
    if set(overall.allowed) != OVERALL_VALUES:
        raise Problem(path, f"fields[{fields.index(overall)}].values",
                      f"overall must have exactly the values accept, reject, needs-work; got {list(overall.allowed)}")
    rat = by_key.get(doc.rationale_field)
    if rat is None or rat.kind != "text":
        raise Problem(path, "rationale_field", f"{doc.rationale_field!r} does not name a text field of this rubric")
    return Rubric(id=doc.id, title=doc.title, version=doc.version, fields=tuple(fields),
                  rationale_field=doc.rationale_field, path=path)


def _field(path: Path, where: str, raw: RubricFieldTable, known_checks: set[str]) -> RubricField:
    """One field's semantic checks (what the struct cannot express)."""
    if raw.kind == "text":
        for k in ("values", "ordered", "rationale_for", "informed_by", "suggest", "subject"):
            if getattr(raw, k) is not None:
                raise Problem(path, f"{where}.{k}", "not allowed on a text field")
        return RubricField(key=raw.key, label=raw.label, help=raw.help, kind="text", required=raw.required)
    values = _values(path, where, raw)
    ordered = bool(raw.ordered)
    if not ordered and any(v.outside_order for v in values):
        raise Problem(path, f"{where}.values", "outside_order is only meaningful on an ordered field")
    rule = _rules(path, where, raw, {v.value for v in values}, known_checks)
    return RubricField(key=raw.key, label=raw.label, help=raw.help, kind="choice", values=tuple(values),
                       ordered=ordered, required=raw.required, rationale_for=tuple(raw.rationale_for or ()),
                       informed_by=tuple(raw.informed_by or ()), suggest=rule, subject=tuple(raw.subject or ()))


def _values(path: Path, where: str, raw: RubricFieldTable) -> list[RubricValue]:
    """A choice field's values: at least one, each value and keyboard character unique,
    each character one printable, non-space character."""
    if not raw.values:
        raise Problem(path, f"{where}.values", "a choice field needs at least one value" if raw.values is not None
                      else "missing required key (an array of value tables)")
    values: list[RubricValue] = []
    for j, rv in enumerate(raw.values):
        vw = f"{where}.values[{j}]"
        if len(rv.key) != 1 or not rv.key.isprintable() or rv.key.isspace():
            raise Problem(path, f"{vw}.key", f"must be one printable, non-space character, got {rv.key!r}")
        if any(v.value == rv.value for v in values):
            raise Problem(path, f"{vw}.value", f"duplicate value {rv.value!r}")
        if any(v.key == rv.key for v in values):
            raise Problem(path, f"{vw}.key", f"keyboard key {rv.key!r} already picks another value of {raw.key!r}")
        values.append(RubricValue(value=rv.value, key=rv.key, label=rv.label, help=rv.help,
                                  outside_order=rv.outside_order))
    return values


def _rules(path: Path, where: str, raw: RubricFieldTable, allowed: set[str], known_checks: set[str]) -> dict[str, str]:
    """A choice field's ``suggest`` rule, after checking it and the keys it relates to:
    ``rationale_for`` and ``suggest`` name ``allowed`` values, ``informed_by`` registered
    checks, ``suggest`` known outcomes (and needs ``informed_by``), ``subject`` a subset of
    ``informed_by``."""
    _all_in(path, f"{where}.rationale_for", raw.rationale_for, allowed, lambda v: f"{v!r} is not a value of {raw.key!r}")
    _all_in(path, f"{where}.informed_by", raw.informed_by, known_checks,
            lambda c: f"unknown check id {c!r} (no registered check has it)")
    rule = dict(raw.suggest or {})
    for outcome, v in rule.items():
        if outcome not in OUTCOMES:
            raise Problem(path, f"{where}.suggest.{outcome}", f"unknown outcome (allowed: {', '.join(OUTCOMES)})")
        if v not in allowed:
            raise Problem(path, f"{where}.suggest.{outcome}", f"{v!r} is not a value of {raw.key!r}")
    if rule and not raw.informed_by:
        raise Problem(path, f"{where}.suggest", "a suggestion rule needs informed_by check ids")
    _all_in(path, f"{where}.subject", raw.subject, set(raw.informed_by or ()),
            lambda c: f"{c!r} is not one of this field's informed_by checks")
    return rule


def _all_in(path: Path, key: str, items: list[str] | None, allowed: set[str], why: Callable[[str], str]) -> None:
    """Raise the Problem ``why(item)`` at ``key[j]`` for the first of ``items`` not in ``allowed``."""
    for j, item in enumerate(items or ()):
        if item not in allowed:
            raise Problem(path, f"{key}[{j}]", why(item))


def rubric_search_path(queue_root: Path | str | None = None) -> list[Path]:
    """Folders searched for ``<id>.toml``, first match wins.

    1. ``<queue>/rubrics/`` (a queue may carry its own rubric),
    2. each folder of the ``rubric_path`` setting (``KWS_RUBRIC_PATH``, ``os.pathsep``-separated;
       ``rubric_path = [...]`` in the user config file),
    3. the project's ``rubrics/`` folder next to the ``workstation`` package,
    4. ``workstation/data/rubrics/`` (package data, for installs without the source tree).
    """
    dirs: list[Path] = []
    if queue_root is not None:
        dirs.append(Path(queue_root) / QUEUE_RUBRICS)
    dirs.extend(settings.current().rubric_path)
    pkg = Path(workstation.__file__).resolve().parent
    dirs.append(pkg.parent / "rubrics")
    dirs.append(pkg / "data" / "rubrics")
    return dirs


def find_rubric(rubric_id: str, queue_root: Path | str | None = None) -> Rubric:
    """Load the rubric ``rubric_id`` from :func:`rubric_search_path`.

    Raises :class:`~workstation.schema.problem.Problem` naming the folders searched when there is none.
    """
    _check_id(rubric_id)
    dirs = rubric_search_path(queue_root)
    for d in dirs:
        p = d / f"{rubric_id}.toml"
        if p.is_file():
            return load_rubric(p)
    raise Problem(
        f"{rubric_id}.toml",
        "",
        "no such rubric; looked in " + ", ".join(str(d) for d in dirs),
    )


def rubric_in_commit(rubric_id: str, queue_file: Callable[[str], bytes | None]) -> Rubric:
    """The rubric ``rubric_id`` as a commit of a queue gives it: the queue's own
    ``rubrics/<id>.toml`` in that commit's tree, else :func:`find_rubric` without a queue
    (the ``rubric_path`` setting, the rubrics kws ships). ``queue_file(path)`` gives the
    bytes of a file of the tree (``path`` relative to the queue root), None when the tree
    has no such file.

    Raises:
        Problem: ``rubric_id`` is not a rubric id, the tree's file does not load
            (:func:`parse_rubric`; or ``queue_file`` raised it), or there is no such rubric.
    """
    _check_id(rubric_id)
    rel = f"{QUEUE_RUBRICS}/{rubric_id}.toml"
    raw = queue_file(rel)
    return parse_rubric(raw, rel) if raw is not None else find_rubric(rubric_id)


def _check_id(rubric_id: str) -> None:
    if not _ID_RE.match(rubric_id):
        raise Problem(f"{rubric_id}.toml", "id", f"{rubric_id!r} is not a rubric id")


def queue_rubric(queue_root: Path | str) -> Rubric:
    """The rubric a queue names in ``queue.toml`` (``rubric = "..."``), default kernel-review.

    Raises:
        Problem: the ``queue.toml`` does not load, or the rubric cannot be found or loaded.
    """
    from workstation.task.queue import read_queue_config

    return find_rubric(read_queue_config(queue_root).rubric, queue_root)


# --------------------------------------------------------------------------------------------
# validation of a reviewer's values


def validate_values(rubric: Rubric, values: Mapping[str, Any]) -> list[str]:
    """Problems with a set of field values, as readable strings (empty: the values commit).

    ``values`` maps field keys to values (choice: the value string; text: the text). Checks,
    in field order: unknown keys; each required choice field has a value; each choice value
    is allowed; text values are strings; a required text field is non-blank; and the
    rubric's rationale field is non-blank where some field's value is in that field's
    ``rationale_for`` (e.g. overall = reject).
    """
    problems: list[str] = []
    for k in values:
        if rubric.field(k) is None:
            problems.append(f"{k}: not a field of rubric {rubric.id} (fields: {', '.join(rubric.keys)})")
    for f in rubric.fields:
        problem = _value_problem(f, values.get(f.key))
        if problem is not None:
            problems.append(problem)
    rationale = values.get(rubric.rationale_field)
    if not (isinstance(rationale, str) and rationale.strip()):
        needing = [
            f"{f.key} is {values[f.key]}"
            for f in rubric.choice_fields
            if values.get(f.key) in f.rationale_for
        ]
        if needing:
            problems.append(f"{rubric.rationale_field}: required when {' and '.join(needing)}")
    return problems


def _value_problem(f: RubricField, v: Any) -> str | None:
    """What is wrong with ``v`` as field ``f``'s value (None: nothing; :func:`validate_values`)."""
    if f.kind == "choice":
        if v is None or v == "":
            return f"{f.key}: required (one of: {', '.join(f.allowed)})" if f.required else None
        if not isinstance(v, str) or v not in f.allowed:
            return f"{f.key}: {v!r} is not one of: {', '.join(f.allowed)}"
        return None
    if v is not None and not isinstance(v, str):
        return f"{f.key}: must be text, got {type(v).__name__}"
    if f.required and not (v or "").strip():
        return f"{f.key}: required"
    return None


def field_values_from_pairs(rubric: Rubric, pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``KEY=VALUE`` strings (the CLI's ``--field``) into a dict.

    Raises ValueError naming the malformed pair or an unknown field key; values are
    validated later with :func:`validate_values`.
    """
    out: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(f"--field {p!r}: expected KEY=VALUE")
        if rubric.field(key) is None:
            raise ValueError(
                f"--field {p!r}: {key!r} is not a field of rubric {rubric.id} "
                f"(fields: {', '.join(rubric.keys)})"
            )
        if key in out and out[key] != value:
            raise ValueError(f"--field {key} given twice ({out[key]!r} and {value!r})")
        out[key] = value
    return out
