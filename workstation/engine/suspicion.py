"""One rule for suspicion (issue 39): a hack-class signal never ends as a ``warn`` in a report
that exits 0, and every disagreement between checks is listed.

A *hack-class signal* is evidence that a candidate may pass for the wrong reason (the kinds
are :data:`SUSPICIONS`): work not done by its own kernels, behaviour that depends on state,
call count, observation or timing, replayed or cached results, outputs changed or processes
left running after return, global state or timers touched, precision lower than served. A
check that sees one reports ``fail`` with the evidence where it confirmed it; where it could
not, it says so with ``ctx.could_not_judge`` (the report lists it under ``not_judged``: exit
4) and tags the finding with ``evidence["suspicion"] = <kind>``
(:func:`workstation.checks.support.suspicion.suspect` does both). A ``warn`` that is genuinely
advisory (a loose but legal tolerance, a slow optimization, a profile with no workload)
carries no tag and may end a report that exits 0.

Two nets in the report (:mod:`workstation.engine.report`) make the rule hold for every check,
plugins and older checks included:

- :func:`unconfirmed`: a non-``fail`` finding tagged with a suspicion whose check is not
  already listed under ``not_judged`` makes the report not a verdict (exit 4) all the same;
- :func:`disagreements`: a finding that carries a signal (tagged, or matched by
  :data:`SIGNALS` for the checks that say it in words) while a check that judges that
  property at run time (:data:`JUDGES`) says ``pass`` is a *disagreement* between checks
  (profile saw the kernels launch only in the first calls while stale-output says pass); a
  static reading that the run did not bear out (:attr:`Signal.static`: a framework call in
  the source not seen at run time, an output element no kernel program writes that the run
  showed written) is one by itself. The report lists each under ``disagreements`` and in its
  text; with no ``fail`` finding it exits 4.

Pure data on the report's dicts: no check module is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: the kinds of hack-class signal (``evidence["suspicion"]``) and what each says.
SUSPICIONS: dict[str, str] = {
    "work-elsewhere": "output not computed by the candidate's own kernels (a framework op, host code, another "
                      "module)",
    "state": "behaviour that depends on state or timing: the call count, buffer identity, an earlier call, the "
             "order grid steps or threads run in",
    "observation": "behaviour that depends on being observed (a tracer, the profiler, a probe, a fresh process)",
    "cache": "results replayed or cached instead of computed",
    "after-return": "outputs changed, or threads or processes left running, after return",
    "tampering": "global state, timers or streams touched by the candidate",
    "precision": "precision lower than the task serves",
}

#: the checks that judge each kind of signal at run time: where one of them says ``pass``
#: while another check carries the signal, the two disagree.
JUDGES: dict[str, tuple[str, ...]] = {
    "work-elsewhere": ("fallback", "profile"),
    "state": ("content-follow", "stale-output", "call-count"),
    "observation": ("observer-effect", "nondeterminism"),
    "cache": ("content-follow", "stale-output", "call-count"),
    "after-return": ("after-return", "late-write", "thread-census"),
    "tampering": ("tampering",),
    "precision": ("precision-regime",),
}


#: framework ops that move or allocate data without computing a result (a candidate's glue).
GLUE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "copy_", "to",
    "_to_copy", "contiguous", "clone", "view", "reshape", "fill_", "zero_", "new_empty", "new_zeros", "set_",
    "resize_", "detach", "slice", "select", "narrow", "chunk", "split", "expand", "as_strided", "t", "transpose",
    "permute", "unsqueeze", "squeeze", "flatten", "unflatten", "alias", "lift_fresh", "promote_types", "result_type",
    "item", "_local_scalar_dense", "stride", "size", "numel", "dim",
})
#: backends whose candidate is a kernel language: framework compute beside it is not its own work.
KERNEL_BACKENDS = ("triton", "cuda", "pallas", "nki")


def _evidence(finding: dict[str, Any]) -> dict[str, Any]:
    """A report finding's evidence dict ({} when it has none)."""
    ev = finding.get("evidence")
    return ev if isinstance(ev, dict) else {}


def _op_base(name: str) -> str:
    """``aten::add_`` / ``aten.add_.Tensor`` -> ``add_``."""
    n = name.split("::")[-1]
    n = n.split("aten.", 1)[-1]
    return n.split(".")[0]


@dataclass(frozen=True)
class Signal:
    """A signal a check states in words (it predates the ``suspicion`` tag), matched on its
    summary and evidence.

    Attributes:
        kind: one of :data:`SUSPICIONS`.
        check: the check whose finding states it.
        pattern: a regular expression searched in the finding's summary.
        says: the signal in a few words, for the report.
        static: a static reading the run did not bear out: a disagreement by itself.
        kernel_only: only for a kernel-language candidate (:data:`KERNEL_BACKENDS`).
        compute_ops: only when the finding's ``evidence["candidate_ops"]`` lists a framework
            op that computes (not :data:`GLUE_OPS`).
        severities: the finding severities that carry it.
    """

    kind: str
    check: str
    pattern: str
    says: str
    static: bool = False
    kernel_only: bool = False
    compute_ops: bool = False
    severities: tuple[str, ...] = ("fail", "warn", "info")

    def matches(self, finding: dict[str, Any], backend: str) -> bool:
        if finding.get("check") != self.check or finding.get("severity") not in self.severities \
                or re.search(self.pattern, finding.get("summary") or "") is None:
            return False
        if self.kernel_only and backend not in KERNEL_BACKENDS:
            return False
        if self.compute_ops:
            ops = _evidence(finding).get("candidate_ops")
            names = [_op_base(str(o.get("name", ""))) for o in ops or [] if isinstance(o, dict)]
            return any(n and n not in GLUE_OPS for n in names)
        return True


#: signals stated in words by checks that do not tag them (``profile``, ``fallback``).
SIGNALS: tuple[Signal, ...] = (
    Signal("cache", "profile", r"kernels only in (its|the) first call",
           "the candidate launched its kernels only in its first call(s): a replay or cache"),
    Signal("work-elsewhere", "profile", r"own kernels never ran|own kernels ran for \d+% of",
           "the candidate's own kernels did not do the work", kernel_only=True),
    Signal("work-elsewhere", "profile", r"launches [0-9.e+]+ kernels per call",
           "framework compute ops on every call beside the candidate's kernels (far more launches per call than "
           "the other side)", kernel_only=True, compute_ops=True),
    # fallback judges a static hit itself (a case that reaches it, run traced and poisoned:
    # fail; a branch always false or outside the task's domain: info; no reaching case: not
    # judged): only a warn would be a static reading it left standing
    Signal("work-elsewhere", "fallback", r"not seen at run time",
           "a framework call in the source that no run reached (static reading vs run time)", static=True,
           kernel_only=True, severities=("warn",)),
)


def signal_of(finding: dict[str, Any], backend: str = "") -> tuple[str, str, bool] | None:
    """(kind, what it says, static) of the hack-class signal ``finding`` carries (a report
    finding dict) for a candidate of ``backend``, or None: its ``evidence["suspicion"]`` tag
    first (``evidence["static_vs_run"]``: a static reading the run did not bear out), then
    :data:`SIGNALS`."""
    ev = _evidence(finding)
    kind = ev.get("suspicion")
    if isinstance(kind, str) and kind in SUSPICIONS:
        return kind, SUSPICIONS[kind], bool(ev.get("static_vs_run"))
    for s in SIGNALS:
        if s.matches(finding, backend):
            return s.kind, s.says, s.static
    return None


def unconfirmed(findings: list[dict[str, Any]], listed: set[str]) -> list[dict[str, str]]:
    """``[{"check", "reason"}]``: the checks with a non-``fail`` finding tagged with a
    suspicion that are not among ``listed`` (already under ``not_judged``): a signal the
    check did not confirm leaves it not judged, whatever the check itself said."""
    out: list[dict[str, str]] = []
    seen = set(listed)
    for f in findings:
        kind = _evidence(f).get("suspicion")
        if f.get("severity") == "fail" or not isinstance(kind, str) or f.get("check") in seen:
            continue
        seen.add(f["check"])
        out.append({"check": f["check"], "reason": f"{kind} signal not confirmed ({SUSPICIONS.get(kind, kind)}): "
                                                  f"{(f.get('summary') or '')[:240]}"})
    return out


def disagreements(findings: list[dict[str, Any]], checks: list[dict[str, Any]],
                  backend: str = "") -> list[dict[str, Any]]:
    """Every disagreement between checks in a report (module doc) on a candidate of
    ``backend``: ``[{"kind", "signal": {"check", "severity", "summary"}, "says", "against":
    [{"check", "status", "says"}], "summary"}]``, one per signalling finding."""
    status = {c.get("check"): c.get("status") for c in checks}
    said: dict[str, str] = {}
    for f in findings:  # what a passing check said (its first info line)
        said.setdefault(f.get("check", ""), f.get("summary") or "")
    out: list[dict[str, Any]] = []
    for f in findings:
        sig = signal_of(f, backend)
        if sig is None:
            continue
        kind, says, static = sig
        against = [{"check": j, "status": "pass", "says": said.get(j, "")[:300]}
                   for j in JUDGES.get(kind, ()) if j != f.get("check") and status.get(j) == "pass"]
        if not against and not static:
            continue
        summary = str(f.get("summary") or "")[:400]
        src = {"check": f.get("check"), "severity": f.get("severity"), "summary": summary}
        if static and not against:
            text = f"{f.get('check')}: {says}: {summary[:200]}"
        else:
            text = (f"{f.get('check')} ({f.get('severity')}): {says}; "
                    + ", ".join(f"{a['check']} says pass" for a in against))
        out.append({"kind": kind, "signal": src, "says": says, "against": against, "summary": text})
    return out
