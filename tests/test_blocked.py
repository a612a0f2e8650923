"""Blocked time, wait budgets and the fork server's guard against a hostile channel, on
synthetic readings and pipes (issue 40): no task code runs here.

- :meth:`ServerJob._account <workstation.harness.custody.ServerJob._account>`: a sleeping job is
  blocked, a starved one (runnable on a busy machine) is not, nor is a thread waiting in
  ``join`` on one that computes, nor the time the job waits on kws;
- :class:`~workstation.runner.limits.BudgetWatch`: ``"blocked"`` past the wait budget, the wall
  backstop counted without the runnable seconds;
- the channel: a foreign line, a ``W`` mark without the simulated load, more hand-overs than
  steps, answers the job does not take: each ends the job, and the server never blocks;
- the seccomp program that refuses the keyring calls.
"""

from __future__ import annotations

import os

import pytest

from workstation.harness import custody, jobns
from workstation.harness.procs import JobReading
from workstation.protocol import childenv, control
from workstation.runner.limits import BudgetWatch, wall_backstop


def _job(steps: int = 1) -> custody.ServerJob:
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    os.set_blocking(ack_w, False)
    job = custody.ServerJob(1, os.getpid(), ctl_r, ack_w, steps)
    job._test_fds = (ctl_w, ack_r)  # type: ignore[attr-defined]
    return job


def _close(job: custody.ServerJob) -> None:
    for fd in (job.ctl, job.ack, *job._test_fds):  # type: ignore[attr-defined]
        if fd >= 0:
            os.close(fd)


def _reading(cpu: float, ready: dict[int, float]) -> JobReading:
    return JobReading(cpu_s=cpu, ready_ns={t: int(s * 1e9) for t, s in ready.items()})


def _blocked(readings: list[tuple[float, JobReading]], kws: list[float] | None = None) -> tuple[float, float]:
    job = _job()
    try:
        for i, (t, r) in enumerate(readings):
            job.kws_s = kws[i] if kws else 0.0
            job._account(t, r)
        return job.blocked, job.runnable
    finally:
        _close(job)


def test_a_sleep_is_blocked_a_starved_call_is_not():
    # 10 s asleep: no CPU, no run-queue wait
    assert _blocked([(0.0, _reading(0, {1: 0})), (10.0, _reading(0, {1: 0}))]) == pytest.approx((10.0, 0.0))
    # 10 s on a busy machine: 1 CPU s, 9 s waiting to run
    assert _blocked([(0.0, _reading(0, {1: 0})), (10.0, _reading(1, {1: 9}))]) == pytest.approx((0.0, 9.0))
    # a main thread in join on a worker that computes all along
    assert _blocked([(0.0, _reading(0, {1: 0, 2: 0})), (10.0, _reading(10, {1: 0, 2: 0}))]) == pytest.approx((0, 0))
    # two threads that compute on two cores do not bank time for a later sleep
    seq = [(0.0, _reading(0, {1: 0, 2: 0})), (10.0, _reading(20, {1: 0, 2: 0})), (15.0, _reading(20, {1: 0, 2: 0}))]
    assert _blocked(seq)[0] == pytest.approx(5.0)
    # the time spent waiting on kws (hand-overs, the simulated load) is not the job's
    seq = [(0.0, _reading(0, {1: 0})), (10.0, _reading(0, {1: 0}))]
    assert _blocked(seq, kws=[0.0, 4.0])[0] == pytest.approx(6.0)
    # a thread that appeared between readings brings its whole run-queue wait; a reused id nothing
    seq = [(0.0, _reading(0, {1: 5})), (10.0, _reading(2, {1: 1, 7: 3}))]
    assert _blocked(seq)[0] == pytest.approx(5.0)


def _usage(seq: int, cpu: float = 0.0, blocked: float = 0.0, runnable: float = 0.0) -> control.CpuUsage:
    return control.CpuUsage(id=1, seq=seq, cpu_s=cpu, import_cpu_s=0.0, import_wall_s=0.0, importing=False,
                            blocked_s=blocked, runnable_s=runnable)


def test_the_wait_budget_fires_blocked_and_load_never_reaches_the_backstop():
    w = BudgetWatch([10.0], 120.0, 10_000.0, 0.0, waits=[5.0])
    w.step_began(1.0)
    seq = w.next_ask(1.0)
    assert seq is not None
    assert w.fired(1.0, _usage(seq, blocked=1.0)) == ""  # the step's base
    assert w.fired(5.0, _usage(seq, blocked=5.5)) == ""  # 4.5 s blocked in the step
    assert w.fired(6.0, _usage(seq, blocked=6.5)) == "blocked"
    assert w.use.step_blocked_s == pytest.approx(5.5)
    # a starved step: far past the backstop in wall time, but all of it waiting for a CPU
    w = BudgetWatch([10.0], 120.0, 10_000.0, 0.0, waits=[5.0])
    w.step_began(1.0)
    seq = w.next_ask(1.0)
    assert seq is not None
    w.fired(1.0, _usage(seq))
    late = wall_backstop(10.0) + 500.0
    assert w.fired(late, _usage(seq, cpu=9.0, runnable=late - 9.0)) == ""
    assert w.fired(late, _usage(seq, cpu=10.5, runnable=late - 10.5)) == "step"
    # readings that stop coming (kws lost track of the job): the backstop
    w = BudgetWatch([10.0], 120.0, 10_000.0, 0.0, waits=[5.0])
    w.step_began(1.0)
    seq = w.next_ask(1.0)
    assert seq is not None
    w.fired(1.0, _usage(seq))
    assert w.fired(wall_backstop(10.0) + 0.5, _usage(seq)) == ""
    assert w.fired(wall_backstop(10.0) + 1.5, _usage(seq)) == "wall"
    # the job's own limit, too, counts wall time less the runnable seconds
    w = BudgetWatch([10.0], 120.0, 100.0, 0.0, waits=[5.0])
    w.fired(1000.0, _usage(w.next_ask(1.0) or 0, runnable=950.0))
    assert not w.past_job_limit(1000.0) and w.past_job_limit(1051.0)


def _lines(job: custody.ServerJob, *lines: bytes) -> None:
    job.buf += b"".join(x + b"\n" for x in lines)
    custody.handle_lines(job, None, most=100)


@pytest.fixture
def emitted(monkeypatch: pytest.MonkeyPatch) -> list[control.FromServer]:
    out: list[control.FromServer] = []
    monkeypatch.setattr(custody, "emit", out.append)
    return out


@pytest.mark.parametrize(("lines", "why"), [
    ([b"hello"], "a line kws's harness never writes"),
    ([b"W 1"], "a line kws's harness never writes"),  # no simulated load here
    ([b"V " + b"0" * 64 + b" -"] * 2, "more steps were handed over"),
])
def test_a_channel_that_breaks_the_protocol_ends_the_job(lines, why, emitted, monkeypatch):
    monkeypatch.delenv(childenv.STRETCH, raising=False)
    monkeypatch.setattr(custody, "verify", lambda *a: "")  # the step's own hand-over checks out
    job = _job(steps=1)
    try:
        _lines(job, *lines)
        assert why in job.end, job.end
        (msg,) = [m for m in emitted if isinstance(m, control.Verified) and m.step == job.steps]
        assert why in msg.custody
    finally:
        _close(job)


def test_answers_the_job_does_not_take_end_it_without_blocking(emitted, monkeypatch):
    monkeypatch.setattr(custody, "verify", lambda *a: "")
    job = _job(steps=10**9)
    try:
        while True:  # fill the job's end of the answer pipe
            try:
                os.write(job.ack, b"k" * 4096)
            except BlockingIOError:
                break
        _lines(job, b"V " + b"0" * 64 + b" -")
        assert "did not take kws's answers" in job.end, job.end
    finally:
        _close(job)


def test_the_simulated_load_is_kws_time_only_when_it_is_on(emitted, monkeypatch):
    monkeypatch.setenv(childenv.STRETCH, "4")
    job = _job()
    try:
        _lines(job, b"W 1")
        assert not job.end and job.wait_since is not None
        _lines(job, b"W 0")
        assert not job.end and job.wait_since is None and job.kws_s >= 0.0
    finally:
        _close(job)


def test_the_keyring_filter_refuses_the_three_calls_and_nothing_else():
    prog = jobns.keyring_filter()
    deny = len(prog) - 1
    assert prog[deny][3] == 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    for arch, nrs in jobns.KEYRING_SYSCALLS.items():
        assert any(k == arch for _, _, _, k in prog)
        for nr in nrs:
            (i,) = [j for j, (c, _, _, k) in enumerate(prog) if c == 0x15 and k == nr]
            assert i + 1 + prog[i][1] == deny, (arch, nr)  # jumps to the refusal
