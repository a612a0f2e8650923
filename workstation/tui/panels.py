"""The review screen's panels: spec (and history), source diff, checks (with evidence),
timing, rubric. Each is a :class:`Panel` that can be maximised; each only displays the
:class:`~workstation.review.session.ReviewSession` and forwards keys to it.
"""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Static, TextArea

from workstation.review.diff import FileDiff
from workstation.review.evidence import evidence_lines
from workstation.review.session import ReviewSession
from workstation.review.timing import TimingView, histogram, histogram_blocks, timing_views
from workstation.tui.keymap import bindings_for
from workstation.tui.listview import ChecksList, fit
from workstation.tui.sourceview import SourceView


def set_static(widget: Static, content: Any, key: Any = None) -> None:
    """``widget.update(content)`` unless it already shows the same thing (``key``; for a
    string, the string itself). Every update of a Static re-lays the whole screen out,
    so periodic status lines and per-keystroke hints update only when they change."""
    k = key if key is not None else (content if isinstance(content, str) else (
        content.plain, tuple(content.spans)) if isinstance(content, Text) else None)
    if k is not None and getattr(widget, "_kws_key", None) == k:
        return
    widget._kws_key = k  # type: ignore[attr-defined]
    widget.update(content)


class Panel(Vertical):
    """A titled, maximisable panel of the review screen. ``name`` is its key in the
    layout (spec, diff, checks, timing, rubric)."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    Panel { border: round $panel-lighten-2; padding: 0 0; height: 1fr; }
    Panel:focus-within { border: heavy $accent; }
    Panel > .panel-status { height: 1; color: $text-muted; }
    """

    def __init__(self, title: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.base_title = title
        self.border_title = title

    def focus_main(self) -> None:
        """Focus the panel's main widget."""
        for w in self.query("*"):
            if w.focusable:
                self.screen.set_focus(w)  # now: keys typed right after go there
                return


# ------------------------------------------------------------------------------------------
# spec and history


class SpecPanel(Panel):
    """The task's spec (Markdown) or, switched with the History key, the task's history
    of verdicts, disputes and resolutions."""

    history_text = ""

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="spec-scroll"):
            with VerticalScroll(id="spec-scroll", can_focus=True):
                # Rich's Markdown in one Static: Textual's Markdown widget mounts a widget
                # per block, which costs a few hundred ms on the way to the first paint
                yield Static("loading the spec…", id="spec-md", markup=False)
            with VerticalScroll(id="history-scroll", can_focus=True):
                yield Static("loading the history…", id="history-text", markup=False)

    def show(self, which: str) -> None:
        sw = self.query_one(ContentSwitcher)
        sw.current = "history-scroll" if which == "history" else "spec-scroll"
        self.border_title = "History" if which == "history" else self.base_title
        self.screen.set_focus(self.query_one(f"#{sw.current}"))

    @property
    def showing(self) -> str:
        return "history" if self.query_one(ContentSwitcher).current == "history-scroll" else "spec"

    def set_spec(self, text: str) -> None:
        from rich.markdown import Markdown as RichMarkdown

        self.query_one("#spec-md", Static).update(RichMarkdown(text, code_theme="ansi_dark", hyperlinks=False))

    def set_history(self, text: str) -> None:
        self.history_text = text
        self.query_one("#history-text", Static).update(text)


# ------------------------------------------------------------------------------------------
# source diff


class DiffPanel(Panel):
    """The candidate against its baseline (or the original of a translation), or a plain
    listing; other task files are one key away (``diff.next_file``)."""

    def compose(self) -> ComposeResult:
        yield Static("loading the source…", classes="panel-status", id="diff-status", markup=False)
        yield SourceView(id="source")

    def on_mount(self) -> None:
        self.files: list[tuple[str, FileDiff]] = []
        self.tokens: dict[str, tuple[Any, Any]] = {}
        self.index = 0
        self.set_interval(0.25, self._refresh_status, pause=False)

    @property
    def view(self) -> SourceView:
        return self.query_one(SourceView)

    def set_files(self, files: list[tuple[str, FileDiff]]) -> None:
        """``files``: (label, diff) pairs; the first is the candidate's diff."""
        self.files = files
        self.index = 0
        if files:
            self._show(0)

    def set_tokens(self, label: str, old: Any, new: Any) -> None:
        self.tokens[label] = (old, new)
        if self.files and self.files[self.index][0] == label:
            self.view.set_tokens(old, new)

    def _show(self, i: int) -> None:
        self.index = i
        label, fd = self.files[i]
        old, new = self.tokens.get(label, (None, None))
        self.view.set_diff(fd, old, new)
        self._refresh_status()

    def show_file(self, name: str) -> bool:
        """Show the file whose new side is ``name`` (a task-relative path)."""
        for i, (_label, fd) in enumerate(self.files):
            if fd.new_name == name:
                if i != self.index:
                    self._show(i)
                return True
        return False

    def next_file(self) -> None:
        if self.files:
            self._show((self.index + 1) % len(self.files))

    def on_next_file(self, _msg: Message) -> None:
        self.next_file()

    def _refresh_status(self) -> None:
        if not getattr(self, "files", None):
            return
        label, fd = self.files[self.index]
        v = self.view
        mode = "split" if v.split else "unified"
        if fd.is_listing:
            what = f"{fd.new_name} (no baseline: listing)"
            stats = f"{len(fd.new_lines)} lines"
        else:
            what = f"{fd.old_name} → {fd.new_name}"
            h = v.current_hunk()
            stats = f"+{fd.added} −{fd.removed}, hunk {h or '-'}/{len(fd.hunks)}, {mode}"
        files = f"file {self.index + 1}/{len(self.files)}"
        text = f"{what}  {stats}  {files}"
        set_static(self.query_one("#diff-status", Static), fit(text, max(1, self.size.width)))
        self.border_title = f"{self.base_title}: {label}"


# ------------------------------------------------------------------------------------------
# checks and evidence


class ChecksPanel(Panel):
    """Each check as a row (status, time), filling in live; the evidence of the selected
    finding (or the selected check's summary) below."""

    DEFAULT_CSS = """
    ChecksPanel #evidence { height: 45%; border-top: solid $panel-lighten-2; }
    ChecksPanel ChecksList { height: 1fr; }
    """
    BINDINGS = [b for b in bindings_for("checks") if b.id in ("checks.mark", "checks.rerun")]

    class Rerun(Message):
        """Re-run one check."""

        def __init__(self, check: str) -> None:
            super().__init__()
            self.check = check

    class Selected(Message):
        """The cursor is on a finding (``finding`` None: on a check row)."""

        def __init__(self, check: str, finding: dict[str, Any] | None) -> None:
            super().__init__()
            self.check = check
            self.finding = finding

    def compose(self) -> ComposeResult:
        yield Static("", classes="panel-status", id="checks-status", markup=False)
        yield ChecksList(id="checks-list")
        with VerticalScroll(id="evidence", can_focus=True):
            yield Static("Select a finding to see its evidence.", id="evidence-text", markup=False)

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None
        self.set_interval(0.5, self._tick)

    @property
    def list(self) -> ChecksList:
        return self.query_one(ChecksList)

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh_checks()

    def refresh_checks(self) -> None:
        s = self.session
        if s is None:
            return
        lst = self.list
        if s.error and not s.rows:
            lst.message = f"checks could not run: {s.error}"
        lst.set_checks(list(s.rows.values()))
        self._status()
        self._show_current()

    def _status(self) -> None:
        s = self.session
        if s is None:
            return
        c = s.counts()
        done = sum(v for k, v in c.items() if k not in ("queued", "running"))
        total = len(s.rows)
        parts = [f"{done}/{total} done" if total else "waiting for the runner"]
        for k in ("fail", "warn", "error", "skip"):
            if c.get(k):
                parts.append(f"{c[k]} {k}")
        if s.running and s.run_started:
            parts.append(f"{time.monotonic() - s.run_started:.0f}s")
        elif s.run_seconds is not None:
            parts.append(f"in {s.run_seconds:.1f}s")
        if s.device:
            parts.append(s.device)
        set_static(self.query_one("#checks-status", Static), fit(" · ".join(parts), max(1, self.size.width)))

    def on_resize(self) -> None:
        self._status()

    def _tick(self) -> None:
        if self.session is not None and self.session.running:
            self._status()
            self.list.refresh()

    def on_cursor_list_cursor_moved(self, event: ChecksList.CursorMoved) -> None:
        if event.list is self.list:
            event.stop()
            self._show_current()

    def _show_current(self) -> None:
        lst = self.list
        e = lst.current
        box = self.query_one("#evidence-text", Static)
        if e is None:
            set_static(box, "Select a finding to see its evidence.")
            return
        f = lst.finding_at(e)
        if f is None:
            row = lst.row_of(e.check)
            if row is None:
                return
            lines = [("check", row.check), ("status", row.status)]
            if row.seconds is not None and row.done:
                lines.append(("time", f"{row.seconds:.2f} s"))
            if row.reason:
                lines.append(("reason", row.reason))
            lines.append(("findings", str(len(row.findings)) + (" (↓ to read them)" if row.findings else "")))
            set_static(box, _grid(lines), key=("check", tuple(lines)))
            self.post_message(self.Selected(row.check, None))
            return
        ev = evidence_lines(f)
        set_static(box, _grid(ev), key=("finding", tuple(ev)))
        self.post_message(self.Selected(e.check, f))

    def selected_findings(self) -> list[dict[str, Any]]:
        """The marked findings, else the one under the cursor."""
        lst = self.list
        out = []
        for e in lst.entries:
            if e.finding is not None and (e.check, e.finding) in lst.marked:
                f = lst.finding_at(e)
                if f is not None:
                    out.append(f)
        if not out and lst.current is not None:
            f = lst.finding_at(lst.current)
            if f is not None:
                out.append(f)
        return out

    def action_mark(self) -> None:
        lst = self.list
        e = lst.current
        if e is None or e.finding is None:
            self.app.bell()
            return
        key = (e.check, e.finding)
        lst.marked ^= {key}
        lst.refresh()
        lst.action_cursor(1)

    def action_rerun(self) -> None:
        e = self.list.current
        if e is not None:
            self.post_message(self.Rerun(e.check))


def _grid(lines: list[tuple[str, str]]) -> Table:
    t = Table.grid(padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for label, value in lines:
        t.add_row(label, Text(value))
    return t


# ------------------------------------------------------------------------------------------
# timing


class TimingPanel(Panel):
    """The timing evidence of ``speedup-claim``: per side a histogram of the samples on a
    common axis, cold and warm, median and IQR; the speedup with its interval against
    the claim; the device; or why the timing is not representative."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="timing-scroll", can_focus=True):
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
        views = timing_views(s.findings)
        width = max(20, self.size.width - 2)
        if views:
            set_static(box, render_timing(views[0], width))
            return
        row = s.rows.get("speedup-claim")
        if row is None:
            msg = "speedup-claim is not part of this run" if s.rows and not s.running else "waiting for speedup-claim…"
        elif not row.done:
            msg = f"speedup-claim {row.status}…"
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
        parts = [f"{s.name:<{label_w}}"]
        if s.median_ms is not None:
            parts.append(f"median {s.median_ms:.3g}")
        if s.iqr_ms is not None:
            parts.append(f"IQR {s.iqr_ms[0]:.3g}–{s.iqr_ms[1]:.3g}")
        if s.cold_ms is not None:
            parts.append(f"cold {s.cold_ms:.3g}")
        if s.warm_ms is not None:
            parts.append(f"warm {s.warm_ms:.3g}")
        parts.append(f"ms n={s.n}")
        out.append(" ".join(parts) + "\n")
    where = tv.device or "device ?"
    if tv.case:
        where += f" · case {tv.case_line()}"
    out.append(where + "\n", style="dim")
    if tv.summary:
        out.append(f"{tv.severity}: {tv.summary}\n", style="dim")
    if tv.protocol:
        out.append(f"protocol: {tv.protocol}", style="dim")
    return out


# ------------------------------------------------------------------------------------------
# rubric


class RationaleArea(TextArea):
    """The rationale editor; Escape returns to the rubric fields."""

    BINDINGS = [Binding("escape", "leave", "Back to the fields", show=False)]
    EARLY_KEYS = ("escape",)  # resolved when read (KwsApp.on_event): keys after it go to the new focus

    def action_leave(self) -> None:
        form = self.screen.query("RubricForm")
        if form:
            self.screen.set_focus(form.first())


class RubricForm(Widget, can_focus=True, inherit_bindings=False):
    """The rubric's choice fields, one line each: value, kws's suggestion, and whether
    they agree. On the focused field, the value keys of the rubric pick a value (they take
    precedence over every other binding while the form has focus)."""

    DEFAULT_CSS = """
    RubricForm { height: auto; }
    """
    BINDINGS = bindings_for("rubric")
    cursor: reactive[int] = reactive(0)

    class Changed(Message):
        """The session's values changed through the form."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.session: ReviewSession | None = None
        self._strip_key: Any = None
        self._strips: list[Strip] = []

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.refresh(layout=True)

    @property
    def fields(self) -> list[Any]:
        return list(self.session.rubric.choice_fields) if self.session else []

    @property
    def current_field(self) -> Any | None:
        fs = self.fields
        return fs[self.cursor] if 0 <= self.cursor < len(fs) else None

    #: lines under the fields: the focused field's keys, then kws's suggestion and why
    DETAIL_LINES = 3

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return max(1, len(self.fields)) + self.DETAIL_LINES

    def _detail(self, width: int, sugg: dict[str, Any]) -> list[Text]:
        """The focused field's value keys and kws's suggestion with the findings behind
        it (the reason names the worst informing finding), in DETAIL_LINES lines."""
        import textwrap

        f = self.current_field
        if f is None:
            return [Text("")] * self.DETAIL_LINES
        out = [Text(fit("  ".join(f"{v.key} {v.label}" for v in f.values), width).rstrip(), style="bold")]
        sg = sugg.get(f.key)
        why = f"kws: {sg.value or '-'} ({sg.outcome})" + (f" — {sg.reason}" if sg.reason else "") if sg else \
            "kws: no suggestion for this field"
        rest = self.DETAIL_LINES - 1
        lines = textwrap.wrap(why, width, break_on_hyphens=False) or [""]
        if len(lines) > rest:
            lines = lines[:rest]
            lines[-1] = fit(lines[-1] + " …", width).rstrip()
        out += [Text(ln, style="dim") for ln in lines + [""] * (rest - len(lines))]
        return out

    def _lines(self, width: int) -> list[Text]:
        s = self.session
        if s is None:
            return [Text("loading the rubric…")]
        sugg = s.suggestions()
        longest = max((len(f.label) for f in self.fields), default=12)
        value_w = 15
        agree_w = 7
        label_w = max(12, min(longest + 1, width - 2 - value_w - agree_w - 20))
        out = []
        for i, f in enumerate(self.fields):
            sel = i == self.cursor and self.has_focus
            v = s.values.get(f.key)
            sg = sugg.get(f.key)
            sv = sg.value if sg is not None else None
            if v and sv and v == sv:
                agree = "= kws"
            elif v and sv:
                agree = "≠ kws"
            elif not v and f.required:
                agree = "needed"
            else:
                agree = ""
            kws = f"kws: {sv}" if sv else ("kws: -" if sg is not None else "")
            line = Text()
            line.append("▶ " if i == self.cursor else "  ", style="bold")
            line.append(fit(f.label, label_w - 1) + " ", style="bold" if sel else "")
            line.append(fit(v or "—", value_w - 1) + " ", style="bold" if v else "dim")
            line.append(fit(agree, agree_w), style="bold" if agree == "≠ kws" else "dim")
            line.append(fit(kws, max(0, width - 2 - label_w - value_w - agree_w)), style="dim")
            if sel:
                line.stylize("reverse")
            out.append(line)
        return out + self._detail(width, sugg)

    def render_line(self, y: int) -> Strip:
        """Line API: the form's lines are built once per change and kept as strips
        (a repaint per keystroke then costs next to nothing)."""
        width = max(20, self.size.width)
        s = self.session
        key = (width, self.cursor, self.has_focus, id(s),
               tuple(sorted(s.values.items())) if s else (), s._version if s else -1)
        if key != self._strip_key:
            console = self.app.console
            self._strips = [Strip(list(t.render(console)), t.cell_len).extend_cell_length(width)
                            .crop(0, width).apply_style(self.rich_style) for t in self._lines(width)]
            self._strip_key = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width, self.rich_style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def watch_cursor(self) -> None:
        self.refresh()

    # value keys: consumed before any binding of the screen or app
    def check_consume_key(self, key: str, character: str | None) -> bool:
        f = self.current_field
        return bool(f is not None and character and len(character) == 1 and f.by_key(character) is not None)

    def handle_key_now(self, event: events.Key) -> bool:
        """A value key of the focused field picks that value (called by the app when it
        reads the key, so picks and the bound keys around them keep their order)."""
        f = self.current_field
        ch = event.character
        if f is None or self.session is None or not ch or len(ch) != 1 or f.by_key(ch) is None:
            return False
        if self.session.pick_by_key(f.key, ch):
            self._changed(advance=True)
        return True

    def on_key(self, event: events.Key) -> None:
        if self.handle_key_now(event):  # keys that reach the form another way (tests, palette)
            event.stop()
            event.prevent_default()

    def _changed(self, advance: bool = False) -> None:
        """After a value change: move on, repaint, and update the panel and the screen
        in this same cycle (one frame per keystroke; a message would cost a second)."""
        if advance and self.cursor < len(self.fields) - 1:
            self.cursor += 1
        self.refresh()
        panel = self.parent
        if isinstance(panel, RubricPanel):
            panel.refresh_rubric(form=False)
        self.screen.commit_armed = False  # type: ignore[attr-defined]

    def action_field(self, delta: int) -> None:
        n = len(self.fields)
        if n:
            self.cursor = min(max(self.cursor + delta, 0), n - 1)

    def action_accept(self) -> None:
        f = self.current_field
        if f is None or self.session is None:
            return
        if self.session.accept_suggestion(f.key) or self.session.values.get(f.key):
            self._changed(advance=True)
        else:
            self.app.bell()
            self.notify(f"kws has no suggestion for {f.label} yet", severity="warning", timeout=3)

    def action_clear(self) -> None:
        f = self.current_field
        if f is not None and self.session is not None and self.session.set_value(f.key, None):
            self._changed()

    def action_edit_rationale(self) -> None:
        area = self.screen.query_one(RationaleArea)
        self.screen.set_focus(area)
        area.move_cursor(area.document.end)  # continue a restored or prefilled rationale


class RubricPanel(Panel):
    """The rubric form, the focused field's keys, suggestion and the findings behind it,
    and the rationale editor."""

    DEFAULT_CSS = """
    RubricPanel #rationale-label { height: 1; }
    RubricPanel RationaleArea { height: 1fr; min-height: 3; border: none; padding: 0; }
    RubricPanel RationaleArea:focus { border: none; background: $boost; }
    RubricPanel #rubric-status { height: auto; max-height: 2; }
    """

    def compose(self) -> ComposeResult:
        yield RubricForm(id="rubric-form")
        yield Static("", id="rationale-label", markup=False)
        yield RationaleArea(id="rationale", soft_wrap=True, show_line_numbers=False)
        yield Static("", id="rubric-status", markup=False)

    def on_mount(self) -> None:
        self.session: ReviewSession | None = None
        self._syncing = False

    @property
    def form(self) -> RubricForm:
        return self.query_one(RubricForm)

    def bind_session(self, session: ReviewSession) -> None:
        self.session = session
        self.form.bind_session(session)
        self.sync_rationale()
        self.refresh_rubric()

    def sync_rationale(self) -> None:
        """Put the session's rationale into the editor (after undo, prefill, restore)."""
        if self.session is None:
            return
        area = self.query_one(RationaleArea)
        if area.text != self.session.rationale:
            self._syncing = True
            area.load_text(self.session.rationale)
            self._syncing = False

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._syncing or self.session is None:
            return
        event.stop()
        if self.session.set_rationale(event.text_area.text):
            self.refresh_rubric(form=False)

    def set_status(self, text: str) -> None:
        set_static(self.query_one("#rubric-status", Static), text)

    def refresh_rubric(self, form: bool = True) -> None:
        s = self.session
        if s is None:
            return
        if form:
            self.form.refresh()
        rf = s.rubric.field(s.rubric.rationale_field)
        need = [f"{x.key} is {s.values[x.key]}" for x in s.rubric.choice_fields if s.values.get(x.key) in x.rationale_for]
        label = f"{rf.label if rf else 'Rationale'}" + (f" (required: {', '.join(need)})" if need else "") + ":"
        set_static(self.query_one("#rationale-label", Static), label)

    def on_rubric_form_changed(self, event: RubricForm.Changed) -> None:
        event.stop()  # handled in RubricForm._changed already
