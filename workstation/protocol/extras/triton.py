"""Payloads of the Triton analysis steps: ``interpreter_selftest``
(:mod:`workstation.harness.selftest`), ``triton_aot`` (:mod:`workstation.harness.aot`) and
``triton_bounds`` (:mod:`workstation.harness.bounds`), with the launch records and the IR
analysis they share.

Where a key of the harness's payload is present only sometimes and checks show the payload in
a finding's evidence, its field defaults to :data:`msgspec.UNSET` (left out of the JSON and
of :func:`msgspec.to_builtins`, so the evidence keeps the keys it always had);
:func:`given` reads such a field with a default.
"""

from __future__ import annotations

from typing import Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.extras.monitors import LaunchRecord
from workstation.protocol.results import Payload, Raised

T = TypeVar("T")


def given(value: T | UnsetType, default: T) -> T:
    """``value``, or ``default`` where the harness left the key out (:data:`msgspec.UNSET`)."""
    return default if isinstance(value, UnsetType) else value


# ----------------------------------------------------------------------------- interpreter self-test


class ProbeResult(Payload):
    """One item of the interpreter self-test (:func:`workstation.harness.selftest.interpreter_selftest`).

    Attributes:
        ok: the interpreter computes it as compiled Triton does (every probe held).
        probes: probe name (``sum_of_ones``, ``add``, ``mul``, ``cast_rne``, ``dot``,
            ``fp32_roundtrip``) -> whether it held; empty for ``scalar_args`` and
            ``libdevice`` (one probe each: ``ok``).
        error: ``"<type>: <message>"`` (message at most 200 characters) when a probe kernel
            raised, else "".
    """

    ok: bool = False
    probes: dict[str, bool] = {}
    error: str = ""


class Selftest(Payload):
    """Which dtypes and features the Triton interpreter computes right under kws's fidelity
    layer.

    Attributes:
        dtypes: dtype name (``float16``, ``bfloat16``, ``float32``, ``float8_e4m3fn``,
            ``float8_e5m2``) -> its probes.
        scalar_args: a Python float kernel argument is an fp32 scalar (None: not probed).
        libdevice: ``libdevice.tanh`` evaluates (None: not probed).
        error: ``"<type>: <message>"`` when the self-test itself raised (nothing else is then
            filled), else "".
    """

    dtypes: dict[str, ProbeResult] = {}
    scalar_args: ProbeResult | None = None
    libdevice: ProbeResult | None = None
    error: str = ""

    def items(self) -> list[tuple[str, ProbeResult]]:
        """Every probed item in the harness's order: the dtypes, then ``scalar_args`` and
        ``libdevice`` where probed."""
        out = list(self.dtypes.items())
        for name, p in (("scalar_args", self.scalar_args), ("libdevice", self.libdevice)):
            if p is not None:
                out.append((name, p))
        return out


class FidelityReport(Payload):
    """What kws's interpreter fidelity layer did in the job process
    (:func:`workstation.harness.core.prepare_interpreter`).

    Attributes:
        installed: the layer's patches are installed (False off the interpreter).
        errors: the patches that failed, ``"<part>: <type>: <message>"``.
        device_stand_in: the device stand-in's installed probes (empty off the interpreter).
        adapted: the library launch wrappers the layer adapted (module names).
        version: :data:`workstation.harness.fidelity.FIDELITY_VERSION`.
    """

    installed: bool = False
    errors: list[str] = []
    device_stand_in: list[str] = []
    adapted: list[str] = []
    version: int = 0


@extra_type
class InterpreterSelftestExtra(Extra, tag="interpreter_selftest"):
    """An ``interpreter_selftest`` step.

    Attributes:
        interpreter: the job ran Triton under ``TRITON_INTERPRET=1``.
        gaps: what the fidelity layer cannot make right (sentences checks quote).
        fidelity: what the layer installed, its errors, the launch wrappers it adapted.
        selftest: the self-test's result (None off the interpreter: not run).
    """

    interpreter: bool = False
    gaps: list[str] = []
    fidelity: FidelityReport = msgspec.field(default_factory=FidelityReport)
    selftest: Selftest | None = None


# ----------------------------------------------------------------------------- launches and IR


#: a constexpr value of a launch record: a JSON scalar, ``{"tl_dtype": "fp16"}`` for a Triton
#: dtype, ``{"repr": "..."}`` (at most 200 characters) for anything else.


class SourceLine(Payload):
    """A task source line an IR location resolves to: ``file`` (relative to the task
    folder, else the file's base name) and ``line`` (1-based)."""

    file: str = ""
    line: int = 0


class IrDot(Payload):
    """One ``tt.dot`` (``tt.dot_scaled``, ``ttng.warp_group_dot``) of a kernel's TTIR.

    Attributes:
        op: the operation's name.
        a, b, d: the operand and result element types (``f16``, ``f32``, ``f8E4M3FN``; None
            when the signature does not show them).
        input_precision: ``ieee``, ``tf32``, ``tf32x3`` (absent in the IR: ``ieee``).
        max_num_imprecise_acc: the fp8 promotion interval (elements of K; None: absent).
        lowering: ``wgmma``, ``mma`` or ``fma`` (how the TTGIR lowers it).
        source: the task line (None when the IR names none).
        text: the TTIR line (at most 300 characters).
        lowered_text, lowered_count: the TTGIR dot of the same source line and how many
            there are (left out when the TTGIR has none).
    """

    op: str = ""
    a: str | None = None
    b: str | None = None
    d: str | None = None
    input_precision: str = "ieee"
    max_num_imprecise_acc: int | None = None
    lowering: Literal["wgmma", "mma", "fma"] = "fma"
    source: SourceLine | None = None
    text: str = ""
    lowered_text: str | UnsetType = UNSET
    lowered_count: int | UnsetType = UNSET


class MmaInstr(Payload):
    """One PTX MMA instruction of a kernel: ``instr`` (``mma.sync.aligned.m16n8k16...``),
    ``count`` (occurrences in the PTX), its D, A and B types (``f32``, ``tf32``; None when
    the mnemonic does not show them)."""

    instr: str = ""
    count: int = 0
    d: str | None = None
    a: str | None = None
    b: str | None = None


class LowPrecisionOp(Payload):
    """A sum kept in f16/bf16 in the TTGIR (a ``tt.reduce`` whose combine adds in it, or an
    ``scf.for`` loop-carried value added to): ``dtype`` (``f16``/``bf16``), ``source`` (the
    task line, None when unknown), ``text`` (the IR line, at most 200 characters)."""

    dtype: str = ""
    source: SourceLine | None = None
    text: str = ""


class IrAnalysis(Payload):
    """What a compiled kernel's IR says about precision (:func:`workstation.harness.ir.analyze`).

    Attributes:
        dots: the TTIR dots.
        mma: the PTX MMA instructions.
        cvt_rna_tf32: PTX ``cvt.rna.tf32.f32`` conversions (count).
        low_precision_reductions, low_precision_accumulators: sums kept in f16/bf16.
        fma: PTX ``fma.rn`` type (``f32``, ``f16x2``) -> count.
        explicit_fma: ``math.fma`` ops (``tl.fma``) in the TTGIR (count).
        fma_dots: TTGIR dots lowered to FMA (count).
        ptx_lines: lines of the PTX.
    """

    dots: list[IrDot] = []
    mma: list[MmaInstr] = []
    cvt_rna_tf32: int = 0
    low_precision_reductions: list[LowPrecisionOp] = []
    low_precision_accumulators: list[LowPrecisionOp] = []
    fma: dict[str, int] = {}
    explicit_fma: int = 0
    fma_dots: int = 0
    ptx_lines: int = 0


# ----------------------------------------------------------------------------- triton_aot


class AotLaunch(LaunchRecord):
    """A distinct launch the ``triton_aot`` step captured, with ``cases``: the indices of
    the step's cases that launched it."""

    cases: list[int] = []


class AotKernel(Payload):
    """One launch compiled for one target.

    Attributes:
        launch: its index in the step's ``launches``.
        target: ``"cuda sm_90"``, or ``"device (<name>)"`` for a kernel a GPU launch compiled.
        qualname, file: the kernel (file relative to the task folder when it lies in it).
        analysis: the IR's precision facts (None when the compile failed).
        compile_seconds: wall seconds of the compile (None when read from a GPU launch or failed).
        compiled_by: ``"stages ttir..ptx"`` or ``"triton.compile"`` ("" when not compiled here).
        error: why the compile failed, ``"<type>: <message>"`` (None when it did not).
    """

    launch: int = 0
    target: str = ""
    qualname: str = ""
    file: str = ""
    analysis: IrAnalysis | None = None
    compile_seconds: float | None = None
    compiled_by: str = ""
    error: str | None = None


@extra_type
class TritonAotExtra(Extra, tag="triton_aot"):
    """A ``triton_aot`` step: the candidate's Triton kernels compiled for an NVIDIA target.

    Attributes:
        launches: the distinct launches captured.
        kernels: per launch and target, the compile and its analysis.
        mode: ``"aot"`` (compiled in a second process without the interpreter) or ``"jit"``
            (read from the kernels a GPU launch compiled).
        targets: the targets compiled for, (backend, compute capability, warp size).
        case_errors: case index (as a string) -> what the candidate raised on it.
        interpreter_selftest: the interpreter self-test (None off the interpreter).
        cached: taken from the harness's own AOT cache.
        seconds: wall seconds of the whole step.
    """

    launches: list[AotLaunch] = []
    kernels: list[AotKernel] = []
    mode: Literal["aot", "jit"] = "aot"
    targets: list[tuple[str, int, int]] = []
    case_errors: dict[str, Raised] = {}
    interpreter_selftest: Selftest | None = None
    cached: bool = False
    seconds: float = 0.0


# ----------------------------------------------------------------------------- triton_bounds


class IntArg(Payload, tag="int", tag_field="kind"):
    """An integer kernel argument of a recorded launch (a bool as 0/1): ``value``."""

    value: int = 0


class TensorArg(Payload, tag="tensor", tag_field="kind"):
    """A tensor kernel argument of a recorded launch.

    Attributes:
        dtype: torch dtype name (``float16``).
        shape, strides: sizes and strides (elements; a negative stride as such).
        footprint: elements from the data pointer to one past the furthest element the view
            reaches, ``1 + sum((size-1) * stride)`` (0 for an empty view).
        ptr: the data pointer (tells aliases apart).
        output: the index of the call's output sharing that data pointer (None: no output).
    """

    dtype: str = ""
    shape: list[int] = []
    strides: list[int] = []
    footprint: int = 0
    ptr: int = 0
    output: int | None = None


class OtherArg(Payload, tag="other", tag_field="kind"):
    """A kernel argument that is neither an integer nor a tensor: its Python ``type`` name."""

    type: str = ""


#: one runtime (non-constexpr) argument of a recorded launch.
BoundsArg = IntArg | TensorArg | OtherArg


class BoundsCall(Payload):
    """One launch the ``triton_bounds`` step recorded (and skipped).

    Attributes:
        key: the index of its distinct compile in the step's ``launches``.
        qualname: the kernel's qualified name.
        grid: the three grid sizes (programs).
        args: runtime argument name -> its facts.
    """

    key: int = 0
    qualname: str = ""
    grid: list[int] = []
    args: dict[str, BoundsArg] = {}


class BoundsCase(Payload):
    """One case of the ``triton_bounds`` step: ``launches`` in order and the launches whose
    record could not be made (``errors``, ``"<type>: <message>"``); or ``error``, what the
    candidate raised (None when it returned)."""

    launches: list[BoundsCall] = []
    errors: list[str] = []
    error: Raised | None = None


class BoundsLaunch(LaunchRecord):
    """A distinct launch of the ``triton_bounds`` step: ``index`` (what
    :attr:`BoundsCall.key` refers to), its TTIR for sm_90 (``ttir``; None when it was not
    lowered) and why not (``ttir_error``, "" when lowered)."""

    index: int = 0
    ttir: str | None = None
    ttir_error: str = ""


@extra_type
class TritonBoundsExtra(Extra, tag="triton_bounds"):
    """A ``triton_bounds`` step: ``cases`` (one per case of the step, in order), the distinct
    ``launches`` with their TTIR, and the step's wall ``seconds``."""

    cases: list[BoundsCase] = []
    launches: list[BoundsLaunch] = []
    seconds: float = 0.0
