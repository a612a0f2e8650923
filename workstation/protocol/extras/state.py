"""Payload of the ``state_probe`` step (:mod:`workstation.harness.state`; ``tampering``).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

import msgspec

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.series import Frame
from workstation.protocol.results import Payload


class ThreadInfo(Payload):
    """One live Python thread in a snapshot.

    Attributes:
        name: its name.
        ident: its ``threading`` ident (None before it started).
        daemon: a daemon thread.
        alive: ``is_alive()``.
        cls: its class's qualified name (the JSON key is ``class``).
        target: ``<module>.<qualname>`` of its target (``""`` when it has none).
    """

    name: str = ""
    ident: int | None = None
    daemon: bool = False
    alive: bool = True
    cls: str = msgspec.field(default="", name="class")
    target: str = ""


class CudaState(Payload):
    """CUDA state in a snapshot: the current stream's handle (``cuda_stream``, an integer
    address) and the current device's index."""

    current_stream: int
    device: int = 0


class Snapshot(Payload):
    """Process-global state at one moment (:func:`workstation.harness.state.snapshot`).

    Attributes:
        flags: flag label (``"torch.backends.cuda.matmul.allow_tf32"``) -> the ``repr`` of
            its value; a flag this torch build does not have is left out.
        functions: ``<namespace>.<name>`` of every callable snapshotted -> its token
            ``<owner>:<id>:<id of __code__>``.
        threads: the live Python threads.
        env: the environment (``os.environ``).
        cuda: the current stream and device (None off CUDA).
    """

    flags: dict[str, str] = {}
    functions: dict[str, str] = {}
    threads: list[ThreadInfo] = []
    env: dict[str, str] = {}
    cuda: CudaState | None = None


class StreamCreated(Payload):
    """One ``torch.cuda.Stream`` created during the call: the innermost task-code frame
    that created it (file relative to the task folder), None when no task frame was on the
    stack."""

    site: Frame | None = None


class StreamWatch(Payload):
    """What the call did with CUDA streams (CUDA only): the streams it ``created`` and its
    number of ``torch.cuda.set_stream`` calls."""

    created: list[StreamCreated] = []
    set_stream_calls: int = 0


class CallableInfo(Payload, omit_defaults=True):
    """Where a callable whose token changed comes from (evidence only: the parent judges
    from the tokens). A field Python could not tell is left out of the JSON and of a
    finding's evidence.

    Attributes:
        qualname: its ``__qualname__`` (its type's when it has none).
        module: its ``__module__`` (``""`` when none).
        file: its source file (``inspect.getsourcefile``: None when the file is not on
            disk, ``UNSET`` when inspect refused the object, a builtin).
        line: the first line of its source (None: unknown).
        task_file: ``file`` relative to the task folder, when it lies there (None
            otherwise).
    """

    qualname: str = ""
    module: str = ""
    file: str | None | msgspec.UnsetType = msgspec.UNSET
    line: int | None = None
    task_file: str | None = None


@extra_type
class StateProbeExtra(Extra, tag="state_probe"):
    """A ``state_probe`` step: snapshots of process-global state around one import and one
    call of a role; a step that failed part-way sends the snapshots it took.

    Attributes:
        device_name: ``"cpu"`` or the CUDA device's name.
        before: after the inputs were made, before the role's module was imported.
        after_import: after the import.
        after_call: after one call (and, on CUDA, a synchronize).
        streams: CUDA streams created and ``set_stream`` calls during the call (None off
            CUDA or when the call did not complete).
        details: callable key -> where it comes from, for every callable whose token
            changed after the import or the call (empty when the step failed).
    """

    device_name: str = ""
    before: Snapshot | None = None
    after_import: Snapshot | None = None
    after_call: Snapshot | None = None
    streams: StreamWatch | None = None
    details: dict[str, CallableInfo] = {}
