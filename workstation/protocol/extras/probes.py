"""Payloads of the probe steps (:mod:`workstation.harness.probes`): ``inputs_only``,
``repeat_call``, ``hashseed_call`` and ``stale_call`` (``input-mutation``, ``nondeterminism``,
``stale-output``).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.calls import InputDesc
from workstation.protocol.results import Payload, TensorMeta


@extra_type
class InputsOnlyExtra(Extra, tag="inputs_only"):
    """An ``inputs_only`` step: the inputs of one case and seed after the step's transforms,
    made and sent (arrays ``in<j>``, one per tensor input) without calling anything.

    Attributes:
        inputs: each positional input as made (``sha256_after`` None: nothing was called).
        device_name: ``"cpu"`` or the CUDA device's name.
    """

    inputs: list[InputDesc] = []
    device_name: str = ""


class RepeatRun(Payload):
    """One call of a ``repeat_call`` step: ``outputs`` (metadata of its outputs, whose
    values travel as arrays ``r<k>_<j>``) and its wall ``seconds``."""

    outputs: list[TensorMeta] = []
    seconds: float = 0.0


@extra_type
class RepeatCallExtra(Extra, tag="repeat_call"):
    """A ``repeat_call`` step: the role called ``n`` times in one process, each call on a
    fresh clone of the same inputs.

    Attributes:
        runs: call ``k``'s outputs' metadata and wall seconds, in call order (empty when
            the step failed).
        pid: the job process's id (0 when the step failed).
        device_name: ``"cpu"`` or the CUDA device's name.
    """

    runs: list[RepeatRun] = []
    pid: int = 0
    device_name: str = ""


@extra_type
class HashseedCallExtra(Extra, tag="hashseed_call"):
    """A ``hashseed_call`` step: one plain ``call`` step in a fresh interpreter started with
    ``PYTHONHASHSEED=hashseed``.

    Attributes:
        hashseed: the ``PYTHONHASHSEED`` it ran with.
        returncode: the fresh interpreter's exit status (None: killed at the step's
            timeout).
        stderr_tail: the last 2000 characters of its standard error.
        wall_seconds: wall seconds of the whole sub-run (the interpreter's start included).
        outputs: metadata of the call's outputs (values in arrays ``h<j>``); empty when the
            call failed.
    """

    hashseed: int = 0
    returncode: int | None = None
    stderr_tail: str = ""
    wall_seconds: float = 0.0
    outputs: list[TensorMeta] = []


class OutputFacts(Payload, omit_defaults=True):
    """What the parent needs to judge one output of a ``stale_call`` step's second call.

    A non-tensor output has ``type`` only (every other field None, left out of its JSON and
    of a finding's evidence); a tensor output has every field.

    Attributes:
        type: the output's qualified type (``"torch.Tensor"``; a non-tensor's bare type
            name, ``"int"``); ``""`` only in an empty :class:`OutputFacts` (no facts).
        plain_tensor: ``type(o) is torch.Tensor``.
        overrides: which of ``__torch_function__`` / ``__torch_dispatch__`` its class
            defines itself (a subclass deciding what readers see).
        device: ``"cpu"``, ``"cuda:0"``, ``"meta"``.
        is_meta: a meta tensor (no values).
        fake: a ``FakeTensor`` / ``FunctionalTensor`` (or a class of a ``fake`` module).
        shape, stride: as torch gives them (stride in elements).
        zero_stride_dims: dimensions of size > 1 with stride 0 (an expanded view).
        aliases_inputs: indices of the inputs whose memory it overlaps.
        aliases_first_outputs: indices of the first call's outputs whose memory it overlaps.
        same_object_as_first: indices of the first call's outputs that are this very object.
    """

    type: str = ""
    plain_tensor: bool | None = None
    overrides: list[str] | None = None
    device: str | None = None
    is_meta: bool | None = None
    fake: bool | None = None
    shape: list[int] | None = None
    stride: list[int] | None = None
    zero_stride_dims: list[int] | None = None
    aliases_inputs: list[int] | None = None
    aliases_first_outputs: list[int] | None = None
    same_object_as_first: list[int] | None = None


@extra_type
class StaleCallExtra(Extra, tag="stale_call"):
    """A ``stale_call`` step: the role called on the inputs of ``seed_a``, then again after
    seed B's values were copied into the same input tensors in place.

    Arrays: ``first<j>`` (first outputs right after the first call), ``firstafter<j>`` (the
    same tensors after the second call), ``early<j>`` (CUDA: the second outputs copied on the
    current stream before a synchronize); the step's outputs are the second call's.

    Attributes:
        facts: per output of the second call, its aliasing and materialisation facts.
        refill: per input, how it got seed B's values (``"copied in place"``, or
            ``"replaced (not a tensor of the same shape and dtype)"``).
        seed_a, seed_b: the two seeds.
        calls: wall seconds of the two calls.
        sync_checked: the ``early<j>`` arrays were taken (on CUDA).
        device_name: ``"cpu"`` or the CUDA device's name.
        written_args: input indices the task declares written (``out_args`` and
            ``inout_args``), sorted.
    """

    facts: list[OutputFacts] = []
    refill: list[str] = []
    seed_a: int = 0
    seed_b: int = 0
    calls: list[float] = []
    sync_checked: bool = False
    device_name: str = ""
    written_args: list[int] = []
