"""The typed boundary between a job child and the parent (issue 38): what a step sends back
is decoded once into Structs, a renamed key fails there, and every error cause and report
note has exactly one handler in the parent."""

from __future__ import annotations

import json

import msgspec
import pytest

from workstation.engine import payloads
from workstation.protocol.extras import EXTRAS, Extra, decode_extra, extra_as
from workstation.protocol.extras.autotune import (
    AutotuneCase,
    AutotuneProbeExtra,
    ProbeCall,
    TunedCall,
)
from workstation.protocol.extras.calls import AuthorTestExtra, CallExtra, FaultCallExtra, InputDesc
from workstation.protocol.extras.guards import GuardedCallExtra, SanitizerCallExtra
from workstation.protocol.extras.monitors import (
    REPORTS,
    AtenOpsReport,
    MonitorReports,
    NumCallersReport,
)
from workstation.protocol.extras.numerics import NumOracleExtra
from workstation.protocol.extras.probes import (
    OutputFacts,
    RepeatCallExtra,
    RepeatRun,
    StaleCallExtra,
)
from workstation.protocol.extras.series import (
    CallSeriesExtra,
    Frame,
    SerialCall,
    SeriesLoop,
    SeriesThread,
)
from workstation.protocol.extras.state import CallableInfo, Snapshot, StateProbeExtra
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
    TensorMeta,
    Where,
    decode_doc,
    encodable,
)
from workstation.protocol.steps import Monitor, kind_of


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


# ----------------------------------------------------------------------------- probe and series kinds


def _tensor_meta(**over):
    return {"dtype": "float32", "shape": [4], "stride": [1], **over}


@pytest.mark.parametrize("kind, extra, where", [
    # inputs_only: an input description's digest renamed
    ("inputs_only", {"kind": "inputs_only", "inputs": [{"index": 0, "kind": "tensor", "sha": "ab"}]}, "sha"),
    # repeat_call: a run's seconds renamed
    ("repeat_call", {"kind": "repeat_call", "runs": [{"outputs": [_tensor_meta()], "secs": 0.1}]}, "secs"),
    # hashseed_call: the sub-run's exit status renamed
    ("hashseed_call", {"kind": "hashseed_call", "hashseed": 0, "exit_code": 0}, "exit_code"),
    # stale_call: an output's aliasing facts renamed
    ("stale_call", {"kind": "stale_call", "facts": [{"type": "torch.Tensor", "aliases_input": [0]}]},
     "aliases_input"),
    # call_series: a serial call's thread census renamed
    ("call_series", {"kind": "call_series", "serial": [{"call": 0, "threads_after_return": [
        {"ident": 1, "name": "t", "class": "threading.Thread", "started": []}]}]}, "started"),
    # state_probe: a snapshot's flags renamed
    ("state_probe", {"kind": "state_probe", "before": {"flag": {}}}, "flag"),
    # autotune_probe: a tuned call's launch counts renamed
    ("autotune_probe", {"kind": "autotune_probe", "cases": [{"case": {"N": 8}, "tuned": {"ok": True,
                                                                                         "launch": {}}}]},
     "launch"),
])
def test_a_renamed_key_in_a_probe_payload_fails_at_the_boundary_naming_it(kind, extra, where):
    with pytest.raises(ResultFormatError, match=where):
        decode_extra(kind, extra)


def test_probe_payloads_round_trip_as_the_harness_writes_them():
    """Each kind's Struct survives the harness's encoding (to_builtins, then json, NaN kept)
    and the parent's decoding; evidence built with to_builtins keeps the harness's keys
    (``class`` for a thread's class, absent facts of a non-tensor output left out)."""
    meta = TensorMeta(dtype="float32", shape=[4], stride=[1])
    thread = SeriesThread(ident=7, name="Thread-1", cls="threading.Thread",
                          started_at=[Frame(file="/t/candidate.py", line=3, function="f")])
    payloads = [
        RepeatCallExtra(runs=[RepeatRun(outputs=[meta], seconds=0.5)], pid=1),
        StaleCallExtra(facts=[OutputFacts(type="int"), OutputFacts(type="torch.Tensor", plain_tensor=True,
                                                                    overrides=[], aliases_inputs=[])]),
        CallSeriesExtra(serial=[SerialCall(call=0, threads_after_return=[thread], arrays=["s0_0", None])],
                        loop=SeriesLoop(n=2, audit=0)),
        StateProbeExtra(before=Snapshot(flags={"f": "True"}), details={"torch.allclose": CallableInfo(
            qualname="<lambda>", module="candidate", file=None)}),
        AutotuneProbeExtra(cases=[AutotuneCase(case={"N": 8}, tuned=TunedCall(ok=False, error=Raised(
            type="ValueError", message="m")), configs=[[ProbeCall(ok=True, outputs=[meta])]])]),
    ]
    for p in payloads:
        kind = p.__struct_config__.tag
        assert EXTRAS[kind] is type(p)
        back = decode_extra(kind, json.loads(json.dumps(encodable(p))))
        assert msgspec.to_builtins(back) == msgspec.to_builtins(p)
        assert extra_as(back, type(p)) is back
    with pytest.raises(TypeError, match="RepeatCallExtra"):
        extra_as(payloads[0], StaleCallExtra)
    with pytest.raises(TypeError, match="untyped dict"):
        extra_as({}, StaleCallExtra)
    facts = msgspec.to_builtins(payloads[1].facts)
    assert facts[0] == {"type": "int"} and facts[1]["overrides"] == [] and "device" not in facts[1]
    assert msgspec.to_builtins(thread)["class"] == "threading.Thread"
    assert msgspec.to_builtins(payloads[3].details["torch.allclose"]) == {
        "qualname": "<lambda>", "module": "candidate", "file": None}
    nan = RepeatCallExtra(runs=[RepeatRun(seconds=float("nan"))])
    rc = decode_extra("repeat_call", json.loads(json.dumps(encodable(nan))))
    assert isinstance(rc, RepeatCallExtra) and rc.runs[0].seconds != rc.runs[0].seconds  # NaN survives


# ----------------------------------------------------------------------------- the call family's payloads

_TENSOR = {"index": 0, "kind": "tensor", "dtype": "float32", "shape": [4], "stride": [1], "sha256": "a"}


@pytest.mark.parametrize("kind, cls", [
    ("call", CallExtra), ("author_test", AuthorTestExtra), ("fault_call", FaultCallExtra),
    ("guarded_call", GuardedCallExtra), ("sanitizer_call", SanitizerCallExtra), ("num_oracle", NumOracleExtra),
])
def test_the_call_family_kinds_are_registered_and_a_failed_step_sends_few_fields(kind, cls):
    assert EXTRAS[kind] is cls
    got = decode_extra(kind, {"device_name": "cpu"} if "device_name" in cls.__struct_fields__ else {})
    assert isinstance(got, cls)


def test_every_monitor_has_its_report_field_and_struct():
    tags = {kind_of(m) for m in Monitor.__args__}
    assert set(REPORTS) == tags == set(MonitorReports.__struct_fields__)
    reports = MonitorReports(aten_ops=AtenOpsReport(), num_callers=NumCallersReport(total=3))
    assert reports.of(NumCallersReport).total == 3
    with pytest.raises(LookupError, match="keep_float64"):
        reports.of(REPORTS["keep_float64"])


def test_a_call_payload_round_trips_and_skips_the_monitors_it_did_not_run():
    ex = CallExtra(inputs=[InputDesc(**_TENSOR)], monitors=MonitorReports(aten_ops=AtenOpsReport()),
                   calls=[0.5], device_name="cpu")
    data = json.loads(json.dumps(encodable(ex)))
    assert data["monitors"] == {"aten_ops": {"ops": {}, "profiler": None}}
    assert decode_extra("call", data) == ex


def test_call_renamed_key_fails_at_the_boundary():
    with pytest.raises(ResultFormatError, match="inputs_before"):
        decode_extra("call", {"inputs_before": [], "device_name": "cpu"})
    with pytest.raises(ResultFormatError, match="digest"):  # a renamed key of an input
        decode_extra("call", {"inputs": [{**_TENSOR, "digest": "a"}]})
    with pytest.raises(ResultFormatError, match="op_counts"):  # a renamed key of a monitor's report
        decode_extra("call", {"monitors": {"aten_ops": {"op_counts": {}}}})
    with pytest.raises(ResultFormatError, match="launch_count"):
        decode_extra("call", {"monitors": {"triton_launches": {"launch_count": 3}}})
    with pytest.raises(ResultFormatError, match="aten_opz"):  # a renamed monitor
        decode_extra("call", {"monitors": {"aten_opz": {}}})


def test_author_test_renamed_key_fails_at_the_boundary():
    with pytest.raises(ResultFormatError, match="ok_"):
        decode_extra("author_test", {"ok_": True})


def test_fault_call_renamed_key_fails_at_the_boundary():
    with pytest.raises(ResultFormatError, match="attempts"):
        decode_extra("fault_call", {"fault": "triton_launch", "attempts": 2})


def test_guarded_call_renamed_key_fails_at_the_boundary():
    buf = {"kind": "allocation", "index": 0, "dtype": "float32", "shape": [4], "stride": [1], "element_size": 4,
           "extent": 4, "guard": 4096, "poisoned": True, "guarded": True, "device": "cpu"}
    ok = decode_extra("guarded_call", {"buffers": [buf], "output_sources": [{"output": 0, "buffer": 0}]})
    assert isinstance(ok, GuardedCallExtra) and ok.buffers[0].site is None
    assert msgspec.to_builtins(ok.buffers[0]) == buf  # its evidence: the keys the harness wrote, no more
    with pytest.raises(ResultFormatError, match="guard_elements"):
        decode_extra("guarded_call", {"buffers": [{**buf, "guard_elements": 4096}]})
    with pytest.raises(ResultFormatError, match="buf"):
        decode_extra("guarded_call", {"output_sources": [{"output": 0, "buf": 0}]})


def test_sanitizer_call_renamed_key_fails_at_the_boundary():
    with pytest.raises(ResultFormatError, match="error_count"):
        decode_extra("sanitizer_call", {"ran": True, "error_count": 0})


def test_num_oracle_renamed_key_fails_at_the_boundary():
    ok = decode_extra("num_oracle", {"inputs": [_TENSOR], "float_inputs": [0], "bump": {"input": 0, "flat_index": 3,
                                                                                         "rel": 2.0 ** -20}})
    assert isinstance(ok, NumOracleExtra) and isinstance(ok, CallExtra) and ok.bump is not None
    with pytest.raises(ResultFormatError, match="float_input_indices"):
        decode_extra("num_oracle", {"float_input_indices": [0]})
    with pytest.raises(ResultFormatError, match="index_flat"):
        decode_extra("num_oracle", {"bump": {"input": 0, "index_flat": 3, "rel": 1e-6}})


def test_a_reader_asking_the_wrong_kind_is_a_kws_bug():
    with pytest.raises(TypeError, match="expected the call step's payload, got the guarded_call step's"):
        extra_as(GuardedCallExtra(), CallExtra)
    with pytest.raises(TypeError, match="untyped"):
        extra_as({"x": 1}, CallExtra)
    assert isinstance(extra_as(NumOracleExtra(), CallExtra), Extra)  # the oracle is a call of the reference
