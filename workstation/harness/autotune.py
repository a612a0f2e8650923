"""Child side of the ``autotune`` check: find the candidate's autotuners and drive them.

The ``autotune_probe`` step imports the candidate, finds every
``triton.runtime.autotuner.Autotuner`` reachable from the task's modules (module
globals, also behind ``@triton.heuristics``), and per case:

1. *tuned* call: every autotuner's tuning cache is cleared (and Triton's on-disk
   autotuning cache is disabled), then the candidate is called on fresh inputs: this call
   runs the autotuner, whose benchmark launches each config on the real arguments (on a
   GPU ``triton.testing.do_bench`` launches it for ~25 ms of warm-up and ~100 ms of
   timing; under the interpreter kws's harness launches it
   ``AUTOTUNE_LAUNCHES_PER_CONFIG`` times, see :mod:`workstation.harness.core`). Every
   launch is counted per config (and every launch that raised) by a
   :class:`ConfigLaunchCounter` observing :mod:`workstation.harness.launches`, and the config the
   autotuner picked is read from ``triton.knobs.autotuning.listener`` and
   ``Autotuner.cache``;
2. *cached* call: fresh inputs again, the tuning cache now hit: no tuning launches;
3. one call per config: the autotuner's config list is set to that one config (Triton
   then runs it without benchmarking), fresh inputs, the outputs kept; a config that
   raises is reported with its exception, never silently pruned.

Outputs travel as arrays ``c<case>_<run>_out<j>`` (``run``: ``tuned``, ``cached``,
``cfg<a>_<i>`` for config ``i`` of autotuner ``a``); the parent compares them with the
reference. The payload is :class:`~workstation.protocol.extras.autotune.AutotuneProbeExtra`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Iterator
from typing import Any

from workstation.harness import StepOutput, step
from workstation.harness.core import JobContext, encode_tensor, error_info
from workstation.harness.launches import Launch, LaunchObserver, launch_classes, observing
from workstation.protocol.extras.autotune import (
    AutotuneCase,
    AutotuneProbeExtra,
    AutotunerDesc,
    ConfigDesc,
    ListenerPick,
    PickedConfig,
    ProbeCall,
    TunedCall,
)
from workstation.protocol.steps import AutotuneProbeStep, Case


def _autotuner_cls() -> Any:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return None
    return Autotuner


#: top-level packages never searched for a candidate's autotuners (the framework itself).
FRAMEWORK = {"torch", "triton", "numpy", "scipy", "workstation", "msgspec", "jax", "sympy", "typing_extensions"}


def imported_packages(ctx: JobContext) -> set[str]:
    """Top-level names of the installed (non-stdlib, non-framework) packages the task's
    modules reference: modules bound in their globals and the modules of the functions and
    classes they import (``from liger_kernel.ops.rms_norm import LigerRMSNormFunction``
    gives ``liger_kernel``). These are where a library candidate's kernels live."""
    root = os.path.realpath(ctx.task_dir)
    tops: set[str] = set()
    std = set(getattr(sys, "stdlib_module_names", ()))
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f or not os.path.realpath(f).startswith(root + os.sep):
            continue
        for v in list(vars(mod).values()):
            name = v.__name__ if inspect.ismodule(v) else getattr(v, "__module__", None)
            if isinstance(name, str) and name:
                tops.add(name.split(".")[0])
    return {t for t in tops if t not in FRAMEWORK and t not in std and not t.startswith("_")}


def find_autotuners(ctx: JobContext, packages: set[str] | None = None) -> list[Any]:
    """Every Autotuner in the globals of the task's modules (files under the task folder)
    and, when ``packages`` is given, of the loaded modules of those installed packages
    (:func:`imported_packages`), unwrapping ``Heuristics`` and other ``.fn`` chains; in
    discovery order (task modules first), no repeats."""
    cls = _autotuner_cls()
    if cls is None:
        return []
    root = os.path.realpath(ctx.task_dir)
    found: list[Any] = []
    seen: set[int] = set()
    mods = list(sys.modules.items())
    ordered = [m for _, m in mods if isinstance(getattr(m, "__file__", None), str)
               and os.path.realpath(str(m.__file__)).startswith(root + os.sep)]
    if packages:
        ordered += [m for n, m in mods if n.split(".")[0] in packages and m not in ordered]
    for mod in ordered:
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        for v in list(vars(mod).values()):
            obj, depth = v, 0
            while obj is not None and depth < 6:
                if isinstance(obj, cls) and id(obj) not in seen:
                    seen.add(id(obj))
                    found.append(obj)
                obj = getattr(obj, "fn", None) if not inspect.isfunction(obj) else None
                depth += 1
    return found


def _config_doc(cfg: Any) -> ConfigDesc:
    return ConfigDesc(kwargs={k: (v if isinstance(v, int | float | bool | str) else repr(v))
                              for k, v in cfg.kwargs.items()},
                      num_warps=cfg.num_warps, num_stages=cfg.num_stages, num_ctas=getattr(cfg, "num_ctas", 1),
                      maxnreg=getattr(cfg, "maxnreg", None), pre_hook=cfg.pre_hook is not None, text=str(cfg))


def describe(at: Any) -> AutotunerDesc:
    """The facts of one autotuner: kernel name and source line, configs, key,
    ``reset_to_zero``, ``restore_value``, user hooks, pruning."""
    base = at.base_fn
    code = getattr(base, "__code__", None)
    return AutotunerDesc(
        kernel=base.__name__,
        file=os.path.basename(code.co_filename) if code else "",
        line=code.co_firstlineno if code else 0,
        arg_names=list(at.arg_names),
        configs=[_config_doc(c) for c in at.configs],
        key=list(getattr(at, "keys", []) or []),
        reset_to_zero=list(getattr(at, "reset_to_zero", []) or []),
        restore_value=list(getattr(at, "restore_value", []) or []),
        user_pre_hook=bool(getattr(at, "user_defined_pre_hook", False)),
        user_post_hook=bool(getattr(at, "user_defined_post_hook", False)),
        early_config_prune=getattr(at, "early_config_prune", None) is not None,
        perf_model=getattr(at, "perf_model", None) is not None,
    )


def _config_index(at: Any, kwargs: dict[str, Any]) -> int:
    """Which of ``at.configs`` a launch's keyword arguments carry (-1: none)."""
    for i, cfg in enumerate(at.configs):
        ak = cfg.all_kwargs()
        if all(kwargs.get(k) == v for k, v in ak.items() if k in kwargs):
            if all(k in kwargs for k in cfg.kwargs):
                return i
    return -1


class ConfigLaunchCounter(LaunchObserver):
    """Counts launches (and launches that raised, with the first error) per autotuner and
    config index (:func:`_config_index`; -1: no config matched) of the autotuners ``ats``.

    A launch belongs to an autotuner when its kernel is the one the autotuner launches
    (``at.fn``, or the JIT function under a ``@triton.heuristics`` wrapper); one kernel
    shared by several autotuners counts for each. ``log[a]``: ``launches``, ``raised``,
    ``errors``, each keyed by config index.
    """

    def __init__(self, ats: list[Any]):
        self.log: dict[int, dict[str, dict[int, Any]]] = {
            a: {"launches": {}, "raised": {}, "errors": {}} for a in range(len(ats))}
        self._owners: dict[int, list[tuple[int, Any]]] = {}
        for a, at in enumerate(ats):
            kernel = _launched_kernel(at)
            if kernel is not None:
                self._owners.setdefault(id(kernel), []).append((a, at))

    def before(self, launch: Launch) -> None:
        for a, at in self._owners.get(id(launch.kernel), ()):
            n = self.log[a]["launches"]
            i = _config_index(at, launch.kwargs)
            n[i] = n.get(i, 0) + 1

    def after(self, launch: Launch, result: Any, error: BaseException | None) -> None:
        if error is None:
            return
        for a, at in self._owners.get(id(launch.kernel), ()):
            e = self.log[a]
            i = _config_index(at, launch.kwargs)
            e["raised"][i] = e["raised"].get(i, 0) + 1
            e["errors"].setdefault(i, f"{type(error).__name__}: {str(error)[:300]}")


def _launched_kernel(at: Any) -> Any:
    """The launch-class instance (JIT or interpreted function) ``at`` ends in: ``at.fn``,
    unwrapping ``Heuristics`` and other ``.fn`` chains (None when there is none)."""
    classes = tuple(launch_classes())
    obj, depth = at.fn, 0
    while obj is not None and depth < 6:
        if isinstance(obj, classes):
            return obj
        obj, depth = getattr(obj, "fn", None), depth + 1
    return None


@contextlib.contextmanager
def pick_listener(picks: list[ListenerPick]) -> Iterator[None]:
    """Record ``triton.knobs.autotuning.listener`` calls (the config each tuning picked).

    Not under the interpreter: ``Autotuner.run`` looks for the ``JITFunction`` behind the
    kernel to call the listener, and an interpreted kernel has none (the pick is then
    read from ``Autotuner.cache``)."""
    from workstation.harness.core import INTERPRETER

    try:
        from triton import knobs
    except ImportError:
        yield
        return
    if INTERPRETER:
        yield
        return
    old = knobs.autotuning.listener

    def listener(fn: Any, key: Any, best_config: Any, configs_timings: Any, duration: Any, cache_hit: bool) -> None:
        timings: dict[str, float | str] = {}
        for c, t in (configs_timings or {}).items():
            v = t[0] if isinstance(t, list | tuple) and t else t
            timings[str(c)] = float(v) if isinstance(v, int | float) else repr(v)
        picks.append(ListenerPick(kernel=getattr(fn, "__name__", "?"), key=repr(key), best=str(best_config),
                                  timings=timings,
                                  duration_s=float(duration) if isinstance(duration, int | float) else None,
                                  cache_hit=bool(cache_hit)))
        if old is not None:
            old(fn=fn, key=key, best_config=best_config, configs_timings=configs_timings, duration=duration,
                cache_hit=cache_hit)

    knobs.autotuning.listener = listener
    try:
        yield
    finally:
        knobs.autotuning.listener = old


def _call(ctx: JobContext, case: Case, seed: int, out: StepOutput, tag: str) -> ProbeCall:
    """Fresh inputs, one candidate call, outputs stored under ``tag``; the call's record."""
    try:
        inputs = ctx.make_inputs(case, seed)
        result = ctx.callable("candidate")(*inputs)
        ctx.sync()
        outputs = ctx.outputs_of(result, inputs)
    except BaseException as e:  # noqa: BLE001  (a config that raises is reported, never pruned)
        return ProbeCall(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")))
    metas = []
    for j, t in enumerate(outputs):
        meta, arr = encode_tensor(t)
        metas.append(meta)
        out.arrays[f"{tag}_out{j}"] = arr
    return ProbeCall(ok=True, outputs=metas)


@step(AutotuneProbeStep)
def autotune_probe_step(ctx: JobContext, spec: AutotuneProbeStep) -> StepOutput:
    """Drive the candidate's autotuners on ``spec.cases`` (module doc).

    ``extra`` (:class:`AutotuneProbeExtra`): ``autotuners`` (:func:`describe` each),
    ``device_name``, ``interpreter``, ``cases``: per case ``tuned`` / ``cached`` call
    records (``ok``, ``error``, ``outputs`` metadata, ``launches`` per autotuner and config
    index, ``picks``) and ``configs`` (per autotuner, per config: the call record).
    """
    out = StepOutput(ok=True)
    from workstation.harness.core import INTERPRETER

    try:
        ctx.callable("candidate")
    except BaseException as e:  # noqa: BLE001  (the candidate's import error, sent as the step's)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "import")),
                          extra=AutotuneProbeExtra(device_name=ctx.device_name))
    own = find_autotuners(ctx)
    packages = imported_packages(ctx)
    ats = find_autotuners(ctx, packages)
    if len(ats) > len(own) and spec.cases:
        # keep the package autotuners whose kernel the candidate launches (a library has
        # many); one discovery call on the first case tells
        with observing(ConfigLaunchCounter(ats)) as counter:
            _call(ctx, spec.cases[0], spec.seed, StepOutput(ok=True), "discover")
        used = {a for a, d in counter.log.items() if d["launches"]}
        ats = [at for a, at in enumerate(ats) if at in own or a in used]
    extra = AutotuneProbeExtra(autotuners=[describe(at) for at in ats], device_name=ctx.device_name,
                               interpreter=INTERPRETER, cases=[], packages_searched=sorted(packages),
                               from_packages=[describe(at).kernel for at in ats if at not in own])
    out.extra = extra
    if not ats:
        return out
    for at in ats:
        at.cache_results = False
    seed = spec.seed
    for ci, case in enumerate(spec.cases):
        rec = AutotuneCase(case=case, configs=[])
        for at in ats:
            at.cache = {}
        for run in ("tuned", "cached"):
            picks: list[ListenerPick] = []
            with observing(ConfigLaunchCounter(ats)) as counter, pick_listener(picks):
                r = _call(ctx, case, seed, out, f"c{ci}_{run}")
            log = counter.log
            tuned = TunedCall(
                ok=r.ok, error=r.error, outputs=r.outputs,
                launches={str(a): {str(k): v for k, v in d["launches"].items()} for a, d in log.items()},
                raised={str(a): {str(k): v for k, v in d["raised"].items()} for a, d in log.items()},
                launch_errors={str(a): {str(k): v for k, v in d["errors"].items()} for a, d in log.items()},
                picks=picks, picked=[_picked(at) for at in ats])
            if run == "tuned":
                rec.tuned = tuned
            else:
                rec.cached = tuned
        for a, at in enumerate(ats):
            configs, cache = at.configs, at.cache
            per: list[ProbeCall] = []
            for i, cfg in enumerate(configs):
                at.configs, at.cache = [cfg], {}
                try:
                    per.append(_call(ctx, case, seed, out, f"c{ci}_cfg{a}_{i}"))
                finally:
                    at.configs, at.cache = configs, cache
            rec.configs.append(per)
        extra.cases.append(rec)
    return out


def _picked(at: Any) -> PickedConfig:
    best = getattr(at, "best_config", None)
    idx = next((i for i, c in enumerate(at.configs) if c is best), -1)
    return PickedConfig(index=idx, config=str(best) if best is not None else None,
                        cache={repr(k): str(v) for k, v in at.cache.items()})

