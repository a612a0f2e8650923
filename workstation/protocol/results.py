"""What a step sends back, typed: the one boundary between a job child and the parent.

A job child writes, per step, one JSON document (:class:`StepDoc`) and an ``.npz`` of arrays
(:mod:`workstation.protocol.wire` reads both as hostile input). Everything in the document is
a :class:`msgspec.Struct` declared here or in :mod:`workstation.protocol.extras`, written by
the harness from those same classes and decoded once, in :func:`decode_doc`, by the parent: a
field renamed on one side is a :class:`ResultFormatError` naming the field at the boundary,
never a check ``error`` deep in a check.

The parts of a step's document:

- ``error`` (:class:`Raised`): what task code raised, with its ``phase`` (``import``,
  ``make_inputs``, ``transform``, ``call``, ``test``, ``bench``, ``harness``) and ``origin``
  (``task``, ``triton-compile``, ``build``, ``task-format``, ``kws``), and, when the error
  has a cause kws recognises (:data:`Cause`; most are *limits* of this machine or of the
  task rather than defects of the role): a library that is not installed (:class:`MissingModule`), a GPU feature
  kws's CPU device stand-in cannot answer (:class:`DeviceStandinLimit`), a construct kws's
  CPU emulation of CUDA does not run (:class:`CudaEmulationLimit`), or a task-format problem
  only a child can see (:class:`TaskFormat`: an ``out_args`` index beyond the inputs, a case
  over the input budget).
- ``extra``: the step kind's own payload, one Struct per step kind
  (:mod:`workstation.protocol.extras`, tagged by the step's kind).
- ``imports`` (:class:`ImportTime` per task file imported during the step) and ``notes``
  (:data:`Note`: what a backend layer observed for the report: the device stand-in's probes
  (:class:`StandinCalls`), the CUDA extensions built under emulation
  (:class:`CudaEmulationBuilds`)).

The parent registers one handler per :data:`Cause` and :data:`Note` kind
(:mod:`workstation.engine.payloads`), the way the harness registers ``@step`` handlers.

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, Literal, TypeVar

import msgspec


class Payload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every typed part of a step's result: keyword-only fields, unknown fields
    refused (a key the harness renamed fails at the boundary)."""


class ResultFormatError(ValueError):
    """A step's result document does not have the declared form: a kws bug (the harness and
    the parent disagree) or a document task code wrote itself; the runner refuses the step
    (:class:`workstation.protocol.wire.WireError` carries it)."""


# ----------------------------------------------------------------------------- errors


class Where(Payload):
    """The task-code frame an exception came from (the last frame outside site-packages and
    kws): file name (no folder), line, function."""

    file: str
    line: int | None = None
    function: str = ""


class MissingModule(Payload, tag="missing_module", tag_field="kind"):
    """A ``ModuleNotFoundError`` (raised or in the chain).

    Attributes:
        name: the module that could not be found (``"liger_kernel.ops"``).
        top: its top-level package (``"liger_kernel"``).
        found: whether ``top`` is importable here at all (over the job's ``sys.path``: the
            task folder and the queue's helpers first). False: a library not installed here,
            a limit of this machine; True: a typo of a submodule, the task code's defect.
        importer: the task file whose line imported it ("" when none).
    """

    name: str
    top: str
    found: bool
    importer: str = ""


class DeviceStandinLimit(Payload, tag="device_standin_limit", tag_field="kind"):
    """The code needs a GPU beyond what kws's CPU device stand-in answers (a CUDA tensor,
    stream or driver call): ``why`` (at most 500 characters)."""

    why: str


class CudaEmulationLimit(Payload, tag="cuda_emulation_limit", tag_field="kind"):
    """The code uses a construct kws's CPU emulation of CUDA does not run (inline assembly,
    wmma, cooperative groups, a CUDA library): ``why`` (at most 1500 characters)."""

    why: str


class TaskFormat(Payload, tag="task_format", tag_field="kind"):
    """A task-format problem only a job child can see (never a role's defect): ``key`` is
    the task.toml key (``entry.out_args``, ``entry.inout_args``, ``cases``)."""

    key: str


#: what an error is due to, where kws recognises it (a handler per kind in the parent): all but
#: a :class:`MissingModule` whose package is importable (a typo) say the error is a limit of
#: this machine or a problem of the task, not a defect of the role that raised it.
Cause = MissingModule | DeviceStandinLimit | CudaEmulationLimit | TaskFormat

C = TypeVar("C", bound=Payload)

Origin = Literal["task", "triton-compile", "build", "task-format", "kws"]


class Raised(Payload):
    """An exception raised in a step (by task code, or kws's harness with origin ``kws``).

    Attributes:
        type: the exception's qualified type (``"ValueError"``, ``"triton.compiler.errors.CompilationError"``).
        message: its message (at most 4000 characters).
        traceback: the formatted traceback (its last 12000 characters).
        phase: where it happened: ``import``, ``make_inputs``, ``transform``, ``call``,
            ``test``, ``bench``, ``harness``, ``step``.
        origin: ``triton-compile`` (Triton rejected the program), ``build`` (a C++/CUDA
            extension failed to build), ``task-format`` (see :class:`TaskFormat`), ``kws``
            (kws's own harness), else ``task``.
        where: the task-code frame, when there is one.
        causes: what kws recognised the error to be due to (empty: nothing but the role).
    """

    type: str
    message: str
    traceback: str = ""
    phase: str = ""
    origin: Origin = "task"
    where: Where | None = None
    causes: list[Cause] = []

    def cause(self, kind: builtins.type[C]) -> C | None:
        """The first cause of type ``kind`` (None when there is none)."""
        return next((c for c in self.causes if isinstance(c, kind)), None)

    def as_evidence(self) -> dict[str, Any]:
        """The error as a finding's evidence shows it (the report's shape since task format
        v1: ``type``, ``message``, ``traceback``, ``phase``, ``origin``, ``where`` and, for a
        limit, its own key: ``missing_module`` / ``device_standin_limit`` /
        ``cuda_emulation_limit`` / ``key``)."""
        d: dict[str, Any] = {}
        for c in self.causes:
            if isinstance(c, MissingModule):
                d["missing_module"] = {"name": c.name, "top": c.top, "found": c.found, "importer": c.importer}
            elif isinstance(c, DeviceStandinLimit):
                d["device_standin_limit"] = c.why
            elif isinstance(c, CudaEmulationLimit):
                d["cuda_emulation_limit"] = c.why
        d.update({"type": self.type, "message": self.message, "traceback": self.traceback, "phase": self.phase,
                  "origin": self.origin})
        if (tf := self.cause(TaskFormat)) is not None:
            d["key"] = tf.key
        d["where"] = msgspec.to_builtins(self.where) if self.where is not None else None
        return d


def kws_error(message: str, *, phase: str = "harness", type_: str = "KwsError") -> Raised:
    """An error of kws's own harness (origin ``kws``): never a verdict on task code."""
    return Raised(type=type_, message=message, phase=phase, origin="kws")


# ----------------------------------------------------------------------------- report notes


class ImportTime(Payload):
    """CPU and wall seconds one task file's import took in a step (charged to the job's
    import budget, not to the step's)."""

    cpu_s: float
    wall_s: float


class StandinCalls(Payload, tag="device_standin", tag_field="kind"):
    """The probes of kws's CPU device stand-in that task code called during the step
    (docs/backends.md, "Device stand-in"): ``target`` is the emulated device
    (:data:`workstation.protocol.devices.DEVICE_TARGETS`), ``calls`` probe -> count."""

    target: str
    calls: dict[str, int] = {}


class EmulatedLaunch(Payload):
    """One ``<<<...>>>`` launch site the CUDA emulation rewrote: source line, kernel name,
    the launch configuration's and the arguments' expressions as written."""

    line: int
    kernel: str
    config: list[str] = []
    args: list[str] = []


class EmulatedBuild(Payload):
    """One CUDA extension built (or taken from the run's cache) under kws's CPU emulation.

    Attributes:
        name: the extension's name (``load_inline(name=...)``).
        module: the Python module name it was loaded as.
        key, so: its cache key (a hash of the sources and flags) and the shared object's path.
        via: ``load_inline`` or ``load``.
        cached: taken from the run's cache (no compile in this step).
        seconds, cpu_s: g++ wall and CPU seconds (None when cached or unknown).
        launches: the launch sites rewritten.
        fibers: whether its blocks ran as fibers (barriers, warp shuffles).
    """

    name: str
    module: str = ""
    key: str = ""
    so: str = ""
    via: str = ""
    cached: bool = False
    seconds: float | None = None
    cpu_s: float | None = None
    launches: list[EmulatedLaunch] = []
    fibers: bool = False


class CudaEmulationBuilds(Payload, tag="cuda_emulation", tag_field="kind"):
    """The CUDA extensions this step built or loaded under kws's CPU emulation."""

    builds: list[EmulatedBuild]


#: what a backend layer observed in a step, for the report (a handler per kind in the parent).
Note = StandinCalls | CudaEmulationBuilds


# ----------------------------------------------------------------------------- outputs


class TensorMeta(Payload):
    """One tensor as the child saw it (its values travel as an array in the ``.npz``).

    Attributes:
        dtype: torch dtype name (``"float16"``).
        shape, stride: as torch gives them (stride in elements).
        storage_offset: in elements.
        contiguous: ``is_contiguous()``.
        device: ``"cpu"``, ``"cuda:0"``, ``"meta"``.
        data_ptr: the first element's address (0 for an empty tensor).
        requires_grad: as the tensor said.
        is_view: it is a view of another tensor (``_base`` is set).
    """

    dtype: str
    shape: list[int]
    stride: list[int]
    storage_offset: int = 0
    contiguous: bool = True
    device: str = "cpu"
    data_ptr: int = 0
    requires_grad: bool = False
    is_view: bool = False


class StepDoc(Payload):
    """One step's result document (``step-<i>.json``).

    Attributes:
        ok: False when the step's code raised (``error`` then says what).
        kind: the step's kind (``kind_of(step)``): which payload ``extra`` holds; the parent
            checks it is the kind of the step it sent.
        error: the exception (None when ``ok``).
        outputs: metadata of the role's outputs (arrays ``out<j>``).
        extra: the step kind's payload (:mod:`workstation.protocol.extras`), as the JSON
            object the harness wrote; :func:`decode_doc` turns it into its Struct.
        seconds: wall seconds of the task call(s) inside the step.
        step_seconds: wall seconds of the whole step, imports included.
        cpu_s: CPU seconds (user + system) of the job process and the children it reaped
            during the step (what a candidate's CPU budget is compared with).
        imports: task file -> its import's seconds, for files imported in this step.
        notes: what backend layers observed, for the report.
    """

    ok: bool
    kind: str
    error: Raised | None = None
    outputs: list[TensorMeta] = []
    extra: dict[str, Any] = {}
    seconds: float = 0.0
    step_seconds: float = 0.0
    cpu_s: float = 0.0
    imports: dict[str, ImportTime] = {}
    notes: list[Note] = []


def _path_of(e: msgspec.ValidationError) -> str:
    text = str(e)
    return text.rsplit(" - at ", 1)[-1] if " - at " in text else "$"


def decode_doc(data: object) -> StepDoc:
    """A step's result document from its parsed JSON (``json.loads`` of ``step-<i>.json``).

    Raises:
        ResultFormatError: a field is missing, unknown or of another type (the message
            names its path, ``$.error.limit.name``).
    """
    try:
        return msgspec.convert(data, type=StepDoc)
    except msgspec.ValidationError as e:
        raise ResultFormatError(f"the step's result does not have kws's form: {e} (at {_path_of(e)})") from None


def encodable(doc: msgspec.Struct) -> Any:
    """``doc`` as JSON-ready builtins (for ``json.dumps``, which keeps NaN and infinities
    as the tokens the parent's ``json.loads`` reads back, where msgspec would write null)."""
    return msgspec.to_builtins(doc, enc_hook=_builtin_hook)


def _builtin_hook(obj: object) -> object:
    """numpy scalars become their Python values; anything else JSON cannot hold becomes its
    repr, as the harness always wrote it."""
    item = getattr(obj, "item", None)
    if callable(item) and type(obj).__module__ == "numpy":
        return item()
    return repr(obj)


def finite_or_none(x: float | None) -> float | None:
    """``x`` when it is a finite float, else None (NaN and infinities in a payload field
    that must be a number or missing)."""
    return x if x is not None and math.isfinite(x) else None
