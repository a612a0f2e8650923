"""Payloads of the plain call steps: ``call`` and ``author_test``
(:mod:`workstation.harness.core`), ``fault_call`` (:mod:`workstation.harness.trace`), and
the input description every calling step shares (:class:`InputDesc`).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

import msgspec

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.monitors import AtenOpCount, AtenProfile, MonitorReports
from workstation.protocol.results import Payload


class InputDesc(Payload):
    """One positional input of a role call, as the child saw it before the call.

    Attributes:
        index: its position.
        kind: ``"tensor"``, or the Python type name of a non-tensor argument (``"int"``).
        dtype, shape, stride, storage_offset, contiguous, data_ptr: a tensor's layout
            (stride and offset in elements).
        sha256: a digest of the tensor's bytes before the call.
        sha256_after: the same after the call (steps that call the role once), None when
            not taken.
        finite: every element is finite (None: torch cannot tell for the dtype).
        value: a non-tensor argument's repr (at most 200 characters).
        sent: its values were sent back as the array ``in<index>``.
    """

    index: int
    kind: str
    dtype: str = ""
    shape: list[int] = []
    stride: list[int] = []
    storage_offset: int = 0
    contiguous: bool = True
    data_ptr: int = 0
    sha256: str = ""
    sha256_after: str | None = None
    finite: bool | None = None
    value: str = ""
    sent: bool = False


@extra_type
class CallExtra(Extra, tag="call"):
    """A ``call`` step: the role called ``repeat`` times on one set of inputs.

    Attributes:
        inputs: each input before the call (with its digest after it); empty when the
            step failed before or during the call.
        monitors: what each monitor the step asked for observed (all None when the call
            raised).
        calls: wall seconds of each call.
        device_name: ``"cpu"`` or the CUDA device's name (sent on every path).
    """

    inputs: list[InputDesc] = []
    monitors: MonitorReports = msgspec.field(default_factory=MonitorReports)
    calls: list[float] = []
    device_name: str = ""


@extra_type
class AuthorTestExtra(Extra, tag="author_test"):
    """An ``author_test`` step: whether the author's ``check(case, device, seed)`` returned
    (``passed``), and the AssertionError's message when it failed one (at most 4000
    characters; "" otherwise)."""

    passed: bool = False
    assertion: str = ""


@extra_type
class FaultCallExtra(Extra, tag="fault_call"):
    """A ``fault_call`` step: one call of the role with a fault injected where its kernels
    start (every Triton launch, or every C++/CUDA extension build, raises), traced as the
    ``aten_ops`` monitor traces.

    Attributes:
        fault: the fault injected (``"triton_launch"``, ``"extension_build"``).
        device_name: ``"cpu"`` or the CUDA device's name.
        inputs: each input before the call (empty when making them failed).
        attempted: launches or builds that hit the fault.
        kernels: kernel name -> launches that hit it (``triton_launch`` only).
        ops: aten op name -> what the dispatch-mode tracer saw (see
            :class:`~workstation.protocol.extras.monitors.AtenOpsReport`).
        profiler: what the autograd profiler saw (None when the trace never started).
    """

    fault: str = ""
    device_name: str = ""
    inputs: list[InputDesc] = []
    attempted: int = 0
    kernels: dict[str, int] = {}
    ops: dict[str, AtenOpCount] = {}
    profiler: AtenProfile | None = None
