"""Child side of ``unwritten-output`` and ``out-of-bounds``: poisoned, guarded buffers.

Step ``guarded_call`` (:class:`~workstation.protocol.steps.GuardedCallStep`: ``scenario``
picks the poison of :data:`workstation.protocol.sentinels.POISON`, ``guard`` surrounds
buffers with guard bands, else they are only poisoned) makes the inputs, replaces every tensor input by a copy that sits in the middle of a
larger buffer whose bands before and after hold :data:`~workstation.protocol.sentinels.GUARD_BYTE`
(``out_args`` copies are filled with the poison instead of their values: they are
write-only), imports and calls the role inside :class:`GuardedAllocMode`, a
``TorchDispatchMode`` that turns every ``aten.empty*`` / ``empty_like`` /
``empty_strided`` / ``new_empty*`` result into a poisoned tensor inside a guarded buffer.
Works on CPU and CUDA tensors alike: Triton kernels (compiled or interpreted) then write
over the poison through the pointers they are given.

It sends the outputs (as every call step does), their raw element bits (``bits<j>``,
integers of the element's width), and the raw bytes of every guard band (``gb<k>`` before,
``ga<k>`` after buffer ``k``) with ``extra.buffers[k]`` describing buffer ``k`` (what it
is, dtype, shape, the guard length, where it was allocated) and
``extra.output_sources[j]`` saying which buffer output ``j`` lives in (``extra``: a
:class:`~workstation.protocol.extras.guards.GuardedCallExtra`). The parent compares bits and
bytes with the sentinels; nothing is judged here.

Step ``sanitizer_call`` runs one call of a role under NVIDIA compute-sanitizer's memcheck
tool in a fresh interpreter (CUDA only) and returns its report lines (``extra``: a
:class:`~workstation.protocol.extras.guards.SanitizerCallExtra`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from workstation.harness import StepOutput, step
from workstation.harness.core import describe_inputs, error_info, prepared_inputs
from workstation.protocol import sentinels
from workstation.protocol.extras.guards import (
    GuardedBuffer,
    GuardedCallExtra,
    OutputSource,
    SanitizerCallExtra,
)
from workstation.protocol.extras.monitors import Site
from workstation.protocol.results import ResultFormatError, decode_doc, kws_error
from workstation.protocol.steps import (
    CallStep,
    GuardedCallStep,
    SanitizerCallStep,
    Step,
    encode_job,
)

aten = torch.ops.aten

#: allocation ops whose results are write-only memory (their content is unspecified).
ALLOC_OPS = (
    aten.empty.memory_format, aten.empty_like.default, aten.empty_strided.default,
    aten.new_empty.default, aten.new_empty_strided.default,
)
#: guard band length (elements, each side): at least this many...
GUARD_MIN_ELEMENTS = 4096
#: ...at least the buffer's own size (a whole extra tile grid), at most this many.
GUARD_MAX_ELEMENTS = 1 << 18
#: allocations larger than this are poisoned but neither guarded nor kept (Triton's
#: 256 MiB L2-flush buffer in do_bench).
GUARD_MAX_BUFFER_BYTES = 1 << 26
#: guard bands of at most this many buffers per call are kept and sent.
MAX_GUARDED_BUFFERS = 64
#: guard byte length is a multiple of this, so the guarded view keeps the allocator's
#: alignment (Triton specialises pointer arguments on 16-byte divisibility).
GUARD_ALIGN_BYTES = 256

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class _NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def warm_dispatch_modes() -> None:
    """Pay, once, what the first ``TorchDispatchMode`` of a process costs: its first
    dispatch imports torch._dynamo, sympy and mpmath (about 800 modules, ~1 s on the CPU).
    Run at import, so the fork server (which preloads this module) pays it and every
    forked child starts warm."""
    with _NoopMode():
        torch.empty(0)


warm_dispatch_modes()


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def int_view(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` reinterpreted as integers of its element width (None for widths > 8 bytes)."""
    it = _INT_OF_SIZE.get(t.element_size())
    return None if it is None else t.view(it)


def _signed(bits: int, size: int) -> int:
    """An unsigned bit pattern as the signed value of a ``size``-byte integer (uint8 stays)."""
    if size == 1:
        return bits
    return bits - (1 << (8 * size)) if bits >= 1 << (8 * size - 1) else bits


def fill_bits(t: torch.Tensor, bits: int) -> None:
    """Fill every element of ``t`` with the raw bit pattern ``bits`` (unsigned)."""
    v = int_view(t)
    if v is None:
        raise TypeError(f"cannot fill {t.dtype} by bits")
    v.fill_(_signed(bits, t.element_size()))


def raw_bits(t: torch.Tensor):
    """The raw bits of ``t``'s elements in logical order, as a numpy integer array."""
    v = int_view(t.detach().contiguous())
    if v is None:
        return None
    return v.cpu().numpy()


def storage_extent(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements of storage a view spans from its first element (0 for an empty view)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride, strict=True))


def guard_length(numel: int, element_size: int) -> int:
    """Guard band length in elements for a buffer of ``numel`` elements (module constants)."""
    g = min(max(GUARD_MIN_ELEMENTS, numel), GUARD_MAX_ELEMENTS)
    per = max(1, GUARD_ALIGN_BYTES // element_size)
    return -(-g // per) * per


def task_site(task_dir: Path, depth: int = 2) -> dict[str, Any] | None:
    """The innermost frame of the call stack that lies in the task folder (file relative
    to it, line, function), or None."""
    root = str(task_dir)
    f: FrameType | None = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if fn.startswith(root):
            return {"file": os.path.relpath(fn, root), "line": f.f_lineno, "function": f.f_code.co_name}
        f = f.f_back
    return None


@dataclass
class Buffer:
    """One guarded (and maybe poisoned) buffer: ``tensor`` is what task code sees; it
    shares ``base``'s storage from element offset ``guard`` on (``base`` is None for a
    buffer that is poisoned but not guarded)."""

    kind: str  # input | out_arg | inout_arg | allocation
    index: int
    tensor: torch.Tensor
    base: torch.Tensor | None
    guard: int
    extent: int
    poisoned: bool
    site: dict[str, Any] | None = None
    op: str = ""
    note: str = ""

    def describe(self) -> GuardedBuffer:
        """What the parent is told of this buffer (``extra.buffers[k]``)."""
        t = self.tensor
        return GuardedBuffer(kind=self.kind, index=self.index, dtype=dtype_name(t), shape=list(t.shape),
                             stride=list(t.stride()), element_size=t.element_size(), extent=self.extent,
                             guard=self.guard if self.base is not None else 0, poisoned=self.poisoned,
                             guarded=self.base is not None, device=str(t.device),
                             site=Site(**self.site) if self.site else None, op=self.op, note=self.note)

    def bands(self):
        """(before, after) guard bands as numpy uint8 arrays, or None when unguarded."""
        if self.base is None:
            return None
        raw = self.base.detach().view(torch.uint8)
        es = self.tensor.element_size()
        before = raw[: self.guard * es]
        after = raw[(self.guard + self.extent) * es:]
        return before.cpu().numpy().copy(), after.cpu().numpy().copy()


def make_guarded(shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """A tensor of ``shape``/``stride`` placed after a guard band inside a larger buffer.

    Returns (tensor, base, guard, extent): ``base`` is the whole 1-D buffer, filled with
    the guard byte; the tensor starts ``guard`` elements into it and spans ``extent``.
    The tensor is not a view in autograd's sense (it is made with ``set_``), so
    ``resize_``/``_base`` behave as for a plain allocation.
    """
    extent = storage_extent(shape, stride)
    es = torch.empty(0, dtype=dtype).element_size()
    guard = guard_length(max(extent, 1), es)
    base = torch.empty(guard + extent + guard, dtype=dtype, device=device)
    base.view(torch.uint8).fill_(sentinels.GUARD_BYTE)
    t = torch.empty(0, dtype=dtype, device=device)
    t.set_(base.untyped_storage(), guard, shape, stride)
    return t, base, guard, extent


def poison(t: torch.Tensor, scenario: str) -> bool:
    """Fill ``t`` with the poison of its dtype for ``scenario``; False when the dtype is
    not poisoned (bool, complex)."""
    bits = sentinels.poison_bits(dtype_name(t), scenario)
    if bits is None or int_view(t) is None:
        return False
    fill_bits(t, bits)
    return True


class GuardedAllocMode(TorchDispatchMode):
    """Replaces every fresh allocation (:data:`ALLOC_OPS`) made under it by a poisoned
    tensor of the same shape, strides, dtype and device, sitting between guard bands
    (unless ``guard`` is False or the buffer is larger than GUARD_MAX_BUFFER_BYTES).

    ``buffers`` lists what it allocated, with the task-code line that asked for it.
    Allocations of zero elements pass through (the Triton interpreter makes many).
    """

    def __init__(self, scenario: str, guard: bool, task_dir: Path):
        super().__init__()
        self.scenario = scenario
        self.guard = guard
        self.task_dir = task_dir
        self.buffers: list[Buffer] = []
        self.unguarded = 0
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func not in ALLOC_OPS or not isinstance(out, torch.Tensor) or out.numel() == 0:
            return out
        self.count += 1
        site = task_site(self.task_dir, 1)
        shape, stride = tuple(out.shape), tuple(out.stride())
        nbytes = storage_extent(shape, stride) * out.element_size()
        keep = (self.guard and len(self.buffers) < MAX_GUARDED_BUFFERS and nbytes <= GUARD_MAX_BUFFER_BYTES
                and not out.is_pinned() and all(s >= 0 for s in stride))
        if keep:
            t, base, g, extent = make_guarded(shape, stride, out.dtype, out.device)
            del out
        else:
            t, base, g, extent = out, None, 0, storage_extent(shape, stride)
            self.unguarded += 1
        poisoned = poison(t, self.scenario)
        # guarded buffers are kept (their bands are read after the call); a small
        # unguarded one is kept for its description; a large one is not kept alive
        if keep or (len(self.buffers) < MAX_GUARDED_BUFFERS and nbytes <= GUARD_MAX_BUFFER_BYTES):
            self.buffers.append(Buffer("allocation", self.count - 1, t, base, g, extent, poisoned,
                                       site, str(func.overloadpacket).removeprefix("aten.")))
        return t


def guard_inputs(ctx: Any, inputs: tuple, scenario: str, guard: bool) -> tuple[tuple, list[Buffer]]:
    """Guarded copies of the tensor inputs: ``out_args`` poisoned (write-only), every other
    tensor input (``inout_args`` included) with its values. Inputs that overlap
    themselves (expanded, stride 0) or require grad are passed unchanged."""
    out_args = set(ctx.out_args)
    inout = set(ctx.inout_args)
    new = list(inputs)
    bufs: list[Buffer] = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        kind = "out_arg" if i in out_args else "inout_arg" if i in inout else "input"
        overlapping = any(st == 0 and s > 1 for s, st in zip(x.shape, x.stride(), strict=True))
        if not guard or overlapping or x.requires_grad or any(st < 0 for st in x.stride()):
            t, base, g, extent = x, None, 0, storage_extent(tuple(x.shape), tuple(x.stride()))
            note = "not guarded: the input overlaps itself (stride 0)" if overlapping else ""
        else:
            t, base, g, extent = make_guarded(tuple(x.shape), tuple(x.stride()), x.dtype, x.device)
            note = ""
            if kind != "out_arg":
                t.copy_(x)
        poisoned = poison(t, scenario) if kind == "out_arg" else False
        new[i] = t
        bufs.append(Buffer(kind, i, t, base, g, extent, poisoned, note=note))
    return tuple(new), bufs


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.device == b.device
    except RuntimeError:  # tensors without storage (meta, some subclasses)
        return False


@step(GuardedCallStep)
def guarded_call_step(ctx: Any, spec: GuardedCallStep) -> StepOutput:
    """Make inputs, guard and poison them, call the role under :class:`GuardedAllocMode`
    (module doc); send outputs, their bits and every guard band."""
    scenario = spec.scenario
    try:
        inputs = prepared_inputs(ctx, spec.case, spec.seed, spec.transforms)
        inputs, bufs = guard_inputs(ctx, inputs, scenario, spec.guard)
        before = describe_inputs(inputs)
        mode = GuardedAllocMode(scenario, spec.guard, ctx.task_dir)
        with mode:
            result, seconds = ctx.timed_call(ctx.callable(spec.role), inputs)
        outputs = ctx.outputs_of(result, inputs)
    except BaseException as e:  # noqa: BLE001  (what the role or make_inputs raised is the step's error)
        return StepOutput(ok=False, error=error_info(e, getattr(e, "_kws_phase", "call")),
                          extra=GuardedCallExtra(device_name=ctx.device_name))
    buffers = bufs + mode.buffers
    res = StepOutput(ok=True, outputs=outputs, seconds=seconds)
    sources = []
    for j, o in enumerate(outputs):
        b = raw_bits(o)
        if b is not None:
            res.arrays[f"bits{j}"] = b
        found = next((k for k, buf in enumerate(buffers) if _same_storage(o, buf.tensor)), None)
        sources.append(OutputSource(output=j, buffer=found))
    for k, buf in enumerate(buffers):
        bands = buf.bands()
        if bands is not None:
            res.arrays[f"gb{k}"], res.arrays[f"ga{k}"] = bands
    res.extra = GuardedCallExtra(
        scenario=scenario, buffers=[b.describe() for b in buffers], output_sources=sources,
        allocations=mode.count, unguarded_allocations=mode.unguarded,
        inputs=before, device_name=ctx.device_name, calls=[seconds])
    return res


# -- compute-sanitizer (CUDA only) ---------------------------------------------------------

SANITIZER_CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer", "/opt/nvidia/compute-sanitizer/compute-sanitizer")
_ERR_LINE = re.compile(r"^=========\s+(Invalid __global__ (read|write) of size \d+ bytes.*|.*out of bounds.*|"
                       r"Program hit .*|.*Address 0x[0-9a-f]+.*|\s*at .*)$")


def find_compute_sanitizer() -> str | None:
    """The compute-sanitizer binary: ``PATH``, ``$CUDA_HOME/bin``, then the usual install dirs."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if base and os.access(os.path.join(base, "bin", "compute-sanitizer"), os.X_OK):
            return os.path.join(base, "bin", "compute-sanitizer")
    for p in SANITIZER_CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return None


def run_subjob(ctx: Any, steps: list[Step], *, prefix: list[str] | None = None,
               env: dict[str, str] | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """Run core harness ``steps`` (``call``, ``author_test``) in a fresh Python interpreter
    (optionally under ``prefix``, e.g. a sanitizer) on this job's task copy; return its
    exit code, output tails and the raw step documents and arrays (``{"returncode",
    "stdout", "stderr", "steps": [...]}``)."""
    import numpy as np

    work = Path(tempfile.mkdtemp(prefix="kws-sub-"))
    out = work / "out"
    out.mkdir()
    job = msgspec.structs.replace(ctx.job, out_dir=str(out), steps=steps)
    (work / "job.json").write_bytes(encode_job(job))
    # only the core steps (call, author_test): importing every harness module would cost
    # the fresh interpreter seconds (their imports, the dispatch-mode warm-up) for nothing
    code = ("import sys\nimport workstation.harness as h\nimport workstation.harness.core\n"
            "from workstation.protocol.steps import read_job\n"
            "h.load_plugins = lambda: None\nh.run_job(read_job(sys.argv[1]))\n")
    cmd = list(prefix or []) + [sys.executable, "-c", code, str(work / "job.json")]
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        p = subprocess.run(cmd, cwd=work, env=full_env, capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out_text = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, so, se = None, out_text, "timeout"
    docs = []
    for i in range(len(steps)):
        js = out / f"step-{i}.json"
        doc = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else None
        arrays = {}
        npz = out / f"step-{i}.npz"
        if npz.is_file():
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        docs.append({"doc": doc, "arrays": arrays})
    shutil.rmtree(work, ignore_errors=True)
    return {"returncode": rc, "stdout": so[-20000:], "stderr": se[-20000:], "steps": docs}


@step(SanitizerCallStep)
def sanitizer_call_step(ctx: Any, spec: SanitizerCallStep) -> StepOutput:
    """One call of ``spec.role`` on ``spec.case``/``spec.seed`` under
    ``compute-sanitizer --tool memcheck`` (CUDA only). ``extra`` (a
    :class:`~workstation.protocol.extras.guards.SanitizerCallExtra`): ``ran`` (False with a
    ``reason`` when it could not), ``errors`` (the ERROR SUMMARY count), ``report`` (the
    sanitizer's error lines), ``returncode``, ``call_ok``."""
    if ctx.device.type != "cuda":
        return StepOutput(ok=True, extra=SanitizerCallExtra(
            ran=False, reason="no CUDA device: memcheck instruments GPU kernels"))
    binary = find_compute_sanitizer()
    if binary is None:
        return StepOutput(ok=True, extra=SanitizerCallExtra(
            ran=False, reason="compute-sanitizer is not installed (not on PATH, not in $CUDA_HOME/bin or "
            "/usr/local/cuda/bin)"))
    sub = CallStep(role=spec.role, case=spec.case, seed=spec.seed)
    t0 = time.perf_counter()
    r = run_subjob(ctx, [sub], prefix=[binary, "--tool", "memcheck", "--error-exitcode", "97", "--print-limit", "40"],
                   timeout=spec.timeout)
    if r["returncode"] is None:
        return StepOutput(ok=True, seconds=time.perf_counter() - t0, extra=SanitizerCallExtra(
            ran=False, reason=f"memcheck did not finish within {spec.timeout:g} s",
            tail=(r["stdout"] + r["stderr"])[-4000:]))
    text = r["stdout"] + "\n" + r["stderr"]
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    lines = [ln for ln in text.splitlines() if _ERR_LINE.match(ln)]
    doc = r["steps"][0]["doc"] if r["steps"] else None
    try:
        call_error = decode_doc(doc).error if isinstance(doc, dict) else None
    except ResultFormatError as e:  # the sub-interpreter's result was not kws's form
        call_error = kws_error(f"the call's result under memcheck: {e}")
    return StepOutput(ok=True, seconds=time.perf_counter() - t0, extra=SanitizerCallExtra(
        ran=True, binary=binary, errors=int(m.group(1)) if m else None, report=lines[:80],
        returncode=r["returncode"], call_ok=bool(doc and doc.get("ok")), call_error=call_error,
        tail=text[-4000:]))
