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


# -- the analysis, compile and timing steps' payloads (protocol/extras: triton, backends, timing)

_RAISED = {"type": "ValueError", "message": "bad", "traceback": "", "phase": "call", "origin": "task",
           "where": None, "causes": []}

#: per step kind: a payload as the harness writes it, with one key renamed deep inside (the
#: renamed key, as the error names it).
RENAMED = {
    "interpreter_selftest": ({"kind": "interpreter_selftest", "interpreter": True, "gaps": ["g"],
                              "fidelity": {"installed": True, "errors": [], "adapted": [], "version": 1},
                              "selftest": {"dtypes": {"bfloat16": {"ok": False, "probe": {"add": False}}}}},
                             "probe"),
    "triton_aot": ({"kind": "triton_aot", "mode": "aot", "targets": [["cuda", 90, 32]],
                    "launches": [{"file": "c.py", "qualname": "k", "signature": {"x": "*fp32"}, "cases": [0]}],
                    "kernels": [{"launch": 0, "target": "cuda sm_90", "qualname": "k",
                                 "analysis": {"dots": [{"op": "tt.dot", "input_precison": "tf32"}]}}]},
                   "input_precison"),
    "triton_bounds": ({"kind": "triton_bounds",
                       "cases": [{"launches": [{"key": 0, "qualname": "k", "grid": [1, 1, 1],
                                                "args": {"n": {"kind": "int", "value": 4},
                                                         "x": {"kind": "tensor", "dtype": "float32", "shape": [4],
                                                               "stride": [1], "footprint": 4, "ptr": 64}}}]}]},
                      "stride"),
    "pallas_read": ({"kind": "pallas_read", "calls": [1], "jax": True,
                     "kernels": [{"grid": [2], "outputs": [{"array_shape": [8], "dtype": "float32",
                                                            "block_shape": [4],
                                                            "cover": {"reach": [8], "uncoverd": 0}}],
                                  "name": "k", "case": 0}]},
                    "uncoverd"),
    "cuda_build": ({"kind": "cuda_build", "tools": {"nvcc": "/usr/bin/nvcc", "cuobjdump": None},
                    "builds": [{"name": "ext", "via": "load_inline",
                                "sources": [{"file": "cuda.cu", "lines": 3, "compile": {"ok": True, "sas": ""}}]}]},
                   "sas"),
    "timing": ({"kind": "timing", "device": "cpu", "cache": {"bytes": 1 << 20, "level": 3, "source": "sysfs"},
                "cases": [{"case": {"N": 4}, "sides": {"candidate": {"role": "candidate", "cold_ns": [1, 2],
                                                                      "warm_nanos": [1, 2]}}}]},
               "warm_nanos"),
    "torch_timer": ({"kind": "torch_timer", "median_ms": 1.0, "mean_ms": 1.0, "iqr": 0.1, "blocks": 3}, "iqr"),
    "author_bench": ({"kind": "author_bench", "result": {"candidate_ms": 1.0, "baseline_ms": 2.0},
                      "events": [{"kind": "clock", "clock": "perf_counter", "t": 5, "line": 3, "in_bench": True},
                                 {"kind": "call", "side": "candidate", "t": 6, "t_stop": 9, "line": 4}]},
                     "t_stop"),
    "profile": ({"kind": "profile", "calls": 1, "launches": {"kernels": {"_k": 1}, "launches": 1},
                 "trace": {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "_k"}], "deviceProperties": []},
                 "workload": {"read_bytes": 8, "write_bytes": 4, "flop": 0}},
                "flop"),
}


@pytest.mark.parametrize("kind", sorted(RENAMED))
def test_a_renamed_key_in_a_steps_payload_fails_at_the_boundary_naming_it(kind):
    data, key = RENAMED[kind]
    with pytest.raises(ResultFormatError, match=f"the {kind} step's extra .*{key}"):
        decode_extra(kind, json.loads(json.dumps(data)))
    # the payload with the key as the harness names it decodes into the kind's Struct
    good = json.loads(json.dumps(data).replace(f'"{key}"', f'"{_RIGHT[key]}"'))
    assert isinstance(decode_extra(kind, good), EXTRAS[kind])


#: the renamed keys above -> their names in the payload Structs.
_RIGHT = {"probe": "probes", "input_precison": "input_precision", "stride": "strides", "uncoverd": "uncovered",
          "sas": "sass", "warm_nanos": "warm_ns", "iqr": "iqr_ms", "t_stop": "t_end", "flop": "flops"}


def test_a_step_whose_handler_failed_early_still_decodes_its_kinds_struct():
    """``run_job`` sends ``{}`` for a handler that raised: every field has its default."""
    for kind in RENAMED:
        got = decode_extra(kind, {})
        assert isinstance(got, EXTRAS[kind]) and msgspec.to_builtins(got)["kind"] == kind


def test_keys_the_harness_sends_only_sometimes_stay_out_of_the_evidence():
    """A key present only sometimes (an IR dot's lowering, a Pallas output's cover, nvcc's
    version, a flops count's error) is UNSET when absent: checks that show the payload in
    evidence keep the keys the report always had."""
    from workstation.protocol.extras.backends import CudaTools, PallasReading
    from workstation.protocol.extras.timing import Workload
    from workstation.protocol.extras.triton import IrDot, SourceLine, given

    d = IrDot(op="tt.dot", a="f32", b="f32", d="f32", source=SourceLine(file="c.py", line=9), text="t")
    assert list(msgspec.to_builtins(d)) == ["op", "a", "b", "d", "input_precision", "max_num_imprecise_acc",
                                            "lowering", "source", "text"]
    d.lowered_text, d.lowered_count = "w", 1
    assert msgspec.to_builtins(d)["lowered_count"] == 1
    failed = PallasReading(error="ValueError: x", name="k")
    assert list(msgspec.to_builtins(failed)) == ["error", "name", "site", "case", "args"]
    assert given(failed.outputs, []) == [] and given(failed.grid, None) is None
    assert msgspec.to_builtins(CudaTools(nvcc=None, cuobjdump=None)) == {"nvcc": None, "cuobjdump": None}
    assert msgspec.to_builtins(Workload(read_bytes=1, write_bytes=2)) == {"read_bytes": 1, "write_bytes": 2,
                                                                          "flops": None}


def test_payloads_round_trip_through_the_harness_encoding():
    """The harness writes ``encodable(struct)`` with json (NaN and infinities survive);
    the parent's decode gives the same Struct back."""
    from workstation.protocol.extras.timing import SideSamples, TimedCase, TimingExtra

    ex = TimingExtra(device="cpu", cases=[TimedCase(case={"N": 4, "dtype": "float32"}, params={"max_call_s": 0.5},
                                                    sides={"candidate": SideSamples(cold_ns=[3, 4],
                                                                                    stdrel_cold=float("inf"))},
                                                    errors={"baseline": Raised(**_RAISED)})])
    back = decode_extra("timing", json.loads(json.dumps(encodable(ex))))
    assert back == ex and back.cases[0].sides["candidate"].stdrel_cold == float("inf")


def test_an_aot_result_cached_by_an_older_kws_is_a_miss(tmp_path, monkeypatch):
    """kws's own result cache (CheckContext._cached) keeps ``triton_aot`` results; an entry
    whose payload another kws wrote (the self-test as one mixed dict) does not decode: a miss."""
    from types import SimpleNamespace

    from workstation.engine import context as cmod
    from workstation.engine import kwscache
    from workstation.protocol.extras.triton import ProbeResult, Selftest, TritonAotExtra
    from workstation.protocol.steps import TritonAotStep

    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path))
    key = kwscache.key_of("an aot step")
    fake = SimpleNamespace(result_cache_key=lambda s: key)
    step = TritonAotStep(cases=[{"N": 4, "dtype": "float32"}])
    old = {"ok": True, "kind": "triton_aot", "seconds": 0.0, "cpu_s": 0.0,
           "extra": {"launches": [], "kernels": [], "mode": "aot", "targets": [["cuda", 90, 32]], "case_errors": {},
                     "interpreter_selftest": {"float16": {"ok": True, "probes": {"sum_of_ones": True}}},
                     "cached": False, "seconds": 1.0}}
    kwscache.put_json("steps", key, old)
    assert cmod.CheckContext._cached(fake, step) is None
    now = TritonAotExtra(targets=[("cuda", 90, 32)],
                         interpreter_selftest=Selftest(dtypes={"float16": ProbeResult(ok=True)}))
    doc = StepDoc(ok=True, kind="triton_aot", extra=encodable(now))
    kwscache.put_json("steps", key, encodable(doc))
    hit = cmod.CheckContext._cached(fake, step)
    assert hit is not None and hit.step.extra == now
