"""``task.toml`` (task format version 1): its schema, and :func:`load_task`.

The format is the contract in ``shared/spec/task-format.md``, documented for users in
``docs/task-format.md``. The tables are declared once, as msgspec structs (below), and read
through the schema layer (:mod:`workstation.schema`): a guarded read, a typed conversion
whose messages name the dotted key and the value, then the checks a struct cannot express
(entry files exist inside the folder and define their callables, the id matches the
folder, declared cases lie inside ``[params]``). Task code is never imported or run here
(entry callables are located with :mod:`ast`), so this is safe in the TUI's own process.

Every problem is a :class:`~workstation.schema.problem.Problem` naming the file, the key
and the problem. Unknown keys are warnings (``Task.warnings``): a task written against a
later format version still loads.

kws extensions (optional keys, never changing a contract key's meaning):

- top-level ``original = "<file>"``: the source file a translation or migration started
  from (CUDA, Pallas, ...), shown in the diff viewer, never run.
- ``[[profiles]]``: profiler exports attached as evidence (``file``, ``format``, ``role``,
  ``case``, ``calls``, ``device``; :class:`ProfileTable`). Loading the task checks each
  file's name, location, size and format; the file itself is parsed only when a check,
  ``kws profile`` or the review screen asks (:mod:`workstation.profiles.load`).
- ``[inputs] keep_structure = [i, ...]``: inputs whose structure value checks keep.
- ``[delegation] ops = ["aten::mm", ...]``: framework ops the candidate delegates to by design.
- ``[tolerance_rule] atol_scale = ["K"]`` (and ``rtol_scale``): per-case tolerance scaled by
  the product of case parameters (FlagGems' ``atol = 1e-4 * K``).
- ``[[case_tolerance]] match = {...}, atol/rtol/ulp``: a tolerance for matching cases.
- ``[target] device = "H100"`` (``"H200"``, ``"A100"``): the GPU the task targets; on a
  machine without CUDA kws's device stand-in answers device queries with its figures (the
  job file carries the value to the job child: ``Job.target``).
- ``[contract] compute_dtype = "input"`` (``"float16"``, ``"bfloat16"``, ``"float32"``) and
  ``accumulate = "float32"`` (or ``"input"``): the accuracy contract the kernel computes under
  by design; special-values and precision-regime judge against an oracle computed under it
  (:class:`~workstation.task.model.AccuracyContract`).
- ``[backends] baseline = "cuda"`` (and ``reference``, ``test``, ``bench``): the backend of a
  role other than the candidate (the CUDA source of a translation, a Pallas kernel being
  migrated); a role not listed is ``torch``. kws decides where a role can run from this
  declaration, never from the imports its file mentions.
These live outside ``[[cases]]`` (whose keys are case parameters) and ``[tolerance.X]``
(whose X is a dtype).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.text import safe_text
from workstation.schema.toml import read_toml
from workstation.task.model import (
    ACCUMULATE_DTYPES,
    BACKEND_ROLES,
    COMPUTE_DTYPES,
    DEVICE_TARGET_NAMES,
    DTYPE_NAMES,
    PROFILE_FORMATS,
    ROLES_OPTIONAL,
    ROLES_REQUIRED,
    SCHEMA,
    TASK_ID_RE,
    AccuracyContract,
    AttachedProfile,
    CaseTolerance,
    Claims,
    Contract,
    EntryPoint,
    Extensions,
    ParamSpec,
    Task,
    Tolerance,
)
from workstation.task.sources import parse_module

#: the largest task.toml kws reads (bytes).
MAX_TASK_TOML_BYTES = 1 << 20
#: the largest attached profile a task may list (bytes; checked at load, again when read).
MAX_PROFILE_BYTES = 64 << 20
#: at most this many ``[[profiles]]`` entries.
MAX_PROFILES = 16
#: file name endings -> the profile format they imply when ``format`` is not given.
PROFILE_SUFFIXES = ((".hatchet", "proton"), (".csv", "ncu-csv"), (".sqlite", "nsys-sqlite"),
                    (".db", "nsys-sqlite"), (".json", "torch-trace"))

Scalar = Annotated[int | float | str | bool, Meta(description="a scalar (a case value)")]
NonNegInt = Annotated[int, Meta(ge=0, description="a non-negative integer")]
NonNegFloat = Annotated[float, Meta(ge=0, description="a number")]
EntryRef = Annotated[str, Meta(description="'file.py:callable'")]
FileName = Annotated[str, Meta(description="a file name")]
Flag = Annotated[bool, Meta(description="true or false")]
Kind = Annotated[Literal["generation", "translation", "migration", "debugging", "optimization", "fusion"],
                 Meta(extra={"noun": "kind"})]
Backend = Annotated[Literal["triton", "torch", "cuda", "pallas", "nki"], Meta(extra={"noun": "backend"})]
DtypeName = Annotated[Literal[DTYPE_NAMES], Meta(extra={"noun": "dtype"})]  # type: ignore[valid-type]  # Literal of a tuple constant: msgspec reads it, mypy cannot
FailureClass = Annotated[
    Literal["", "compile-error", "runtime-error", "crash", "timeout", "mismatch", "nan", "nondeterministic", "slow"],
    Meta(extra={"noun": "failure class"})]


class EntryTable(Struct, frozen=True):
    """``[entry]``: ``"file.py:callable"`` per role, and the written-input indices."""

    candidate: EntryRef
    reference: EntryRef
    inputs: EntryRef
    baseline: EntryRef | None = None
    test: EntryRef | None = None
    bench: EntryRef | None = None
    out_args: Annotated[list[NonNegInt], Meta(description="an array of input indices")] = []
    inout_args: Annotated[list[NonNegInt], Meta(description="an array of input indices")] = []


class ParamTable(Struct, frozen=True):
    """One ``[params]`` entry: the legal values of an integer case parameter (sizes: the
    contract's default for an unlisted one is any positive int, so bounds are >= 0)."""

    min: Annotated[int, Meta(ge=0, description="a non-negative integer")] | None = None
    max: Annotated[int, Meta(ge=0, description="a non-negative integer")] | None = None
    multiple_of: Annotated[int, Meta(gt=0, description="a positive integer")] | None = None
    choices: Annotated[list[Scalar], Meta(min_length=1, description="a non-empty array")] | None = None


class ContractTable(Struct, frozen=True):
    """``[contract]``: what the spec promises (defaults per the task format)."""

    dtypes: Annotated[list[DtypeName], Meta(description="an array of dtype names")] = []
    contiguous_only: Flag = False
    deterministic: Flag = True
    mutates_inputs: Flag = False
    nonfinite_inputs: Flag = False
    max_abs_input: NonNegFloat = 0.0
    reduction: Annotated[list[str], Meta(description="an array of case parameter names")] = []
    #: kws extension (docs/task-format.md): framework ops the candidate must not dispatch.
    forbidden_ops: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(description="an array of op names")] = []
    #: kws extension (docs/task-format.md): the accuracy contract the kernel computes under
    #: (the numerics checks judge against an oracle rounded to it); ``accumulate`` needs it.
    compute_dtype: Annotated[Literal[COMPUTE_DTYPES], Meta(extra={"noun": "compute dtype"})] | None = None  # type: ignore[valid-type]  # Literal of a tuple constant: msgspec reads it, mypy cannot
    accumulate: Annotated[Literal[ACCUMULATE_DTYPES], Meta(extra={"noun": "accumulation dtype"})] | None = None  # type: ignore[valid-type]  # Literal of a tuple constant: msgspec reads it, mypy cannot


class ToleranceTable(Struct, frozen=True):
    """``[tolerance.<dtype>]``: a per-dtype override."""

    atol: NonNegFloat | None = None
    rtol: NonNegFloat | None = None
    ulp: NonNegFloat | None = None


class ClaimsTable(Struct, frozen=True):
    """``[claims]``: what the task reports about itself."""

    status: Annotated[Literal["pass", "fail"], Meta(description="'pass' or 'fail'")] = "pass"
    failure: Annotated[str, Meta(description="free text", max_length=20_000)] = ""
    failure_class: FailureClass = ""
    speedup: NonNegFloat = 0.0


class BenchmarkTable(Struct, frozen=True):
    """``[benchmark]``: the cases the author timed."""

    cases: Annotated[list[dict[str, Scalar]], Meta(description="an array of case tables")] = []


class ProfileTable(Struct, frozen=True):
    """One ``[[profiles]]`` entry (kws extension): an attached profiler export."""

    file: FileName
    format: Annotated[Literal[PROFILE_FORMATS], Meta(extra={"noun": "profile format"})] | None = None  # type: ignore[valid-type]  # Literal of a tuple constant: msgspec reads it, mypy cannot
    role: Annotated[Literal["candidate", "baseline", "reference", "mixed"],
                    Meta(extra={"noun": "profile role"})] = "candidate"
    case: Annotated[dict[str, Scalar], Meta(description="a case table")] | None = None
    calls: Annotated[int, Meta(ge=0, le=1_000_000, description="a number of calls (0: as the file says)")] = 0
    device: Annotated[str, Meta(max_length=200, description="a device name")] = ""


#: The longest ``title`` (characters): one line in a table.
MAX_TITLE = 200
#: The longest free-text value (``claims.failure``), characters.
MAX_TEXT = 20_000


class InputsTable(Struct, frozen=True):
    """``[inputs]`` (kws extension)."""

    keep_structure: Annotated[list[NonNegInt], Meta(description="an array of input indices")] = []


class DelegationTable(Struct, frozen=True):
    """``[delegation]`` (kws extension)."""

    ops: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(description="an array of op names")] = []


class ToleranceRuleTable(Struct, frozen=True):
    """``[tolerance_rule]`` (kws extension)."""

    atol_scale: Annotated[list[str], Meta(description="an array of case parameter names")] = []
    rtol_scale: Annotated[list[str], Meta(description="an array of case parameter names")] = []


class BackendsTable(Struct, frozen=True):
    """``[backends]`` (kws extension): the backend of each role other than the candidate."""

    reference: Backend | None = None
    baseline: Backend | None = None
    test: Backend | None = None
    bench: Backend | None = None


class TargetTable(Struct, frozen=True):
    """``[target]`` (kws extension): the GPU the task targets (docs/backends.md, "Device stand-in")."""

    device: Annotated[Literal[DEVICE_TARGET_NAMES], Meta(extra={"noun": "target device"})] | None = None  # type: ignore[valid-type]  # Literal of a tuple constant: msgspec reads it, mypy cannot


class CaseToleranceTable(Struct, frozen=True):
    """One ``[[case_tolerance]]`` (kws extension)."""

    match: Annotated[dict[str, Scalar], Meta(description="a table of case parameters")]
    atol: NonNegFloat | None = None
    rtol: NonNegFloat | None = None
    ulp: NonNegFloat | None = None


class TaskFile(Struct, frozen=True):
    """The whole ``task.toml``. ``tolerance`` holds ``atol``/``rtol``/``ulp`` and
    ``[tolerance.<dtype>]`` sub-tables side by side; :func:`_tolerances` splits them."""

    schema: Annotated[int, Meta(description="the format version, 1")]
    id: Annotated[str, Meta(description="the task id")]
    title: Annotated[str, Meta(description="a one-line title", max_length=MAX_TITLE)]
    kind: Kind
    backend: Backend
    spec: Annotated[str, Meta(description="the spec file name")]
    entry: Annotated[EntryTable, Meta(description="the [entry] table")]
    cases: Annotated[list[dict[str, Scalar]], Meta(description="at least one [[cases]] table")]
    original: FileName | None = None
    params: Annotated[dict[str, ParamTable], Meta(description="a table of parameter specs")] = {}
    contract: Annotated[ContractTable, Meta(description="the [contract] table")] = ContractTable()
    tolerance: Annotated[dict[str, float | ToleranceTable], Meta(description="the [tolerance] table")] = {}
    claims: Annotated[ClaimsTable, Meta(description="the [claims] table")] = ClaimsTable()
    benchmark: Annotated[BenchmarkTable, Meta(description="the [benchmark] table")] = BenchmarkTable()
    profiles: Annotated[list[ProfileTable], Meta(max_length=MAX_PROFILES,
                                                 description="an array of [[profiles]] tables")] = []
    inputs: Annotated[InputsTable, Meta(description="the [inputs] table")] = InputsTable()
    delegation: Annotated[DelegationTable, Meta(description="the [delegation] table")] = DelegationTable()
    tolerance_rule: Annotated[ToleranceRuleTable, Meta(description="the [tolerance_rule] table")] = ToleranceRuleTable()
    case_tolerance: Annotated[list[CaseToleranceTable], Meta(description="[[case_tolerance]] tables")] = []
    backends: Annotated[BackendsTable, Meta(description="the [backends] table")] = BackendsTable()
    target: Annotated[TargetTable, Meta(description="the [target] table")] = TargetTable()


# ----------------------------------------------------------------------------- file checks


def _defined_names(source: str) -> set[str]:
    """Top-level names a module binds (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in parse_module(source).body:
        names.update(_bound_names(node))
    return names


def _bound_names(node: ast.stmt) -> list[str]:
    """The names one top-level statement binds: a def's or class's, assignment targets,
    imports' (first part of a dotted name), and those bound inside an ``if`` / ``try``
    (``if TYPE_CHECKING:`` and try-import blocks)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    names = []
    if isinstance(node, ast.If | ast.Try):
        for sub in ast.walk(node):
            if isinstance(sub, ast.FunctionDef | ast.ClassDef):
                names.append(sub.name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.append(sub.id)
    return names


def relative_file(task_dir: Path, toml: Path, key: str, value: str) -> Path:
    """Resolve a task-relative file name; it must stay inside the task folder and exist.

    Raises:
        Problem: empty, absolute, with ``..``, resolving outside the folder, or missing.
    """
    if not value:
        raise Problem(toml, key, "empty file name")
    p = Path(value)
    if p.is_absolute() or ".." in p.parts:
        raise Problem(toml, key, f"{value!r} must be relative to the task folder, without '..'")
    full = task_dir / p
    try:
        full.resolve().relative_to(task_dir.resolve())
    except ValueError:
        raise Problem(toml, key, f"{value!r} resolves outside the task folder") from None
    if not full.is_file():
        raise Problem(toml, key, f"file {value!r} does not exist in {task_dir}")
    return full


def _entry_point(task_dir: Path, toml: Path, key: str, value: str) -> EntryPoint:
    file, sep, name = value.rpartition(":")
    if not sep or not file or not name:
        raise Problem(toml, key, f"expected 'file.py:callable', got {value!r}")
    if not name.isidentifier():
        raise Problem(toml, key, f"{name!r} is not a Python identifier")
    path = relative_file(task_dir, toml, key, file)
    if path.suffix != ".py":
        raise Problem(toml, key, f"entry file {file!r} is not a Python file")
    try:
        names = _defined_names(path.read_text(encoding="utf-8"))
    except SyntaxError as e:
        raise Problem(path, key, f"syntax error at line {e.lineno}: {e.msg}") from None
    except UnicodeDecodeError:
        raise Problem(path, key, "file is not UTF-8 text") from None
    if name not in names:
        raise Problem(toml, key, f"callable {name!r} is not defined in {file}")
    return EntryPoint(file=file, name=name)


def _params(toml: Path, table: dict[str, ParamTable]) -> dict[str, ParamSpec]:
    out: dict[str, ParamSpec] = {}
    for pname, spec in table.items():
        if spec.min is not None and spec.max is not None and spec.min > spec.max:
            raise Problem(toml, f"params.{pname}", f"min {spec.min} is greater than max {spec.max}")
        choices = spec.choices
        if choices is not None and len({type(c).__name__ for c in choices}) > 1:
            # ["a", 64, 37]: one parameter takes values of one type
            first = type(choices[0]).__name__
            i = next(i for i, c in enumerate(choices) if type(c).__name__ != first)
            raise Problem(toml, f"params.{pname}.choices[{i}]", f"{choices[i]!r} is a {type(choices[i]).__name__}, "
                          f"but choices[0] is a {first}: a parameter's choices are all of one type")
        if spec.choices is not None and len(set(map(repr, spec.choices))) != len(spec.choices):
            raise Problem(toml, f"params.{pname}.choices", "lists a value twice")
        out[pname] = ParamSpec(spec.min, spec.max, spec.multiple_of,
                               tuple(spec.choices) if spec.choices is not None else None)
    return out


def _tolerance_value(toml: Path, key: str, v: float) -> float:
    """One atol / rtol / ulp value: a finite number >= 0; ``ulp`` a whole number (a count
    of representable values)."""
    if v != v:
        raise Problem(toml, key, "must be a number >= 0, got nan (nan compares false: no output would ever be close)")
    if v < 0:
        raise Problem(toml, key, f"must be >= 0, got {v}")
    if v == float("inf"):
        raise Problem(toml, key, "must be finite, got inf (every output would be close)")
    if key.endswith("ulp") and float(v) != int(v):
        raise Problem(toml, key, f"must be a whole number of ULPs, got {v}")
    return float(v)


def _tolerances(toml: Path, table: dict[str, float | ToleranceTable]) -> tuple[Tolerance, dict[str, Tolerance]]:
    """``[tolerance]``'s own keys and its per-dtype sub-tables."""
    own: dict[str, float] = {}
    by_dtype: dict[str, Tolerance] = {}
    for k, v in table.items():
        if isinstance(v, ToleranceTable):
            if k not in DTYPE_NAMES:
                raise Problem(toml, f"tolerance.{k}", f"unknown dtype {k!r} for a per-dtype tolerance")
            vals = {n: _tolerance_value(toml, f"tolerance.{k}.{n}", x) if x is not None else None
                    for n, x in (("atol", v.atol), ("rtol", v.rtol), ("ulp", v.ulp))}
            by_dtype[k] = Tolerance(**vals)
        elif k in ("atol", "rtol", "ulp"):
            own[k] = _tolerance_value(toml, f"tolerance.{k}", v)
        else:
            raise Problem(toml, f"tolerance.{k}", "unknown key; expected atol, rtol, ulp or a [tolerance.<dtype>] table")
    return Tolerance(**own), by_dtype


def _case_shape(toml: Path, cases: list[dict[str, Any]], key: str, warnings: list[Problem]) -> None:
    """Every case names the same parameters (a case missing one that another case has is an
    error: ``make_inputs`` would fail or pick a default nobody declared); a case equal to
    an earlier one is a warning (valid, but it only repeats work)."""
    names: dict[str, int] = {}
    for i, case in enumerate(cases):
        for k in case:
            names.setdefault(k, i)
    for i, case in enumerate(cases):
        for k, first in names.items():
            if k not in case:
                raise Problem(toml, f"{key}[{i}].{k}", f"missing: {key}[{first}] has {k}, and every case must "
                              "name the same parameters")
    seen: dict[tuple, int] = {}
    for i, case in enumerate(cases):
        sig = tuple(sorted((k, type(v).__name__, v) for k, v in case.items()))
        if sig in seen:
            warnings.append(Problem(toml, f"{key}[{i}]", f"the same case as {key}[{seen[sig]}] (ignored: "
                                    "it only repeats the work)"))
        else:
            seen[sig] = i


def _cases(toml: Path, raw: list[dict[str, Any]], params: dict[str, ParamSpec], key: str) -> list[dict[str, Any]]:
    cases = []
    for i, case in enumerate(raw):
        ck = f"{key}[{i}]"
        dtype = case.get("dtype")
        if dtype is None:
            raise Problem(toml, f"{ck}.dtype", "missing required key (the primary input dtype)")
        if dtype not in DTYPE_NAMES:
            raise Problem(toml, f"{ck}.dtype", f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_NAMES)}")
        for pname, value in case.items():
            if pname == "dtype":
                continue
            spec = params.get(pname)
            if spec is not None and not spec.allows(value):
                raise Problem(toml, f"{ck}.{pname}", f"value {value!r} is outside [params]: {spec.describe()}")
            if spec is None and isinstance(value, int) and not isinstance(value, bool) and value <= 0:
                raise Problem(toml, f"{ck}.{pname}", f"an integer case parameter without [params] must be positive, got {value}")
        cases.append(dict(case))
    return cases


def _profiles(task_dir: Path, toml: Path, table: list[ProfileTable], params: dict[str, ParamSpec]
              ) -> tuple[AttachedProfile, ...]:
    """``[[profiles]]``: each file inside the folder, no larger than
    :data:`MAX_PROFILE_BYTES`, of a known format (given, or implied by its name)."""
    out = []
    for i, p in enumerate(table):
        key = f"profiles[{i}]"
        path = relative_file(task_dir, toml, f"{key}.file", p.file)
        size = path.stat().st_size
        if size > MAX_PROFILE_BYTES:
            raise Problem(toml, f"{key}.file", f"{p.file!r} is {size} bytes, larger than the "
                          f"{MAX_PROFILE_BYTES}-byte limit for an attached profile")
        fmt = p.format or next((f for suf, f in PROFILE_SUFFIXES if p.file.lower().endswith(suf)), None)
        if fmt is None:
            raise Problem(toml, f"{key}.format", f"cannot tell the format of {p.file!r} from its name; "
                          f"give format = one of {', '.join(PROFILE_FORMATS)}")
        case = None
        if p.case is not None:
            try:
                case = _cases(toml, [p.case], params, f"{key}.case")[0]
            except Problem as e:
                raise Problem(toml, e.key.replace(f"{key}.case[0]", f"{key}.case", 1), e.problem) from None
        out.append(AttachedProfile(file=p.file, format=fmt, role=p.role, case=case, calls=p.calls,
                                   device=p.device, key=key))
    return tuple(out)


# ----------------------------------------------------------------------------- loading


def load_task(task_dir: Path | str) -> Task:
    """Load and validate ``<task_dir>/task.toml``.

    Raises:
        Problem: naming the file, the key and the problem, for: no or unparsable task.toml
            (or one over :data:`MAX_TASK_TOML_BYTES`, not UTF-8, nested too deeply), a
            missing key, a wrong type, an unknown kind/backend/dtype, an entry file or
            callable that does not exist, an id that does not match the folder, a declared
            case outside ``[params]``.
    """
    task_dir = Path(task_dir)
    toml = task_dir / "task.toml"
    if not toml.is_file():
        raise Problem(toml, "", "no task.toml in this task folder")
    data = read_toml(toml, max_bytes=MAX_TASK_TOML_BYTES)
    schema = data.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema != SCHEMA:
        raise Problem(toml, "schema", f"unsupported schema {schema}; this kws reads schema {SCHEMA}")
    doc = convert(data, TaskFile, file=toml)
    warnings = [Problem(toml, k, "unknown key (ignored)") for k in unknown_keys(data, TaskFile)
                if not k.startswith(("cases[", "benchmark.cases[", "tolerance.", "case_tolerance["))
                and not (k.startswith("profiles[") and ".case." in k)]

    if not TASK_ID_RE.match(doc.id):
        raise Problem(toml, "id", f"{doc.id!r} does not match [a-z0-9][a-z0-9._-]*")
    if doc.id != task_dir.name:
        raise Problem(toml, "id", f"{doc.id!r} does not match the folder name {task_dir.name!r}")
    relative_file(task_dir, toml, "spec", doc.spec)
    if doc.original is not None:
        relative_file(task_dir, toml, "original", doc.original)

    entry = _entries(task_dir, toml, doc)

    params = _params(toml, doc.params)
    c = doc.contract
    contract = Contract(dtypes=tuple(c.dtypes), contiguous_only=c.contiguous_only, deterministic=c.deterministic,
                        mutates_inputs=c.mutates_inputs, nonfinite_inputs=c.nonfinite_inputs,
                        max_abs_input=float(c.max_abs_input), reduction=tuple(c.reduction))
    if not doc.cases:
        raise Problem(toml, "cases", "at least one [[cases]] table is required")
    cases = _cases(toml, doc.cases, params, "cases")
    _case_shape(toml, cases, "cases", warnings)
    unique = [c for i, c in enumerate(cases) if not any(w.key == f"cases[{i}]" for w in warnings)]
    for p in contract.reduction:
        if not any(p in case for case in cases):
            raise Problem(toml, "contract.reduction", f"{p!r} is not a parameter of any case")
    tolerance, by_dtype = _tolerances(toml, doc.tolerance)
    cl = doc.claims
    claims = Claims(status=cl.status, failure=cl.failure, failure_class=cl.failure_class, speedup=float(cl.speedup))
    bench_cases = _cases(toml, doc.benchmark.cases, params, "benchmark.cases")
    _case_shape(toml, bench_cases, "benchmark.cases", warnings)
    cases = unique
    profiles = _profiles(task_dir, toml, doc.profiles, params)

    extensions = _extensions(toml, doc, cases, entry)

    return Task(
        id=doc.id, dir=task_dir, title=safe_text(doc.title, None), kind=doc.kind, backend=doc.backend, spec=doc.spec,
        entry=entry, out_args=tuple(doc.entry.out_args), inout_args=tuple(doc.entry.inout_args),
        params=params, contract=contract, cases=cases, tolerance=tolerance, tolerance_by_dtype=by_dtype,
        claims=claims, benchmark_cases=bench_cases, original=doc.original, profiles=profiles, warnings=warnings,
        extensions=extensions, helper_dirs=_helper_dirs(task_dir),
    )


def _entries(task_dir: Path, toml: Path, doc: TaskFile) -> dict[str, EntryPoint]:
    """``[entry]``: each role's entry point (checked to exist in the task folder).

    Raises:
        Problem: an entry file or callable that does not exist, or an input index in both
            ``out_args`` and ``inout_args``.
    """
    entry: dict[str, EntryPoint] = {}
    for role in ROLES_REQUIRED + ROLES_OPTIONAL:
        value = getattr(doc.entry, role)
        if value is not None:
            entry[role] = _entry_point(task_dir, toml, f"entry.{role}", value)
    if set(doc.entry.out_args) & set(doc.entry.inout_args):
        raise Problem(toml, "entry.inout_args", "an input index cannot be both in out_args and inout_args")
    return entry


def _extensions(toml: Path, doc: TaskFile, cases: list[dict[str, Any]], entry: dict[str, EntryPoint]) -> Extensions:
    """The kws extension tables, validated against the cases (and ``[backends]`` against
    the roles ``[entry]`` gives)."""
    role_backends = []
    for role in BACKEND_ROLES:
        b = getattr(doc.backends, role)
        if b is None:
            continue
        if role not in entry:
            raise Problem(toml, f"backends.{role}", f"the task has no entry.{role}: a backend for a role it does "
                          "not have")
        role_backends.append((role, b))
    for k, n in ((f"tolerance_rule.{name}", p) for name in ("atol_scale", "rtol_scale")
                 for p in getattr(doc.tolerance_rule, name)):
        if not any(n in case for case in cases):
            raise Problem(toml, k, f"{n!r} is not a parameter of any case")
    case_tolerances = _case_tolerances(toml, doc, cases)
    accuracy = None
    if doc.contract.compute_dtype is not None:
        accuracy = AccuracyContract(doc.contract.compute_dtype, doc.contract.accumulate or "float32")
    elif doc.contract.accumulate is not None:
        raise Problem(toml, "contract.accumulate", "qualifies an accuracy contract, but contract.compute_dtype is not "
                      f"given (add compute_dtype = one of {', '.join(COMPUTE_DTYPES)})")
    return Extensions(keep_structure=tuple(doc.inputs.keep_structure), delegates=tuple(doc.delegation.ops),
                      atol_scale=tuple(doc.tolerance_rule.atol_scale), rtol_scale=tuple(doc.tolerance_rule.rtol_scale),
                      case_tolerances=case_tolerances, role_backends=tuple(role_backends),
                      forbidden_ops=tuple(doc.contract.forbidden_ops), accuracy=accuracy, target=doc.target.device)


def _case_tolerances(toml: Path, doc: TaskFile, cases: list[dict[str, Any]]) -> tuple[CaseTolerance, ...]:
    """``[[case_tolerance]]`` tables, each matching at least one declared case and giving a
    tolerance."""
    cts = []
    for i, ct in enumerate(doc.case_tolerance):
        if not ct.match:
            raise Problem(toml, f"case_tolerance[{i}].match", "an empty match would apply to every case; use [tolerance]")
        if ct.atol is None and ct.rtol is None and ct.ulp is None:
            raise Problem(toml, f"case_tolerance[{i}]", "gives none of atol, rtol, ulp")
        if not any(all(c.get(k) == v for k, v in ct.match.items()) for c in cases):
            raise Problem(toml, f"case_tolerance[{i}].match", f"matches no declared case: {dict(ct.match)}")
        cts.append(CaseTolerance(tuple(sorted(ct.match.items())), Tolerance(ct.atol, ct.rtol, ct.ulp)))
    return tuple(cts)


def _helper_dirs(task_dir: Path) -> tuple[Path, ...]:
    """The shared helper folder of the queue ``task_dir`` belongs to (empty outside a
    queue, or when its ``queue.toml`` names none or cannot be read: the queue loader
    reports that file's problems)."""
    from workstation.task.helpers import queue_helpers_dir, queue_root_of

    root = queue_root_of(task_dir)
    if root is None:
        return ()
    try:
        d = queue_helpers_dir(root)
    except Problem:
        return ()
    return (d,) if d is not None else ()

