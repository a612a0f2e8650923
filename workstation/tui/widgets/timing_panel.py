"""TimingPanel: the timing evidence of the run's timing-evidence checks as histograms and
the speedup against the claim (:class:`~workstation.review.timing.TimingView`)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from workstation.review.evidence import figure_parts
from workstation.review.session import ReviewSession
from workstation.review.timing import TimingView, histogram, histogram_blocks, timing_views
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.scroll_pane import ScrollPane
from workstation.tui.widgets.text import set_static

__all__ = ["TimingPanel", "render_timing"]


class TimingPanel(Panel):
    """The timing evidence of the run (the findings of the checks the session names in
    ``timing_evidence_checks``): per side a histogram of the samples on a common axis,
    cold and warm, median and IQR; the speedup with its interval against the claim; the
    device; or why the timing is not representative."""

    def compose(self) -> ComposeResult:
        with ScrollPane(id="timing-scroll"):
            yield Static("", id="timing-text")

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh_timing()

    def on_resize(self) -> None:
        self.refresh_timing()

    def refresh_timing(self) -> None:
        s = self.session
        if s is None:
            return
        box = self.query_one("#timing-text", Static)
        views = timing_views(s.timing_findings())
        width = max(20, self.size.width - 2)
        if views:
            set_static(box, render_timing(views[0], width))
            return
        ids = s.timing_evidence_checks
        cid = next((c for c in ids if c in s.rows), ids[0] if ids else "")
        row = s.rows.get(cid) if cid else None
        if row is None:
            if not cid:
                msg = "no timing check in this run" if s.rows and not s.running else "waiting for the timing check…"
            else:
                msg = f"{cid} is not part of this run" if s.rows and not s.running else f"waiting for {cid}…"
        elif not row.done:
            msg = f"{cid} {row.status}…"
        elif row.status == "skip":
            msg = f"no timing: {row.reason or 'skipped'}"
        elif row.status == "error":
            msg = f"timing failed: {row.reason.splitlines()[0] if row.reason else 'error'}"
        else:
            msg = "no timing evidence in this run" + (f" ({row.findings[0]['summary']})" if row.findings else "")
        set_static(box, Text(msg, style="dim"))


def render_timing(tv: TimingView, width: int) -> Text:
    """The timing view as text: the verdict line first (speedup, interval, claim), then
    representativeness, a histogram per side on a common axis (log10 when the sides
    differ by more than 10x), each side's statistics, the device and the protocol."""
    out = Text()
    out.append(tv.speedup_line() + "\n", style="bold")
    if not tv.representative:
        out.append(f"not representative: {tv.reason}\n", style="bold reverse")
    rng = tv.range_ms()
    label_w = max((len(s.name) for s in tv.sides), default=8) + 1
    bins = max(8, min(64, width - label_w - 2))
    if rng is not None:
        lo, hi = rng
        log = lo > 0 and hi / lo > 10
        axis_lo, axis_hi = f"{lo:.3g} ms", f"{hi:.3g} ms" + (" (log)" if log else "")
        gap = max(1, bins + 2 - len(axis_lo) - len(axis_hi))
        out.append(" " * label_w + axis_lo + " " * gap + axis_hi + "\n", style="dim")
        counts = [histogram(s.samples_ms, lo, hi, bins, log=log) for s in tv.sides]
        peak = max((max(c, default=0) for c in counts), default=0)
        for s, c in zip(tv.sides, counts, strict=True):
            out.append(f"{s.name:<{label_w}}", style="bold")
            out.append("▕" + histogram_blocks(c, peak) + "▏\n")
    for s in tv.sides:
        stats = figure_parts(("median {:.3g}", s.median_ms), ("IQR {0[0]:.3g}–{0[1]:.3g}", s.iqr_ms),
                             ("cold {:.3g}", s.cold_ms), ("warm {:.3g}", s.warm_ms))
        out.append(" ".join([f"{s.name:<{label_w}}", *stats, f"ms n={s.n}"]) + "\n")
    where = tv.device or "device ?"
    if tv.case:
        where += f" · case {tv.case_line()}"
    out.append(where + "\n", style="dim")
    if tv.summary:
        out.append(f"{tv.severity}: {tv.summary}\n", style="dim")
    if tv.protocol:
        out.append(f"protocol: {tv.protocol}", style="dim")
    return out
