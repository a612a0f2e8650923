"""Where a check's time goes (engine/costs.py, ``kws check --timings``): the arithmetic on
injected readings, never a measured time."""

from __future__ import annotations

import threading

from workstation.engine.check import CheckResult
from workstation.engine.costs import CheckCost, timings_table


def test_cpu_is_the_parent_thread_plus_the_jobs_and_wait_is_the_rest_of_the_wall():
    cost = CheckCost()
    cost.add_job(wall_s=4.0, cpu_s=3.0, queued_s=0.5)
    cost.add_job(wall_s=2.0, cpu_s=None, queued_s=1.5)  # no CPU reading: counted as 0
    t = cost.as_dict(wall_s=10.0, thread_cpu_s=0.25)
    assert t == {"cpu_s": 3.25, "parent_cpu_s": 0.25, "jobs": 2, "job_cpu_s": 3.0, "job_wall_s": 6.0,
                 "queued_s": 2.0, "wait_s": 6.75}


def test_jobs_side_by_side_can_use_more_cpu_than_the_wall_and_wait_never_goes_negative():
    cost = CheckCost()
    for _ in range(2):
        cost.add_job(wall_s=5.0, cpu_s=5.0, queued_s=0.0)
    assert cost.as_dict(wall_s=5.5, thread_cpu_s=0.1)["wait_s"] == 0.0


def test_jobs_counted_from_many_threads_are_all_counted():
    cost = CheckCost()

    def add() -> None:
        for _ in range(500):
            cost.add_job(wall_s=0.001, cpu_s=0.001, queued_s=0.0)

    threads = [threading.Thread(target=add) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert cost.jobs == 4000


def test_the_report_entry_carries_timings_only_when_measured():
    plain = CheckResult("correctness", "pass", 1.5)
    assert "timings" not in plain.as_dict()
    plain.timings = CheckCost().as_dict(wall_s=1.5, thread_cpu_s=0.5)
    assert plain.as_dict()["timings"]["wait_s"] == 1.0


def test_the_table_lists_the_slowest_check_first_and_the_run_total():
    checks = [
        {"check": "correctness", "seconds": 2.0, "timings": CheckCost().as_dict(wall_s=2.0, thread_cpu_s=0.5)},
        {"check": "edge-shapes", "seconds": 9.0, "timings": CheckCost().as_dict(wall_s=9.0, thread_cpu_s=1.5)},
        {"check": "old-entry", "seconds": 1.0},  # a report from before timings: no row
    ]
    lines = timings_table(checks, total_s=10.0)
    rows = [ln.split()[0] for ln in lines[2:]]
    assert rows == ["edge-shapes", "correctness", "run"]
    assert "0.20" in lines[-1]  # CPU of all checks (2.0) over the run's wall (10.0)
