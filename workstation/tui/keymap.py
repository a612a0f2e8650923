"""Key bindings of the review app: every action has a binding id; keymap files map ids to
keys.

Keymap files (format: ``docs/tui.md``, "Keymaps")::

    name = "vim"                   # optional
    base = "default"               # user file only, optional: the keymap it starts from
    [keys]
    "queue.down" = "j,down"        # comma-separated Textual key names, or an array of them

Resolution (:func:`resolve_keymap`): the keymap named by ``--keymap`` (``default``,
``vim``, or a file), else the user file's ``base``, else ``default``; then the user file
``<config dir>/keymap.toml`` (config dir: ``$KWS_CONFIG_DIR`` or
``platformdirs.user_config_dir("kws")``) overrides single bindings. Every bad part of a
file (an unknown binding id, a bad key name, a clash) is reported (file, key, problem)
and ignored on its own: the good entries and ``base`` stay. Only a file that cannot be
read or is not TOML is ignored whole.

Files are read through the schema layer (:func:`~workstation.schema.toml.read_toml`, the
:class:`KeymapFile` struct); an unknown key is an error, reported as a
:class:`~workstation.schema.problem.Problem`. Key names are Textual's; one typed character
is named as Textual names it (:func:`character_key`).

The TUI builds its ``BINDINGS`` from :data:`ACTIONS` and applies the resolved keymap with
``App.set_keymap``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, cast

from msgspec import Meta, Struct

from workstation import settings
from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import read_toml

__all__ = [
    "ACTIONS",
    "BUNDLED",
    "PANEL_KEYS",
    "SCREEN_SCOPES",
    "ActionSpec",
    "KeymapFile",
    "KeymapLoad",
    "UserKeymapFile",
    "bindings_for",
    "character_key",
    "config_dir",
    "key_display",
    "key_meanings",
    "conflicts",
    "keymap_search_path",
    "load_keymap_file",
    "read_keymap_file",
    "normalise_key_list",
    "resolve_keymap",
    "user_keymap_path",
]

BUNDLED = ("default", "vim")


@dataclass(frozen=True)
class ActionSpec:
    """One bindable action: its binding id (``scope.name``), the Textual action it runs
    in that scope, a description (footer, help screen, command palette), the default
    keys, whether the footer shows it, and what the key *means* (:attr:`meaning`: the key
    grammar of docs/tui.md, "Keys"; one meaning per key within a screen, a test checks).
    ``scope`` is where the binding lives: ``app`` (every screen), ``queue`` (queue
    screen), ``review`` (review screen), or a review panel's widget (``diff``, ``checks``,
    ``evidence``, ``scroll``: every scrollable pane, ``rubric``). ``palette``: offered by
    name in the command palette (movement and scrolling are not)."""

    id: str
    action: str
    description: str
    default: str
    show: bool = True
    priority: bool = False
    meaning: str = ""
    palette: bool = True

    @property
    def scope(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def means(self) -> str:
        """What the key does, in the grammar's words (the description where unset)."""
        return self.meaning or self.description.lower()


def _move(id_: str, action: str, description: str, default: str, meaning: str) -> ActionSpec:
    return ActionSpec(id_, action, description, default, show=False, meaning=meaning, palette=False)


#: the panel jumps of the review screen: alt+<n> shows panel n (digits pick values).
PANEL_KEYS = {"spec": 1, "diff": 2, "checks": 3, "timing": 4, "rubric": 5, "history": 6, "profile": 7}

#: every action, in help-screen order. Defaults equal keymaps/default.toml (a test checks).
ACTIONS: tuple[ActionSpec, ...] = (
    # the whole app (every screen)
    ActionSpec("app.help", "show_keys", "Keys", "f1,question_mark", meaning="help: every key"),
    ActionSpec("app.palette", "command_palette", "Commands", "ctrl+p", show=False, meaning="command palette"),
    ActionSpec("app.switch_keymap", "switch_keymap", "Switch keymap", "f2", show=False),
    ActionSpec("app.sync", "sync", "Sync records", "f6", show=False,
               meaning="sync: pull and push the queue's records"),
    ActionSpec("app.calibration", "show_calibration", "Calibration", "f7", show=False,
               meaning="calibration view"),
    ActionSpec("app.report", "show_report", "Report", "f8", show=False,
               meaning="report view of the task (under the cursor, or open)"),
    ActionSpec("app.quit", "quit", "Quit", "ctrl+q", show=False, priority=True),
    # queue screen
    ActionSpec("queue.open", "open_task", "Open", "enter", meaning="confirm"),
    ActionSpec("queue.next_unreviewed", "next_unreviewed", "Next unreviewed", "n",
               meaning="next task I have not reviewed"),
    ActionSpec("queue.next_reserved", "next_reserved", "Next reserved by me", "m",
               meaning="next task I hold reserved"),
    ActionSpec("queue.filter", "focus_filter", "Filter", "slash"),
    ActionSpec("queue.clear_filter", "clear_filter", "Clear filter", "x", show=False),
    ActionSpec("queue.sort", "cycle_sort", "Sort", "s"),
    ActionSpec("queue.reverse", "reverse_sort", "Reverse", "S", show=False, meaning="reverse the sort"),
    ActionSpec("queue.reserve", "reserve", "Reserve", "r", meaning="reserve the task (4 h) and sync"),
    ActionSpec("queue.release", "release", "Release", "u", show=False, meaning="release my reservation and sync"),
    ActionSpec("queue.refresh", "refresh_queue", "Reload", "f5", show=False, meaning="reload tasks and records"),
    _move("queue.down", "table('cursor_down')", "Down", "down", "down"),
    _move("queue.up", "table('cursor_up')", "Up", "up", "up"),
    _move("queue.page_down", "table('page_down')", "Page down", "pagedown", "page down"),
    _move("queue.page_up", "table('page_up')", "Page up", "pageup", "page up"),
    _move("queue.top", "table('cursor_top')", "First task", "home", "top"),
    _move("queue.bottom", "table('cursor_bottom')", "Last task", "end", "bottom"),
    ActionSpec("queue.quit", "quit", "Quit", "q", show=False),
    # review screen (any panel)
    ActionSpec("review.back", "back", "Queue", "escape", meaning="back"),
    ActionSpec("review.commit", "commit", "Commit", "ctrl+s", meaning="commit the verdict"),
    ActionSpec("review.commit_next", "commit_next", "Commit, next", "ctrl+n",
               meaning="commit the verdict and open the next unreviewed task"),
    ActionSpec("review.next_task", "next_task", "Next task", "N", show=False,
               meaning="open the next unreviewed task (no commit)"),
    ActionSpec("review.accept_all", "accept_all", "Accept all", "A", meaning="accept every suggestion for empty fields"),
    ActionSpec("review.undo", "undo", "Undo", "ctrl+z", show=False),
    ActionSpec("review.redo", "redo", "Redo", "ctrl+y", show=False),
    ActionSpec("review.rerun_all", "rerun_all", "Re-run all", "R", show=False, meaning="re-run every check"),
    ActionSpec("review.rerun_timing", "rerun_timing", "Re-run timing", "T", show=False,
               meaning="re-run the timing checks"),
    ActionSpec("review.dispute", "dispute", "Dispute", "D", show=False, meaning="dispute a verdict of the task"),
    ActionSpec("review.resolve", "resolve", "Resolve dispute", "X", show=False,
               meaning="resolve an open dispute of the task"),
    ActionSpec("review.prefill", "prefill_rationale", "Cite findings", "P", show=False,
               meaning="cite the marked findings in the rationale"),
    ActionSpec("review.maximize", "toggle_maximize", "Max/restore", "z", show=False,
               meaning="maximise or restore the focused panel"),
    ActionSpec("review.layout", "toggle_layout", "Tabs/columns", "f3", show=False),
    ActionSpec("review.grow", "grow_panel", "Grow panel", "plus,equals_sign", show=False,
               meaning="taller panel", palette=False),
    ActionSpec("review.shrink", "shrink_panel", "Shrink panel", "minus", show=False, meaning="shorter panel",
               palette=False),
    ActionSpec("review.wider", "wider_panel", "Widen panel", "greater_than_sign", show=False,
               meaning="wider panel", palette=False),
    ActionSpec("review.narrower", "narrower_panel", "Narrow panel", "less_than_sign", show=False,
               meaning="narrower panel", palette=False),
    ActionSpec("review.next_panel", "next_panel", "Next panel", "tab", show=False, palette=False),
    ActionSpec("review.prev_panel", "prev_panel", "Previous panel", "shift+tab", show=False, palette=False),
    *(ActionSpec(f"review.panel_{name}", f"show_panel('{name}')",
                 "Source" if name == "diff" else name.capitalize(), f"alt+{n}", show=False,
                 meaning=f"show panel {n}") for name, n in PANEL_KEYS.items()),
    # source / diff viewer
    ActionSpec("diff.next_hunk", "next_hunk", "Next hunk", "right_square_bracket"),
    ActionSpec("diff.prev_hunk", "prev_hunk", "Previous hunk", "left_square_bracket"),
    ActionSpec("diff.toggle_view", "toggle_view", "Unified/split", "v", meaning="unified or split diff"),
    ActionSpec("diff.next_file", "next_file", "Next file", "f", meaning="next task file"),
    _move("diff.down", "scroll_lines(1)", "Down", "down", "down"),
    _move("diff.up", "scroll_lines(-1)", "Up", "up", "up"),
    _move("diff.left", "scroll_columns(-8)", "Left", "left", "left"),
    _move("diff.right", "scroll_columns(8)", "Right", "right", "right"),
    _move("diff.page_down", "scroll_pages(1)", "Page down", "pagedown,space", "page down"),
    _move("diff.page_up", "scroll_pages(-1)", "Page up", "pageup", "page up"),
    _move("diff.top", "scroll_to_top", "Top", "home", "top"),
    _move("diff.bottom", "scroll_to_bottom", "Bottom", "end", "bottom"),
    # checks panel: the list of checks and findings
    _move("checks.down", "cursor(1)", "Down", "down", "down"),
    _move("checks.up", "cursor(-1)", "Up", "up", "up"),
    _move("checks.page_down", "page_evidence(1)", "Page down the evidence", "pagedown,space", "page down"),
    _move("checks.page_up", "page_evidence(-1)", "Page up the evidence", "pageup", "page up"),
    _move("checks.top", "cursor_top", "First check", "home", "top"),
    _move("checks.bottom", "cursor_bottom", "Last check", "end", "bottom"),
    _move("checks.next_check", "jump('check', 1)", "Next check", "c", "next check (skip its findings)"),
    _move("checks.prev_check", "jump('check', -1)", "Previous check", "C", "previous check"),
    _move("checks.next_fail", "jump('fail', 1)", "Next fail", "full_stop", "next fail or error"),
    _move("checks.prev_fail", "jump('fail', -1)", "Previous fail", "comma", "previous fail or error"),
    ActionSpec("checks.open", "open_evidence", "Read evidence", "enter", meaning="confirm"),
    ActionSpec("checks.mark", "mark", "Mark finding", "m", meaning="mark the finding (to cite it)"),
    ActionSpec("checks.rerun", "rerun", "Re-run check", "r", meaning="re-run the check under the cursor"),
    # the evidence pane, once focused (Enter on a finding)
    ActionSpec("evidence.back", "leave", "Back to the checks", "escape", show=False, meaning="back", palette=False),
    # every scrollable pane: spec, history, timing, evidence, help and report views
    _move("scroll.down", "scroll_down", "Down", "down", "down"),
    _move("scroll.up", "scroll_up", "Up", "up", "up"),
    _move("scroll.page_down", "page_down", "Page down", "pagedown,space", "page down"),
    _move("scroll.page_up", "page_up", "Page up", "pageup", "page up"),
    _move("scroll.top", "scroll_home", "Top", "home", "top"),
    _move("scroll.bottom", "scroll_end", "Bottom", "end", "bottom"),
    # rubric form
    _move("rubric.down", "field(1)", "Next field", "down", "down"),
    _move("rubric.up", "field(-1)", "Previous field", "up", "up"),
    _move("rubric.page_down", "field_page(1)", "Fields down a page", "pagedown", "page down"),
    _move("rubric.page_up", "field_page(-1)", "Fields up a page", "pageup", "page up"),
    _move("rubric.top", "field_edge(-1)", "First field", "home", "top"),
    _move("rubric.bottom", "field_edge(1)", "Last field", "end", "bottom"),
    ActionSpec("rubric.confirm", "confirm", "Confirm field", "enter", meaning="confirm"),
    *(ActionSpec(f"rubric.pick_{n}", f"pick({n})", f"Value {n}", str(n), show=False,
                 meaning="pick the nth value of the focused field", palette=False) for n in range(1, 10)),
    ActionSpec("rubric.clear", "clear", "Clear field", "backspace", show=False),
    ActionSpec("rubric.edit_rationale", "edit_rationale", "Rationale", "e", meaning="edit the rationale"),
)

#: the binding scopes active on each screen (app bindings apply everywhere).
SCREEN_SCOPES: dict[str, tuple[str, ...]] = {
    "queue": ("app", "queue"),
    "review": ("app", "review", "diff", "checks", "evidence", "scroll", "rubric"),
}

_BY_ID = {a.id: a for a in ACTIONS}
_MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")


#: one ``[keys]`` value.
Keys = Annotated[str | list[str], Meta(description="a string of comma-separated keys or an array of strings")]
#: :data:`Keys` as the schema layer's ``convert`` takes a type (``type[T]``): msgspec converts
#: to the annotated union all the same, which a ``type[T]`` cannot spell.
_KEYS_TYPE = cast("type[str | list[str]]", Keys)


class KeymapFile(Struct, frozen=True):
    """A bundled keymap file (or one given with ``--keymap``): an optional name and
    description, and ``[keys]``: binding id = :data:`Keys` (each value is converted on its
    own, so a message names its binding id)."""

    name: Annotated[str, Meta(description="a string")] | None = None
    description: Annotated[str, Meta(description="a string")] | None = None
    keys: Annotated[dict[str, Any], Meta(description="a table of binding id = keys")] = {}


class UserKeymapFile(KeymapFile, frozen=True):
    """The user keymap file: a keymap file that may also name its ``base`` keymap."""

    base: Annotated[str, Meta(description="a bundled keymap name")] | None = None


@dataclass
class KeymapLoad:
    """The resolved keymap: ``name`` (of the base keymap), ``keys`` (binding id ->
    comma-separated keys, complete), the files it came from, and the problems of files
    that were ignored."""

    name: str
    keys: dict[str, str]
    files: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def config_dir() -> Path:
    """Per-user config folder: the ``config_dir`` setting (``$KWS_CONFIG_DIR`` or
    ``platformdirs.user_config_dir("kws")``)."""
    return settings.current().config_dir


def user_keymap_path() -> Path:
    """The user keymap file: ``<config dir>/keymap.toml``."""
    return config_dir() / "keymap.toml"


def keymap_search_path() -> list[Path]:
    """Folders holding the bundled keymaps: ``keymaps/`` next to the package (a source
    checkout), then ``workstation/data/keymaps`` (package data)."""
    pkg = Path(__file__).resolve().parents[1]  # the workstation package
    return [pkg.parent / "keymaps", pkg / "data" / "keymaps"]


#: Textual's short names for some characters' Unicode names (``/`` is ``slash``).
_KEY_NAME_REPLACEMENTS = {
    "solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at",
    "hyphen_minus": "minus", "plus_sign": "plus", "low_line": "underscore",
}


def character_key(character: str) -> str:
    """The Textual key name of one typed character, as Textual names the key event:
    a letter or digit is itself; any other character is its Unicode name in lower case
    with spaces and dashes as underscores (``?`` is ``question_mark``, ``]`` is
    ``right_square_bracket``), a few shortened (``/`` is ``slash``, ``-`` is ``minus``,
    ``+`` is ``plus``, ``_`` is ``underscore``, ``@`` is ``at``, ``\\`` is
    ``backslash``); tab is ``tab``. (Textual's inverse, ``textual.keys.key_to_character``,
    maps each of these back: a test checks.)"""
    if character.isalnum():
        return character
    try:
        name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        name = {"\t": "tab"}.get(character, character)
    return _KEY_NAME_REPLACEMENTS.get(name, name)


def normalise_key_list(keys: str) -> str:
    """Comma-separated keys with each single character written as its key name
    (:func:`character_key`): ``"?,f1"`` -> ``"question_mark,f1"``; how ``App.set_keymap``
    writes keys, so keymaps compare equal however they spell a key."""
    return ",".join(character_key(k) if len(k) == 1 else k for k in (p.strip() for p in keys.split(",")))


def _known_key_names() -> set[str]:
    from textual.keys import Keys

    names = {k.value for k in Keys}
    names |= {character_key(chr(c)) for c in range(33, 127)}
    names |= {"space", "tab", "enter", "escape", "backspace", "delete", "insert", "home", "end",
              "pageup", "pagedown", "up", "down", "left", "right"}
    names |= {f"f{i}" for i in range(1, 25)}
    return names


def _check_key(key: str, known: set[str]) -> str | None:
    """None when ``key`` is a valid Textual key name, else the problem."""
    if not key:
        return "empty key name"
    if any(ch.isspace() for ch in key):
        return f"{key!r} contains a space (separate keys with commas)"
    *mods, base = key.split("+") if len(key) > 1 else [key]
    for m in mods:
        if m not in _MODIFIERS:
            return f"{key!r}: unknown modifier {m!r} (modifiers: {', '.join(_MODIFIERS)})"
    if len(base) == 1:
        base = character_key(base)
    if base not in known and base.lower() not in known:
        return f"{key!r}: unknown key name {base!r} (e.g. j, ctrl+s, f1, enter, question_mark)"
    return None


def _normalise_keys(value: str | list[str], file: Path, key: str, known: set[str]) -> str:
    parts = [p.strip() for p in (value.split(",") if isinstance(value, str) else value)]
    if not parts or parts == [""]:
        raise Problem(file, key, "no keys given")
    for p in parts:
        problem = _check_key(p, known)
        if problem:
            raise Problem(file, key, problem)
    return normalise_key_list(",".join(parts))


def read_keymap_file(path: Path | str, *, user: bool = False) -> tuple[dict[str, str], str | None, str | None,
                                                                      list[Problem]]:
    """Read one keymap file, keeping every good entry; returns ``(keys, name, base,
    problems)``: the bindings that validate, the file's name and base (None when absent or
    bad), and one :class:`~workstation.schema.problem.Problem` (file, key, problem) per bad
    part, each ignored on its own: an unknown top-level key (``base`` outside a user file
    included), a value of the wrong type, ``base`` not a bundled keymap, a ``keys`` entry
    that names no binding id, a value that is not keys, an unknown key name.

    Raises :class:`~workstation.schema.problem.Problem` only when nothing of the file can be
    used: it cannot be read or is not valid TOML.
    """
    path = Path(path)
    schema: type[KeymapFile] = UserKeymapFile if user else KeymapFile
    data = read_toml(path)
    problems: list[Problem] = []
    allowed = ", ".join(sorted(schema.__struct_fields__))
    unknown = unknown_keys(data, schema)
    for k in unknown:
        problems.append(Problem(path, k, f"unknown key (allowed: {allowed})"))
    known_top = {k: v for k, v in data.items() if k not in unknown}
    try:
        doc = convert(known_top, schema, file=path)
    except Problem:
        parts: dict[str, Any] = {}
        for k, v in known_top.items():  # each top-level key on its own: the good ones stay
            try:
                convert({k: v}, schema, file=path)
                parts[k] = v
            except Problem as e:
                problems.append(e)
        doc = convert(parts, schema, file=path)
    base = doc.base if isinstance(doc, UserKeymapFile) else None
    if base is not None and base not in BUNDLED:
        problems.append(Problem(path, "base", f"must be one of {', '.join(BUNDLED)}, got {base!r}"))
        base = None
    known = _known_key_names()
    keys: dict[str, str] = {}
    for bid, value in doc.keys.items():
        where = f"keys.{bid}"
        if bid not in _BY_ID:
            problems.append(Problem(path, where, f"unknown binding id {bid!r} (see the help screen or docs/tui.md)"))
            continue
        try:
            keys[bid] = _normalise_keys(convert(value, _KEYS_TYPE, file=path, prefix=where), path, where, known)
        except Problem as e:
            problems.append(e)
    return keys, doc.name, base, problems


def load_keymap_file(path: Path | str, *, user: bool = False) -> tuple[dict[str, str], str | None, str | None]:
    """Read and validate one keymap file strictly; returns ``(keys, name, base)``.

    Raises :class:`~workstation.schema.problem.Problem` (file, key, problem) for the first
    problem :func:`read_keymap_file` finds, or when the file cannot be read or parsed.
    """
    keys, name, base, problems = read_keymap_file(path, user=user)
    if problems:
        raise problems[0]
    return keys, name, base


def conflicts(keys: dict[str, str], file: Path | str) -> list[Problem]:
    """Every clash in ``keys``: two actions of one scope sharing a key, or one key meaning
    two things on one screen (:data:`SCREEN_SCOPES`, :attr:`ActionSpec.means`: the key
    grammar); one :class:`~workstation.schema.problem.Problem` each."""
    return [Problem(file, f"keys.{bid}", msg) for bid, _other, msg in _conflict_pairs(keys)]


def _conflict_pairs(keys: dict[str, str]) -> list[tuple[str, str, str]]:
    """The clashes of :func:`conflicts` as (binding id, the other binding id, problem)."""
    out: list[tuple[str, str, str]] = []
    seen: dict[tuple[str, str], str] = {}
    for bid in sorted(keys):
        scope = _BY_ID[bid].scope
        for k in keys[bid].split(","):
            other = seen.get((scope, k))
            if other is not None and other != bid:
                out.append((bid, other, f"key {k!r} is also bound to {other} in the same scope ({scope})"))
            seen[(scope, k)] = bid
    for screen, (bid, other, k) in _meaning_clashes(keys).items():
        out.append((bid, other, f"key {k!r} means {_BY_ID[bid].means!r} and, through {other}, "
                                f"{_BY_ID[other].means!r} on the {screen} screen (one meaning per key)"))
    return out


def check_conflicts(keys: dict[str, str], file: Path | str) -> None:
    """Raise the first of :func:`conflicts` (a :class:`~workstation.schema.problem.Problem`)."""
    found = conflicts(keys, file)
    if found:
        raise found[0]


def _clash(keys: dict[str, str], bid: str, new: str) -> str:
    """Why binding ``bid`` cannot take keys ``new`` next to ``keys``: the first binding
    of its scope on one of those keys, or of another meaning on one of its screens."""
    spec = _BY_ID[bid]
    screens = [sc for sc, scopes in SCREEN_SCOPES.items() if spec.scope in scopes]
    for k in new.split(","):
        for other, ks in sorted(keys.items()):
            if other == bid or k not in ks.split(","):
                continue
            o = _BY_ID[other]
            if o.scope == spec.scope:
                return f"key {k!r} is bound to {other} in the same scope ({spec.scope})"
            shared = [sc for sc in screens if o.scope in SCREEN_SCOPES[sc]]
            if shared and o.means != spec.means:
                return (f"key {k!r} means {o.means!r} ({other}) on the {shared[0]} screen, "
                        f"not {spec.means!r} (one meaning per key)")
    return f"keys {new!r} clash with another binding"


def _meaning_clashes(keys: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """Per screen, the first key bound to two meanings: (binding id, other id, key)."""
    out: dict[str, tuple[str, str, str]] = {}
    for screen, scopes in SCREEN_SCOPES.items():
        by_key: dict[str, str] = {}
        for bid in sorted(keys):
            if _BY_ID[bid].scope not in scopes:
                continue
            for k in keys[bid].split(","):
                other = by_key.setdefault(k, bid)
                if _BY_ID[other].means != _BY_ID[bid].means and screen not in out:
                    out[screen] = (bid, other, k)
    return out


def key_meanings(keys: dict[str, str], screen: str) -> dict[str, tuple[str, list[str]]]:
    """The key grammar of one screen under ``keys``: key -> (meaning, binding ids)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for a in ACTIONS:
        if a.scope not in SCREEN_SCOPES[screen]:
            continue
        for k in keys.get(a.id, a.default).split(","):
            meaning, ids = out.setdefault(k, (a.means, []))
            ids.append(a.id)
    return out


def defaults() -> dict[str, str]:
    """The built-in default keys (equal to keymaps/default.toml)."""
    return {a.id: normalise_key_list(a.default) for a in ACTIONS}


def _bundled_path(name: str) -> Path | None:
    for d in keymap_search_path():
        p = d / f"{name}.toml"
        if p.is_file():
            return p
    return None


def resolve_keymap(choice: str | None = None, *, user_file: Path | None = None) -> KeymapLoad:
    """The keymap to use (see the module docstring). Never raises: a bad file's problem
    (or any other error resolving the keymap: an unreadable config folder, a path the
    system refuses, a directory where the file should be) goes to ``problems`` and the
    default keymap is used instead."""
    try:
        return _resolve_keymap(choice, user_file)
    except Exception as e:  # noqa: BLE001  (documented as never raising: any failure is a problem of the keymap)
        where = user_file if user_file is not None else (choice or "keymap")
        out = KeymapLoad(name="default", keys=defaults())
        out.problems.append(e if isinstance(e, Problem) else Problem(str(where), "", f"cannot be used: {e}"))
        return out


def _user_file_state(ufile: Path) -> str:
    """``"file"``, ``"absent"`` or why the user keymap path cannot be read."""
    try:
        st = ufile.stat()
    except FileNotFoundError:
        return "absent"
    except NotADirectoryError:
        return "absent"
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    except ValueError as e:
        return f"is not a usable path: {e}"
    import stat as _stat

    if _stat.S_ISDIR(st.st_mode):
        return "is a directory, not a keymap file"
    if not _stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    return "file"


def _resolve_keymap(choice: str | None, user_file: Path | None) -> KeymapLoad:
    out = KeymapLoad(name="default", keys=defaults())
    ufile = user_file if user_file is not None else user_keymap_path()
    user_keys: dict[str, str] = {}
    user_base: str | None = None
    state = _user_file_state(ufile)
    if state not in ("file", "absent"):
        out.problems.append(Problem(ufile, "", state))
    elif state == "file":
        try:
            user_keys, _uname, user_base, problems = read_keymap_file(ufile, user=True)
            out.problems.extend(problems)  # each bad entry is dropped on its own
        except Problem as e:
            out.problems.append(e)  # unreadable or not TOML: nothing of it applies
    base = choice or user_base or "default"
    path = Path(base) if base not in BUNDLED else _bundled_path(base)
    if path is None:
        if base != "default":
            out.problems.append(Problem(f"{base}.toml", "", "bundled keymap not found; looked in "
                                            + ", ".join(str(d) for d in keymap_search_path())))
    else:
        try:
            keys, name, _ = load_keymap_file(path)
            merged = {**defaults(), **keys}
            check_conflicts(merged, path)
            out.keys, out.name = merged, name or (base if base in BUNDLED else path.stem)
            out.files.append(path)
        except Problem as e:
            out.problems.append(e)
            out.keys, out.name = defaults(), "default"
    if user_keys:
        # an override that clashes is dropped (back to the base keymap's keys for that
        # binding), the others stay; all applied at once, so swapping two keys works
        merged = {**out.keys, **user_keys}
        dropped: set[str] = set()
        for _ in range(len(user_keys)):  # each round drops one override
            clashes = _conflict_pairs(merged)
            if not clashes:
                break
            bid, other, _msg = clashes[0]
            victim = bid if bid in user_keys and bid not in dropped else other
            dropped.add(victim)
            rest = {k: v for k, v in merged.items() if k != victim}
            out.problems.append(Problem(ufile, f"keys.{victim}",
                                        "ignored: " + _clash(rest, victim, user_keys.get(victim, merged[victim]))))
            merged[victim] = out.keys[victim]
        if _conflict_pairs(merged):  # cannot happen with a clean base keymap: keep the base whole
            merged = dict(out.keys)
        out.keys = merged
    if state == "file" and (user_keys or user_base):
        out.files.append(ufile)
    return out


def bindings_for(scope: str) -> list:
    """Textual ``Binding`` s (with ids) for every action of ``scope``, default keys."""
    from textual.binding import Binding

    return [
        Binding(a.default, a.action, a.description, show=a.show, priority=a.priority, id=a.id)
        for a in ACTIONS
        if a.scope == scope
    ]


def key_display(keys: str) -> str:
    """Keys as the help screen shows them: ``ctrl+s``, ``?``, ``]`` (comma-separated)."""
    from textual.keys import format_key

    out = []
    for k in keys.split(","):
        *mods, base = k.split("+")
        shown = format_key(base) if base not in ("space", "tab", "enter", "escape") else base
        out.append("+".join([*mods, shown]))
    return ", ".join(out)
