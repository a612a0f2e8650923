"""ProfilePanel: which kernels and ops really ran (kws's own profile of each role and the
task's attached profiles) as a table sorted by time per call and a bar chart of time per
kernel/op, the roofline position where bytes and FLOPs are known, and the profile
findings (:class:`~workstation.review.profile.ProfileView`)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from workstation.review.profile import PROFILE_CHECKS, ProfileView, RoleView, bar, bar_rows, fmt_ns
from workstation.review.session import ReviewSession
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.text import fit, set_static

__all__ = ["ProfilePanel", "render_bars"]

_SEV_STYLE = {"fail": "bold red", "warn": "bold yellow", "info": "dim"}
COLUMNS = ("profile", "kernel / op", "kind", "/call", "time/call", "share", "own")


class ProfilePanel(Panel):
    """The profile evidence of the run (findings of the ``profile`` and
    ``profile-attached`` checks): a header (case, device, why there are no time shares),
    a :class:`DataTable` of every kernel and op of every profile, largest time per call
    first, a bar chart of time per call per profile (calls per call where the profile
    has no durations: launch tracing on the CPU), roofline lines and the findings."""

    DEFAULT_CSS = """
    ProfilePanel #profile-table { height: auto; max-height: 12; }
    ProfilePanel #profile-head, ProfilePanel #profile-bars { height: auto; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="profile-scroll"):
            yield Static("", id="profile-head")
            yield DataTable(id="profile-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="profile-bars")

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None
        table = self.query_one("#profile-table", DataTable)
        table.add_columns(*COLUMNS)

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh_profile()

    def on_resize(self) -> None:
        self.refresh_profile()

    def view(self) -> ProfileView | None:
        s = self.session
        if s is None:
            return None
        findings = [f for cid in PROFILE_CHECKS if (row := s.rows.get(cid)) is not None for f in row.findings]
        return ProfileView.from_findings(findings)

    def refresh_profile(self) -> None:
        s = self.session
        if s is None or not self.is_mounted:
            return
        head = self.query_one("#profile-head", Static)
        table = self.query_one("#profile-table", DataTable)
        bars = self.query_one("#profile-bars", Static)
        v = self.view()
        table.clear()
        width = max(30, self.size.width - 2)
        if v is None or (v.empty and not v.findings):
            set_static(head, Text(self._waiting(s), style="dim"))
            set_static(bars, Text(""))
            table.display = False
            return
        table.display = True
        t = Text()
        if v.case_line or v.device:
            line = f"case {v.case_line or '?'} · {v.device or '?'}"
            if not v.time_shares and v.roles:
                line += " · counts only, no time shares"
            t.append(fit(line, width), style="bold")
        set_static(head, t)
        for rv in v.all_profiles():
            short = rv.role[:4] + (" kws" if rv.source == "kws" else " file")
            for r in rv.rows:
                table.add_row(short, r.name[:40], r.kind, f"{r.per_call:.3g}", fmt_ns(r.time_ns),
                              f"{r.share:.0%}" if r.share is not None else "-",
                              "own" if r.own else ("deleg." if r.delegated else ("fw" if r.own is False else "")))
        set_static(bars, render_bars(v, width))

    @staticmethod
    def _waiting(s: ReviewSession) -> str:
        rows = [s.rows.get(c) for c in PROFILE_CHECKS]
        if all(r is None for r in rows):
            return "no profile check in this run" if s.rows and not s.running else "waiting for the profile check…"
        for cid, r in zip(PROFILE_CHECKS, rows, strict=True):
            if r is not None and not r.done:
                return f"{cid} {r.status}…"
        reasons = [f"{c}: {r.status} ({r.reason.splitlines()[0] if r.reason else ''})" for c, r in
                   zip(PROFILE_CHECKS, rows, strict=True) if r is not None and r.status in ("skip", "error")]
        return "no profile evidence: " + "; ".join(reasons) if reasons else "no profile evidence in this run"


def render_bars(v: ProfileView, width: int) -> Text:
    """Per profile: a bar of time per call for each kernel/op (largest first), the
    roofline lines, then the profile findings, worst first."""
    out = Text()
    label_w = max(10, min(34, width // 3))
    bar_w = max(8, width - label_w - 12)
    if v.why_no_time:
        out.append(f"no time shares: {v.why_no_time}\n", style="dim")
    for rv in v.all_profiles():
        out.append(fit(_title(rv), width) + "\n", style="bold")
        if rv.problem:
            out.append(fit(f"! {rv.problem}", width) + "\n", style="bold red")
        for label, frac, value in bar_rows(rv):
            out.append(f"{label[:label_w]:<{label_w}} ")
            out.append(bar(frac, bar_w), style="cyan")
            out.append(f" {value}\n")
        for line in rv.roofline:
            out.append(fit(f"roofline {line}", width) + "\n", style="magenta")
    if v.roofline:
        out.append(fit(f"roofline {v.roofline}", width) + "\n", style="magenta")
    for sev, check, summary in v.findings:
        if sev == "info":
            continue
        out.append(f"{sev.upper()} ", style=_SEV_STYLE.get(sev, ""))
        out.append(f"{check}: {summary}\n")
    return out


def _title(rv: RoleView) -> str:
    s = rv.summary()
    return f"{rv.title}" + (f" — {s}" if s else "")
