"""`kws selfcheck`: the published-hack corpus (sample_queue_hacks/) and its judgement.

Unit tests: the corpus's sidecars and twins, the judgement of a row from a `kws check`
report, the exit codes, the stored figure. Battery: the cheap subset end to end (4 pairs).
System (full suite only): the whole corpus, every hack caught and every twin quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO
from workstation.engine.selfcheck import (
    CAUGHT,
    GPU_ONLY,
    MISSED,
    NOISY,
    NOT_COVERED,
    NOT_JUDGED,
    QUIET,
    HackEntry,
    Row,
    SelfcheckResult,
    bundled_corpus,
    judge,
    load_corpus,
    select,
)

KWS = [sys.executable, "-m", "workstation.cli.main"]
CORPUS = REPO / "sample_queue_hacks"
#: files a clean twin may differ in from its hack (the hack lives in one of them).
HACK_FILES = {"candidate.py", "task.toml", "spec.md", "hack.toml", "bench.py", "answers.json"}


def _entry(expect=("stale-output",), twin_of="", quiet=()) -> HackEntry:
    return HackEntry(id="x", dir=CORPUS, mechanism="m", source="s", source_url="u", expect_fail=list(expect),
                     quiet=list(quiet), cpu_or_gpu="cpu", gpu_note="", pending_check="", twin_of=twin_of)


def _doc(**statuses: str) -> dict:
    checks = [{"check": c.replace("_", "-"), "status": s, "seconds": 0.1, "reason": ""} for c, s in statuses.items()]
    findings = [{"check": c["check"], "severity": "fail", "summary": f"{c['check']} finding", "evidence": {},
                 "repro": ""} for c in checks if c["status"] == "fail"]
    return {"checks": checks, "findings": findings, "not_judged": []}


# -- the corpus ----------------------------------------------------------------------------


def test_the_bundled_corpus_has_30_cpu_hacks_each_with_a_twin_that_differs_only_in_the_hack():
    from workstation.task.format import load_task

    assert bundled_corpus() == CORPUS
    entries = load_corpus(CORPUS)
    hacks = [e for e in entries if not e.is_twin]
    twins = {e.twin_of: e for e in entries if e.is_twin}
    assert len([h for h in hacks if h.cpu_or_gpu == "cpu"]) >= 30
    assert {h.id for h in hacks} == set(twins)
    for h in hacks:
        t = twins[h.id]
        assert h.expect_fail and t.expect_fail == [] and t.quiet == h.expect_fail, h.id
        assert h.source and h.source_url.startswith("https://") and h.mechanism, h.id
        assert h.cpu_or_gpu in ("cpu", "gpu-only") and (h.cpu_or_gpu == "cpu" or h.gpu_note), h.id
        for e in (h, t):
            task = load_task(e.dir)
            assert task.id == e.id
            assert h.source in (e.dir / "spec.md").read_text()
        files = {p.name for p in h.dir.iterdir()} | {p.name for p in t.dir.iterdir()}
        differ = {f for f in files if not ((h.dir / f).is_file() and (t.dir / f).is_file()
                                           and (h.dir / f).read_bytes() == (t.dir / f).read_bytes())}
        assert differ <= HACK_FILES, (h.id, differ - HACK_FILES)
        assert "candidate.py" in differ or "bench.py" in differ or "task.toml" in differ, h.id


def test_subset_selection_keeps_pairs_and_refuses_unknown_ids():
    entries = load_corpus(CORPUS)
    cheap = select(entries, "cheap")
    assert len(cheap) == 10 and {e.hack_id for e in cheap} == {e.id for e in cheap if not e.is_twin}
    assert [e.id for e in select(entries, "cache-shape")] == ["cache-shape", "cache-shape-clean"]
    with pytest.raises(KeyError, match="no-such-hack"):
        select(entries, "no-such-hack")


def test_a_sidecar_without_expect_fail_is_a_problem_naming_the_file(tmp_path):
    from workstation.schema.problem import Problem

    (tmp_path / "tasks" / "a").mkdir(parents=True)
    (tmp_path / "tasks" / "a" / "hack.toml").write_text('id = "a"\n')
    with pytest.raises(Problem, match="expect_fail"):
        load_corpus(tmp_path)


# -- judgement -----------------------------------------------------------------------------


def test_a_hack_is_caught_only_when_every_expected_check_fails():
    e = _entry(expect=("stale-output", "tampering"))
    assert judge(e, _doc(correctness="pass", stale_output="fail", tampering="fail"), False)[0] == CAUGHT
    outcome, statuses, detail = judge(e, _doc(correctness="pass", stale_output="fail", tampering="warn"), False)
    assert outcome == MISSED and statuses["tampering"] == "warn" and "tampering" in detail
    # a check that could not look is no catch and no miss
    assert judge(e, _doc(stale_output="fail", tampering="skip"), False)[0] == NOT_JUDGED
    assert judge(e, _doc(stale_output="fail"), False)[0] == NOT_JUDGED


def test_a_twin_is_quiet_unless_a_watched_check_or_correctness_fails():
    t = _entry(expect=(), twin_of="h", quiet=("stale-output",))
    assert judge(t, _doc(correctness="pass", stale_output="warn"), False)[0] == QUIET
    assert judge(t, _doc(correctness="fail", stale_output="pass"), False)[0] == NOISY
    assert judge(t, _doc(correctness="pass", stale_output="fail"), False)[0] == NOISY
    assert judge(t, _doc(correctness="pass", stale_output="skip"), False)[0] == NOT_JUDGED
    # --full: any failing check makes a twin noisy
    doc = _doc(correctness="pass", stale_output="pass", edge_shapes="fail")
    assert judge(t, doc, False)[0] == QUIET and judge(t, doc, True)[0] == NOISY


def test_exit_codes_are_fail_closed_and_gpu_only_rows_stay_out_of_the_figures():
    h, t = _entry(), _entry(expect=(), twin_of="x", quiet=("stale-output",))

    def res(*rows):
        return SelfcheckResult(rows=list(rows), device="cpu", seconds=1.0, full=False)

    ok = res(Row(h, CAUGHT), Row(t, QUIET), Row(h, GPU_ONLY), Row(t, GPU_ONLY))
    assert ok.exit_code == 0 and ok.summary() == "battery catches 1/1, clean twins quiet 1/1"
    assert res(Row(h, MISSED), Row(t, QUIET)).exit_code == 1
    assert res(Row(h, CAUGHT), Row(t, NOISY)).exit_code == 1
    assert res(Row(h, CAUGHT), Row(t, NOT_JUDGED)).exit_code == 4
    assert res(Row(h, CAUGHT), Row(t, QUIET), Row(h, NOT_COVERED)).exit_code == 4
    assert res().exit_code == 4
    doc = res(Row(h, MISSED), Row(t, QUIET)).as_dict()
    assert doc["caught"] == 0 and doc["hacks"] == 1 and doc["rows"][0]["outcome"] == MISSED


def test_the_figure_is_stored_per_version_and_shown_by_the_help_text(tmp_path, monkeypatch):
    from workstation.review.selfcheck_figure import figure_text, load_figure, store_figure

    monkeypatch.setenv("KWS_CACHE_DIR", str(tmp_path / "cache"))
    assert load_figure("9.9") is None and "no selfcheck measured" in figure_text("9.9")
    store_figure({"summary": "battery catches 3/4, clean twins quiet 4/4", "device": "cpu", "full": False,
                  "when": "2026-01-01 00:00 UTC"}, version="9.9")
    assert load_figure("9.9")["summary"].startswith("battery catches 3/4")
    assert "battery catches 3/4, clean twins quiet 4/4" in figure_text("9.9")
    assert load_figure("9.8") is None  # another version's figure is never shown


# -- end to end ----------------------------------------------------------------------------


def _selfcheck(tmp_path, *args: str, timeout: int) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**__import__("os").environ, "KWS_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([*KWS, "selfcheck", "--json", *args], capture_output=True, text=True, cwd=REPO,
                       timeout=timeout, env=env)
    return p, json.loads(p.stdout)


def test_the_cheap_subset_is_caught_and_its_twins_quiet(tmp_path):
    p, doc = _selfcheck(tmp_path, "--subset", "cheap", timeout=600)
    assert p.returncode == 0, (p.stderr, [(r["id"], r["outcome"], r["detail"]) for r in doc["rows"]])
    assert (doc["caught"], doc["hacks"], doc["quiet"], doc["twins"]) == (5, 5, 5, 5)
    stored = json.loads(next((tmp_path / "cache" / "selfcheck").glob("*.json")).read_text())
    assert stored["summary"] == doc["summary"] and stored["subset"] == "cheap"


def test_the_whole_corpus_is_caught_and_every_twin_quiet(tmp_path):
    p, doc = _selfcheck(tmp_path, "--no-store", timeout=1800)
    rows = [(r["id"], r["outcome"], r["detail"]) for r in doc["rows"]]
    assert not [r for r in rows if r[1] in (MISSED, NOISY, NOT_JUDGED)], rows
    assert doc["caught"] == doc["hacks"] >= 25 and doc["quiet"] == doc["twins"], rows
    pending = [r for r in doc["rows"] if r["outcome"] == NOT_COVERED]
    assert all(r["detail"].startswith("not yet covered: kws has no check") for r in pending), pending
    assert p.returncode == (4 if pending else 0), p.stderr


def test_the_corpus_sidecars_parse_as_toml():
    for f in sorted(CORPUS.glob("tasks/*/hack.toml")):
        raw = tomllib.loads(f.read_text())
        assert raw["id"] == f.parent.name
