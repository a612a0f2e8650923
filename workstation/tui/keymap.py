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
``platformdirs.user_config_dir("kws")``) overrides single bindings. A file that does not
parse or validate is reported (file, key, problem) and ignored: the app falls back to
the default keymap rather than start with half a keymap.

Files are read through the schema layer (:func:`~workstation.schema.toml.read_toml`, the
:class:`KeymapFile` struct); an unknown key is an error, reported as a
:class:`~workstation.schema.problem.Problem`. Key names are Textual's; one typed character
is named as Textual names it (:func:`character_key`).

The TUI builds its ``BINDINGS`` from :data:`ACTIONS` and applies the resolved keymap with
``App.set_keymap``.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import platformdirs
from msgspec import Meta, Struct

from workstation.schema.problem import Problem
from workstation.schema.structs import convert, unknown_keys
from workstation.schema.toml import read_toml

__all__ = [
    "ACTIONS",
    "BUNDLED",
    "ActionSpec",
    "KeymapFile",
    "KeymapLoad",
    "UserKeymapFile",
    "bindings_for",
    "character_key",
    "config_dir",
    "key_display",
    "keymap_search_path",
    "load_keymap_file",
    "normalise_key_list",
    "resolve_keymap",
    "user_keymap_path",
]

BUNDLED = ("default", "vim")


@dataclass(frozen=True)
class ActionSpec:
    """One bindable action: its binding id (``scope.name``), the Textual action it runs
    in that scope, a description (footer and help screen), the default keys, and whether
    the footer shows it. ``scope`` is where the binding lives: ``app``, ``queue`` (queue
    screen), ``review`` (review screen), or a review panel widget (``diff``, ``checks``,
    ``rubric``)."""

    id: str
    action: str
    description: str
    default: str
    show: bool = True
    priority: bool = False

    @property
    def scope(self) -> str:
        return self.id.split(".", 1)[0]


#: every action, in help-screen order. Defaults equal keymaps/default.toml (a test checks).
ACTIONS: tuple[ActionSpec, ...] = (
    # the whole app
    ActionSpec("app.help", "show_keys", "Keys", "f1,question_mark"),
    ActionSpec("app.palette", "command_palette", "Commands", "ctrl+p", show=False),
    ActionSpec("app.switch_keymap", "switch_keymap", "Switch keymap", "f2", show=False),
    ActionSpec("app.quit", "quit", "Quit", "ctrl+q", show=False, priority=True),
    # queue screen
    ActionSpec("queue.open", "open_task", "Open", "enter"),
    ActionSpec("queue.next_unreviewed", "next_unreviewed", "Next unreviewed", "n"),
    ActionSpec("queue.filter", "focus_filter", "Filter", "slash"),
    ActionSpec("queue.clear_filter", "clear_filter", "Clear filter", "x", show=False),
    ActionSpec("queue.sort", "cycle_sort", "Sort", "s"),
    ActionSpec("queue.reverse", "reverse_sort", "Reverse", "S", show=False),
    ActionSpec("queue.refresh", "refresh_queue", "Reload", "f5", show=False),
    ActionSpec("queue.down", "table('cursor_down')", "Down", "down", show=False),
    ActionSpec("queue.up", "table('cursor_up')", "Up", "up", show=False),
    ActionSpec("queue.page_down", "table('page_down')", "Page down", "pagedown", show=False),
    ActionSpec("queue.page_up", "table('page_up')", "Page up", "pageup", show=False),
    ActionSpec("queue.top", "table('cursor_top')", "First task", "home", show=False),
    ActionSpec("queue.bottom", "table('cursor_bottom')", "Last task", "end", show=False),
    ActionSpec("queue.quit", "quit", "Quit", "q", show=False),
    # review screen
    ActionSpec("review.back", "back", "Queue", "escape"),
    ActionSpec("review.commit", "commit", "Commit", "ctrl+s"),
    ActionSpec("review.accept_all", "accept_all", "Accept all", "A"),
    ActionSpec("review.undo", "undo", "Undo", "ctrl+z", show=False),
    ActionSpec("review.redo", "redo", "Redo", "ctrl+y", show=False),
    ActionSpec("review.rerun_all", "rerun_all", "Re-run all", "R", show=False),
    ActionSpec("review.rerun_timing", "rerun_timing", "Re-run timing", "T", show=False),
    ActionSpec("review.dispute", "dispute", "Dispute", "D", show=False),
    ActionSpec("review.prefill", "prefill_rationale", "Cite findings", "P", show=False),
    ActionSpec("review.maximize", "toggle_maximize", "Max/restore", "z", show=False),
    ActionSpec("review.layout", "toggle_layout", "Tabs/columns", "f3", show=False),
    ActionSpec("review.grow", "grow_panel", "Grow panel", "plus,equals_sign", show=False),
    ActionSpec("review.shrink", "shrink_panel", "Shrink panel", "minus", show=False),
    ActionSpec("review.wider", "wider_panel", "Widen panel", "greater_than_sign", show=False),
    ActionSpec("review.narrower", "narrower_panel", "Narrow panel", "less_than_sign", show=False),
    ActionSpec("review.next_panel", "next_panel", "Next panel", "tab", show=False),
    ActionSpec("review.prev_panel", "prev_panel", "Previous panel", "shift+tab", show=False),
    ActionSpec("review.panel_spec", "show_panel('spec')", "Spec", "1", show=False),
    ActionSpec("review.panel_diff", "show_panel('diff')", "Diff", "2", show=False),
    ActionSpec("review.panel_checks", "show_panel('checks')", "Checks", "3", show=False),
    ActionSpec("review.panel_timing", "show_panel('timing')", "Timing", "4", show=False),
    ActionSpec("review.panel_rubric", "show_panel('rubric')", "Rubric", "5", show=False),
    ActionSpec("review.panel_history", "show_panel('history')", "History", "6", show=False),
    ActionSpec("review.panel_profile", "show_panel('profile')", "Profile", "7", show=False),
    # source / diff viewer
    ActionSpec("diff.next_hunk", "next_hunk", "Next hunk", "right_square_bracket"),
    ActionSpec("diff.prev_hunk", "prev_hunk", "Previous hunk", "left_square_bracket"),
    ActionSpec("diff.toggle_view", "toggle_view", "Unified/split", "v"),
    ActionSpec("diff.next_file", "next_file", "Next file", "f"),
    ActionSpec("diff.down", "scroll_lines(1)", "Down", "down", show=False),
    ActionSpec("diff.up", "scroll_lines(-1)", "Up", "up", show=False),
    ActionSpec("diff.page_down", "scroll_pages(1)", "Page down", "pagedown,space", show=False),
    ActionSpec("diff.page_up", "scroll_pages(-1)", "Page up", "pageup", show=False),
    ActionSpec("diff.top", "scroll_to_top", "Top", "home", show=False),
    ActionSpec("diff.bottom", "scroll_to_bottom", "Bottom", "end", show=False),
    # checks panel
    ActionSpec("checks.down", "cursor(1)", "Down", "down", show=False),
    ActionSpec("checks.up", "cursor(-1)", "Up", "up", show=False),
    ActionSpec("checks.mark", "mark", "Mark finding", "space"),
    ActionSpec("checks.rerun", "rerun", "Re-run check", "r"),
    # rubric form
    ActionSpec("rubric.down", "field(1)", "Next field", "down", show=False),
    ActionSpec("rubric.up", "field(-1)", "Previous field", "up", show=False),
    ActionSpec("rubric.accept", "accept", "Accept kws's", "space"),
    ActionSpec("rubric.clear", "clear", "Clear field", "backspace", show=False),
    ActionSpec("rubric.edit_rationale", "edit_rationale", "Rationale", "e"),
)

_BY_ID = {a.id: a for a in ACTIONS}
_MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")


#: one ``[keys]`` value.
Keys = Annotated[str | list[str], Meta(description="a string of comma-separated keys or an array of strings")]


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
    """Per-user config folder: ``$KWS_CONFIG_DIR`` or ``platformdirs.user_config_dir("kws")``."""
    env = os.environ.get("KWS_CONFIG_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("kws"))


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


def load_keymap_file(path: Path | str, *, user: bool = False) -> tuple[dict[str, str], str | None, str | None]:
    """Read and validate one keymap file; returns ``(keys, name, base)``.

    Raises :class:`~workstation.schema.problem.Problem` (file, key, problem) for: a file
    that cannot be read or is not valid TOML, an unknown key (``base`` outside a user
    file included), ``base`` not a bundled keymap, a value of the wrong type, a ``keys``
    entry that names no binding id, a value that is not keys, or an unknown key name.
    """
    path = Path(path)
    schema: type[KeymapFile] = UserKeymapFile if user else KeymapFile
    data = read_toml(path)
    unknown = unknown_keys(data, schema)
    if unknown:
        allowed = sorted(schema.__struct_fields__)
        raise Problem(path, unknown[0], f"unknown key (allowed: {', '.join(allowed)})")
    doc = convert(data, schema, file=path)
    base = doc.base if isinstance(doc, UserKeymapFile) else None
    if base is not None and base not in BUNDLED:
        raise Problem(path, "base", f"must be one of {', '.join(BUNDLED)}, got {base!r}")
    known = _known_key_names()
    keys: dict[str, str] = {}
    for bid, value in doc.keys.items():
        if bid not in _BY_ID:
            raise Problem(path, f"keys.{bid}", f"unknown binding id {bid!r} (see the help screen or docs/tui.md)")
        where = f"keys.{bid}"
        keys[bid] = _normalise_keys(convert(value, Keys, file=path, prefix=where), path, where, known)
    return keys, doc.name, base


def check_conflicts(keys: dict[str, str], file: Path | str) -> None:
    """Raise :class:`~workstation.schema.problem.Problem` when two actions of one scope
    share a key."""
    seen: dict[tuple[str, str], str] = {}
    for bid in sorted(keys):
        scope = _BY_ID[bid].scope
        for k in keys[bid].split(","):
            other = seen.get((scope, k))
            if other is not None and other != bid:
                raise Problem(file, f"keys.{bid}", f"key {k!r} is also bound to {other} in the same scope ({scope})")
            seen[(scope, k)] = bid


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
    except Exception as e:  # noqa: BLE001 - documented as never raising
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
        return out
    if state == "file":
        try:
            user_keys, _uname, user_base = load_keymap_file(ufile, user=True)
        except Problem as e:
            out.problems.append(e)
            return out  # the default keymap, never half of the user's
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
        merged = {**out.keys, **user_keys}
        try:
            check_conflicts(merged, ufile)
            out.keys = merged
            out.files.append(ufile)
        except Problem as e:
            out.problems.append(e)
            out.keys, out.name = defaults(), "default"
            out.files = []
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
