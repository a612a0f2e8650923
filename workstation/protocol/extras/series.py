"""Payload of the ``call_series`` step (:mod:`workstation.harness.series`; ``late-write``,
``call-count``, ``thread-census``).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

import msgspec

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.results import Payload


class Frame(Payload):
    """One stack frame: ``file`` (the path as the frame gives it), ``line`` (None when
    Python does not know it), ``function``."""

    file: str
    line: int | None = None
    function: str = ""


class SeriesThread(Payload):
    """One Python thread alive right after a serial call returned (or after the settle
    wait) that was not alive before the call.

    Attributes:
        ident: its ``threading`` ident (None before it started).
        name: its name (``"Thread-3 (fill)"``).
        daemon: a daemon thread.
        cls: its class's qualified name (``"threading.Thread"``; the JSON key is
            ``class``).
        target: ``<module>.<qualname>`` of its target, None when it has none.
        started_at: the last 8 frames of the stack that called ``Thread.start`` (empty when
            it was not started during the call).
        running: the last 8 frames of the stack it is running.
        task_code: a task file started it itself, holds its target, or is on that stack.
    """

    ident: int | None = None
    name: str = ""
    daemon: bool = False
    cls: str = msgspec.field(default="", name="class")
    target: str | None = None
    started_at: list[Frame] = []
    running: list[Frame] = []
    task_code: bool = False


class SerialCall(Payload):
    """One call of the serial phase, on fresh copies of the inputs of ``seed_a``; the lists
    of outputs have one entry per output ``j``.

    Attributes:
        call: its index (0-based).
        seconds: the call's wall seconds.
        types: each output's qualified type (``"torch.Tensor"``).
        dtypes: each output's torch dtype name (``""`` for a non-tensor).
        exact_tensor: ``type(o) is torch.Tensor``.
        early: each output's fingerprint (BLAKE2b, 16 bytes, hex) right after the call
            returned, or ``"unreadable: <why>"``.
        late: the same after a synchronize, the settle wait and a second synchronize.
        arrays: the array holding the output's value after the settle (``s<k>_<j>``, the
            first call to send that fingerprint), None when it is unreadable.
        early_arrays: the array holding the value right after return (``e<k>_<j>``), only
            where it differs from the late one; None otherwise.
        threads_after_return: the new threads alive right after the call returned.
        threads_after_settle: the new threads alive after the settle wait.
        os_threads: the process's OS thread count before the call, right after it
            returned, after the settle wait (-1 where unreadable).
    """

    call: int = 0
    seconds: float = 0.0
    types: list[str] = []
    dtypes: list[str] = []
    exact_tensor: list[bool] = []
    early: list[str] = []
    late: list[str] = []
    arrays: list[str | None] = []
    early_arrays: list[str | None] = []
    threads_after_return: list[SeriesThread] = []
    threads_after_settle: list[SeriesThread] = []
    os_threads: list[int] = []


class SeriesLoop(Payload):
    """The loop phase: ``n`` calls back to back without a synchronize, alternating fresh
    copies of the inputs of ``seed_a`` (even calls) and ``seed_b`` (odd calls). Call
    ``audit`` (chosen at random in the child) and the last call are kept (arrays
    ``audit<j>``, ``last<j>``; ``audit_early<j>`` where the audit's value right after return
    differs). Every field but ``n`` keeps its default when ``n`` is 0.

    Attributes:
        n: the number of loop calls (0: no loop).
        audit: the audit call's index (0-based; None when there is no loop).
        audit_seed, last_seed: the seed of the audit call's and the last call's inputs.
        audit_early: the audit call's output fingerprints right after return.
        audit_types, audit_dtypes, audit_exact_tensor, audit_late: per audit output: its
            qualified type, dtype name, ``type(o) is torch.Tensor``, fingerprint after the
            synchronize and settle wait.
        last_types, last_dtypes, last_exact_tensor, last_late: the same for the last call.
    """

    n: int = 0
    audit: int | None = None
    audit_seed: int = 0
    last_seed: int = 0
    audit_early: list[str] = []
    audit_types: list[str] = []
    audit_dtypes: list[str] = []
    audit_exact_tensor: list[bool] = []
    audit_late: list[str] = []
    last_types: list[str] = []
    last_dtypes: list[str] = []
    last_exact_tensor: list[bool] = []
    last_late: list[str] = []


@extra_type
class CallSeriesExtra(Extra, tag="call_series"):
    """A ``call_series`` step: the serial calls and the loop (:mod:`workstation.harness.series`).

    Attributes:
        serial: the serial calls that completed, in order (a failed step still sends them).
        loop: the loop phase (``n`` 0 when the step failed before it or ran no loop).
        settle_s: the settle wait between the two synchronizes (seconds).
        device_name: ``"cpu"`` or the CUDA device's name.
        pid: the job process's id (0 when the step failed).
    """

    serial: list[SerialCall] = []
    loop: SeriesLoop = msgspec.field(default_factory=SeriesLoop)
    settle_s: float = 0.0
    device_name: str = ""
    pid: int = 0
