"""Rubric files: loading, validation errors (file, key, problem), suggestions, value checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w

from workstation.engine.check import check_ids
from workstation.rubric.model import (
    field_values_from_pairs,
    find_rubric,
    load_rubric,
    queue_rubric,
    validate_values,
)
from workstation.rubric.suggest import suggest
from workstation.schema.problem import Problem

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "rubrics" / "kernel-review.toml"


def _finding(check: str, severity: str, summary: str = "s") -> dict:
    return {"check": check, "severity": severity, "summary": summary, "evidence": {}, "repro": ""}


def _check(check: str, status: str, reason: str = "") -> dict:
    return {"check": check, "status": status, "seconds": 0.1, "reason": reason}


def _all_pass(except_: tuple[str, ...] = ()) -> list[dict]:
    return [_check(c, "pass") for c in check_ids() if c not in except_]


@pytest.fixture(scope="module")
def rubric():
    return load_rubric(DEFAULT)


def test_default_rubric_covers_the_review_points(rubric):
    assert rubric.id == "kernel-review" and rubric.version == 1
    assert list(rubric.keys) == [
        "reference",
        "tolerance",
        "correctness",
        "edge_coverage",
        "benchmark",
        "failure_report",
        "overall",
        "rationale",
    ]
    overall = rubric["overall"]
    assert overall.ordered and overall.scale() == ("reject", "needs-work", "accept")
    assert overall.rationale_for == ("reject",)
    assert rubric["rationale"].kind == "text"
    # every check id of the contract informs the overall suggestion
    assert set(overall.informed_by) == set(check_ids())
    # keyboard keys are unique per field, and every choice field has a suggestion rule
    for f in rubric.choice_fields:
        assert len({v.key for v in f.values}) == len(f.values)
        assert f.suggest, f.key
    assert rubric["benchmark"].rank("not-applicable") is None
    assert rubric["benchmark"].rank("invalid") == 0
    assert find_rubric("kernel-review").path.resolve() == DEFAULT.resolve()


def _write(tmp_path: Path, data: dict, name: str = "r.toml") -> Path:
    p = tmp_path / name
    p.write_bytes(tomli_w.dumps(data).encode())
    return p


def _base() -> dict:
    data = tomllib.loads(DEFAULT.read_text())
    return data


@pytest.mark.parametrize(
    "mutate, key, problem",
    [
        (lambda d: d.pop("title"), "title", "missing"),
        (lambda d: d.update(version="1"), "version", "expected a positive integer, got a string '1'"),
        (lambda d: d.update(colour="red"), "colour", "unknown key"),
        (lambda d: d["fields"][0].update(kind="slider"), "fields[0].kind", "unknown field kind 'slider'; expected one of choice, text"),
        (lambda d: d["fields"][0].update(requried=True), "fields[0].requried", "unknown key"),
        (
            lambda d: d["fields"][0]["values"][1].update(key="i"),
            "fields[0].values[1].key",
            "already picks",
        ),
        (
            lambda d: d["fields"][0]["values"][1].update(key="ab"),
            "fields[0].values[1].key",
            "one printable",
        ),
        (
            lambda d: d["fields"][2].update(informed_by=["correctnes"]),
            "fields[2].informed_by[0]",
            "unknown check id",
        ),
        (
            lambda d: d["fields"][2]["suggest"].update(fail="wrong"),
            "fields[2].suggest.fail",
            "is not a value",
        ),
        (
            lambda d: d["fields"][2]["suggest"].update(broken="incorrect"),
            "fields[2].suggest.broken",
            "unknown outcome",
        ),
        (
            lambda d: d["fields"][6].update(rationale_for=["refuse"]),
            "fields[6].rationale_for[0]",
            "is not a value",
        ),
        (lambda d: d["fields"][1].update(key="reference"), "fields[1].key", "duplicate field key"),
        (lambda d: d["fields"].pop(6), "fields", "'overall'"),
        (
            lambda d: (
                d["fields"][6]["values"][1].update(value="revise"),
                d["fields"][6]["suggest"].update(warn="revise"),
            ),
            "fields[6].values",
            "exactly the values",
        ),
        (lambda d: d.update(rationale_field="why"), "rationale_field", "does not name a text field"),
        (lambda d: d["fields"][7].update(values=[]), "fields[7].values", "not allowed on a text field"),
    ],
)
def test_bad_rubric_names_file_key_and_problem(tmp_path, mutate, key, problem):
    data = _base()
    mutate(data)
    path = _write(tmp_path, data, "kernel-review.toml")
    with pytest.raises(Problem) as ei:
        load_rubric(path)
    err = ei.value
    assert err.file == path
    assert err.key == key
    assert problem in err.problem
    assert str(path) in str(err) and key in str(err)


def test_bad_toml_and_id_file_mismatch(tmp_path):
    p = tmp_path / "kernel-review.toml"
    p.write_text("id = [\n")
    with pytest.raises(Problem, match="not valid TOML"):
        load_rubric(p)
    other = _write(tmp_path, _base(), "other.toml")
    with pytest.raises(Problem) as ei:
        load_rubric(other)
    assert ei.value.key == "id" and "file name" in ei.value.problem


def test_queue_rubric_prefers_the_queues_own(tmp_path):
    data = _base()
    data["id"] = "strict"
    data["title"] = "Strict"
    (tmp_path / "rubrics").mkdir()
    _write(tmp_path / "rubrics", data, "strict.toml")
    (tmp_path / "queue.toml").write_text('name = "q"\nrubric = "strict"\n')
    assert queue_rubric(tmp_path).title == "Strict"
    (tmp_path / "queue.toml").write_text('rubric = "nonesuch"\n')
    with pytest.raises(Problem, match="no such rubric"):
        queue_rubric(tmp_path)
    (tmp_path / "queue.toml").unlink()
    assert queue_rubric(tmp_path).id == "kernel-review"


def test_suggest_maps_worst_severity(rubric):
    findings = [
        _finding("edge-shapes", "fail", "mismatch at N=1025 (edge tile)"),
        _finding("noncontiguous", "warn", "stride"),
        _finding("tolerance-loose", "warn", "atol 1e-1 is 40x the fp16 budget at K=4096"),
        _finding("correctness", "info", "worst err/allowed 0.2"),
    ]
    checks = _all_pass(except_=("edge-shapes", "noncontiguous", "tolerance-loose", "speedup-claim"))
    checks += [
        _check("edge-shapes", "fail"),
        _check("noncontiguous", "warn"),
        _check("tolerance-loose", "warn"),
        _check("speedup-claim", "skip", "needs a GPU"),
    ]
    s = suggest(rubric, findings, checks)
    assert s["edge_coverage"].value == "fails" and s["edge_coverage"].outcome == "fail"
    assert [f["check"] for f in s["edge_coverage"].findings] == ["edge-shapes", "noncontiguous"]
    assert "N=1025" in s["edge_coverage"].reason
    assert s["tolerance"].value == "questionable"
    assert s["correctness"].value == "correct" and s["correctness"].outcome == "clean"
    # the info finding is listed behind the suggestion but does not lower it
    assert s["correctness"].findings[0]["severity"] == "info"
    assert s["reference"].value == "legitimate"
    assert s["overall"].value == "reject"
    # benchmark: benchmark-bias ran clean, speedup-claim skipped -> clean, but says so
    assert s["benchmark"].value == "valid"
    assert s["benchmark"].not_run == ("speedup-claim",)
    assert "speedup-claim (skip: needs a GPU)" in s["benchmark"].reason
    assert "rationale" not in s


def test_suggest_skipped_and_not_run(rubric):
    checks = [_check("failure-mismatch", "skip", 'status = "pass"'), _check("correctness", "error")]
    s = suggest(rubric, [], checks)
    # failure-mismatch skipped on a pass claim: the rule maps skipped -> not-applicable
    assert s["failure_report"].value == "not-applicable"
    assert s["failure_report"].outcome == "skipped"
    # correctness errored: it could not look, so no suggestion, and the reason says so
    assert s["correctness"].value is None and s["correctness"].outcome == "not-judged"
    assert "could not look: correctness" in s["correctness"].reason
    # reference checks absent from the report: no suggestion
    assert s["reference"].value is None
    assert "no informing check" in s["reference"].reason
    # an errored failure-mismatch is not a skip: no "not-applicable" guess
    s2 = suggest(rubric, [], [_check("failure-mismatch", "error")])
    assert s2["failure_report"].value is None


def test_suggest_never_proposes_a_passing_value_from_a_check_that_did_not_look(rubric):
    """A not-judged informing check (the report's ``not_judged``: a skip, or a check that
    judged part and reports only ``info``) turns ``clean`` into ``not-judged``: no value
    unless the rule maps it; a warn or fail from the checks that did look still counts."""
    checks = _all_pass(except_=("precision-regime",))
    checks.append(_check("precision-regime", "skip", "the Triton IR was not examined"))
    findings = [_finding("precision-regime", "info", "the Triton IR was not examined: the AOT step was killed")]
    nj = [{"check": "precision-regime", "reason": "the Triton IR was not examined: the AOT step was killed"}]
    clean = suggest(rubric, findings, checks)  # without not_judged the info finding reads as "ran"
    assert clean["tolerance"].outcome == "clean" and clean["tolerance"].value == "appropriate"
    s = suggest(rubric, findings, checks, nj)
    assert s["tolerance"].outcome == "not-judged" and s["tolerance"].value is None
    assert s["tolerance"].not_judged == ("precision-regime",)
    assert "could not look: precision-regime (the Triton IR was not examined" in s["tolerance"].reason
    assert s["overall"].value is None  # never "accept" on what was not looked at
    assert s["correctness"].value == "correct"  # a field precision-regime does not inform is unchanged
    # a warn from a check that did look still gives the warn value
    warned = suggest(rubric, [*findings, _finding("tolerance-loose", "warn", "atol 40x budget")],
                     [*(c for c in checks if c["check"] != "tolerance-loose"), _check("tolerance-loose", "warn")], nj)
    assert warned["tolerance"].outcome == "warn" and warned["tolerance"].value == "questionable"


def test_suggest_uses_check_status_without_findings(rubric):
    s = suggest(rubric, [], [_check("correctness", "fail")])
    assert s["correctness"].value == "incorrect"
    assert "status of correctness" in s["correctness"].reason


def test_validate_values(rubric):
    good = {
        "reference": "legitimate",
        "tolerance": "appropriate",
        "correctness": "incorrect",
        "edge_coverage": "fails",
        "benchmark": "not-applicable",
        "failure_report": "not-applicable",
        "overall": "reject",
        "rationale": "edge-shapes fails at N=1025: the store mask uses BLOCK, not N.",
    }
    assert validate_values(rubric, good) == []
    bad = dict(good, overall="reject", rationale="  ", correctness="wrongish", colour="red")
    del bad["tolerance"]
    problems = validate_values(rubric, bad)
    assert any(p.startswith("colour: not a field") for p in problems)
    assert any(p.startswith("tolerance: required") for p in problems)
    assert any(p.startswith("correctness: 'wrongish' is not one of") for p in problems)
    assert "rationale: required when overall is reject" in problems
    accept = dict(good, overall="accept", rationale="")
    assert validate_values(rubric, accept) == []


def test_field_pairs(rubric):
    assert field_values_from_pairs(rubric, ["correctness=correct", " overall = accept"]) == {
        "correctness": "correct",
        "overall": "accept",
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        field_values_from_pairs(rubric, ["correctness"])
    with pytest.raises(ValueError, match="not a field"):
        field_values_from_pairs(rubric, ["colour=red"])
    with pytest.raises(ValueError, match="given twice"):
        field_values_from_pairs(rubric, ["overall=accept", "overall=reject"])
