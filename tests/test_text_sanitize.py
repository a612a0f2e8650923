"""The one sanitizer for task-derived text (workstation.schema.text) and where it applies:
a task title, the text report of a doc read back from a file (issue 26)."""

from __future__ import annotations

import hashlib

from tests.conftest import write_task
from workstation.engine.report import to_text
from workstation.schema.text import safe_text, safe_tree
from workstation.task.format import load_task

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
HOSTILE = OSC52 + "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\x1b]0;title\x07\x1b[2J\x9b31m\x90dcs\x9c\r\x7f\u202e"


def _unsafe(s: str) -> list[str]:
    return [c for c in s if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
            or 0x202a <= ord(c) <= 0x202e]


def test_control_characters_and_escape_sequences_are_shown_escaped():
    out = safe_text("ok\tline\n" + HOSTILE)
    assert _unsafe(out) == []
    assert out.startswith("ok\tline\n\\x1b]52;c;ZWNobyBwd25lZA==\\x07")  # visible, as text
    assert "\\x9b31m" in out and "\\x90dcs\\x9c" in out and "\\x0d\\x7f\\u202e" in out
    assert safe_text(out) == out  # idempotent
    assert safe_text("C:\\path and \\d+") == "C:\\path and \\d+"  # backslashes stay
    assert safe_text("\ud800lone").startswith("\\ud800")


def test_a_long_text_is_cut_with_its_size_and_hash():
    big = "E" * 1_500_000
    out = safe_text(big, 200)
    digest = hashlib.sha256(big.encode()).hexdigest()[:12]
    assert out == "E" * 200 + f"…[1.4 MB, sha256 {digest}]"
    assert safe_text("short", 200) == "short" and len(safe_text(big, None)) == len(big)


def test_safe_tree_reaches_every_string_and_key():
    doc = {"a\x1b": [OSC52, ("x\x07", 1, None, 2.5)], "n": {"m": "\x9b"}}
    out = safe_tree(doc)
    assert out == {"a\\x1b": ["\\x1b]52;c;ZWNobyBwd25lZA==\\x07", ["x\\x07", 1, None, 2.5]], "n": {"m": "\\x9b"}}


def test_a_task_title_with_escape_sequences_is_shown_escaped(tmp_path):
    d = write_task(tmp_path)
    toml = (d / "task.toml").read_text()
    head, _, rest = toml.partition("title = ")
    rest = rest.split("\n", 1)[1]
    (d / "task.toml").write_text(head + 'title = "add \\u001b]52;c;aGk=\\u0007 \\u009b2J"\n' + rest)
    task = load_task(d)
    assert "\x1b" not in task.title and "\x9b" not in task.title
    assert task.title == "add \\x1b]52;c;aGk=\\x07 \\x9b2J"


def test_the_text_report_of_a_stored_doc_has_no_escape_byte():
    doc = {"task": "t", "title": HOSTILE, "device": "cpu", "seeds": [0], "versions": {"kws": "x"},
           "checks": [{"check": "correctness", "status": "fail", "seconds": 0.1, "reason": OSC52}],
           "findings": [{"check": "correctness", "severity": "fail", "summary": "raised " + OSC52, "repro": OSC52}],
           "complete": True}
    text = to_text(doc)
    assert _unsafe(text) == [] and "\\x1b]52;" in text
