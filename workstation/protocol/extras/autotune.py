"""Payload of the ``autotune_probe`` step (:mod:`workstation.harness.autotune`; ``autotune``).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

import msgspec

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.results import Payload, Raised, TensorMeta
from workstation.protocol.steps import Case


class ConfigDesc(Payload):
    """One ``triton.Config`` of an autotuner.

    Attributes:
        kwargs: its meta-parameters (``{"BLOCK": 128}``); a value that is not an int,
            float, bool or str is its ``repr``.
        num_warps, num_stages, num_ctas: as the config holds them (Triton's defaults 4, 3,
            1; None only where task code set None).
        maxnreg: its register cap (None: none).
        pre_hook: it has a ``pre_hook``.
        text: ``str(config)`` (``"BLOCK: 128, num_warps: 4, ..."``).
    """

    kwargs: dict[str, int | float | bool | str] = {}
    num_warps: int | None = 4
    num_stages: int | None = 3
    num_ctas: int | None = 1
    maxnreg: int | None = None
    pre_hook: bool = False
    text: str = ""


class AutotunerDesc(Payload):
    """One ``triton.runtime.autotuner.Autotuner`` the probe found.

    Attributes:
        kernel: the tuned kernel's function name.
        file, line: its source file's name (no folder; ``""`` when unknown) and first line
            (0 when unknown).
        arg_names: the kernel's argument names.
        configs: its configs, in declaration order (a config index counts in this list).
        key: the argument names of its tuning key.
        reset_to_zero, restore_value: the argument names it resets / restores around each
            tuning launch.
        user_pre_hook, user_post_hook: it has a user ``pre_hook`` / ``post_hook``.
        early_config_prune, perf_model: it prunes configs early / has a performance model.
    """

    kernel: str = ""
    file: str = ""
    line: int = 0
    arg_names: list[str] = []
    configs: list[ConfigDesc] = []
    key: list[str] = []
    reset_to_zero: list[str] = []
    restore_value: list[str] = []
    user_pre_hook: bool = False
    user_post_hook: bool = False
    early_config_prune: bool = False
    perf_model: bool = False


class ListenerPick(Payload):
    """One tuning as ``triton.knobs.autotuning.listener`` reported it (CUDA only).

    Attributes:
        kernel: the kernel's name (``"?"`` when unknown).
        key: the ``repr`` of the tuning key's values.
        best: ``str`` of the config it picked.
        timings: ``str(config)`` -> its measured time (milliseconds, as
            ``triton.testing.do_bench`` gives it; a value that is no number is its
            ``repr``).
        duration_s: how long the tuning took (seconds; None when Triton gave no number).
        cache_hit: the pick came from Triton's cache.
    """

    kernel: str = ""
    key: str = ""
    best: str = ""
    timings: dict[str, float | str] = {}
    duration_s: float | None = None
    cache_hit: bool = False


class PickedConfig(Payload):
    """The config one autotuner holds after a call: ``index`` in its configs (-1: none or
    not one of them), ``config`` (``str`` of it, None when none) and ``cache`` (its tuning
    cache: ``repr`` of the key -> ``str`` of the config)."""

    index: int = -1
    config: str | None = None
    cache: dict[str, str] = {}


class ProbeCall(Payload):
    """One candidate call on fresh inputs.

    Attributes:
        ok: the call returned.
        error: what it raised (None when ``ok``).
        outputs: its outputs' metadata (values in arrays ``c<case>_<run>_out<j>``); empty
            when it raised.
    """

    ok: bool = False
    error: Raised | None = None
    outputs: list[TensorMeta] = []


class TunedCall(ProbeCall):
    """The ``tuned`` (empty tuning cache) or ``cached`` call of a case, with what the
    autotuners did during it. Maps keyed by autotuner index then config index (both as
    strings; config ``"-1"``: a launch that matched no config).

    Attributes:
        launches: kernel launches per autotuner and config.
        raised: launches that raised, per autotuner and config.
        launch_errors: the first error of those (``"<type>: <message>"``, at most 300
            characters of message), per autotuner and config.
        picks: the listener's reports (:class:`ListenerPick`; empty under the interpreter).
        picked: per autotuner (in the order of ``autotuners``), the config it holds after
            the call.
    """

    launches: dict[str, dict[str, int]] = {}
    raised: dict[str, dict[str, int]] = {}
    launch_errors: dict[str, dict[str, str]] = {}
    picks: list[ListenerPick] = []
    picked: list[PickedConfig] = []


class AutotuneCase(Payload):
    """The probe of one case.

    Attributes:
        case: the case table.
        tuned: the first call, which runs the autotuners (their caches emptied).
        cached: the second call, which hits their caches.
        configs: per autotuner (in the order of ``autotuners``), per config: one call with
            the config list set to that config alone.
    """

    case: Case = {}
    tuned: TunedCall = msgspec.field(default_factory=TunedCall)
    cached: TunedCall = msgspec.field(default_factory=TunedCall)
    configs: list[list[ProbeCall]] = []


@extra_type
class AutotuneProbeExtra(Extra, tag="autotune_probe"):
    """An ``autotune_probe`` step: the candidate's autotuners found and driven per case.

    Attributes:
        autotuners: the autotuners driven: the task's own, then those of installed packages
            that a discovery call showed the candidate launching.
        device_name: ``"cpu"`` or the CUDA device's name.
        interpreter: the Triton interpreter ran the kernels (configs are not timed).
        cases: per case of the step, in order (empty when no autotuner was found).
        packages_searched: the installed top-level packages searched for autotuners.
        from_packages: kernel names of the ``autotuners`` that live in those packages.
    """

    autotuners: list[AutotunerDesc] = []
    device_name: str = ""
    interpreter: bool = False
    cases: list[AutotuneCase] = []
    packages_searched: list[str] = []
    from_packages: list[str] = []
