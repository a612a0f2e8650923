"""kws calibrate: agreement with gold per reviewer and field, Krippendorff's alpha per field
(ordinal for ordered fields, nominal otherwise, missing ratings allowed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner

from tests.recordkit import ALICE, BOB, CAROL, RUBRIC, isolate, make_queue, verdict
from workstation.cli import records as cli_records
from workstation.records.calibration import calibrate, format_calibration, load_gold
from workstation.records.parse import load_records

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


def _gold(root: Path, task: str, text: str) -> None:
    (root / "gold").mkdir(exist_ok=True)
    (root / "gold" / f"{task}.toml").write_text(text)


@pytest.fixture
def rated(env):
    """Four tasks, three reviewers, gold for t1..t3; Bob changes his mind on t1."""
    repo = make_queue(env / "q", tasks=("t1", "t2", "t3", "t4"))
    root = Path(repo.working_tree_dir)
    _gold(root, "t1", 'schema = 1\ntask = "t1"\noverall = "accept"\n[fields]\ncorrectness = "correct"\n')
    _gold(root, "t2", 'overall = "reject"\nnote = "unmasked edge tile"\n[fields]\ncorrectness = "incorrect"\n')
    _gold(root, "t3", 'overall = "needs-work"\n')
    verdict(repo, "t1", ALICE, "accept", benchmark="valid")
    verdict(repo, "t2", ALICE, "reject", correctness="incorrect", benchmark="invalid")
    verdict(repo, "t3", ALICE, "accept", benchmark="valid")
    verdict(repo, "t4", ALICE, "accept")
    verdict(repo, "t1", BOB, "accept", benchmark="valid")
    verdict(repo, "t2", BOB, "reject", correctness="incorrect", benchmark="questionable")
    verdict(repo, "t4", BOB, "reject", correctness="incorrect", benchmark="valid")
    verdict(repo, "t1", BOB, "reject", correctness="doubtful")  # his latest on t1
    verdict(repo, "t3", CAROL, "needs-work", benchmark="valid")
    return repo


def test_agreement_with_gold_per_reviewer_and_field(rated):
    cal = calibrate(rated.working_tree_dir, RUBRIC)
    assert sorted(cal.gold) == ["t1", "t2", "t3"]
    ag = {(a.reviewer.email, a.field): a for a in cal.agreements}
    a = ag[(ALICE.email, "overall")]
    assert (a.agree, a.total) == (2, 3) and a.misses == [("t3", "needs-work", "accept")]
    assert (ag[(ALICE.email, "correctness")].agree, ag[(ALICE.email, "correctness")].total) == (2, 2)
    b = ag[(BOB.email, "overall")]
    assert (b.agree, b.total) == (1, 2) and b.misses == [("t1", "accept", "reject")]  # latest verdict counts
    assert (ag[(BOB.email, "correctness")].agree, ag[(BOB.email, "correctness")].total) == (1, 2)
    assert (ag[(CAROL.email, "overall")].agree, ag[(CAROL.email, "overall")].total) == (1, 1)
    # gold states no tolerance: no agreement row for it
    assert (ALICE.email, "tolerance") not in ag
    text = format_calibration(cal)
    assert "3 gold task(s); 3 reviewer(s)" in text
    assert "missed: t1 (gold accept, said reject)" in text


def _expected_alpha(rows: list[list[float]], level: str, n_values: int) -> float:
    return float(krippendorff.alpha(reliability_data=np.array(rows, dtype=float),
                                    level_of_measurement=level, value_domain=list(range(n_values))))


def test_alpha_per_field_ordinal_and_nominal_with_missing_ratings(rated):
    cal = calibrate(rated.working_tree_dir, RUBRIC)
    alphas = {a.field: a for a in cal.alphas}
    nan = np.nan
    # reviewers in email order (alice, bob, carol), tasks t1..t4; overall scale worst first:
    # reject=0, needs-work=1, accept=2
    overall = [[2, 0, 2, 2], [0, 0, nan, 0], [nan, nan, 1, nan]]
    a = alphas["overall"]
    assert a.level == "ordinal" and a.units == 4 and a.ratings == 8
    assert a.alpha == pytest.approx(_expected_alpha(overall, "ordinal", 3))
    # the metric matters for this data: nominal would give another value
    assert a.alpha != pytest.approx(_expected_alpha(overall, "nominal", 3))
    # benchmark: not-applicable (outside the order) is a missing rating on the ordinal scale
    # scale invalid=0, questionable=1, valid=2; alice t4 and bob t1 (latest) are not-applicable
    bench = [[2, 0, 2, nan], [nan, 1, nan, 2], [nan, nan, 2, nan]]
    b = alphas["benchmark"]
    assert b.units == 2 and b.ratings == 4
    assert b.alpha == pytest.approx(_expected_alpha(bench, "ordinal", 3))
    # tolerance: everyone said "appropriate": no variation, alpha undefined and said so
    t = alphas["tolerance"]
    assert t.alpha is None and "same value" in t.note


def test_alpha_nominal_for_unordered_fields(env, tmp_path):
    # a rubric whose correctness field is not ordered
    text = (REPO / "rubrics" / "kernel-review.toml").read_text()
    text = text.replace('id = "kernel-review"', 'id = "nominal-review"', 1)
    start = text.index('key = "correctness"')
    end = text.index("[[fields]]", start)
    text = text[:start] + text[start:end].replace("ordered = true", "ordered = false") + text[end:]
    repo = make_queue(env / "q", tasks=("t1", "t2", "t3"))
    root = Path(repo.working_tree_dir)
    (root / "rubrics").mkdir()
    (root / "rubrics" / "nominal-review.toml").write_text(text)
    from workstation.records.drafts import Draft
    from workstation.records.store import commit_verdict
    from workstation.rubric.model import find_rubric

    rub = find_rubric("nominal-review", root)
    assert not rub["correctness"].ordered
    from tests.recordkit import values

    ratings = {ALICE: ["incorrect", "doubtful", "correct"], BOB: ["incorrect", "correct", "correct"]}
    for who, vals in ratings.items():
        for task, val in zip(("t1", "t2", "t3"), vals, strict=True):
            d = Draft(task=task, queue=str(root), values=values("accept", correctness=val),
                      rubric_id=rub.id, rubric_version=rub.version)
            commit_verdict(repo, d, rub, identity=who)
    verdict(repo, "t1", CAROL, "accept")  # another rubric: not counted
    cal = calibrate(root, rub)
    a = {x.field: x for x in cal.alphas}["correctness"]
    assert a.level == "nominal"
    assert a.alpha == pytest.approx(_expected_alpha([[0, 1, 2], [0, 2, 2]], "nominal", 3))
    assert any("another rubric" in n for n in cal.notes)


def test_alpha_undefined_without_two_ratings(env):
    repo = make_queue(env / "q", tasks=("t1", "t2"))
    verdict(repo, "t1", ALICE, "accept")
    verdict(repo, "t2", BOB, "reject")
    cal = calibrate(repo.working_tree_dir, RUBRIC)
    a = {x.field: x for x in cal.alphas}["overall"]
    assert a.alpha is None and a.units == 0 and "two reviewers" in a.note
    assert cal.agreements == []
    assert "no reviewer has judged a gold task yet" in format_calibration(cal)


def test_malformed_gold_and_verdicts_are_reported_calibration_goes_on(rated):
    root = Path(rated.working_tree_dir)
    _gold(root, "t4", 'overall = "maybe"\n')
    _gold(root, "Bad Name", 'overall = "accept"\n')
    _gold(root, "t9", 'task = "t8"\noverall = "accept"\n')
    _gold(root, "t5", 'overall = "accept"\n[fields]\ncorrectness = "flawless"\n')
    (root / "verdicts" / "t1" / "zz-broken.toml").write_text("schema = 1\nrecord = 'verdict'\n")
    rated.git.add("verdicts")
    rated.git.commit("-q", "-m", "a broken verdict")
    cal = calibrate(root, RUBRIC)
    where = {(p.file.as_posix(), p.key) for p in cal.problems}
    assert ("gold/t4.toml", "overall") in where
    assert ("gold/Bad Name.toml", "") in where
    assert ("gold/t9.toml", "task") in where
    assert ("gold/t5.toml", "fields.correctness") in where
    assert any(p.file.name == "zz-broken.toml" and p.key for p in cal.problems)
    assert sorted(cal.gold) == ["t1", "t2", "t3"]
    a = {(x.reviewer.email, x.field): x for x in cal.agreements}[(ALICE.email, "overall")]
    assert (a.agree, a.total) == (2, 3)
    text = format_calibration(cal)
    assert "skipped gold/t4.toml: overall:" in text


def test_gold_unknown_keys_are_warnings_and_the_gold_counts(rated):
    root = Path(rated.working_tree_dir)
    _gold(root, "t1", 'overall = "accept"\nconfidence = "high"\n')
    _gold(root, "t2", 'overall = 3\n')
    cal = calibrate(root, RUBRIC)
    assert "t1" in cal.gold and "t2" not in cal.gold
    assert [(p.file.as_posix(), p.key) for p in cal.warnings] == [("gold/t1.toml", "confidence")]
    bad = {p.file.as_posix(): p for p in cal.problems}["gold/t2.toml"]
    assert bad.key == "overall" and "got an integer 3" in bad.problem


def test_cli_calibrate(rated):
    @click.group()
    def main() -> None:
        pass

    for cmd in cli_records.COMMANDS:
        main.add_command(cmd)
    r = CliRunner().invoke(main, ["calibrate", "--queue", rated.working_tree_dir])
    assert r.exit_code == 0, r.output
    assert "Agreement with gold" in r.output and "Krippendorff's alpha" in r.output
    assert f"{ALICE}" in r.output and "ordinal" in r.output


def test_sample_queue_gold_matches_the_expectations():
    """Gold for the bundled sample queue lives in sample_queue/gold/ (the review screen
    never reads it); it must agree with each task's tests/sample_expectations.d entry."""
    root = REPO / "sample_queue"
    gold, problems = load_gold(root, RUBRIC)
    assert problems == []
    for exp in sorted((REPO / "tests" / "sample_expectations.d").glob("*.toml")):
        data = tomllib.loads(exp.read_text())
        if "gold" not in data:
            continue
        tid = data.get("id", exp.stem)
        assert tid in gold, (
            f"{exp.name} has a [gold] table but sample_queue/gold/{tid}.toml is missing: add it "
            f"(schema = 1, task, overall, note; see docs/records.md)"
        )
        assert gold[tid].values["overall"] == data["gold"]["overall"], tid
    for tid in gold:
        assert (root / "tasks" / tid / "task.toml").is_file(), f"gold for a task that does not exist: {tid}"
    # nothing of gold leaks into records
    assert load_records(root).verdicts == []
