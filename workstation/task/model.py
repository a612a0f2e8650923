"""The task model (task format version 1): what a validated task says, as Python values.

Loaded by :mod:`workstation.task.format` from ``task.toml``; the contract is
``shared/spec/task-format.md``, documented for users in ``docs/task-format.md``. Nothing
here reads files or runs task code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.schema.problem import Problem

SCHEMA = 1
TASK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
KINDS = ("generation", "translation", "migration", "debugging", "optimization", "fusion")
BACKENDS = ("triton", "torch", "cuda", "pallas", "nki")
ROLES_REQUIRED = ("candidate", "reference", "inputs")
ROLES_OPTIONAL = ("baseline", "test", "bench")
#: the roles whose backend ``[backends]`` (a kws extension) may declare: every role but the
#: candidate (the contract's ``backend``) and ``inputs`` (torch by the contract).
BACKEND_ROLES = ("reference", "baseline", "test", "bench")
#: the backend of a role ``[backends]`` does not list.
DEFAULT_ROLE_BACKEND = "torch"
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
#: formats of attached profiles (``[[profiles]]``, a kws extension): torch.profiler's
#: Chrome-trace JSON, ``ncu --csv`` exports, Nsight Systems' SQLite export, proton's
#: hatchet JSON (:mod:`workstation.profiles`).
PROFILE_FORMATS = ("torch-trace", "ncu-csv", "nsys-sqlite", "proton")
#: the role an attached profile profiled: a task role, or ``mixed`` (several roles in one
#: file; its kernels are listed but no per-role comparison is made).
PROFILE_ROLES = ("candidate", "baseline", "reference", "mixed")
CONTRACT_DEFAULTS: dict[str, Any] = {
    "dtypes": [],
    "contiguous_only": False,
    "deterministic": True,
    "mutates_inputs": False,
    "nonfinite_inputs": False,
    "max_abs_input": 0.0,
    "reduction": [],
}


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
class CaseTolerance:
    """``[[case_tolerance]]`` (kws extension): a tolerance for the cases whose parameters
    equal every key of ``match`` (``dtype`` included); its keys override the dtype's."""

    match: tuple[tuple[str, Any], ...]
    tolerance: Tolerance

    def applies(self, case: dict[str, Any]) -> bool:
        return all(case.get(k) == v for k, v in self.match)


#: ``[contract] compute_dtype`` (kws extension): the dtype every floating operation of the
#: kernel rounds its result to by design; ``"input"``: the case's input dtype.
COMPUTE_DTYPES = ("input", "float16", "bfloat16", "float32")
#: ``[contract] accumulate``: where reductions and matmuls accumulate (``"float32"``, the
#: default: only their result is rounded to the compute dtype; ``"input"``: every partial
#: sum is rounded to the compute dtype).
ACCUMULATE_DTYPES = ("float32", "input")


@dataclass(frozen=True)
class AccuracyContract:
    """``[contract] compute_dtype`` / ``accumulate`` (kws extension): the precision a kernel
    computes in by design (a library that computes logits at the input dtype). The numerics
    checks judge it against an oracle computed under this contract
    (:mod:`workstation.checks.support.contract`) and report how far the contract is from fp32."""

    compute_dtype: str
    accumulate: str = "float32"

    def compute_for(self, case_dtype: str) -> str:
        """The dtype a case of ``case_dtype`` computes in under this contract (``"input"``
        resolved; an input wider than fp32, or not floating, computes in float32)."""
        if self.compute_dtype != "input":
            return self.compute_dtype
        return case_dtype if case_dtype in ("float16", "bfloat16", "float32") else "float32"

    def accumulate_for(self, case_dtype: str) -> str:
        """The dtype a case's reductions accumulate in: float32, or the compute dtype."""
        return "float32" if self.accumulate == "float32" else self.compute_for(case_dtype)

    def describe(self, case_dtype: str | None = None) -> str:
        """``"compute at float16 (the input dtype), accumulate in float32"``."""
        if case_dtype is None:
            c = "the input dtype" if self.compute_dtype == "input" else self.compute_dtype
            a = "the compute dtype" if self.accumulate == "input" else "float32"
        else:
            c = self.compute_for(case_dtype) + (" (the input dtype)" if self.compute_dtype == "input" else "")
            a = self.accumulate_for(case_dtype)
        return f"compute at {c}, accumulate in {a}"


#: the GPUs a task may declare with ``[target] device`` (kws extension; the parent's loader
#: reads it, :attr:`Extensions.target`, and the job file carries it to the job child): their figures are :data:`workstation.protocol.devices.DEVICE_TARGETS`
#: (a test keeps the two equal).
DEVICE_TARGET_NAMES = ("H100", "H200", "A100")


@dataclass(frozen=True)
class Extensions:
    """The kws extensions of task.toml (docs/task-format.md, "kws extensions").

    Attributes:
        keep_structure: ``[inputs] keep_structure``: input indices whose values have a
            structure (rotary tables, probability vectors, SPD matrices) that value checks
            (special-values, degenerate-inputs' perturbations) must not perturb.
        delegates: ``[delegation] ops``: framework ops (``aten::mm``, ``matmul``) the
            candidate may call by design; fallback judges the rest.
        atol_scale: ``[tolerance_rule] atol_scale``: case parameters whose product
            multiplies the declared atol per case (FlagGems' ``atol = 1e-4 * K``).
        rtol_scale: ``[tolerance_rule] rtol_scale``: the same for rtol.
        case_tolerances: ``[[case_tolerance]]`` tables, in file order (the last match wins).
        role_backends: ``[backends]``: the backend of a role other than the candidate
            (``(("baseline", "cuda"),)``: the CUDA source of a translation); a role not
            listed is ``torch`` (:data:`DEFAULT_ROLE_BACKEND`). The candidate's backend is
            the contract's top-level ``backend``.
        forbidden_ops: ``[contract] forbidden_ops``: framework ops (``aten::mm``) the
            candidate must not dispatch (``forbidden-ops`` enforces them from the dispatch
            trace).
        accuracy: ``[contract] compute_dtype`` / ``accumulate``: the declared accuracy
            contract, or ``None`` (judged against the float64 oracle as always).
        target: ``[target] device``: the GPU the task targets, one of
            :data:`DEVICE_TARGET_NAMES`, or ``None`` when it declares none (the job file's
            ``target``: the device stand-in answers as it).
    """

    keep_structure: tuple[int, ...] = ()
    delegates: tuple[str, ...] = ()
    atol_scale: tuple[str, ...] = ()
    rtol_scale: tuple[str, ...] = ()
    case_tolerances: tuple[CaseTolerance, ...] = ()
    role_backends: tuple[tuple[str, str], ...] = ()
    forbidden_ops: tuple[str, ...] = ()
    accuracy: AccuracyContract | None = None
    target: str | None = None


@dataclass(frozen=True)
class Claims:
    """``[claims]``: what the task reports about itself."""

    status: str = "pass"
    failure: str = ""
    failure_class: str = ""
    speedup: float = 0.0


@dataclass(frozen=True)
class AttachedProfile:
    """One ``[[profiles]]`` entry (kws extension): a profiler export the author attaches
    as evidence. Only its metadata is loaded with the task; the file is parsed lazily,
    under the schema layer's guard (:mod:`workstation.profiles.load`).

    Attributes:
        file: the file, relative to the task folder.
        format: one of :data:`PROFILE_FORMATS`.
        role: one of :data:`PROFILE_ROLES`.
        case: the case the file profiles (``None``: the first ``[benchmark]`` case, else
            the first declared case).
        calls: how many calls of ``role`` the file covers (per-call figures divide by
            it; ``0``: as the file says, e.g. its ``ProfilerStep`` count, else 1).
        device: the device the file was captured on when the file does not say
            (``torch.cuda.get_device_name`` spelling, e.g. ``"NVIDIA H100 80GB HBM3"``).
        key: its key in task.toml (``profiles[0]``), for messages.
    """

    file: str
    format: str
    role: str
    case: dict[str, Any] | None = None
    calls: int = 0
    device: str = ""
    key: str = ""


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
    profiles: tuple[AttachedProfile, ...] = ()
    warnings: list[Problem] = field(default_factory=list)
    extensions: Extensions = field(default_factory=Extensions)
    #: the queue's shared helper folders (``queue.toml`` ``helpers``), put on the job
    #: child's ``sys.path`` after the task folder; part of the task's identity.
    helper_dirs: tuple[Path, ...] = ()

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

    def tolerance_for_case(self, case: dict[str, Any]) -> Tolerance:
        """The declared tolerance for ``case``: :meth:`tolerance_for` its dtype, then the
        last matching ``[[case_tolerance]]``, then ``[tolerance_rule]``: atol (rtol)
        multiplied by the product of the case's ``atol_scale`` (``rtol_scale``) parameters
        (a parameter the case lacks counts 1). Keys missing everywhere stay ``None``."""
        tol = self.tolerance_for(case.get("dtype", ""))
        for ct in self.extensions.case_tolerances:
            if ct.applies(case):
                o = ct.tolerance
                tol = Tolerance(atol=o.atol if o.atol is not None else tol.atol,
                                rtol=o.rtol if o.rtol is not None else tol.rtol,
                                ulp=o.ulp if o.ulp is not None else tol.ulp)
        ext = self.extensions

        def scale(names: tuple[str, ...]) -> float:
            f = 1.0
            for n in names:
                v = case.get(n)
                if isinstance(v, int | float) and not isinstance(v, bool):
                    f *= float(v)
            return f

        if ext.atol_scale and tol.atol is not None:
            tol = Tolerance(atol=tol.atol * scale(ext.atol_scale), rtol=tol.rtol, ulp=tol.ulp)
        if ext.rtol_scale and tol.rtol is not None:
            tol = Tolerance(atol=tol.atol, rtol=tol.rtol * scale(ext.rtol_scale), ulp=tol.ulp)
        return tol

    def backend_of(self, role: str) -> str | None:
        """The declared backend of ``role``'s code: the contract's ``backend`` for the
        candidate, ``[backends]`` (kws extension) for another role, else
        :data:`DEFAULT_ROLE_BACKEND`; ``None`` when the task has no such role. Never read
        from the imports a file mentions (:func:`workstation.task.backends.imported_backend`
        says what those suggest)."""
        if role == "candidate":
            return self.backend
        if role not in self.entry:
            return None
        return dict(self.extensions.role_backends).get(role, DEFAULT_ROLE_BACKEND)

    def source_path(self, role: str) -> Path | None:
        """The file of an entry role (``"candidate"``, ``"baseline"``...), or ``None``."""
        ep = self.entry.get(role)
        return self.dir / ep.file if ep else None
