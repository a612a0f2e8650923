"""Keymap files: the bundled ones are complete and valid; user files override; bad files
are reported with file, key and problem and the default keymap is used."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from workstation.schema.problem import Problem
from workstation.tui.keymap import (
    ACTIONS,
    character_key,
    defaults,
    key_display,
    load_keymap_file,
    normalise_key_list,
    resolve_keymap,
    user_keymap_path,
)

KEYMAPS = Path(__file__).resolve().parents[1] / "keymaps"


def test_default_toml_equals_the_built_in_defaults_and_lists_every_action():
    data = tomllib.loads((KEYMAPS / "default.toml").read_text())
    assert set(data["keys"]) == {a.id for a in ACTIONS}
    keys, name, _ = load_keymap_file(KEYMAPS / "default.toml")
    assert name == "default" and keys == defaults()


def test_vim_toml_is_complete_and_differs_in_movement():
    data = tomllib.loads((KEYMAPS / "vim.toml").read_text())
    assert set(data["keys"]) == {a.id for a in ACTIONS}
    load = resolve_keymap("vim", user_file=Path("/nonexistent"))
    assert not load.problems and load.name == "vim"
    assert load.keys["queue.down"] == "j,down" and load.keys["review.commit"] == "ctrl+s,Z"
    assert load.keys["diff.next_hunk"].startswith("right_curly_bracket")


def test_binding_ids_are_unique_and_scoped():
    ids = [a.id for a in ACTIONS]
    assert len(ids) == len(set(ids))
    assert {a.scope for a in ACTIONS} == {"app", "queue", "review", "diff", "checks", "evidence", "scroll", "rubric"}


def test_user_file_overrides_and_can_choose_the_base(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    assert user_keymap_path() == tmp_path / "keymap.toml"
    user_keymap_path().write_text('base = "vim"\n[keys]\n"review.commit" = ["ctrl+o", "W"]\n')
    load = resolve_keymap(None)
    assert load.name == "vim" and not load.problems
    assert load.keys["review.commit"] == "ctrl+o,W"
    assert load.keys["queue.down"] == "j,down"
    assert load.files[-1] == user_keymap_path()
    # --keymap wins over the user file's base; the overrides still apply
    load = resolve_keymap("default")
    assert load.name == "default" and load.keys["review.commit"] == "ctrl+o,W"


@pytest.mark.parametrize("text, key, problem", [
    ("[keys\n", "", "not valid TOML"),
    ('[keys]\n"review.comit" = "ctrl+s"\n', "keys.review.comit", "unknown binding id"),
    ('[keys]\n"review.commit" = "ctrl+banana"\n', "keys.review.commit", "unknown key name 'banana'"),
    ('[keys]\n"review.commit" = "hyperdrive+s"\n', "keys.review.commit", "unknown modifier"),
    ('[keys]\n"review.commit" = 5\n', "keys.review.commit", "expected a string"),
    ('[keys]\n"review.commit" = ""\n', "keys.review.commit", "no keys given"),
    ('colour = "red"\n', "colour", "unknown key"),
    ('base = "emacs"\n', "base", "must be one of default, vim"),
    ('[keys]\n"review.commit" = "R"\n', "keys.review.commit", "ignored: key 'R' is bound to review.rerun_all"),
])
def test_malformed_user_file_is_reported_and_ignored(tmp_path, monkeypatch, text, key, problem):
    """A file with one bad part: that part is named (file, key, problem) and ignored; here
    nothing else is in the file, so the keys are the default's."""
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    user_keymap_path().write_text(text)
    load = resolve_keymap(None)
    assert load.name == "default" and load.keys == defaults()
    assert len(load.problems) == 1
    err = load.problems[0]
    assert isinstance(err, Problem)
    assert err.file == user_keymap_path() and err.key == key and problem in err.problem, str(err)
    assert str(user_keymap_path()) in str(err)


def test_a_user_keymap_with_bad_entries_keeps_its_good_ones_and_names_every_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    user_keymap_path().write_text(
        'base = "vim"\ncolour = "red"\n[keys]\n'
        '"review.comit" = "ctrl+s"\n'          # a typo: that entry only
        '"queue.down" = "ctrl+banana"\n'       # a bad key name: queue.down keeps vim's keys
        '"rubric.edit_rationale" = "r"\n'      # r re-runs a check on the review screen
        '"review.commit" = "ctrl+y"\n"review.redo" = "ctrl+s"\n'  # a swap: both apply
        '"review.accept_all" = "W"\n')
    load = resolve_keymap(None)
    assert load.name == "vim" and load.files[-1] == user_keymap_path()
    assert load.keys["review.commit"] == "ctrl+y" and load.keys["review.redo"] == "ctrl+s"
    assert load.keys["review.accept_all"] == "W"
    assert load.keys["queue.down"] == "j,down" and load.keys["rubric.edit_rationale"] == "e"
    got = {(p.key, p.file) for p in load.problems}
    assert got == {(k, user_keymap_path()) for k in (
        "colour", "keys.review.comit", "keys.queue.down", "keys.rubric.edit_rationale")}, load.problems
    msg = {p.key: p.problem for p in load.problems}
    assert "unknown binding id 'review.comit'" in msg["keys.review.comit"]
    assert "re-run the check under the cursor" in msg["keys.rubric.edit_rationale"]


def test_a_bad_keymap_file_given_on_the_command_line_falls_back(tmp_path):
    bad = tmp_path / "mine.toml"
    bad.write_text('[keys]\n"app.quit" = "ctrl+"\n')
    load = resolve_keymap(str(bad), user_file=tmp_path / "none.toml")
    assert load.name == "default" and load.problems and load.problems[0].file == bad


def test_key_display():
    assert key_display("question_mark,f1") == "?, f1"
    assert key_display("ctrl+s,Z") == "ctrl+s, Z"
    assert key_display("right_square_bracket") == "]"


def test_character_key_names_keys_as_textual_does():
    from textual.keys import key_to_character

    short = {"+": "plus", "-": "minus", "/": "slash", "@": "at", "\\": "backslash", "_": "underscore"}
    for c in map(chr, range(33, 127)):
        name = character_key(c)
        if c in short:
            assert name == short[c]
        else:  # Textual's own inverse gives the character back
            assert key_to_character(name) == c, (c, name)
    assert character_key("?") == "question_mark" and character_key("]") == "right_square_bracket"
    assert normalise_key_list("?, f1,ctrl+s") == "question_mark,f1,ctrl+s"


def test_docs_key_grammar_tables_match_the_actions():
    """docs/tui.md lists, per screen, every key of the default keymap with its one meaning
    and its binding ids: exactly what the ActionSpecs say (key_meanings)."""
    import re

    from workstation.tui.keymap import SCREEN_SCOPES, key_meanings

    doc = (KEYMAPS.parent / "docs" / "tui.md").read_text()
    for screen in SCREEN_SCOPES:
        block = re.search(rf"<!-- keys:{screen} -->\n(.*?)<!-- /keys -->", doc, re.S)
        assert block, f"docs/tui.md has no key table for the {screen} screen"
        rows = [r for r in block.group(1).splitlines() if r.startswith("| `")]
        got = {}
        for r in rows:
            key, meaning, ids = (c.strip() for c in r.strip("|").split("|"))
            got[key.strip("`")] = (meaning, ids)
        want = {key_display(k): (m, ", ".join(ids)) for k, (m, ids) in key_meanings(defaults(), screen).items()}
        assert got == want, screen


@pytest.mark.parametrize("name", ["default", "vim"])
def test_one_meaning_per_key_on_each_screen(name):
    from workstation.tui.keymap import SCREEN_SCOPES, key_meanings

    load = resolve_keymap(name, user_file=Path("/nonexistent"))
    assert not load.problems
    for screen in SCREEN_SCOPES:
        km = key_meanings(load.keys, screen)
        assert all(len({a.means for a in ACTIONS if a.id in ids}) == 1 for _m, ids in km.values()), screen
        assert km["enter"][0] == "confirm" and km.get("escape", ("back",))[0] == "back"
    review = key_meanings(load.keys, "review")
    assert {review[str(n)][0] for n in range(1, 10)} == {"pick the nth value of the focused field"}
    assert all(review[f"alt+{n}"][0] == f"show panel {n}" for n in range(1, 7))
    assert review["space"][0] == "page down"


def test_a_user_keymap_giving_a_key_two_meanings_on_a_screen_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("KWS_CONFIG_DIR", str(tmp_path))
    user_keymap_path().write_text('[keys]\n"rubric.edit_rationale" = "r"\n')  # r re-runs a check on that screen
    load = resolve_keymap(None)
    assert load.name == "default" and load.problems
    assert "one meaning per key" in load.problems[0].problem and "review screen" in load.problems[0].problem


def test_the_palette_offers_every_action_of_the_screen_it_was_opened_on(tmp_path, monkeypatch):
    import asyncio

    from tests.tuikit import replay_app, tui_env, wait_queue, wait_review_ready
    from workstation.tui.commands import NAMES, KwsCommands
    from workstation.tui.keymap import SCREEN_SCOPES

    root = tui_env(monkeypatch, tmp_path)

    async def go() -> None:
        app = replay_app(root)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_queue(pilot)
            for screen_kind in ("queue", "review"):
                if screen_kind == "review":
                    app.screen.open_task("matmul-opt")
                    await wait_review_ready(pilot)
                names = {n for n, _h, _cb in KwsCommands(app.screen)._commands()}
                want = {NAMES.get(a.id, a.description) for a in ACTIONS
                        if a.palette and a.scope in SCREEN_SCOPES[screen_kind] and a.scope not in ("evidence", "scroll")}
                assert want <= names, (screen_kind, sorted(want - names))
                assert {"Next unreviewed task", "Next task reserved by me", "Switch keymap: vim",
                        "Open task: matmul-opt"} <= names
            assert {"Reserve task: matmul-opt", "Resolve a dispute of matmul-opt", "Re-run check: correctness",
                    "Set Overall: Accept"} <= names

    asyncio.run(go())


def test_alt_digits_from_a_terminal_reach_the_panel_keys():
    """A terminal sends alt+5 as Esc 5, which Textual's parser turns into the character
    macOS's Option+5 types (∞): the app maps each of these back to alt+digit."""
    from textual._xterm_parser import XTermParser

    from workstation.tui.app import ALT_DIGIT_KEYS

    parser = XTermParser(debug=False)
    for d in "0123456789":
        [ev] = list(parser.feed("\x1b" + d))
        assert ALT_DIGIT_KEYS[ev.key] == d, (d, ev.key)
