"""The ``triton_aot`` step: the candidate's Triton kernels compiled ahead of time for an
NVIDIA target, and what their IR says about precision.

Under ``TRITON_INTERPRET=1`` (the CPU), ``@triton.jit`` makes interpreter functions that
cannot be compiled, and the interpreter's numerics are not a GPU's (its ``tl.dot`` is a
numpy matmul in true fp32, its reductions run in numpy's order). So the step works in two
processes:

1. in the job child (interpreter): the candidate runs once per case under the
   ``triton_launch_records`` monitor (:mod:`workstation.harness.aot_capture`), which
   records each distinct launch: kernel file, qualified name, signature, constexprs and
   launch options;
2. a second child, ``python -m workstation.harness.aot_compile`` started without
   ``TRITON_INTERPRET``, compiles each recorded launch for the targets (default sm_90; no
   GPU needed) and analyses its TTIR, TTGIR and PTX (:func:`workstation.harness.ir.analyze`).
   It is started at the beginning of the step, so its imports overlap the interpreter run.

On a GPU the kernels are compiled for real by the launch itself: the monitor keeps the IR
of the ``CompiledKernel`` each launch returned and the step analyses it in place (launches
the JIT did not hand back are compiled in the AOT child for the device's own target).
Under the interpreter the step also reports :func:`workstation.harness.selftest.interpreter_selftest`.

Results are cached under ``$TRITON_CACHE_DIR/../kws-aot/`` keyed by the task's Python
sources, the cases, the seed, the targets, the Triton version and :data:`ANALYSIS_VERSION`,
so a task that has not changed is analysed once.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import msgspec

from workstation.harness import StepOutput, step
from workstation.harness.aot_capture import launch_key
from workstation.harness.aot_compile import run_child, task_relative
from workstation.harness.core import INTERPRETER, error_info, run_role
from workstation.harness.ir import analyze
from workstation.harness.selftest import selftest_or_error
from workstation.protocol.extras import extra_as
from workstation.protocol.extras.calls import CallExtra
from workstation.protocol.extras.monitors import TritonLaunchRecordsReport
from workstation.protocol.extras.triton import AotKernel, AotLaunch, TritonAotExtra
from workstation.protocol.results import Raised, encodable
from workstation.protocol.steps import Case, TritonAotStep, TritonLaunchRecords

#: 3: the payload is :class:`~workstation.protocol.extras.triton.TritonAotExtra` (an entry
#: of an older version would not decode: a miss either way).
ANALYSIS_VERSION = 3
#: wall seconds the job child waits for the AOT compile child: only a guard against a stuck
#: child. What bounds the compile is the step's CPU budget (the parent's ``aot_budget``
#: setting, KWS_AOT_BUDGET, counted over every process of the job, this child included) and
#: the job's wall-clock backstop (10 x that + 30 s); a shorter wall limit here would call a
#: compile slowed by a loaded machine a failure.
AOT_TIMEOUT_S = 3600.0
DEFAULT_TARGETS = (("cuda", 90, 32),)


def _cache_dir() -> Path | None:
    base = os.environ.get("TRITON_CACHE_DIR")
    return Path(base).parent / "kws-aot" if base else None


def _cache_key(task_dir: Path, cases: list[Case], seed: int, targets: list[list[Any]], interpreter: bool) -> str:
    import triton

    h = hashlib.sha256()
    h.update(json.dumps({"v": ANALYSIS_VERSION, "triton": triton.__version__, "cases": cases,
                         "seed": seed, "targets": targets,
                         "interp": interpreter, "fusion": os.environ.get("TRITON_DEFAULT_FP_FUSION", "")},
                        sort_keys=True).encode())
    # a library candidate's kernels live in installed packages: any install or upgrade
    # (and the fidelity layer's version) invalidates the analysis
    import importlib.metadata as md

    from workstation.harness.fidelity import FIDELITY_VERSION

    dists = sorted(f"{d.metadata['Name'] or ''}=={d.version}" for d in md.distributions())
    h.update(json.dumps({"fidelity": FIDELITY_VERSION, "dists": dists}).encode())
    for p in sorted(task_dir.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(task_dir)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:32]


@step(TritonAotStep)
def aot_step(ctx: Any, spec: TritonAotStep) -> StepOutput:
    """Capture the candidate's Triton launches on each case of ``spec.cases`` (seed
    ``spec.seed``) and read the IR of each distinct kernel launch compiled for
    ``spec.targets`` (default sm_90) (module doc). One AOT child serves all cases.

    ``extra``: :class:`~workstation.protocol.extras.triton.TritonAotExtra`: ``launches``
    (file relative to the task, qualname, signature, constexprs, options, and ``cases``: the
    indices of the cases that launched it), ``kernels`` (per launch and target:
    ``qualname``, ``file``, ``target``, ``launch`` (index into ``launches``) and
    :func:`analyze`'s ``analysis`` or an ``error``), ``mode`` (``"aot"``: compiled in a
    second process without the interpreter; ``"jit"``: read from the kernels a GPU launch
    compiled), ``cached``, ``seconds``, ``case_errors`` (cases the candidate raised on).
    """
    t0 = time.perf_counter()
    targets = [list(t) for t in spec.targets or DEFAULT_TARGETS]
    cases = list(spec.cases)
    task_dir = Path(ctx.task_dir)
    key = _cache_key(task_dir, cases, spec.seed, targets, INTERPRETER)
    cdir = _cache_dir()
    cfile = cdir / f"{key}.json" if cdir else None
    hit = _cached(cfile)
    if hit is not None:
        hit.cached, hit.seconds = True, time.perf_counter() - t0
        return StepOutput(ok=True, extra=hit)
    proc = _aot_child(ctx, task_dir) if INTERPRETER else None
    recs, case_errors, compiled, seconds = _capture(ctx, cases, spec.seed)
    mode: Literal["aot", "jit"] = "aot" if INTERPRETER else "jit"
    if proc is not None:
        found = _compile_in_child(proc, recs, task_dir, targets)
        if isinstance(found, Raised):
            return StepOutput(ok=False, error=found, extra=TritonAotExtra(mode=mode))
    else:
        found = _read_jit(ctx, task_dir, recs, compiled)
    for rec in recs:
        rec["file"] = task_relative(rec["file"], task_dir)
    data = TritonAotExtra(launches=msgspec.convert(recs, type=list[AotLaunch]),
                          kernels=msgspec.convert(found, type=list[AotKernel]), mode=mode,
                          targets=[(b, a, w) for b, a, w in spec.targets or DEFAULT_TARGETS], case_errors=case_errors)
    if INTERPRETER:
        data.interpreter_selftest = selftest_or_error()
    if cfile is not None and not case_errors and all(k.error is None for k in data.kernels):
        _store(cfile, data)
    data.cached, data.seconds = False, time.perf_counter() - t0
    return StepOutput(ok=True, extra=data, seconds=seconds)


def _cached(cfile: Path | None) -> TritonAotExtra | None:
    """The cached analysis in ``cfile``, or None (no entry, or one that does not decode:
    another kws version wrote it)."""
    if cfile is None or not cfile.is_file():
        return None
    try:
        return msgspec.convert(json.loads(cfile.read_text()), type=TritonAotExtra)
    except (OSError, ValueError):
        return None


def _store(cfile: Path, data: TritonAotExtra) -> None:
    """Write ``data`` to ``cfile`` atomically (a cache that cannot be written is no error)."""
    try:
        cfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = cfile.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(encodable(data)))
        os.replace(tmp, cfile)
    except OSError:
        pass


def _aot_child(ctx: Any, task_dir: Path) -> subprocess.Popen[str]:
    """The AOT compile child (no interpreter), started early so its imports overlap the
    capture; it preloads the candidate's file."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cand = str(task_dir / ctx.entry["candidate"].rpartition(":")[0]) if ctx.entry.get("candidate") else ""
    preload = ["--preload", cand] if cand else []
    return subprocess.Popen([sys.executable, "-m", "workstation.harness.aot_compile", *preload],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=str(task_dir), text=True)


def _capture(ctx: Any, cases: list[Case], seed: int) -> tuple[list[dict[str, Any]], dict[str, Raised],
                                                                dict[str, dict[str, str]], float]:
    """The candidate's distinct Triton launches over ``cases`` (each with the indices of the
    cases that launched it), the errors of the cases it raised on (by case index), the IR
    a GPU's JIT compiled (by launch key), and the candidate's call seconds."""
    launches: dict[str, dict[str, Any]] = {}
    case_errors: dict[str, Raised] = {}
    compiled: dict[str, dict[str, str]] = {}
    seconds = 0.0
    for ci, case in enumerate(cases):
        try:
            inputs = ctx.make_inputs(case, seed)
            res = run_role(ctx, "candidate", inputs, [TritonLaunchRecords()])
        except BaseException as e:  # noqa: BLE001  (the case's error is reported, the other cases go on)
            case_errors[str(ci)] = error_info(e, getattr(e, "_kws_phase", "call"))
            continue
        seconds += res.seconds
        compiled.update(getattr(ctx, "_kws_compiled", {}))
        for rec in msgspec.to_builtins(extra_as(res.extra, CallExtra).monitors.of(TritonLaunchRecordsReport).launches):
            launches.setdefault(launch_key(rec), dict(rec, cases=[]))["cases"].append(ci)
    return list(launches.values()), case_errors, compiled, seconds


def _compile_in_child(proc: subprocess.Popen[str], recs: list[dict[str, Any]], task_dir: Path,
                      targets: list[list[Any]]) -> list[dict[str, Any]] | Raised:
    """The AOT child's kernels for ``recs`` (its error, as kws's, when it did not answer)."""
    if not recs:
        proc.kill()
        proc.communicate()
        return []
    req = {"task_dir": str(task_dir), "launches": recs, "targets": targets}
    try:
        out, err = proc.communicate(json.dumps(req), timeout=AOT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Raised(type="TimeoutError", message=f"the AOT compile child did not finish in {AOT_TIMEOUT_S:g} s",
                      traceback=err[-4000:], phase="aot", origin="kws")
    try:
        found: list[dict[str, Any]] = json.loads(out)["kernels"]
        return found
    except (ValueError, KeyError, TypeError):
        return Raised(type="AotError", message=f"the AOT compile child exited with {proc.returncode} without a result",
                      traceback=err[-4000:], phase="aot", origin="kws")


def _read_jit(ctx: Any, task_dir: Path, recs: list[dict[str, Any]],
              compiled: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """On a GPU: the IR of each launch from the kernels the JIT compiled; launches whose
    kernel it did not hand back are compiled for the device's own target."""
    found: list[dict[str, Any]] = []
    missing = []
    for li, rec in enumerate(recs):
        asm = compiled.get(launch_key(rec))
        entry: dict[str, Any] = {"launch": li, "target": f"device ({ctx.device_name})",
                                 "qualname": rec["qualname"], "file": task_relative(rec["file"], task_dir)}
        if asm:
            entry["analysis"] = analyze(asm, str(task_dir))
            found.append(entry)
        else:
            missing.append((li, rec))
    if missing:
        found += _compile_for_device(ctx, task_dir, missing)
    return found


def _compile_for_device(ctx: Any, task_dir: Path, missing: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """On a GPU, launches whose compiled kernel the JIT did not hand back: compiled in the
    AOT child for the device's own target (``torch.cuda.get_device_capability``)."""
    import torch

    major, minor = torch.cuda.get_device_capability(ctx.device)
    target = ["cuda", major * 10 + minor, 32]
    req = {"task_dir": str(task_dir), "launches": [r for _, r in missing], "targets": [target]}
    try:
        got = run_child(task_dir, req, AOT_TIMEOUT_S)
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as e:
        return [{"launch": li, "target": f"cuda sm_{target[1]}", "qualname": r["qualname"],
                 "file": task_relative(r["file"], task_dir), "error": f"{type(e).__name__}: {e}"} for li, r in missing]
    for k in got:  # re-index into the step's launch list
        k["launch"] = missing[k["launch"]][0]
    return got
