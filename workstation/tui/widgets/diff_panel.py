"""DiffPanel: the task's sources in a :class:`SourceView`, one file at a time."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from workstation.review.diff import FileDiff
from workstation.tui.widgets.panel import Panel
from workstation.tui.widgets.source_view import SourceView
from workstation.tui.widgets.text import fit, set_static

__all__ = ["DiffPanel"]


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

    def show_source(self, file: str) -> str | None:
        """Show the diff or listing holding task file ``file`` (the shown one when it
        does); returns the side it is on ("new" or "old": the old side of the first diff
        is the baseline), or None when no shown file is ``file``."""
        if not self.files:
            return None
        fd = self.files[self.index][1]
        if fd.new_name != file and fd.old_name != file:
            if not self.show_file(file):
                if self.files[0][1].old_name != file:
                    return None
                self._show(0)
            fd = self.files[self.index][1]
        return "new" if fd.new_name == file else "old"

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
