"""Payloads of the memory-checking call steps (:mod:`workstation.harness.guards`):
``guarded_call`` (poisoned, guard-banded buffers) and ``sanitizer_call`` (compute-sanitizer's
memcheck in a fresh interpreter).

Torch-free: the parent imports it; strict mypy.
"""

from __future__ import annotations

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.calls import InputDesc
from workstation.protocol.extras.monitors import Site
from workstation.protocol.results import Payload, Raised


class GuardedBuffer(Payload, omit_defaults=True, kw_only=True):
    """One buffer of a guarded run: a tensor input (or ``out_args`` input) copied into the
    middle of a larger buffer, or a fresh allocation made during the call.

    Attributes:
        kind: ``"input"``, ``"out_arg"``, ``"inout_arg"`` or ``"allocation"``.
        index: the input's position, or the allocation's rank among the call's non-empty
            allocations (from 0).
        dtype: torch dtype name; shape, stride (elements): the tensor task code saw.
        element_size: bytes per element.
        extent: elements of storage the tensor spans from its first element.
        guard: guard band length on each side (elements; 0 when not guarded).
        poisoned: it was filled with the scenario's poison (write-only buffers).
        guarded: it sits between guard bands (arrays ``gb<k>`` / ``ga<k>`` hold their
            bytes after the call).
        device: ``"cpu"``, ``"cuda:0"``.
        site: the task-code line that allocated it (allocations only; None, and then not
            encoded, when outside the task's code or for an input).
        op: the allocating aten op (``"empty"``, ``"empty_like"``; "" for an input).
        note: why an input was not guarded ("" when it was, or for no reason to give).
    """

    kind: str
    index: int
    dtype: str
    shape: list[int]
    stride: list[int]
    element_size: int
    extent: int
    guard: int
    poisoned: bool
    guarded: bool
    device: str
    site: Site | None = None
    op: str = ""
    note: str = ""


class OutputSource(Payload):
    """Which buffer output ``output`` of a guarded run lives in: ``buffer``, an index into
    :attr:`GuardedCallExtra.buffers` (None: none of them, e.g. a tensor the role allocated
    outside the dispatcher or returned as a view of something else)."""

    output: int
    buffer: int | None


@extra_type
class GuardedCallExtra(Extra, tag="guarded_call"):
    """A ``guarded_call`` step: the role called once on guarded, poisoned inputs with every
    fresh allocation poisoned and guarded (arrays: ``bits<j>``, the raw element bits of
    output ``j``; ``gb<k>`` / ``ga<k>``, the guard bands before and after buffer ``k``).

    Attributes:
        scenario: the poison scenario (``"A"``, ``"B"``;
            :data:`workstation.protocol.sentinels.POISON`).
        buffers: the inputs' buffers first (in input order), then the allocations.
        output_sources: per output, which buffer it lives in.
        allocations: non-empty allocations made during the call.
        unguarded_allocations: those poisoned but not guarded (too large, too many, pinned,
            negative strides).
        inputs: each input as the role received it (the guarded copies).
        device_name: ``"cpu"`` or the CUDA device's name (sent on every path).
        calls: wall seconds of the call (one entry).
    """

    scenario: str = ""
    buffers: list[GuardedBuffer] = []
    output_sources: list[OutputSource] = []
    allocations: int = 0
    unguarded_allocations: int = 0
    inputs: list[InputDesc] = []
    device_name: str = ""
    calls: list[float] = []


@extra_type
class SanitizerCallExtra(Extra, tag="sanitizer_call"):
    """A ``sanitizer_call`` step: one call of the role under ``compute-sanitizer --tool
    memcheck`` in a fresh interpreter (CUDA only).

    Attributes:
        ran: memcheck ran to its end (False: ``reason`` says why not).
        reason: why it did not ("" when it did).
        binary: the compute-sanitizer executable used.
        errors: the ERROR SUMMARY's count (None: no summary printed).
        report: the sanitizer's error lines (at most 80).
        returncode: the sanitizer's exit status (97: it found errors).
        call_ok: the call inside it returned.
        call_error: what the call raised, as its step reported it (None when it returned or
            wrote no result).
        tail: the last 4000 characters of its output (also when it timed out).
    """

    ran: bool = False
    reason: str = ""
    binary: str = ""
    errors: int | None = None
    report: list[str] = []
    returncode: int | None = None
    call_ok: bool = False
    call_error: Raised | None = None
    tail: str = ""
