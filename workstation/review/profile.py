"""The profile evidence of a check run as something to display: :class:`ProfileView` (kws's
own profile of each role and every attached profile, as rows sorted by time, with the
roofline position and the profile findings), a text bar (:func:`bar`) and the terminal
rendering ``kws profile`` prints (:func:`profile_text`).

The data comes from the findings of the ``profile`` and ``profile-attached`` checks
(``evidence["profile"]``: kws's own profile, the report's ``profile.self``;
``evidence["attached_profile"]``: one attached file, an entry of ``profile.attached``), so
a live run fills the panel as those checks finish. Pure Python: no Textual, no engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workstation.review.evidence import case_text, figure_parts

__all__ = ["PROFILE_CHECKS", "ProfileRow", "ProfileView", "RoleView", "bar", "fmt_ns", "profile_text"]

#: the checks whose findings carry profile evidence.
PROFILE_CHECKS = ("profile", "profile-attached")
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def fmt_ns(ns: float | None) -> str:
    """``47420.0`` -> ``"47.4 us"``; ``None`` -> ``"-"``."""
    if ns is None or not isinstance(ns, int | float) or not math.isfinite(ns):
        return "-"
    for unit, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= f:
            return f"{ns / f:.3g} {unit}"
    return f"{ns:.3g} ns"


def bar(fraction: float, width: int) -> str:
    """A horizontal bar ``width`` cells wide filled to ``fraction`` (0..1) in eighths."""
    f = min(max(fraction, 0.0), 1.0) * width
    full = int(f)
    part = int(round((f - full) * 8))
    if part == 8:
        full, part = full + 1, 0
    s = "█" * full + (_EIGHTHS[part] if part and full < width else "")
    return s.ljust(width)


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


@dataclass(frozen=True)
class ProfileRow:
    """One kernel, copy or framework op of a role, per call: ``time_ns`` (None when the
    profile has no durations for it), ``share`` of the role's device time (kernels) or
    host op time (ops), ``own`` (the candidate's own kernel; None: not judged)."""

    name: str
    kind: str
    per_call: float
    time_ns: float | None
    share: float | None
    own: bool | None
    delegated: bool
    launched_by: str


@dataclass(frozen=True)
class RoleView:
    """One profile: kws's own of a role, or an attached file."""

    title: str
    role: str
    source: str
    timed: bool
    rows: tuple[ProfileRow, ...]
    launches_per_call: float | None
    device_ns_per_call: float | None
    wall_ns_per_call: float | None
    own_share: float | None
    roofline: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    problem: str = ""

    @classmethod
    def from_doc(cls, d: Mapping[str, Any], *, title: str) -> RoleView:
        calls = max(1, int(_num(d.get("calls")) or 1))
        rows = []
        for k in list(d.get("kernels") or []) + list(d.get("ops") or []):
            if not isinstance(k, Mapping):
                continue
            total = _num(k.get("total_ns"))
            rows.append(ProfileRow(
                name=str(k.get("name") or "?"), kind=str(k.get("kind") or "kernel"),
                per_call=_num(k.get("per_call")) or (_num(k.get("count")) or 0) / calls,
                time_ns=total / calls if total is not None else None, share=_num(k.get("share")),
                own=k.get("own") if isinstance(k.get("own"), bool) else None, delegated=bool(k.get("delegated")),
                launched_by=str(k.get("launched_by") or "")))
        rows.sort(key=lambda r: (r.kind == "op", -(r.time_ns or 0.0), -r.per_call, r.name))
        rl = []
        for r in list(d.get("kernel_roofline") or []) + ([d["case_roofline"]] if d.get("case_roofline") else []):
            if isinstance(r, Mapping):
                rl.append(_roofline_line(r))
        notes = [str(n) for n in d.get("notes") or []]
        if d.get("profiler_error"):
            notes.append(f"torch.profiler: {d['profiler_error']}")
        return cls(title=title, role=str(d.get("role") or ""), source=str(d.get("file") or d.get("source") or "kws"),
                   timed=bool(d.get("timed")), rows=tuple(rows), launches_per_call=_num(d.get("launches_per_call")),
                   device_ns_per_call=_num(d.get("device_ns_per_call")),
                   wall_ns_per_call=_num(d.get("wall_ns_per_call")), own_share=_num(d.get("own_share")),
                   roofline=tuple(line for line in rl if line), notes=tuple(notes),
                   problem=str(d.get("problem") or d.get("failure") or ""))

    def summary(self) -> str:
        """``1 launch/call · device 47.4 us/call · own 92%``."""
        return " · ".join(figure_parts(
            ("{:.3g} launch/call", self.launches_per_call),
            ("device {}/call", None if self.device_ns_per_call is None else fmt_ns(self.device_ns_per_call)),
            ("wall {}/call", None if self.wall_ns_per_call is None else fmt_ns(self.wall_ns_per_call)),
            ("own kernels {:.0%}", self.own_share)))


def _roofline_line(r: Mapping[str, Any]) -> str:
    name = str(r.get("name") or "the case")
    parts = []
    bw, bwf = _num(r.get("bandwidth")), _num(r.get("bandwidth_fraction"))
    if bw is not None:
        parts.append(f"{bw / 1e9:.0f} GB/s" + (f" ({bwf:.0%} of peak)" if bwf is not None else ""))
    fl, flf = _num(r.get("flops_per_s")), _num(r.get("flops_fraction"))
    if fl is not None:
        parts.append(f"{fl / 1e12:.3g} TFLOP/s" + (f" ({flf:.0%} of peak)" if flf is not None else ""))
    ai = _num(r.get("intensity"))
    if ai is not None:
        parts.append(f"{ai:.3g} FLOP/byte")
    return f"{name[:48]}: " + ", ".join(parts) if parts else ""


@dataclass(frozen=True)
class ProfileView:
    """Everything the Profile panel shows."""

    case_line: str
    device: str
    time_shares: bool
    why_no_time: str
    roles: tuple[RoleView, ...]
    attached: tuple[RoleView, ...]
    roofline: str
    findings: tuple[tuple[str, str, str], ...]

    @property
    def empty(self) -> bool:
        return not self.roles and not self.attached

    @classmethod
    def from_findings(cls, findings: Iterable[Mapping[str, Any]]) -> ProfileView:
        """The view of the profile checks' findings (module doc); other findings are ignored."""
        own: Mapping[str, Any] | None = None
        attached = []
        shown = []
        for f in findings:
            if f.get("check") not in PROFILE_CHECKS:
                continue
            ev = f.get("evidence") or {}
            if isinstance(ev.get("profile"), Mapping) and own is None:
                own = ev["profile"]
            if isinstance(ev.get("attached_profile"), Mapping):
                attached.append(ev["attached_profile"])
            shown.append((str(f.get("severity") or ""), str(f.get("check") or ""), str(f.get("summary") or "")))
        roles = []
        rl = ""
        if own is not None:
            for d in own.get("roles") or []:
                if isinstance(d, Mapping):
                    roles.append(RoleView.from_doc(d, title=f"{d.get('role')} (kws)"))
            if isinstance(own.get("roofline"), Mapping):
                rl = _roofline_line({"name": "candidate, whole case", **own["roofline"]})
        att = tuple(RoleView.from_doc(d, title=f"{d.get('role')} ({d.get('file')}, {d.get('format')})")
                    for d in attached)
        rank = {"fail": 0, "warn": 1, "info": 2}
        shown.sort(key=lambda s: rank.get(s[0], 3))
        return cls(case_line=case_text(own.get("case")) if own and isinstance(own.get("case"), Mapping) else "",
                   device=str((own or {}).get("device") or ""), time_shares=bool((own or {}).get("time_shares")),
                   why_no_time=str((own or {}).get("why_no_time_shares") or ""), roles=tuple(roles), attached=att,
                   roofline=rl, findings=tuple(shown))

    def all_profiles(self) -> tuple[RoleView, ...]:
        return self.roles + self.attached


def bar_rows(rv: RoleView, limit: int = 8) -> list[tuple[str, float, str]]:
    """(label, fraction, value) for a role's bar chart: time per call relative to its
    largest row when the profile has durations, else calls per call."""
    rows = [r for r in rv.rows if r.kind != "op"] or list(rv.rows)
    timed = [r for r in rows if r.time_ns is not None]
    if timed:
        top = max(r.time_ns or 0.0 for r in timed) or 1.0
        return [(r.name, (r.time_ns or 0.0) / top, fmt_ns(r.time_ns)) for r in timed[:limit]]
    top = max((r.per_call for r in rows), default=0.0) or 1.0
    return [(r.name, r.per_call / top, f"{r.per_call:.3g}/call") for r in rows[:limit]]


def profile_text(view: ProfileView, width: int = 100) -> str:
    """The view as plain text (``kws profile``): per profile its rows sorted by time with
    a bar of time per call, then the roofline and the findings."""
    out: list[str] = []
    if view.case_line or view.device:
        out.append(f"kws profile: case {view.case_line or '?'} on {view.device or '?'}")
    if view.why_no_time:
        out.append(f"  no time shares: {view.why_no_time}")
    name_w = max(20, min(60, width - 46))
    bar_w = max(8, width - name_w - 30)
    for rv in view.all_profiles():
        out.append("")
        out += _role_text(rv, name_w, bar_w)
    if view.roofline:
        out.append("")
        out.append(f"roofline (kws, the case's bytes and flops): {view.roofline}")
    if view.findings:
        out.append("")
        out.append("findings:")
        for sev, check, summary in view.findings:
            out.append(f"  [{sev.upper() if sev != 'info' else 'info'}] {check}: {summary}")
    if view.empty and not view.findings:
        out.append("no profile evidence in this run")
    return "\n".join(out)


def _role_text(rv: RoleView, name_w: int, bar_w: int) -> list[str]:
    """One profile's lines in :func:`profile_text`: title and summary, its problem, its
    first 20 rows (names cut at ``name_w``, a bar of ``bar_w`` cells), its roofline lines
    and notes."""
    out = [f"{rv.title}: {rv.summary()}" if rv.summary() else rv.title]
    if rv.problem:
        out.append(f"  ! {rv.problem}")
    bars = {label: (frac, value) for label, frac, value in bar_rows(rv, limit=len(rv.rows))}
    for r in rv.rows[:20]:
        tag = " [own]" if r.own else (" [delegated]" if r.delegated else "")
        share = f"{r.share:>5.0%}" if r.share is not None else "    -"
        t = fmt_ns(r.time_ns)
        b = bar(bars[r.name][0], bar_w) if r.name in bars else " " * bar_w
        label = (r.name + tag)[:name_w]
        out.append(f"  {label:<{name_w}} {r.kind:<7} {r.per_call:>6.3g}/call {t:>9} {share} {b}")
    if len(rv.rows) > 20:
        out.append(f"  ... {len(rv.rows) - 20} more")
    out += [f"  roofline {line}" for line in rv.roofline]
    out += [f"  note: {n}" for n in rv.notes]
    return out
