"""Payloads of the plain call steps (:mod:`workstation.harness.core`): ``call`` and
``author_test``, and the input description every calling step shares."""

from __future__ import annotations

from typing import Any

from workstation.protocol.extras import Extra
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


class CallExtra(Extra, tag="call"):
    """A ``call`` step: the role called ``repeat`` times on one set of inputs.

    Attributes:
        inputs: each input before the call (with its digest after it).
        monitors: monitor name (``aten_ops``, ``triton_launches``, ...) -> what it observed.
        calls: wall seconds of each call.
        device_name: ``"cpu"`` or the CUDA device's name.
    """

    inputs: list[InputDesc] = []
    monitors: dict[str, dict[str, Any]] = {}
    calls: list[float] = []
    device_name: str = ""


class AuthorTestExtra(Extra, tag="author_test"):
    """An ``author_test`` step: whether the author's ``check(case, device, seed)`` returned
    (``passed``), and the AssertionError's message when it failed one."""

    passed: bool = False
    assertion: str = ""
