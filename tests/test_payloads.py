"""The typed boundary between a job child and the parent (issue 38): what a step sends back
is decoded once into Structs, a renamed key fails there, and every error cause and report
note has exactly one handler in the parent."""

from __future__ import annotations

import json

import msgspec
import pytest

from workstation.engine import payloads
from workstation.protocol.results import (
    Cause,
    CudaEmulationLimit,
    DeviceStandinLimit,
    MissingModule,
    Note,
    Raised,
    ResultFormatError,
    StepDoc,
    TaskFormat,
    Where,
    decode_doc,
    encodable,
)


def test_every_cause_and_note_kind_has_a_handler():
    assert payloads.missing(Cause.__args__, payloads.CAUSES) == []
    assert payloads.missing(Note.__args__, payloads.NOTES) == []


def test_a_second_handler_or_a_foreign_kind_is_refused():
    with pytest.raises(ValueError, match="already has a handler"):
        payloads.on_cause(MissingModule)(lambda ctx, o, c: None)
    with pytest.raises(ValueError, match="is not a kind of"):
        payloads.on_note(Raised)(lambda ctx, s, n: None)


def _doc(**over):
    d = {"ok": False, "kind": "call", "error": {"type": "ModuleNotFoundError", "message": "no module",
                                               "phase": "import", "origin": "task",
                                               "causes": [{"kind": "missing_module", "name": "liger_kernel.ops",
                                                           "top": "liger_kernel", "found": False}]},
         "outputs": [], "extra": {}, "seconds": 0.0, "cpu_s": 0.1, "imports": {}, "notes": []}
    d.update(over)
    return json.loads(json.dumps(d))


def test_a_document_decodes_into_its_structs():
    doc = decode_doc(_doc())
    assert isinstance(doc.error, Raised)
    miss = doc.error.cause(MissingModule)
    assert miss is not None and miss.top == "liger_kernel" and miss.found is False
    assert doc.error.cause(TaskFormat) is None


@pytest.mark.parametrize("bad, where", [
    ({"cpu_seconds": 0.1}, "cpu_seconds"),  # a renamed top-level key
    ({"error": {"type": "E", "msg": "renamed"}}, "msg"),  # a renamed error key
    ({"error": {"type": "E", "message": "m", "causes": [{"kind": "no_such_cause"}]}}, "causes"),
    ({"outputs": [{"dtype": "float32", "shape": "4"}]}, "shape"),
])
def test_a_renamed_or_mistyped_key_fails_at_the_boundary_naming_it(bad, where):
    with pytest.raises(ResultFormatError, match=where):
        decode_doc(_doc(**bad))


def test_an_error_shows_in_evidence_as_the_report_always_showed_it():
    """Findings' evidence keeps the report's error shape (docs/task-format.md): a limit under
    its own key, a task-format problem's ``key``."""
    e = Raised(type="AssertionError", message="m", traceback="tb", phase="call", where=Where(file="c.py", line=3),
               causes=[MissingModule(name="a.b", top="a", found=True, importer="c.py"),
                       DeviceStandinLimit(why="no streams"), CudaEmulationLimit(why="asm")])
    ev = e.as_evidence()
    assert list(ev) == ["missing_module", "device_standin_limit", "cuda_emulation_limit", "type", "message",
                        "traceback", "phase", "origin", "where"]
    assert ev["missing_module"] == {"name": "a.b", "top": "a", "found": True, "importer": "c.py"}
    assert ev["where"] == {"file": "c.py", "line": 3, "function": ""}
    tf = Raised(type="TaskFormatError", message="beyond", phase="make_inputs", origin="task-format",
                causes=[TaskFormat(key="entry.out_args")]).as_evidence()
    assert tf["key"] == "entry.out_args" and tf["origin"] == "task-format"


def test_nan_survives_the_round_trip():
    """The harness writes with json (NaN and infinities as tokens), not msgspec (null)."""
    doc = StepDoc(ok=True, kind="call", extra={"x": float("nan"), "y": float("-inf")}, seconds=float("inf"))
    back = decode_doc(json.loads(json.dumps(encodable(doc))))
    assert back.seconds == float("inf") and back.extra["y"] == float("-inf") and back.extra["x"] != back.extra["x"]
    assert msgspec.to_builtins(back)["kind"] == "call"
