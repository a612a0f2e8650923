"""Payloads of the backend reading steps: ``pallas_read`` (:mod:`workstation.harness.pallas`)
and ``cuda_build`` (:mod:`workstation.harness.cuda_capture`).

Checks show parts of these payloads in findings' evidence as they are; a key the harness
sends only sometimes is a field defaulting to :data:`msgspec.UNSET` (left out of
:func:`msgspec.to_builtins`, so the evidence keeps its keys), read with
:func:`~workstation.protocol.extras.triton.given`.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from workstation.protocol.extras import Extra, extra_type
from workstation.protocol.results import Payload, Raised

# ----------------------------------------------------------------------------- pallas_read


class TaskLine(Payload):
    """A task source line: ``file`` (relative to the task folder; ``"?"`` for a ``cond``
    whose line is unknown), ``line`` (1-based; None or 0 when unknown) and ``function``
    (left out for the unknown ``cond`` line)."""

    file: str = ""
    line: int | None = None
    function: str | UnsetType = UNSET


class Cover(Payload):
    """How the output blocks of a ``pallas_call`` cover one output.

    Attributes:
        reach: per dimension, the end of the furthest block (elements, capped at the size).
        elements: the output's elements.
        covered, uncovered: elements some grid step writes / none does.
        revisited: elements written by more than one grid step.
        grid_steps_per_block: the most grid steps mapped to one block.
        first_uncovered: the first uncovered element's index (left out when all are covered).
        uncovered_box: per dimension, ``[first, last]`` index of the uncovered elements
            (left out when all are covered).
    """

    reach: list[int] = []
    elements: int = 0
    covered: int = 0
    uncovered: int = 0
    revisited: int = 0
    grid_steps_per_block: int = 0
    first_uncovered: list[int] | UnsetType = UNSET
    uncovered_box: list[list[int]] | UnsetType = UNSET


class BlockMapping(Payload):
    """One block mapping (input or output) of a ``pallas_call``.

    Attributes:
        array_shape: the array's shape (elements).
        dtype: its dtype (``float32``).
        block_shape: the block's shape (elements; a block kind kws does not read: its repr).
        padding: inputs: per dimension, how far the last block reaches past the array
            (elements; left out when the grid or the index map could not be evaluated).
        cover: outputs: how the blocks cover it (left out when not computed; the reading's
            ``notes`` say why).
    """

    array_shape: list[int] = []
    dtype: str = ""
    block_shape: list[int | str] = []
    padding: list[int] | UnsetType = UNSET
    cover: Cover | UnsetType = UNSET


class ScratchBuffer(Payload):
    """A scratch buffer of a ``pallas_call``: ``index`` among the scratch operands,
    ``shape`` (elements), ``dtype``, ``memory`` (its memory space's repr, "" when none)."""

    index: int = 0
    shape: list[int] = []
    dtype: str = ""
    memory: str = ""


class PallasDot(Payload):
    """A ``dot_general`` of the kernel: operand dtypes (``lhs``, ``rhs``), the
    ``preferred_element_type`` and ``precision`` (their reprs; ``"None"`` when unset), the
    result dtype (``out``) and ``shape`` (elements), and its task ``line``."""

    lhs: str = ""
    rhs: str = ""
    preferred_element_type: str = ""
    out: str = ""
    shape: list[int] = []
    precision: str = ""
    line: TaskLine | None = None


class PallasReduction(Payload):
    """A reduction of the kernel (``reduce_sum``, ``cumsum``, ``argmax`` ...): ``op``, input
    ``dtype``, result dtype ``out``, task ``line``."""

    op: str = ""
    dtype: str = ""
    out: str = ""
    line: TaskLine | None = None


class Accumulation(Payload):
    """A read-modify-write accumulation: ``target`` (``output j``, ``scratch k``, ``input
    j``, ``loop carry k``), its ``dtype``, the primitive (``op``: ``swap``, ``addupdate``,
    ``scan``, ``while``) and the task ``line``."""

    target: str = ""
    dtype: str = ""
    op: str = ""
    line: TaskLine | None = None


class OutputWrite(Payload):
    """A store to an output ref: ``target`` (``output j``), ``op`` (``swap`` /
    ``addupdate``), its task ``line`` and ``conds``: the lines of the ``cond`` equations
    (``pl.when``, ``lax.cond``) it lies under, outermost first."""

    target: str = ""
    op: str = ""
    line: TaskLine | None = None
    conds: list[TaskLine] = []


class ScopedScratch(Payload):
    """A ``run_scoped`` scratch buffer: ``shape`` (elements) and ``dtype``."""

    shape: list[int] = []
    dtype: str = ""


class ArgAval(Payload):
    """One argument of a ``pallas_call`` invocation as read: ``shape`` (elements), ``dtype``."""

    shape: list[int] = []
    dtype: str = ""


class PallasReading(Payload):
    """The static reading of one distinct ``pallas_call``
    (:func:`workstation.harness.pallas_read.read_pallas_call`).

    A reading that failed has only ``error`` and the invocation's fields; one whose traced
    jaxpr holds no ``pallas_call`` only ``notes`` and those; the others every field but
    ``error`` (``writes`` and ``scoped`` where there are any).

    Attributes:
        grid: grid sizes (None for a dynamic dimension).
        dimension_semantics: per grid dimension, ``parallel`` / ``arbitrary`` (None when the
            kernel states none).
        inputs, outputs: the block mappings.
        scratch: the scratch operands.
        dots, reductions, accumulations, writes: what the kernel body does.
        scoped: ``run_scoped`` buffers.
        notes: what could not be read.
        error: why the reading failed, ``"<type>: <message>"`` (at most 2000 characters).
        name: the kernel's name.
        site: the task line that called ``pallas_call`` (None when outside the task).
        case: the index of the step's case it was read on.
        args: the call's arguments.
    """

    grid: list[int | None] | UnsetType = UNSET
    dimension_semantics: list[str] | None | UnsetType = UNSET
    inputs: list[BlockMapping] | UnsetType = UNSET
    outputs: list[BlockMapping] | UnsetType = UNSET
    scratch: list[ScratchBuffer] | UnsetType = UNSET
    dots: list[PallasDot] | UnsetType = UNSET
    reductions: list[PallasReduction] | UnsetType = UNSET
    accumulations: list[Accumulation] | UnsetType = UNSET
    writes: list[OutputWrite] | UnsetType = UNSET
    scoped: list[ScopedScratch] | UnsetType = UNSET
    notes: list[str] | UnsetType = UNSET
    error: str | UnsetType = UNSET
    name: str = ""
    site: TaskLine | None = None
    case: int = 0
    args: list[ArgAval] = []


@extra_type
class PallasReadExtra(Extra, tag="pallas_read"):
    """A ``pallas_read`` step.

    Attributes:
        kernels: one reading per distinct ``pallas_call`` (kernel name and argument shapes).
        calls: per case, the ``pallas_call`` invocations the candidate made.
        case_errors: case index (as a string) -> what the candidate raised on it.
        jax: JAX is loaded in the job.
        seconds: wall seconds of the step.
    """

    kernels: list[PallasReading] = []
    calls: list[int] = []
    case_errors: dict[str, Raised] = {}
    jax: bool = False
    seconds: float = 0.0


# ----------------------------------------------------------------------------- cuda_build


class NvccCompile(Payload):
    """One CUDA source compiled with nvcc and read back with cuobjdump.

    Attributes:
        command: the nvcc command line (include folders left out).
        target: ``sm_XX`` compiled for.
        ok: nvcc returned 0 and wrote the fat binary.
        returncode: nvcc's exit status (None when it timed out).
        timed_out: nvcc ran past the step's ``timeout``.
        log: nvcc's and ptxas's output (its last 60000 characters).
        seconds: wall seconds of the compile.
        sass, ptx: cuobjdump's ``-sass`` / ``-ptx`` texts (at most 600000 characters; "" when
            not read).
        sass_error, ptx_error: why cuobjdump did not give them ("" when it did).
        names: mangled kernel name -> demangled (empty without ``c++filt``).
        cached: taken from the harness's compile cache.
    """

    command: str = ""
    target: str = ""
    ok: bool = False
    returncode: int | None = None
    timed_out: bool = False
    log: str = ""
    seconds: float = 0.0
    sass: str = ""
    ptx: str = ""
    sass_error: str = ""
    ptx_error: str = ""
    names: dict[str, str] = {}
    cached: bool = False


class CudaSource(Payload):
    """One CUDA source of a captured build: ``file`` (``cuda.cu`` for ``load_inline``, else
    relative to the task folder), ``lines``, ``sha256`` (hex digest of the text), ``text``
    (at most 200000 characters) and its ``compile`` (None when nvcc was not found)."""

    file: str = ""
    lines: int = 0
    sha256: str = ""
    text: str = ""
    compile: NvccCompile | None = None


class CapturedBuild(Payload):
    """One ``torch.utils.cpp_extension`` build the role made, captured.

    Attributes:
        name: the extension's name.
        via: ``load_inline`` or ``load``.
        functions: the functions ``load_inline`` binds (names).
        flags: ``extra_cuda_cflags``.
        include_paths: ``extra_include_paths``.
        target, target_reason: the ``sm_XX`` compiled for and why.
        cpp_sources: the C++ sources (each at most 20000 characters).
        sources: the CUDA sources.
    """

    name: str = ""
    via: str = ""
    functions: list[str] = []
    flags: list[str] = []
    include_paths: list[str] = []
    target: str = ""
    target_reason: str = ""
    cpp_sources: list[str] = []
    sources: list[CudaSource] = []


class CudaTools(Payload):
    """The CUDA tools the step found: ``nvcc`` and ``cuobjdump`` paths (None: not found),
    nvcc's version line (``nvcc_version``) or why ``nvcc --version`` failed
    (``nvcc_error``); both left out without nvcc."""

    nvcc: str | None = None
    cuobjdump: str | None = None
    nvcc_version: str | UnsetType = UNSET
    nvcc_error: str | UnsetType = UNSET


@extra_type
class CudaBuildExtra(Extra, tag="cuda_build"):
    """A ``cuda_build`` step: the captured ``builds``, the ``tools`` found, the step's wall
    ``seconds``, and ``role_error``: what the role raised when it made no build (None
    otherwise)."""

    builds: list[CapturedBuild] = []
    tools: CudaTools = msgspec.field(default_factory=CudaTools)
    seconds: float = 0.0
    role_error: Raised | None = None
