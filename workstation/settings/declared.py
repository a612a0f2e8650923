"""Every setting kws reads, declared once: its name, environment variable, config-file key,
default, unit, meaning and parser.

A parser takes the raw value (the environment variable's text, or the value TOML parsed
from the user config file: an integer, a float, a string, a boolean or an array) and
returns the typed value, or raises :class:`Invalid` with what was expected, in words
(``expected seconds, a number > 0, got 'abc'``); :mod:`workstation.settings.load` turns
that into a :class:`~workstation.schema.problem.Problem` naming the variable or the file
and its key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

#: binary size suffixes a size value may carry (``16G`` = 16 * 2**30 bytes).
SIZE_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class Invalid(ValueError):
    """A raw value a setting's parser refuses; the message says what was expected."""


def _shown(raw: Any) -> str:
    return repr(raw) if not isinstance(raw, bool) else str(raw).lower()


def _real(raw: Any, what: str, ok: Callable[[float], bool]) -> float:
    """A finite real number parsed from ``raw`` (a number or its text) for which ``ok`` holds.

    Raises:
        Invalid: ``raw`` is a bool, not a number, not finite, or ``ok`` refuses it; the
            message starts with ``what``.
    """
    if isinstance(raw, bool):
        raise Invalid(f"{what}, got {_shown(raw)}")
    try:
        v = float(raw.strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        raise Invalid(f"{what}, got {_shown(raw)}") from None
    if not math.isfinite(v) or not ok(v):
        raise Invalid(f"{what}, got {_shown(raw)}")
    return v


def seconds(raw: Any) -> float:
    """A duration in seconds: a finite number > 0."""
    return _real(raw, "expected seconds, a number > 0", lambda v: v > 0)


def factor(raw: Any) -> float:
    """A stretch factor: a finite number >= 1."""
    return _real(raw, "expected a factor, a number >= 1", lambda v: v >= 1)


def integer(lo: int, hi: int | None = None, what: str = "an integer") -> Callable[[Any], int]:
    """An integer in ``[lo, hi]`` (``hi`` None: no upper bound)."""
    bounds = f">= {lo}" if hi is None else f"from {lo} to {hi}"
    expected = f"expected {what}, an integer {bounds}"

    def parse(raw: Any) -> int:
        if isinstance(raw, bool) or isinstance(raw, float):
            raise Invalid(f"{expected}, got {_shown(raw)}")
        try:
            v = int(raw.strip()) if isinstance(raw, str) else int(raw)
        except (TypeError, ValueError):
            raise Invalid(f"{expected}, got {_shown(raw)}") from None
        if v < lo or (hi is not None and v > hi):
            raise Invalid(f"{expected}, got {_shown(raw)}")
        return v

    return parse


def size(raw: Any) -> int:
    """A byte count > 0: an integer, a number with a binary suffix (``512M``, ``16G``,
    ``1.5T``: K/M/G/T are 2**10/20/30/40), or a plain number such as ``1e9`` (rounded
    down)."""
    what = "expected bytes, an integer > 0 or a size such as 16G"
    if isinstance(raw, bool):
        raise Invalid(f"{what}, got {_shown(raw)}")
    if isinstance(raw, int | float):
        v = float(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        mult = SIZE_SUFFIXES.get(text[-1:].upper(), 1)
        if mult != 1:
            text = text[:-1]
        try:
            v = float(text) * mult
        except ValueError:
            raise Invalid(f"{what}, got {_shown(raw)}") from None
    else:
        raise Invalid(f"{what}, got {_shown(raw)}")
    if not math.isfinite(v) or int(v) < 1:
        raise Invalid(f"{what}, got {_shown(raw)}")
    return int(v)


def boolean(raw: Any) -> bool:
    """On or off: a TOML boolean, or ``1``/``0``, ``true``/``false``, ``yes``/``no``,
    ``on``/``off`` (any case)."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        t = raw.strip().lower()
        if t in ("1", "true", "yes", "on"):
            return True
        if t in ("0", "false", "no", "off"):
            return False
    raise Invalid(f"expected 1 or 0 (true or false), got {_shown(raw)}")


def choice(*values: str, auto: bool = False) -> Callable[[Any], str | None]:
    """One of ``values`` (case-insensitive, stripped); with ``auto``, also ``auto``, which
    means None (kws decides)."""
    allowed = (*values, "auto") if auto else values

    def parse(raw: Any) -> str | None:
        t = raw.strip().lower() if isinstance(raw, str) else None
        if t not in allowed:
            raise Invalid(f"expected one of {', '.join(allowed)}, got {_shown(raw)}")
        return None if t == "auto" else t

    return parse


def folder(raw: Any) -> Path:
    """A folder (``~`` expands); it need not exist yet."""
    if not isinstance(raw, str) or not raw.strip():
        raise Invalid(f"expected a folder path, got {_shown(raw)}")
    return Path(raw).expanduser()


def program(raw: Any) -> str:
    """A program's path; the empty string means none."""
    if not isinstance(raw, str):
        raise Invalid(f"expected a program's path (\"\": none), got {_shown(raw)}")
    return raw


def folders(raw: Any) -> tuple[Path, ...]:
    """Folders: ``os.pathsep``-separated text (the environment) or an array of strings
    (the config file); empty entries are skipped."""
    if isinstance(raw, str):
        parts = raw.split(os.pathsep)
    elif isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        parts = raw
    else:
        raise Invalid(f"expected folders (an array of strings, or {os.pathsep!r}-separated text), got {_shown(raw)}")
    return tuple(Path(p).expanduser() for p in parts if p)


@dataclass(frozen=True)
class Setting:
    """One setting.

    Attributes:
        name: the field of :class:`~workstation.settings.load.Settings` holding its value.
        env: the environment variable that sets it.
        key: its key in the user config file (``None``: environment only).
        default: the value when neither sets it (``None``: kws decides, as ``default_text`` says).
        default_text: the default as the documentation prints it.
        unit: the value's unit (``s``, ``bytes``, ...), or ``""``.
        meaning: what it changes, in one or two sentences.
        parse: raw value (text or TOML value) -> typed value; raises :class:`Invalid`.
        empty_unset: an empty environment variable counts as unset (True for all but
            ``KWS_BWRAP``, where empty means "no bubblewrap").
        compute: when set, the default is computed at load (the per-user folders, from
            platformdirs and the ``XDG_*`` variables) instead of ``default``.
    """

    name: str
    env: str
    key: str | None
    default: Any
    default_text: str
    unit: str
    meaning: str
    parse: Callable[[Any], Any]
    empty_unset: bool = True
    compute: Callable[[], Any] | None = None


def _platform_dir(kind: str) -> Callable[[], Path]:
    fn = getattr(platformdirs, f"user_{kind}_dir")
    return lambda: Path(fn("kws"))


SETTINGS: tuple[Setting, ...] = (
    Setting("sandbox", "KWS_SANDBOX", "sandbox", "bwrap", "`bwrap`", "",
            "Whether task code runs in the bubblewrap sandbox (`bwrap`) or unconfined as you "
            "(`none`); `kws check --no-sandbox` overrides both. A queue cannot change it.",
            choice("bwrap", "none")),
    Setting("bwrap", "KWS_BWRAP", "bwrap", None, "`bwrap` on PATH", "",
            "The bubblewrap program; an empty value means none (kws then refuses to run task "
            "code unless the sandbox is off).", program, empty_unset=False),
    Setting("device", "KWS_DEVICE", "device", None, "CUDA when present, else CPU", "",
            "Where task code runs: `cpu` (Triton interpreter), `cuda`, or `auto`; "
            "`kws check --device` and the app's `--device` override it.",
            choice("cpu", "cuda", auto=True)),
    Setting("step_timeout", "KWS_STEP_TIMEOUT", "step_timeout", 30.0, "30", "CPU s",
            "CPU budget of one step of a job (user + system seconds of all its processes, imports "
            "excluded); a candidate's call gets max(this, 20 x the reference's CPU on that case and seed). "
            "A step runs with twice its budget; over that it hangs. It is also the floor of a step's wait "
            "budget: seconds blocked (no thread of the job running or waiting to run: a sleep, a blocked "
            "read, a deadlock), max(this, the CPU budget, 20 x the reference's wall on the case for a "
            "candidate's call); past it a step hangs at once. A wall-clock backstop of 10 x the larger "
            "budget + 30 s guards against kws's own faults: what it alone stops is not judged.", seconds),
    Setting("import_budget", "KWS_IMPORT_BUDGET", "import_budget", 120.0, "120", "CPU s",
            "CPU budget of the task-file imports of one job, apart from its steps' budgets (wall "
            "backstop: 10 x it + 30 s); an import past it leaves the checks that needed it not "
            "judged.", seconds),
    Setting("aot_budget", "KWS_AOT_BUDGET", "aot_budget", 300.0, "300", "CPU s",
            "CPU budget of kws's own Triton AOT compile step (precision-regime reads the IR it lowers "
            "for sm_90), in place of the step budget: compiling every config of an autotuned kernel "
            "takes minutes of CPU (FlagGems mm, 22 launches: about 160 CPU s) and says nothing about "
            "hangs. Past it the IR is not judged.", seconds),
    Setting("hang_limit", "KWS_HANG_LIMIT", "hang_limit", 2, "2", "hangs",
            "Confirmed hangs of one principal (candidate, reference, ...) after which kws runs none "
            "of its steps again in this run.", integer(1, what="a count")),
    Setting("test_stretch", "KWS_TEST_STRETCH", None, 1.0, "1 (off)", "factor",
            "Test hook: every step and import of a job sleeps (factor - 1) x its own wall time, "
            "simulating a loaded machine without burning CPU; verdicts must not change.", factor),
    Setting("compile_timeout", "KWS_COMPILE_TIMEOUT", "compile_timeout", 90.0, "90", "s",
            "Time box of a torch.compile first call in the timing checks.", seconds),
    Setting("torch_compile", "KWS_TORCH_COMPILE", "torch_compile", True, "1 (on)", "",
            "Whether the timing checks also time a torch.compile baseline (`0`: eager PyTorch only, "
            "reported as such).", boolean),
    Setting("cuda_emulation", "KWS_CUDA_EMULATION", "cuda_emulation", True, "1 (on)", "",
            "Without a GPU, compile a CUDA candidate's extension as host C++ (g++, kws's shim) and run "
            "its kernels on the CPU so the run-time checks judge it (`0`: not run, those checks are not "
            "judged; docs/backends.md, 'CUDA on a CPU').", boolean),
    Setting("llc_bytes", "KWS_LLC_BYTES", "llc_bytes", None, "read by the child (sysfs, the GPU's L2)", "bytes",
            "The cache size the timing protocol's flush must evict, for machines whose sysfs "
            "misreports it.", size),
    Setting("input_budget", "KWS_INPUT_BUDGET", "input_budget", None,
            "half the free device memory (CPU: of available memory, at most 8 GiB)", "bytes",
            "The most bytes one case's inputs may take; larger cases are not run.", size),
    Setting("result_bytes", "KWS_RESULT_BYTES", "result_bytes", 768 << 20, "768M", "bytes",
            "Result bytes (JSON and arrays, as declared) the parent accepts from one job.", size),
    Setting("job_disk_bytes", "KWS_JOB_DISK_BYTES", "job_disk_bytes", 1 << 30, "1G", "bytes",
            "Size cap of each job's folder as the job writes it (task copy, results, stdout/stderr): a "
            "tmpfs of the job's own (memory), so a write past it fails with ENOSPC in the job; with the "
            "sandbox only.", size),
    Setting("job_tmp_bytes", "KWS_JOB_TMP_BYTES", "job_tmp_bytes", 2 << 30, "2G", "bytes",
            "Size cap of each job's private /tmp (a tmpfs: memory; HOME is under it).", size),
    Setting("job_shm_bytes", "KWS_JOB_SHM_BYTES", "job_shm_bytes", 256 << 20, "256M", "bytes",
            "Size cap of each job's private /dev/shm and of its /var/tmp (a tmpfs each: memory).", size),
    Setting("task_max_bytes", "KWS_TASK_MAX_BYTES", "task_max_bytes", 256 << 20, "256M", "bytes",
            "The most bytes of file content a task folder may hold (it is copied for every job).", size),
    Setting("memory_limit", "KWS_MEMORY_LIMIT", "memory_limit", None, "75% of the machine's memory", "bytes",
            "The memory cap of the sandbox's cgroup (where cgroups allow one).", size),
    Setting("pids_limit", "KWS_PIDS_LIMIT", "pids_limit", 4096, "4096", "processes",
            "Processes (threads included) the sandbox's cgroup may hold.", integer(1, what="a count")),
    Setting("child_threads", "KWS_CHILD_THREADS", "child_threads", 1, "1", "threads",
            "Intra-op threads of each job child (`OMP_NUM_THREADS`, `MKL_NUM_THREADS`); jobs "
            "run in parallel.", integer(1, what="a count")),
    Setting("checkserver_nice", "KWS_CHECKSERVER_NICE", "checkserver_nice", 10, "10", "nice increment",
            "CPU priority increment of the app's check server (0: none).", integer(0, 19, what="a nice increment")),
    Setting("rubric_path", "KWS_RUBRIC_PATH", "rubric_path", (), "none", "folders",
            "Folders searched for rubric files after the queue's own `rubrics/` "
            f"(environment: `{os.pathsep}`-separated; config file: an array).", folders),
    Setting("queue", "KWS_QUEUE", "queue", None,
            "the queue whose clone holds the current folder, else the per-user sample queue", "",
            "The queue a command works on when it is run outside any queue's clone and without "
            "`--queue` (a folder: a queue's clone). Inside a clone, that clone is the queue, as git "
            "finds its repository.", folder),
    Setting("config_dir", "KWS_CONFIG_DIR", None, None, 'platformdirs.user_config_dir("kws") (~/.config/kws)', "",
            "The per-user config folder: `config.toml` (these settings) and `keymap.toml`.", folder,
            compute=_platform_dir("config")),
    Setting("cache_dir", "KWS_CACHE_DIR", "cache_dir", None, 'platformdirs.user_cache_dir("kws") (~/.cache/kws)', "",
            "kws's own caches (the queue index, kept AOT compile and bounds results, bounds-proof's proofs); "
            "safe to delete (`kws cache clear`).", folder,
            compute=_platform_dir("cache")),
    Setting("cache_bytes", "KWS_CACHE_BYTES", "cache_bytes", 2 << 30, "2G", "bytes",
            "The most bytes kws's content-addressed caches (proofs, kept step results) hold; the least "
            "recently used entries go first. `kws cache clear` empties them.", size),
    Setting("data_dir", "KWS_DATA_DIR", "data_dir", None, 'platformdirs.user_data_dir("kws") (~/.local/share/kws)',
            "", "The per-user data folder (the first-run copy of the sample queue).", folder,
            compute=_platform_dir("data")),
    Setting("state_dir", "KWS_STATE_DIR", "state_dir", None, 'platformdirs.user_state_dir("kws") (~/.local/state/kws)',
            "", "The per-user state folder (verdict drafts).", folder,
            compute=_platform_dir("state")),
)

#: the settings by name.
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: the settings by config-file key.
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS if s.key}
