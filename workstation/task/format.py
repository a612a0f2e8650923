"""Load and validate kws queues and tasks (task format version 1).

The format is the contract in ``shared/spec/task-format.md``, documented for users in
``docs/task-format.md``. This module only reads files: it never imports or runs task code
(entry callables are located with :mod:`ast`), so it is safe in the TUI's own process.

Every problem is a :class:`TaskError` naming the file, the key and the problem; a queue
with malformed tasks still loads every other task (:func:`load_queue`).

kws extensions (optional keys, never changing a contract key's meaning):

- top-level ``original = "<file>"``: the source file a translation or migration started
  from (CUDA, Pallas, ...), shown in the diff viewer, never run.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = 1
TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
KINDS = ("generation", "translation", "migration", "debugging", "optimization", "fusion")
BACKENDS = ("triton", "torch", "cuda", "pallas", "nki")
ROLES_REQUIRED = ("candidate", "reference", "inputs")
ROLES_OPTIONAL = ("baseline", "test", "bench")
FAILURE_CLASSES = (
    "compile-error",
    "runtime-error",
    "crash",
    "timeout",
    "mismatch",
    "nan",
    "nondeterministic",
    "slow",
)
#: dtype names ``getattr(torch, name)`` resolves to a floating or integer dtype (torch 2.x).
DTYPE_NAMES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)
PARAM_KEYS = ("min", "max", "multiple_of", "choices")
CONTRACT_DEFAULTS: dict[str, Any] = {
    "dtypes": [],
    "contiguous_only": False,
    "deterministic": True,
    "mutates_inputs": False,
    "nonfinite_inputs": False,
    "max_abs_input": 0.0,
    "reduction": [],
}
TOP_LEVEL_KEYS = {
    "schema", "id", "title", "kind", "backend", "spec", "entry", "params", "contract",
    "cases", "tolerance", "claims", "benchmark", "original",
}


class TaskError(Exception):
    """A task or queue file that does not load.

    Attributes:
        file: the offending file (or folder), as a path.
        key: the dotted key inside it (``"entry.candidate"``, ``"cases[2].N"``), or ``""``
            when the whole file is at fault.
        problem: what is wrong, in one sentence.
    """

    def __init__(self, file: Path | str, key: str, problem: str):
        self.file = Path(file)
        self.key = key
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}: {self.key}" if self.key else str(self.file)
        return f"{where}: {self.problem}"

    def as_dict(self) -> dict[str, str]:
        """The error as JSON-ready data: ``{"file", "key", "problem"}``."""
        return {"file": str(self.file), "key": self.key, "problem": self.problem}


@dataclass(frozen=True)
class EntryPoint:
    """``"file.py:callable"`` relative to the task folder."""

    file: str
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.name}"


@dataclass(frozen=True)
class ParamSpec:
    """The legal values of one integer case parameter (``[params]``)."""

    min: int | None = None
    max: int | None = None
    multiple_of: int | None = None
    choices: tuple[Any, ...] | None = None

    def allows(self, value: Any) -> bool:
        """True when ``value`` is legal under this spec."""
        if self.choices is not None:
            return value in self.choices
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        if self.min is not None and value < self.min:
            return False
        if self.max is not None and value > self.max:
            return False
        if self.multiple_of and value % self.multiple_of:
            return False
        return True

    def describe(self) -> str:
        if self.choices is not None:
            return f"one of {list(self.choices)}"
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min}")
        if self.max is not None:
            parts.append(f"<= {self.max}")
        if self.multiple_of:
            parts.append(f"a multiple of {self.multiple_of}")
        return ", ".join(parts) or "any positive int"


@dataclass(frozen=True)
class Contract:
    """``[contract]``: what the spec promises (defaults per the task format)."""

    dtypes: tuple[str, ...] = ()
    contiguous_only: bool = False
    deterministic: bool = True
    mutates_inputs: bool = False
    nonfinite_inputs: bool = False
    max_abs_input: float = 0.0
    reduction: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tolerance:
    """A declared comparison tolerance; ``None`` means "torch.testing's default for the dtype"."""

    atol: float | None = None
    rtol: float | None = None
    ulp: float | None = None


@dataclass(frozen=True)
class Claims:
    """``[claims]``: what the task reports about itself."""

    status: str = "pass"
    failure: str = ""
    failure_class: str = ""
    speedup: float = 0.0


@dataclass
class Task:
    """One validated task. ``dir`` is the task folder; every file key is relative to it."""

    id: str
    dir: Path
    title: str
    kind: str
    backend: str
    spec: str
    entry: dict[str, EntryPoint]
    out_args: tuple[int, ...]
    inout_args: tuple[int, ...]
    params: dict[str, ParamSpec]
    contract: Contract
    cases: list[dict[str, Any]]
    tolerance: Tolerance
    tolerance_by_dtype: dict[str, Tolerance]
    claims: Claims
    benchmark_cases: list[dict[str, Any]]
    original: str | None = None
    warnings: list[TaskError] = field(default_factory=list)

    @property
    def task_toml(self) -> Path:
        return self.dir / "task.toml"

    def tolerance_for(self, case_dtype: str) -> Tolerance:
        """The declared tolerance for a case of ``case_dtype``: ``[tolerance.<dtype>]`` keys
        override ``[tolerance]`` keys; keys missing from both stay ``None``."""
        base, over = self.tolerance, self.tolerance_by_dtype.get(case_dtype)
        if over is None:
            return base
        return Tolerance(
            atol=over.atol if over.atol is not None else base.atol,
            rtol=over.rtol if over.rtol is not None else base.rtol,
            ulp=over.ulp if over.ulp is not None else base.ulp,
        )

    def source_path(self, role: str) -> Path | None:
        """The file of an entry role (``"candidate"``, ``"baseline"``...), or ``None``."""
        ep = self.entry.get(role)
        return self.dir / ep.file if ep else None


@dataclass
class QueueLoad:
    """The result of loading a queue: its valid tasks (sorted by id) and its errors."""

    root: Path
    name: str
    rubric: str
    tasks: list[Task]
    errors: list[TaskError]

    def task(self, task_id: str) -> Task | None:
        return next((t for t in self.tasks if t.id == task_id), None)


# ----------------------------------------------------------------------------- helpers


class _Reader:
    """Typed access to one TOML table with errors that name the file and dotted key."""

    def __init__(self, file: Path, table: dict[str, Any], prefix: str = ""):
        self.file, self.table, self.prefix = file, table, prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def error(self, name: str, problem: str) -> TaskError:
        return TaskError(self.file, self.key(name), problem)

    def get(self, name: str, types: type | tuple[type, ...], default: Any = ..., *, what: str):
        if name not in self.table:
            if default is ...:
                raise self.error(name, f"missing required key ({what})")
            return default
        value = self.table[name]
        # bool is an int subclass: never accept it where a number is wanted, and vice versa
        if isinstance(value, bool) and bool not in _as_tuple(types):
            raise self.error(name, f"expected {what}, got a boolean")
        if not isinstance(value, types):
            raise self.error(name, f"expected {what}, got {_toml_type(value)} {value!r}")
        return value

    def number(self, name: str, default: Any = ..., *, minimum: float | None = 0.0) -> Any:
        value = self.get(name, (int, float), default, what="a number")
        if value is not None and value is not default and minimum is not None and value < minimum:
            raise self.error(name, f"must be >= {minimum}, got {value}")
        return float(value) if isinstance(value, int) else value


def _as_tuple(t: type | tuple[type, ...]) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def _toml_type(value: Any) -> str:
    return {
        bool: "a boolean", int: "an integer", float: "a float", str: "a string",
        list: "an array", dict: "a table",
    }.get(type(value), type(value).__name__)


def _defined_names(source: str) -> set[str]:
    """Top-level names a module binds (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:` / try-import blocks
            for sub in ast.walk(node):
                if isinstance(sub, ast.FunctionDef | ast.ClassDef):
                    names.add(sub.name)
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def _relative_file(task_dir: Path, toml: Path, key: str, value: str) -> Path:
    """Resolve a task-relative file name; it must stay inside the task folder."""
    if not value:
        raise TaskError(toml, key, "empty file name")
    p = Path(value)
    if p.is_absolute() or ".." in p.parts:
        raise TaskError(toml, key, f"{value!r} must be relative to the task folder, without '..'")
    full = task_dir / p
    try:
        full.resolve().relative_to(task_dir.resolve())
    except ValueError:
        raise TaskError(toml, key, f"{value!r} resolves outside the task folder") from None
    if not full.is_file():
        raise TaskError(toml, key, f"file {value!r} does not exist in {task_dir}")
    return full


def _entry_point(task_dir: Path, toml: Path, key: str, value: str) -> EntryPoint:
    file, sep, name = value.rpartition(":")
    if not sep or not file or not name:
        raise TaskError(toml, key, f"expected 'file.py:callable', got {value!r}")
    if not name.isidentifier():
        raise TaskError(toml, key, f"{name!r} is not a Python identifier")
    path = _relative_file(task_dir, toml, key, file)
    if path.suffix != ".py":
        raise TaskError(toml, key, f"entry file {file!r} is not a Python file")
    try:
        names = _defined_names(path.read_text(encoding="utf-8"))
    except SyntaxError as e:
        raise TaskError(path, key, f"syntax error at line {e.lineno}: {e.msg}") from None
    except UnicodeDecodeError:
        raise TaskError(path, key, "file is not UTF-8 text") from None
    if name not in names:
        raise TaskError(toml, key, f"callable {name!r} is not defined in {file}")
    return EntryPoint(file=file, name=name)


def _index_list(r: _Reader, name: str) -> tuple[int, ...]:
    values = r.get(name, list, [], what="an array of input indices")
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise TaskError(r.file, f"{r.key(name)}[{i}]", f"expected a non-negative integer, got {v!r}")
    return tuple(values)


def _params(toml: Path, table: Any) -> dict[str, ParamSpec]:
    if not isinstance(table, dict):
        raise TaskError(toml, "params", f"expected a table, got {_toml_type(table)}")
    out: dict[str, ParamSpec] = {}
    for pname, spec in table.items():
        key = f"params.{pname}"
        if not isinstance(spec, dict):
            raise TaskError(toml, key, f"expected an inline table like {{ min = 1, max = 64 }}, got {_toml_type(spec)}")
        for k in spec:
            if k not in PARAM_KEYS:
                raise TaskError(toml, f"{key}.{k}", f"unknown key; expected one of {', '.join(PARAM_KEYS)}")
        r = _Reader(toml, spec, key + ".")
        lo = r.get("min", int, None, what="an integer")
        hi = r.get("max", int, None, what="an integer")
        mult = r.get("multiple_of", int, None, what="a positive integer")
        choices = r.get("choices", list, None, what="an array")
        if mult is not None and mult <= 0:
            raise r.error("multiple_of", f"must be positive, got {mult}")
        if lo is not None and hi is not None and lo > hi:
            raise TaskError(toml, key, f"min {lo} is greater than max {hi}")
        if choices is not None and not choices:
            raise r.error("choices", "must not be empty")
        out[pname] = ParamSpec(lo, hi, mult, tuple(choices) if choices is not None else None)
    return out


def _tolerance(toml: Path, table: dict[str, Any], prefix: str) -> Tolerance:
    r = _Reader(toml, table, prefix)
    for k, v in table.items():
        if k not in ("atol", "rtol", "ulp") and not isinstance(v, dict):
            raise TaskError(toml, f"{prefix}{k}", "unknown key; expected atol, rtol, ulp or a [tolerance.<dtype>] table")
    return Tolerance(
        atol=r.number("atol", None),
        rtol=r.number("rtol", None),
        ulp=r.number("ulp", None),
    )


# ----------------------------------------------------------------------------- loading


def load_task(task_dir: Path | str) -> Task:
    """Load and validate ``<task_dir>/task.toml``.

    Raises:
        TaskError: naming the file, the key and the problem, for: no or unparsable
            task.toml, a missing key, a wrong type, an unknown kind/backend/dtype, an entry
            file or callable that does not exist, an id that does not match the folder,
            a declared case outside ``[params]``.
    """
    task_dir = Path(task_dir)
    toml = task_dir / "task.toml"
    if not toml.is_file():
        raise TaskError(toml, "", "no task.toml in this task folder")
    try:
        data = tomllib.loads(toml.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(toml, "", f"not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise TaskError(toml, "", "not UTF-8 text") from None

    r = _Reader(toml, data)
    warnings: list[TaskError] = []
    schema = r.get("schema", int, what="the format version, 1")
    if schema != SCHEMA:
        raise r.error("schema", f"unsupported schema {schema}; this kws reads schema {SCHEMA}")
    task_id = r.get("id", str, what="the task id")
    if not TASK_ID_RE.match(task_id):
        raise r.error("id", f"{task_id!r} does not match [a-z0-9][a-z0-9._-]*")
    if task_id != task_dir.name:
        raise r.error("id", f"{task_id!r} does not match the folder name {task_dir.name!r}")
    title = r.get("title", str, what="a one-line title")
    kind = r.get("kind", str, what="the task kind")
    if kind not in KINDS:
        raise r.error("kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    backend = r.get("backend", str, what="the candidate's backend")
    if backend not in BACKENDS:
        raise r.error("backend", f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    spec = r.get("spec", str, what="the spec file name")
    _relative_file(task_dir, toml, "spec", spec)
    original = r.get("original", str, None, what="a file name")
    if original is not None:
        _relative_file(task_dir, toml, "original", original)
    for k in data:
        if k not in TOP_LEVEL_KEYS:
            warnings.append(TaskError(toml, k, "unknown top-level key (ignored)"))

    entry_t = r.get("entry", dict, what="the [entry] table")
    er = _Reader(toml, entry_t, "entry.")
    entry: dict[str, EntryPoint] = {}
    for role in ROLES_REQUIRED + ROLES_OPTIONAL:
        required = role in ROLES_REQUIRED
        value = er.get(role, str, ... if required else None, what="'file.py:callable'")
        if value is not None:
            entry[role] = _entry_point(task_dir, toml, er.key(role), value)
    out_args = _index_list(er, "out_args")
    inout_args = _index_list(er, "inout_args")
    if set(out_args) & set(inout_args):
        raise er.error("inout_args", "an input index cannot be both in out_args and inout_args")
    for k in entry_t:
        if k not in ROLES_REQUIRED + ROLES_OPTIONAL + ("out_args", "inout_args"):
            warnings.append(TaskError(toml, f"entry.{k}", "unknown entry key (ignored)"))

    params = _params(toml, data.get("params", {}))

    ct = r.get("contract", dict, {}, what="the [contract] table")
    cr = _Reader(toml, ct, "contract.")
    dtypes = cr.get("dtypes", list, [], what="an array of dtype names")
    for i, d in enumerate(dtypes):
        if d not in DTYPE_NAMES:
            raise TaskError(toml, f"contract.dtypes[{i}]", f"unknown dtype {d!r}")
    reduction = cr.get("reduction", list, [], what="an array of case parameter names")
    for i, p in enumerate(reduction):
        if not isinstance(p, str):
            raise TaskError(toml, f"contract.reduction[{i}]", f"expected a parameter name, got {p!r}")
    contract = Contract(
        dtypes=tuple(dtypes),
        contiguous_only=cr.get("contiguous_only", bool, False, what="true or false"),
        deterministic=cr.get("deterministic", bool, True, what="true or false"),
        mutates_inputs=cr.get("mutates_inputs", bool, False, what="true or false"),
        nonfinite_inputs=cr.get("nonfinite_inputs", bool, False, what="true or false"),
        max_abs_input=cr.number("max_abs_input", 0.0),
        reduction=tuple(reduction),
    )
    for k in ct:
        if k not in CONTRACT_DEFAULTS:
            warnings.append(TaskError(toml, f"contract.{k}", "unknown contract key (ignored)"))

    cases = _cases(toml, r.get("cases", list, what="at least one [[cases]] table"), params, "cases")
    if not cases:
        raise r.error("cases", "at least one [[cases]] table is required")
    for p in reduction:
        if not any(p in c for c in cases):
            raise TaskError(toml, "contract.reduction", f"{p!r} is not a parameter of any case")

    tt = r.get("tolerance", dict, {}, what="the [tolerance] table")
    tolerance = _tolerance(toml, tt, "tolerance.")
    by_dtype: dict[str, Tolerance] = {}
    for k, v in tt.items():
        if isinstance(v, dict):
            if k not in DTYPE_NAMES:
                raise TaskError(toml, f"tolerance.{k}", f"unknown dtype {k!r} for a per-dtype tolerance")
            by_dtype[k] = _tolerance(toml, v, f"tolerance.{k}.")

    clt = r.get("claims", dict, {}, what="the [claims] table")
    clr = _Reader(toml, clt, "claims.")
    status = clr.get("status", str, "pass", what="'pass' or 'fail'")
    if status not in ("pass", "fail"):
        raise clr.error("status", f"expected 'pass' or 'fail', got {status!r}")
    fclass = clr.get("failure_class", str, "", what="a failure class")
    if fclass and fclass not in FAILURE_CLASSES:
        raise clr.error("failure_class", f"unknown class {fclass!r}; expected one of {', '.join(FAILURE_CLASSES)}")
    claims = Claims(
        status=status,
        failure=clr.get("failure", str, "", what="free text"),
        failure_class=fclass,
        speedup=clr.number("speedup", 0.0),
    )

    bt = r.get("benchmark", dict, {}, what="the [benchmark] table")
    bench_cases = _cases(toml, _Reader(toml, bt, "benchmark.").get("cases", list, [], what="an array of case tables"), params, "benchmark.cases")

    return Task(
        id=task_id, dir=task_dir, title=title, kind=kind, backend=backend, spec=spec,
        entry=entry, out_args=out_args, inout_args=inout_args, params=params,
        contract=contract, cases=cases, tolerance=tolerance, tolerance_by_dtype=by_dtype,
        claims=claims, benchmark_cases=bench_cases, original=original, warnings=warnings,
    )


def _cases(toml: Path, raw: list[Any], params: dict[str, ParamSpec], key: str) -> list[dict[str, Any]]:
    cases = []
    for i, case in enumerate(raw):
        ck = f"{key}[{i}]"
        if not isinstance(case, dict):
            raise TaskError(toml, ck, f"expected a table, got {_toml_type(case)}")
        dtype = case.get("dtype")
        if dtype is None:
            raise TaskError(toml, f"{ck}.dtype", "missing required key (the primary input dtype)")
        if dtype not in DTYPE_NAMES:
            raise TaskError(toml, f"{ck}.dtype", f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_NAMES)}")
        for pname, value in case.items():
            if pname == "dtype":
                continue
            if isinstance(value, dict | list) and pname not in params:
                raise TaskError(toml, f"{ck}.{pname}", "case values must be scalars")
            spec = params.get(pname)
            if spec is not None and not spec.allows(value):
                raise TaskError(toml, f"{ck}.{pname}", f"value {value!r} is outside [params]: {spec.describe()}")
            if spec is None and isinstance(value, int) and not isinstance(value, bool) and value <= 0:
                raise TaskError(toml, f"{ck}.{pname}", f"an integer case parameter without [params] must be positive, got {value}")
        cases.append(dict(case))
    return cases


def find_queue_root(path: Path | str) -> Path | None:
    """The queue root above ``path`` (a folder holding ``tasks/``), or ``None``."""
    p = Path(path).resolve()
    for cand in (p, *p.parents):
        if (cand / "tasks").is_dir() and (cand / "queue.toml").is_file():
            return cand
    for cand in (p, *p.parents):
        if (cand / "tasks").is_dir():
            return cand
    return None


def load_queue(root: Path | str) -> QueueLoad:
    """Load every task under ``<root>/tasks``; malformed ones become :class:`TaskError` s.

    Raises:
        TaskError: only when the queue itself is unusable (no ``tasks/`` folder, a
            ``queue.toml`` that does not parse).
    """
    root = Path(root)
    tasks_dir = root / "tasks"
    if not tasks_dir.is_dir():
        raise TaskError(root, "", "not a kws queue: no tasks/ folder")
    name, rubric = root.name, "kernel-review"
    qt = root / "queue.toml"
    if qt.is_file():
        try:
            q = tomllib.loads(qt.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise TaskError(qt, "", f"not valid TOML: {e}") from None
        qr = _Reader(qt, q)
        name = qr.get("name", str, name, what="a string")
        rubric = qr.get("rubric", str, rubric, what="a rubric id")
    tasks, errors = [], []
    for d in sorted(p for p in tasks_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            tasks.append(load_task(d))
        except TaskError as e:
            errors.append(e)
    return QueueLoad(root=root, name=name, rubric=rubric, tasks=tasks, errors=errors)
