"""Shared fixtures (tiny synthetic tasks written to tmp folders, one runner per module) and the
test tiers: every collected test gets exactly one tier marker here, in one place.

Tiers (docs/architecture.md, "Test tiers"; `make test-fast` runs unit, git and tui):

- ``unit``: pure code; no git repository, no task code.
- ``git``: real git repositories in temporary folders (records, sync, the queue, screen's notes).
- ``tui``: the Textual app under Pilot, and its snapshots, on replayed check runs.
- ``battery``: starts task code: a fork server (``workstation.runner.Runner``, the ``runner``
  fixture), ``kws check`` / ``kws profile`` / ``kws recheck`` on a task, the check server.
- ``system``: whole systems: a Ray cluster, the chaos schedule, ``kws screen`` runs of a queue,
  the real-kernel libraries, the GPU validation script's dry run, the real app in tmux.

A test's tier is, in this order: its entry in ``TEST_TIER`` (``module::function``); ``battery``
when it uses the ``runner`` fixture and its module is not ``system``; its module's entry in
``MODULE_TIER``. A test module missing from ``MODULE_TIER`` is a collection error.

When the selected tests include no ``battery`` or ``system`` test (``make test-fast``,
``pytest -m unit``), a guard (``tests/tierguard``) makes starting task code raise
``StartsTaskCode`` naming the test, in the pytest process and in every Python child of a test,
so a misfiled test fails instead of silently slowing the fast tier.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.tierguard import sitecustomize as tierguard

REPO = Path(__file__).resolve().parents[1]
SAMPLE_QUEUE = REPO / "sample_queue"

# -- a hermetic environment --------------------------------------------------------------
# Every test, and every child process of a test (they inherit os.environ), sees the same
# settings whatever the developer's shell or home holds: every ``KWS_*`` variable is removed
# (but the suite's own channels below), then the suite's values are set, and the per-user
# folders platformdirs computes (``XDG_CONFIG_HOME``: config.toml and keymap.toml;
# ``XDG_DATA_HOME``, ``XDG_STATE_HOME``: the first-run queue copy, drafts) point at empty
# folders of this session. tests/test_hermetic.py proves it under a polluted environment.

#: ``KWS_*`` variables that are the suite's own channels, not kws settings, kept as they come:
#: the fast-tier guard's refusal log when this pytest is a test's child (tests/tierguard), and
#: the chaos test's seed (tests/test_chaos.py).
SUITE_CHANNELS = (tierguard.ENV, "KWS_CHAOS_SEED")
#: the per-user folder variables pointed at this session's empty folders.
USER_DIR_VARS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def _remove_in(pid: int, folder: Path) -> None:
    """Remove ``folder`` when this is process ``pid`` (a forked child exiting through
    ``sys.exit`` runs the atexit handlers it inherited: it must not remove the session's)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _hermetic_environment() -> Path:
    """Scrub ``os.environ`` as the section comment says; returns the session's folder (removed
    when this process exits)."""
    for k in [k for k in os.environ if k.startswith("KWS_") and k not in SUITE_CHANNELS]:
        del os.environ[k]
    base = Path(tempfile.mkdtemp(prefix="kws-test-user-"))
    atexit.register(_remove_in, os.getpid(), base)
    for var in USER_DIR_VARS:
        folder = base / var.lower()
        folder.mkdir()
        os.environ[var] = str(folder)
    # kws's caches (queue index, AOT compile results): shared by the suite's runs, never the user's
    os.environ["KWS_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / "kws-test-cache")
    # the CPU emulation of CUDA (g++, ~20 s per extension and run) is off for the suite: the sample
    # sweep and the backend-gate tests judge CUDA tasks as not run; tests/test_cuda_emu.py turns it on
    os.environ["KWS_CUDA_EMULATION"] = "0"
    return base


USER_DIRS = _hermetic_environment()

TASK_TOML = """\
schema = 1
id = "{id}"
title = "elementwise add"
kind = "generation"
backend = "torch"
spec = "spec.md"

[entry]
candidate = "candidate.py:add"
reference = "reference.py:add"
inputs = "inputs.py:make_inputs"

[params]
N = {{ min = 1, max = 4096 }}

[[cases]]
N = 64
dtype = "float32"

[[cases]]
N = 100
dtype = "float32"

[tolerance]
atol = 1e-6
rtol = 1e-6

[claims]
status = "{status}"
failure_class = "{failure_class}"
"""

INPUTS = """\
import torch

def make_inputs(case, device, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    x = torch.randn(case["N"], generator=g).to(dt)
    y = torch.randn(case["N"], generator=g).to(dt)
    return x.to(device), y.to(device)
"""

REFERENCE = """\
def add(x, y):
    return x + y
"""


def write_task(root: Path, task_id: str = "add", candidate: str = "def add(x, y):\n    return x + y\n",
               status: str = "pass", failure_class: str = "", toml: str | None = None) -> Path:
    """Write a small torch task folder under ``root/tasks/<task_id>`` and return it."""
    d = root / "tasks" / task_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(toml or TASK_TOML.format(id=task_id, status=status, failure_class=failure_class))
    (d / "spec.md").write_text("# add\n\nout = x + y, elementwise, fp32.\n")
    (d / "candidate.py").write_text(textwrap.dedent(candidate))
    (d / "reference.py").write_text(REFERENCE)
    (d / "inputs.py").write_text(INPUTS)
    return d


@pytest.fixture
def task_factory(tmp_path: Path):
    """``task_factory(candidate_source, **kw) -> task folder`` in a fresh queue folder."""

    def make(candidate: str = "def add(x, y):\n    return x + y\n", **kw) -> Path:
        return write_task(tmp_path, candidate=candidate, **kw)

    return make


@pytest.fixture(scope="module")
def runner():
    """One fork server for a test module (CPU, Triton interpreter when no GPU)."""
    from workstation.runner import Runner

    with Runner() as r:
        yield r


# -- test tiers --------------------------------------------------------------------------

TIERS = ("unit", "git", "tui", "battery", "system")
SLOW_TIERS = ("battery", "system")

MODULE_TIER = {
    "test_aot_ir": "unit",
    "test_backend_readings": "unit",
    "test_bounds_proof": "unit",
    "test_bounds_proof_battery": "battery",
    "test_calibration": "git",
    "test_chaos": "system",
    "test_checks_backends": "battery",
    "test_checks_bench": "unit",
    "test_checks_hacks": "battery",
    "test_checks_kinds": "unit",
    "test_checks_memory": "unit",
    "test_checks_numerics": "unit",
    "test_audit_paths": "unit",
    "test_costs": "unit",
    "test_kwscache": "unit",
    "test_shape_variants": "unit",
    "test_cuda_static": "unit",
    "test_cuda_emu": "unit",
    "test_checks_shapes": "unit",
    "test_size_range": "unit",
    "test_legal_props": "unit",
    "test_checks_state": "unit",
    "test_checks_testgap": "unit",
    "test_checks_values": "unit",
    "test_cli_check": "battery",
    "test_compare": "unit",
    "test_contract": "unit",
    "test_diffmodel": "unit",
    "test_fidelity": "unit",
    "test_poison_stores": "unit",
    "test_reach": "unit",
    "test_kernel_work": "battery",
    "test_git_one_way": "unit",
    "test_hermetic": "unit",
    "test_hangs": "battery",
    "test_gpu_validation": "system",
    "test_layers": "unit",
    "test_load_invariance": "battery",
    "test_malformed": "git",
    "test_not_judged": "unit",
    "test_unjudged_paths": "unit",
    "test_numerics": "unit",
    "test_profile_panel": "tui",
    "test_profiles": "unit",
    "test_payloads": "unit",
    "test_protocol": "unit",
    "test_queueview": "git",
    "test_record_faults": "git",
    "test_record_hazards": "git",
    "test_record_policies": "git",
    "test_records": "git",
    "test_registry": "unit",
    "test_review": "unit",
    "test_rubric": "unit",
    "test_runner": "battery",
    "test_admission": "unit",
    "test_blocked": "unit",
    "test_samples": "battery",
    "test_samples_real": "system",
    "test_selfcheck": "unit",
    "test_sandbox": "battery",
    "test_custody": "battery",
    "test_schema": "unit",
    "test_settings": "unit",
    "test_signing": "git",
    "test_screen": "git",
    "test_screen_ray": "system",
    "test_sources": "unit",
    "test_sync": "git",
    "test_suspicion": "unit",
    "test_checks_suspicion": "battery",
    "test_structure": "unit",
    "test_checks_false_alarms": "battery",
    "test_task_problems": "battery",
    "test_team_queue": "git",
    "test_taskfmt": "unit",
    "test_taskfmt_ext": "unit",
    "test_text_sanitize": "unit",
    "test_tiers": "unit",
    "test_timingstats": "unit",
    "test_tui_app": "tui",
    "test_tui_day2": "tui",
    "test_tui_dialogs": "tui",
    "test_tui_isolation": "tui",
    "test_tui_keymap": "tui",
    "test_tui_snapshots": "tui",
    "test_tui_tmux": "system",
    "test_tui_workflow": "tui",
}

# Tests whose tier differs from their module's and that do not use the ``runner`` fixture
# (they start a Runner of their own, run ``kws check`` as a subprocess, ...).
TEST_TIER: dict[str, str] = {
    "test_cuda_emu::test_emulated_kernels_compute_what_numpy_does": "battery",  # g++ on a torch extension
    "test_cuda_emu::test_launch_floor_fails_at_run_time_and_its_clean_twin_passes": "battery",  # its own runner
    "test_cuda_emu::test_a_construct_the_emulation_cannot_run_is_not_judged_naming_it": "battery",
    "test_cuda_emu::test_a_failed_build_is_remembered_for_the_run": "battery",  # g++
    "test_malformed::test_out_args_beyond_the_inputs_and_an_oversized_case_are_task_problems": "battery",
    "test_profiles::test_kws_profile_command_prints_the_panel_text_and_exits_like_check": "battery",
    "test_registry::test_a_check_from_another_package_runs_through_kws_check_only": "battery",
    # the parent's side of the sandbox: result files, task folders, the bwrap command line
    "test_sandbox::test_the_parent_refuses_compressed_and_oversized_arrays": "unit",
    "test_sandbox::test_results_are_never_followed_or_blocked_on": "unit",
    "test_sandbox::test_forging_changes_are_those_on_kws_result_path": "unit",
    "test_sandbox::test_hostile_task_folders_are_refused": "unit",
    "test_sandbox::test_fail_closed_exit_codes": "unit",
    "test_sandbox::test_the_sandbox_argv_binds_no_home_and_no_checkout": "unit",
    # the per-run supervisor on shell scripts: processes, no task code, no git
    "test_screen::test_supervisor_kills_the_whole_tree_at_the_limit": "unit",
    "test_screen::test_supervisor_cleans_up_what_a_finished_command_left": "unit",
    "test_screen::test_supervisor_on_sigterm_kills_the_tree": "unit",
    # kws screen runs of a queue on the local pool
    "test_screen::test_local_screen_stores_then_skips_then_rescreens_a_changed_task": "system",
    "test_screen::test_a_hung_task_is_stopped_at_the_limit_and_nothing_is_left_running": "system",
    "test_screen::test_ctrl_c_stops_cleanly_and_keeps_what_finished": "system",
    # the real app's process runs the real battery (through the check server)
    "test_tui_isolation::test_app_process_never_imports_torch_or_triton": "battery",
    # kws selfcheck end to end: the cheap subset (4 pairs), and the whole corpus (full suite only)
    "test_selfcheck::test_the_cheap_subset_is_caught_and_its_twins_quiet": "battery",
    "test_selfcheck::test_the_whole_corpus_is_caught_and_every_twin_quiet": "system",
}


# Tests of the fast tiers that take more than about 5 s (Pilot tests typing long key
# sequences): marked ``slow``, so ``make test-fast`` leaves them to ``make test``. A key is
# ``module::function`` (every parameter set) or ``module::function[ids]`` (one).
SLOW_TESTS = {
    "test_tui_workflow::test_the_palette_runs_review_actions_on_the_screen_under_it",
    "test_tui_workflow::test_evidence_scrolls_by_keyboard_and_every_panel_maximises_to_the_screen",
    "test_tui_workflow::test_commit_and_next_opens_the_next_unreviewed_task",
    "test_tui_workflow::test_resolve_a_dispute_from_the_review_screen",
    "test_tui_app::test_command_palette_offers_the_actions",
    # issue 41's dialogs and drafts (two app runs, or a commit and a sync each)
    "test_tui_dialogs::test_draft_marker_shows_at_once_and_an_outdated_draft_is_marked",
    "test_tui_dialogs::test_resolve_dialog_checks_self_resolution_when_it_opens_and_keeps_a_draft",
    "test_tui_dialogs::test_dispute_dialog_keeps_its_draft_and_refuses_without_identity",
    # the fast tier keeps the 160x48 run with the default keymap
    "test_tui_app::test_full_review_by_keyboard_commits_a_verdict[size0-vim]",
    "test_tui_app::test_full_review_by_keyboard_commits_a_verdict[size1-default]",
    "test_tui_app::test_full_review_by_keyboard_commits_a_verdict[size1-vim]",
}


def tier_of(item: pytest.Item) -> str:
    """The one tier of a collected test (see the module docstring for the order of rules).

    Raises:
        pytest.UsageError: the test's module is not in ``MODULE_TIER``.
    """
    module = Path(str(item.fspath)).stem
    func = getattr(item, "originalname", None) or item.name
    if f"{module}::{func}" in TEST_TIER:
        return TEST_TIER[f"{module}::{func}"]
    if module not in MODULE_TIER:
        raise pytest.UsageError(f"{module}.py has no tier: add it to MODULE_TIER in tests/conftest.py "
                                f"(one of {', '.join(TIERS)})")
    if MODULE_TIER[module] != "system" and "runner" in getattr(item, "fixturenames", ()):
        return "battery"
    return MODULE_TIER[module]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item)))
        module = Path(str(item.fspath)).stem
        func = getattr(item, "originalname", None) or item.name
        if f"{module}::{func}" in SLOW_TESTS or f"{module}::{item.name}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _fast_tier_guard(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Active when no selected test is battery or system: starting task code raises
    :class:`tests.tierguard.sitecustomize.StartsTaskCode`, here and in every Python child of a
    test (``tests/tierguard`` first on ``PYTHONPATH``); yields the refusal log, or None."""
    if any(i.get_closest_marker(t) for i in request.session.items for t in SLOW_TIERS):
        yield None
        return
    log = tmp_path_factory.mktemp("tierguard") / "refused.txt"
    log.touch()
    _guard_log[:] = [log]
    mp = pytest.MonkeyPatch()
    mp.setenv(tierguard.ENV, str(log))
    mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tierguard.HERE), os.environ.get("PYTHONPATH")) if p))
    init = tierguard.install(log)
    try:
        yield log
    finally:
        subprocess.Popen.__init__ = init  # type: ignore[method-assign]
        mp.undo()
        _guard_log[:] = []


_guard_log: list[Path] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if _guard_log:
        _guard_log[0].write_text("")
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fails a test whose start of task code the guard refused, wherever it was refused (a
    worker thread or a child process may have swallowed the error)."""
    res = yield
    refused = _guard_log[0].read_text().splitlines() if _guard_log else []
    if refused:
        raise tierguard.StartsTaskCode(refused[0])
    return res
