"""Child-side core: load a task's entry points, make inputs, run a role, encode results.

Runs only inside job children. The ``call`` step (:class:`~workstation.protocol.steps.CallStep`):
make the inputs of ``case``/``seed``, apply ``transforms`` in order, call ``role``
``repeat`` times on the same inputs (the last outputs are kept) inside ``monitors``;
``send_inputs`` also sends the inputs (after the call) as arrays ``in<j>``.

``extra`` of a call step is a :class:`~workstation.protocol.extras.calls.CallExtra`:
``inputs`` (per input: kind, dtype, shape, stride, sha256 of its bytes before and after the
call), ``device_name``, ``monitors`` (what each monitor observed, a
:class:`~workstation.protocol.extras.monitors.MonitorReports`) and ``calls`` (wall seconds
per call).

Task-format problems only the child can see are raised as :class:`TaskFormatError`
(``error_info`` origin ``"task-format"``, with the task.toml ``key``), never charged to a
role: ``out_args`` / ``inout_args`` naming an input ``make_inputs`` does not return, and a
case whose inputs need more memory than the **input budget**
(:func:`workstation.harness.inputbudget.input_budget`).
Before calling ``make_inputs`` for real on a case whose integer parameters suggest large
inputs (their product, or the largest squared, times 8 bytes reaches a quarter of the
budget), the child measures
what the inputs need without allocating them: ``make_inputs`` under
``torch._subclasses.fake_tensor.FakeTensorMode`` (tensor metadata only; the first use costs
about 3 s of set-up, so small cases skip it); the bytes of the distinct storages are
summed. A case over the budget is refused naming it; an allocation that fails anyway
(``torch.OutOfMemoryError``, "can't allocate memory") is reported the same way.

Under the Triton interpreter, ``@triton.autotune`` cannot time configs (it needs a GPU
driver): :func:`_patch_autotuner_for_interpreter` replaces its benchmarker with one that
launches each config 3 times (the estimate, one warm-up and one repetition of
``triton.testing.do_bench``) and ranks configs in declaration order, so tuning runs,
``reset_to_zero`` and ``restore_value`` have their real side effects.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from workstation.harness import (
    CALL_HOOKS,
    MONITORS,
    TRANSFORMS,
    StepOutput,
    excchain,
    import_phase,
    step,
    transform,
)
from workstation.harness.inputbudget import (
    case_text,
    gib,
    input_budget,
    looks_large,
    oom_bytes,
    storage_bytes,
)
from workstation.protocol.extras.calls import AuthorTestExtra, CallExtra, InputDesc
from workstation.protocol.extras.monitors import REPORTS, MonitorReports
from workstation.protocol.results import (
    Cause,
    CudaEmulationLimit,
    DeviceStandinLimit,
    MissingModule,
    Origin,
    Raised,
    TaskFormat,
    TensorMeta,
    Where,
)
from workstation.protocol.steps import (
    AuthorTestStep,
    CallStep,
    Case,
    Cast,
    Job,
    Monitor,
    Transform,
    Upcast,
    kind_of,
)

INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
AUTOTUNE_LAUNCHES_PER_CONFIG = 3


def _tag(e: BaseException, phase: str) -> BaseException:
    if not hasattr(e, "_kws_phase"):
        try:
            e._kws_phase = phase  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
    return e


class InputsProblem(Exception):
    """``make_inputs`` returned something the contract does not allow (None, a dict, a
    generator, a value that is not a tuple of arguments, tensors on ``meta`` or on another
    device than the one asked, no tensor of the case's floating dtype). Raised tagged with
    phase ``"make_inputs"``: the parent blames inputs.py, never a role
    (:class:`workstation.engine.check.TaskProblem` on a declared case)."""


class TaskFormatError(Exception):
    """A problem of the task's format that only a job child can see (``key``: the
    task.toml key, e.g. ``entry.out_args`` or ``cases``); reported as a task problem,
    never as a failure of the candidate or the reference."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


def error_info(e: BaseException, phase: str) -> Raised:
    """What task code raised, typed (:class:`~workstation.protocol.results.Raised`).

    ``origin`` is ``"triton-compile"`` when Triton rejected the program (a
    ``CompilationError``, or an error raised from ``triton/language`` or
    ``triton/compiler`` frames, which the interpreter wraps in ``InterpreterError``),
    ``"build"`` for a failed C++/CUDA extension build, ``"task-format"`` for a
    :class:`TaskFormatError`, else ``"task"``. ``causes`` holds what kws recognised the error
    to be due to: a module that could not be found (:class:`MissingModule`), a limit of the
    CPU device stand-in (a CUDA tensor, stream or driver call it cannot give;
    :func:`workstation.harness.fidelity.limit_of`), a limit of kws's CPU emulation of CUDA
    (a construct it does not emulate: :func:`workstation.harness.cuda_emu.limit_of`).
    """
    if isinstance(e, TaskFormatError):
        return Raised(type="TaskFormatError", message=e.problem, phase=phase, origin="task-format",
                      causes=[TaskFormat(key=e.key)])
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    origin: Origin = "task"
    for ex in excchain.chain(e):
        name = type(ex).__name__
        mod = type(ex).__module__
        if name in ("CompilationError", "CompileTimeAssertionFailure", "PTXASError") and mod.startswith("triton"):
            origin = "triton-compile"
            break
        frames = traceback.extract_tb(ex.__traceback__)
        if frames:
            last = frames[-1].filename.replace("\\", "/")
            if "/triton/language/" in last or "/triton/compiler/" in last:
                origin = "triton-compile"
                break
        if "Error building extension" in str(ex) or name == "CalledProcessError" and "ninja" in str(ex):
            origin = "build"
            break
    where = None
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if "/site-packages/" not in fr.filename and "/workstation/" not in fr.filename:
            where = Where(file=os.path.basename(fr.filename), line=fr.lineno, function=fr.name)
            break
    if isinstance(e, SystemExit):
        message = f"SystemExit({e.code!r}): the task code called sys.exit"
    else:
        message = str(e)[:4000]
    from workstation.harness.cuda_emu import limit_of as emulation_limit_of
    from workstation.harness.fidelity import limit_of

    causes: list[Cause] = []
    if (missing := _missing_module(e)) is not None:
        causes.append(missing)
    if standin_limit := limit_of(e):
        causes.append(DeviceStandinLimit(why=standin_limit))
    if emu_limit := emulation_limit_of(e):
        causes.append(CudaEmulationLimit(why=emu_limit))
    return Raised(type=f"{type(e).__module__}.{type(e).__qualname__}".removeprefix("builtins."), message=message,
                  traceback=tb[-12000:], phase=phase, origin=origin, where=where, causes=causes)


def _missing_module(e: BaseException) -> MissingModule | None:
    """For a ``ModuleNotFoundError`` (``e`` or in its chain): the module it could not find,
    its top-level package, whether that package is importable here at all (``found``:
    ``importlib.util.find_spec`` over this ``sys.path``, which holds the task folder and the
    queue's helpers first: False means a library not installed here, not a typo of a
    submodule of one that is), and the task file whose line imported it (the last frame
    outside site-packages, kws and the import machinery; "" when none). None for any other
    exception."""
    cur = next((x for x in excchain.chain(e) if isinstance(x, ModuleNotFoundError) and x.name), None)
    if not isinstance(cur, ModuleNotFoundError) or not cur.name:
        return None
    top = cur.name.split(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    importer = ""
    for fr in reversed(traceback.extract_tb(cur.__traceback__)):
        f = fr.filename.replace("\\", "/")
        if f.startswith("<") or "/site-packages/" in f or "/workstation/" in f:
            continue
        importer = os.path.basename(f)
        break
    return MissingModule(name=cur.name, top=top, found=found, importer=importer)


def _all_finite(t: torch.Tensor) -> bool | None:
    """Whether every element of ``t`` is finite (True for integer and bool tensors; None
    when torch cannot tell for its dtype)."""
    if not (t.is_floating_point() or t.is_complex()):
        return True
    try:
        return bool(torch.isfinite(t.detach()).all())
    except (RuntimeError, NotImplementedError, TypeError):
        try:
            return bool(torch.isfinite(t.detach().to(torch.float32)).all())
        except (RuntimeError, NotImplementedError, TypeError):
            return None


def tensor_digest(t: torch.Tensor) -> str:
    """sha256 of a tensor's elements (in logical order), dtype and shape."""
    c = t.detach()
    if c.device.type != "cpu":
        c = c.cpu()
    c = c.contiguous()
    h = hashlib.sha256(f"{c.dtype}{tuple(c.shape)}".encode())
    h.update(c.view(torch.uint8).numpy().tobytes() if c.numel() else b"")
    return h.hexdigest()


def encode_tensor(t: Any) -> tuple[TensorMeta, np.ndarray]:
    """(metadata, array) for one output: float dtypes as float64 (exact up to fp32),
    integers as int64, bool as bool, complex as complex128; the array has the tensor's
    shape, ``()`` for a 0-d tensor.

    Raises:
        TypeError: ``t`` is not a tensor.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    d = t.detach()
    meta = TensorMeta(dtype=str(d.dtype).removeprefix("torch."), shape=list(d.shape), stride=list(d.stride()),
                      storage_offset=int(d.storage_offset()), contiguous=bool(d.is_contiguous()),
                      device=str(d.device), data_ptr=int(d.data_ptr()) if d.numel() else 0,
                      requires_grad=bool(t.requires_grad), is_view=d._base is not None)
    c = d.cpu() if d.device.type != "cpu" else d
    if c.dtype.is_complex:
        arr = c.to(torch.complex128).numpy()
    elif c.dtype.is_floating_point:
        arr = c.to(torch.float32).to(torch.float64).numpy() if c.element_size() < 2 else c.to(torch.float64).numpy()
    elif c.dtype == torch.bool:
        arr = c.numpy()
    else:
        arr = c.to(torch.int64).numpy()
    # np.require keeps a 0-d array 0-d (np.ascontiguousarray makes it shape (1,)): a
    # scalar output (a mean- or sum-reduced loss) round-trips as shape ().
    return meta, np.require(arr, requirements="C")


def _patch_autotuner_for_interpreter() -> None:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    counter: dict[str, int] = {"n": 0}

    def interp_bench(kernel_call: Any, quantiles: Any = None, **_: Any) -> list[float]:
        for _launch in range(AUTOTUNE_LAUNCHES_PER_CONFIG):
            kernel_call()
        counter["n"] += 1
        t = float(counter["n"])
        return [t, t, t]

    Autotuner.do_bench = property(lambda self: interp_bench)


_PREPARED: dict[str, Any] = {}


def prepare_interpreter() -> dict[str, Any]:
    """kws's own patches of a process that runs Triton under ``TRITON_INTERPRET=1``: the
    autotuner's benchmark stand-in, the interpreter fidelity layer and the device stand-in
    (:mod:`workstation.harness.fidelity`). Installed once per process; the fork server
    installs them before it snapshots the watched modules, so its check of each job from
    outside sees them as the baseline and not as tampering by task code. Returns the
    fidelity layer's report (``{"installed", "errors", "device_stand_in"}``); without the
    interpreter ``{"installed": False, "errors": []}``."""
    if not INTERPRETER:
        return {"installed": False, "errors": []}
    if not _PREPARED:
        _patch_autotuner_for_interpreter()
        from workstation.harness import fidelity

        _PREPARED.update(fidelity.install())
        _PREPARED["device_stand_in"] = fidelity.device_stand_in()
    return dict(_PREPARED)


class JobContext:
    """Per-job state in the child: the task copy, the device, loaded entry modules."""

    def __init__(self, job: Job):
        self.job = job
        self.task_dir = Path(job.task_dir)
        self.device = torch.device(job.device)
        self.entry: dict[str, str] = job.entry
        self.out_args: list[int] = list(job.out_args)
        self.inout_args: list[int] = list(job.inout_args)
        self._modules: dict[str, Any] = {}
        #: the task files imported during the current step: name -> {"cpu_s", "wall_s"}
        #: (:func:`workstation.harness.import_phase`; ``run_job`` resets it per step).
        self.imports: dict[str, dict[str, float]] = {}
        #: the float64 oracle's finding that the reference is homogeneous of degree 1 (set by
        #: its scale probe, :mod:`workstation.harness.numerics`; None before it ran).
        self.homogeneous: bool | None = None
        if str(self.task_dir) not in sys.path:
            sys.path.insert(0, str(self.task_dir))
        for i, h in enumerate(job.helper_dirs):  # the queue's shared helpers, after the task
            if h not in sys.path:
                sys.path.insert(1 + i, h)
        self.fidelity = prepare_interpreter()

    @property
    def device_name(self) -> str:
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return "cpu"

    def module(self, file: str) -> Any:
        """Import a task file (by path, once per job) under a private module name, as an
        import phase (:func:`workstation.harness.import_phase`: its CPU goes to the job's
        import budget, and its CPU and wall seconds into the step's ``imports``)."""
        if file not in self._modules:
            with import_phase(file, self.imports):
                self._import(file)
        return self._modules[file]

    def _import(self, file: str) -> None:
        if file not in self._modules:
            path = self.task_dir / file
            name = Path(file).stem
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {file}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod  # `from candidate import x` in a sibling file finds this one
            try:
                spec.loader.exec_module(mod)
            except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
                sys.modules.pop(name, None)
                raise _tag(e, "import") from None
            self._modules[file] = mod

    def callable(self, role: str) -> Any:
        """The entry callable of ``role`` (``"candidate"``, ``"inputs"``, ...)."""
        ep = self.entry.get(role)
        if not ep:
            raise KeyError(f"the task has no {role} entry")
        file, _, name = ep.rpartition(":")
        return getattr(self.module(file), name)

    def timed_call(self, fn: Any, inputs: tuple) -> tuple[Any, float]:
        """``fn(*inputs)`` followed by a device synchronize; returns (result, wall seconds).
        An exception escapes tagged with phase ``"call"``."""
        t0 = time.perf_counter()
        try:
            with call_context(inputs):
                result = fn(*inputs)
                self.sync()
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            raise _tag(e, "call") from None
        return result, time.perf_counter() - t0

    def make_inputs(self, case: Case, seed: int) -> tuple:
        """``make_inputs(case, device, seed)`` as a tuple.

        Raises:
            TaskFormatError: the case's inputs need more than :func:`input_budget` (measured
                before allocating where the case looks large, else from the failed
                allocation), or ``out_args`` / ``inout_args`` name an input it does not
                return.
            InputsProblem: what it returned breaks the contract (:meth:`_validated_inputs`).
            BaseException: whatever ``make_inputs`` raised (``SystemExit`` included), tagged
                with phase ``"make_inputs"``.
        """
        fn = self._inputs_callable()
        budget = input_budget(self.device)
        if looks_large(dict(case), budget):
            need = self._dry_run_bytes(fn, dict(case), seed)
            if need is not None and need > budget:
                raise _tag(TaskFormatError("cases", f"case {case_text(dict(case))} needs {gib(need)} of inputs, "
                                           f"over the input budget of {gib(budget)} on {self.device_name} "
                                           "(KWS_INPUT_BUDGET sets it)"), "make_inputs")
        try:
            inputs = fn(dict(case), self.device, seed)
        except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
            asked = oom_bytes(e)
            if asked is not None:
                raise _tag(TaskFormatError("cases", f"case {case_text(dict(case))}: make_inputs ran out of memory on "
                                           f"{self.device_name}" + (f" asking for {gib(asked)}" if asked else "")
                                           + f" (input budget {gib(budget)})"), "make_inputs") from None
            raise _tag(e, "make_inputs") from None
        inputs = self._validated_inputs(inputs, case)
        for key, idx in (("entry.out_args", self.out_args), ("entry.inout_args", self.inout_args)):
            beyond = [i for i in idx if i >= len(inputs)]
            if beyond:
                raise _tag(TaskFormatError(key, f"index {beyond[0]} is beyond the {len(inputs)} input(s) make_inputs "
                                           f"returns for case {case_text(dict(case))} (indices start at 0)"),
                           "make_inputs")
            if any(not isinstance(inputs[i], torch.Tensor) for i in idx):
                i = next(i for i in idx if not isinstance(inputs[i], torch.Tensor))
                raise _tag(TaskFormatError(key, f"input {i} is a {type(inputs[i]).__name__}, not a tensor the "
                                           "callables could write"), "make_inputs")
        return inputs

    def _inputs_callable(self) -> Any:
        """The ``make_inputs`` callable; importing its file is part of ``make_inputs``: an
        exception there (a syntax error, an import of a name that does not exist) escapes as
        an :class:`InputsProblem` naming the file and the line (the original exception as its
        cause, so a library that is not installed is still recognised), tagged
        ``"make_inputs"``: the parent blames inputs.py, never the role whose step imported it.

        Raises:
            InputsProblem: the inputs file could not be imported, or has no such callable.
        """
        file = str(self.entry.get("inputs") or "").rpartition(":")[0]
        try:
            return self.callable("inputs")
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) else None
            if line is None:
                for fr in reversed(traceback.extract_tb(e.__traceback__)):
                    if os.path.basename(fr.filename) == os.path.basename(file):
                        line = fr.lineno
                        break
            first = (str(e).strip().splitlines() or [""])[0][:300]
            where = f" at line {line}" if line else ""
            raise _tag(InputsProblem(f"importing {file} failed{where}: {type(e).__name__}: {first}"),
                       "make_inputs") from e

    def _validated_inputs(self, inputs: Any, case: Case) -> tuple:
        """``make_inputs``' return value as the tuple of positional arguments (a single tensor
        is one argument; a list is accepted as a tuple).

        Raises:
            InputsProblem: (tagged ``make_inputs``) None, a dict, a generator or other
                iterator, a value that is neither a tensor nor a tuple/list; a tensor on
                ``meta`` or on another device than :attr:`device`; a case whose ``dtype`` is
                floating and no tensor argument of that dtype (int64 inputs for a float32
                case).
        """
        import types
        from collections.abc import Iterator, Mapping

        def bad(problem: str) -> BaseException:
            return _tag(InputsProblem(f"make_inputs {problem} for case {case_text(dict(case))}"), "make_inputs")

        if inputs is None:
            raise bad("returned None; expected a tuple of the callables' positional arguments")
        if isinstance(inputs, torch.Tensor):
            inputs = (inputs,)
        elif isinstance(inputs, Mapping):
            raise bad(f"returned a {type(inputs).__name__} (keys {list(inputs)[:6]}); expected a tuple of positional "
                      "arguments, not keyword arguments")
        elif isinstance(inputs, types.GeneratorType | Iterator):
            raise bad(f"returned a {type(inputs).__name__}; expected a tuple (a generator is consumed once and would "
                      "hand each role different inputs)")
        elif not isinstance(inputs, tuple | list):
            raise bad(f"returned a {type(inputs).__name__}; expected a tuple of positional arguments (or one tensor)")
        inputs = tuple(inputs)
        tensors = [(i, x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        for i, x in tensors:
            if x.device.type == "meta" or type(x).__name__ == "FakeTensor":
                raise bad(f"built input {i} on 'meta' (no data): inputs must hold values on the device asked "
                          f"({self.device})")
            if x.device.type != self.device.type or (self.device.index is not None and x.device.index is not None
                                                     and x.device.index != self.device.index):
                raise bad(f"put input {i} on {x.device}, not on the device asked ({self.device}): use the `device` "
                          "argument")
        name = case.get("dtype") if isinstance(case, dict) else None
        want = getattr(torch, name, None) if isinstance(name, str) else None
        if isinstance(want, torch.dtype) and want.is_floating_point and not any(x.dtype == want for _, x in tensors):
            have = ", ".join(f"{i}: {str(x.dtype).removeprefix('torch.')}" for i, x in tensors) or "no tensor"
            raise bad(f"returned no tensor of the case's dtype {name} (inputs {have}): case[\"dtype\"] is the "
                      "primary input dtype")
        return inputs

    def _dry_run_bytes(self, fn: Any, case: dict[str, Any], seed: int) -> int | None:
        """Bytes ``make_inputs`` would allocate for ``case``, measured under FakeTensorMode
        (nothing allocated); None when the dry run itself fails (the real call decides)."""
        try:
            from torch._subclasses.fake_tensor import FakeTensorMode

            with FakeTensorMode(allow_non_fake_inputs=True):
                fake = fn(case, self.device, seed)
            return storage_bytes(fake)
        except Exception:  # noqa: BLE001  (a make_inputs the fake mode cannot follow: measured for real instead)
            return None

    def outputs_of(self, result: Any, inputs: tuple) -> list[torch.Tensor]:
        """The role's outputs: the written inputs (out_args + inout_args, in index order)
        when the task declares them, else the return value as a list of tensors.

        Raises:
            TypeError: the return value is not a tensor or a tuple/list of tensors.
        """
        written = sorted(set(self.out_args) | set(self.inout_args))
        if written:
            return [inputs[i] for i in written]
        if isinstance(result, torch.Tensor):
            return [result]
        if isinstance(result, tuple | list) and result and all(isinstance(r, torch.Tensor) for r in result):
            return list(result)
        raise _tag(TypeError(f"returned {type(result).__name__}, expected a tensor or a tuple of tensors"), "call")

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def call_context(inputs: tuple) -> contextlib.ExitStack:
    """The context of every registered call hook (:data:`workstation.harness.CALL_HOOKS`)
    for a role call on ``inputs``, entered around the call."""
    stack = contextlib.ExitStack()
    for hook in CALL_HOOKS:
        stack.enter_context(hook(inputs))
    return stack


def describe_inputs(inputs: tuple) -> list[InputDesc]:
    """Metadata of each positional input: for a tensor its dtype, shape, layout, a content
    digest and ``finite`` (every element finite: :func:`_all_finite`)."""
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            out.append(InputDesc(index=i, kind="tensor", dtype=str(x.dtype).removeprefix("torch."), shape=list(x.shape),
                                 stride=list(x.stride()), storage_offset=int(x.storage_offset()),
                                 contiguous=bool(x.is_contiguous()), data_ptr=int(x.data_ptr()) if x.numel() else 0,
                                 sha256=tensor_digest(x), finite=_all_finite(x)))
        else:
            out.append(InputDesc(index=i, kind=type(x).__name__, value=repr(x)[:200]))
    return out


def prepared_inputs(ctx: JobContext, case: dict[str, Any], seed: int, transforms: list[Transform] | tuple = ()) -> tuple:
    """``make_inputs(case, device, seed)`` after ``transforms``; an exception escapes tagged
    with phase ``"make_inputs"`` or ``"transform"`` (a transform failing is kws's problem,
    never charged to the candidate)."""
    inputs = ctx.make_inputs(case, seed)
    try:
        return apply_transforms(ctx, inputs, list(transforms))
    except BaseException as e:  # noqa: BLE001  (re-raised, tagged with its phase)
        raise _tag(e, "transform") from None


def apply_transforms(ctx: JobContext, inputs: tuple, specs: list[Transform]) -> tuple:
    """``inputs`` after every transform of ``specs``, in order.

    Raises:
        KeyError: a transform type has no registered handler.
    """
    for spec in specs:
        fn = TRANSFORMS.get(type(spec))
        if fn is None:
            raise KeyError(f"unknown transform {kind_of(spec)!r}")
        inputs = tuple(fn(ctx, inputs, spec))
    return inputs


@transform(Upcast)
def _upcast(ctx: JobContext, inputs: tuple, spec: Upcast) -> tuple:
    """Cast every floating tensor input to ``spec.dtype`` (the float64 oracle)."""
    dt = getattr(torch, spec.dtype)
    return tuple(x.to(dt) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point else x for x in inputs)


@transform(Cast)
def _cast(ctx: JobContext, inputs: tuple, spec: Cast) -> tuple:
    """Cast floating tensor inputs of dtype ``spec.from_dtype`` (None: any) to ``spec.dtype``."""
    dt = getattr(torch, spec.dtype)
    src = spec.from_dtype
    return tuple(
        x.to(dt) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point
        and (src is None or str(x.dtype).removeprefix("torch.") == src) else x
        for x in inputs
    )


def run_role(ctx: JobContext, role: str, inputs: tuple, monitors: Sequence[Monitor] = (), repeat: int = 1,
             send_inputs: bool = False) -> StepOutput:
    """Call ``role`` on ``inputs`` ``repeat`` times inside ``monitors`` (module doc); the
    result's ``extra`` is a :class:`~workstation.protocol.extras.calls.CallExtra`.

    Raises:
        KeyError: a monitor type has no registered handler (or no report Struct).
    """
    fn = ctx.callable(role)
    before = describe_inputs(inputs)
    reports = MonitorReports()
    calls: list[float] = []
    result = None
    with contextlib.ExitStack() as stack:
        for m in monitors:
            factory = MONITORS.get(type(m))
            name = kind_of(m)
            if factory is None or name not in REPORTS:
                raise KeyError(f"unknown monitor {name!r}")
            report = REPORTS[name]()
            setattr(reports, name, report)
            stack.enter_context(factory(ctx, m, report))
        for _ in range(repeat):
            result, seconds = ctx.timed_call(fn, inputs)
            calls.append(seconds)
    outputs = ctx.outputs_of(result, inputs)
    after = describe_inputs(inputs)
    for b, a in zip(before, after, strict=True):
        if b.kind == "tensor":
            b.sha256_after = a.sha256
    extra = CallExtra(inputs=before, monitors=reports, calls=calls, device_name=ctx.device_name)
    res = StepOutput(ok=True, outputs=outputs, extra=extra, seconds=sum(calls))
    if send_inputs:
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                meta, arr = encode_tensor(x)
                res.arrays[f"in{j}"] = arr
                before[j].sent = True
    return res


@step(CallStep)
def call_step(ctx: JobContext, spec: CallStep) -> StepOutput:
    """Make inputs for ``spec.case``/``spec.seed``, transform them, call the role."""
    try:
        inputs = prepared_inputs(ctx, spec.case, spec.seed, spec.transforms)
        return run_role(ctx, spec.role, inputs, spec.monitors, spec.repeat, spec.send_inputs)
    except BaseException as e:  # noqa: BLE001  (what the role, make_inputs or a transform raised is the step's error)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")),
                          extra=CallExtra(device_name=ctx.device_name))


@step(AuthorTestStep)
def author_test_step(ctx: JobContext, spec: AuthorTestStep) -> StepOutput:
    """Run the author's ``check(case, device, seed)``; ``extra`` (an
    :class:`~workstation.protocol.extras.calls.AuthorTestExtra`) says whether it returned
    without raising (``passed``; an AssertionError is a failed check, not an error, with its
    message in ``assertion``)."""
    fn = ctx.callable("test")
    t0 = time.perf_counter()
    try:
        fn(dict(spec.case), ctx.device, spec.seed)
        ctx.sync()
    except AssertionError as e:
        return StepOutput(ok=True, extra=AuthorTestExtra(passed=False, assertion=str(e)[:4000]),
                          seconds=time.perf_counter() - t0)
    except BaseException as e:  # noqa: BLE001  (what the author's test raised is the step's error)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "test")), extra=AuthorTestExtra())
    return StepOutput(ok=True, extra=AuthorTestExtra(passed=True), seconds=time.perf_counter() - t0)
