"""Payload of the invariant audit (``audit_series``, :mod:`workstation.harness.audit`).

What an honest kernel keeps whatever the caller does, recorded call by call so the parent
can judge three invariants: the output follows the input's content (every call against the
reference of the inputs it was given), observation does not change the answer (calls on the
same inputs from different contexts agree), and outputs stay put with nothing left running
(held outputs re-read at the end; a process census at every return).
"""

from __future__ import annotations

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.results import Payload, Raised


class Edit(Payload):
    """Elements of one input set to other values (flat indices in logical row-major
    order); ``what`` says which (``"one element"``, ``"one row"``, ``"the last element"``).
    The values come from the same places of another seed's inputs, so the input keeps its
    distribution."""

    input: int
    indices: list[int]
    values: list[float]
    what: str


class Variant(Payload):
    """One set of inputs the audit called the role on: ``make_inputs`` of ``seed``, then
    ``edit`` when there is one."""

    seed: int
    edit: Edit | None = None


class Proc(Payload):
    """A process of the job alive at a call's return that was not alive before the call.

    Attributes:
        pid, ppid: in the job's pid namespace.
        state: the state letter of ``/proc/<pid>/stat`` (``R``, ``S``, ...).
        comm: its command name.
        started_at: the Python frames (``file:line function``) that started it, where it was
            started through Python's process API (``os.fork``, ``os.posix_spawn``,
            ``subprocess.Popen``, hence ``multiprocessing``); empty when it was not (a raw
            ``fork`` through ctypes, or a child of such a process).
        task_code: a task file is on that stack.
    """

    pid: int
    ppid: int
    state: str
    comm: str
    started_at: list[str] = []
    task_code: bool = False


class AuditCall(Payload):
    """One call of the audit.

    Attributes:
        index: its position in the sequence (0-based).
        variant: index into :attr:`AuditExtra.variants`.
        path: how the variant's values reached the inputs (``fresh`` tensors, ``inplace``
            ``copy_`` into the previous call's tensors, ``data`` through ``.data`` (no
            version bump), ``numpy`` through a numpy view (no version bump), ``storage``
            by raw memory copy (no version bump), ``recycled`` new tensors after freeing the
            previous ones (often at the same address), ``clone`` the previous call's
            values at a new address).
        path_note: what the write path observed (same/other address, version bumped or
            not), or why it fell back to ``fresh``.
        context: where the call came from (``plain``, ``dispatch`` (a pass-through
            TorchDispatchMode), ``function_mode`` (TorchFunctionMode), ``profiler``
            (torch.profiler), ``setprofile`` (a Python profile hook), ``frame`` (a caller
            frame named like a benchmark: see ``frame``), ``quick`` (right after the
            previous call on the same tensors), ``pause`` (after a 20 ms pause), ``loop``
            (the last of 6 back-to-back calls without a synchronize), ``clock`` (the
            clocks of the time module read one hour later)).
        frame: the caller's function name for ``frame`` ("" otherwise).
        phase: ``first`` (before the long run), ``long`` (the long run: plain calls on fresh
            copies), ``second`` (after it).
        seconds: wall seconds of the call.
        arrays: per output, the name of the array holding its values (calls whose outputs
            are bitwise equal share one array); None where the output could not be read.
        fingerprints: per output, a BLAKE2b digest of its dtype, shape and bytes.
        dtypes: per output, its torch dtype name.
        new_processes: processes alive at return that were not before the call.
        error: what the call raised (None when it returned).
    """

    index: int
    variant: int
    path: str
    context: str
    phase: str
    path_note: str = ""
    frame: str = ""
    seconds: float = 0.0
    arrays: list[str | None] = []
    fingerprints: list[str] = []
    dtypes: list[str] = []
    new_processes: list[Proc] = []
    error: Raised | None = None


class Held(Payload):
    """An output held from an early call and read again at the end of the audit.

    Attributes:
        call: the call's index; output: the output's index.
        at_return, at_end: fingerprints right after the call returned and at the end.
        array_end: the array with its values at the end (only when they changed).
    """

    call: int
    output: int
    at_return: str
    at_end: str
    array_end: str | None = None


@extra_type
class AuditExtra(Extra, tag="audit_series"):
    """The ``audit_series`` step's payload.

    Attributes:
        variants: the inputs the role was called on (index = ``AuditCall.variant``).
        calls: every call, in the order made.
        held: the held outputs, read again at the end.
        long_run: plain calls made in the long run.
        census: whether the process census could read ``/proc`` ("" when it could, else
            why not).
        editable: the inputs edits were allowed on (float tensors without structure that an
            edit would break: sorted, symmetric, rows summing to one, integer-valued).
        device_name: ``"cpu"`` or the CUDA device's name.
    """

    variants: list[Variant] = []
    calls: list[AuditCall] = []
    held: list[Held] = []
    long_run: int = 0
    census: str = ""
    editable: list[int] = []
    device_name: str = ""
