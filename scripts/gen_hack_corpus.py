"""Write sample_queue_hacks/: the corpus of published kernel-grading hacks (issue 27).

Each hack is one task folder ``tasks/<id>/`` reproducing ONE published mechanism on the CPU,
and its clean twin ``tasks/<id>-clean/`` that differs only in the hack. Every folder holds a
``hack.toml`` sidecar naming the finding kws must make (``expect_fail``; ``[]`` for a twin)
that ``kws selfcheck`` judges. The task files are ordinary task-format v1 tasks
(../shared/spec/task-format.md); this script only saves typing them, and the folders it
writes are committed as they are (edit them or this script, then rerun it).

Usage: ``.venv/bin/python scripts/gen_hack_corpus.py`` (rewrites sample_queue_hacks/tasks).
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sample_queue_hacks"

URL = {
    "sol": "https://github.com/NVIDIA/SOL-ExecBench/blob/main/src/sol_execbench/core/bench/reward_hack.py",
    "gpumode": "https://github.com/gpu-mode/kernelboard/blob/main/kernelboard/static/news/2026-03-09-reward-hacking.md",
    "gpumode-pr": "https://github.com/gpu-mode/reference-kernels/pulls (PR #104, #159-#162)",
    "cudal1": "https://github.com/deepreinforce-ai/CUDA-L1",
    "kb-hacks": "https://github.com/ScalingIntelligence/KernelBench/blob/main/src/kernelbench/tests/test_level1_hacks.py",
    "kb-adv": "https://github.com/ScalingIntelligence/KernelBench/blob/main/src/unit_tests/test_eval_adversarial.py",
    "kb-hard": "https://kernelbench.com (KernelBench-Hard grader spec and run reports)",
    "metr": "https://metr.org/blog/2025-06-05-recent-reward-hacking/",
    "metr-kernels": "https://metr.org/blog/2025-02-14-measuring-automated-kernel-engineering",
    "pygpubench": "https://github.com/gpu-mode/pygpubench",
    "higham": "https://doi.org/10.1137/1.9780898718027",
}
SOURCE = {
    "sol": "SOL-ExecBench reward_hack.py", "gpumode": "GPU MODE kernelboard news 2026-03-09",
    "gpumode-pr": "GPU MODE reference-kernels PRs #104, #159-#162", "cudal1": "CUDA-L1",
    "kb-hacks": "KernelBench test_level1_hacks.py", "kb-adv": "KernelBench test_eval_adversarial.py",
    "kb-hard": "KernelBench-Hard / kernelbench.com grader spec", "metr": "METR reward-hacking report (2025-06)",
    "metr-kernels": "METR automated kernel engineering (2025-02)", "pygpubench": "pygpubench",
    "higham": "Higham, Accuracy and Stability of Numerical Algorithms, ch. 3 (kws issue 39: precision that "
              "drops above a size threshold inside the legal range)",
}


# ---------------------------------------------------------------------------------------
# Base operations: reference, inputs, cases, tolerance, the honest candidate body
# ---------------------------------------------------------------------------------------

@dataclass
class Op:
    name: str            # callable name
    title: str
    spec: str            # the op's specification (markdown)
    reference: str
    inputs: str
    cases: list[dict]
    params: dict[str, str]
    tol: tuple[float, float]
    honest: str          # the honest candidate's module body (defines the callable)
    out_args: list[int] = field(default_factory=list)
    contract: dict = field(default_factory=dict)
    reduction: list[str] = field(default_factory=list)


SILU = Op(
    name="silu", title="SiLU on activations",
    spec="`y = x * sigmoid(x)` elementwise (`torch.nn.functional.silu`).\n\n"
         "- Input: `x`, shape `(M, N)`, `torch.float32`, any `M, N >= 1`, any strides.\n"
         "- Output: a new contiguous `(M, N)` float32 tensor; `x` is not modified.\n"
         "- Called once per step from the training loop, on fresh activations each step.\n",
    reference='''
        """Reference SiLU in plain PyTorch."""

        import torch
        import torch.nn.functional as F


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return ``F.silu(x)`` in ``x.dtype`` (computed in promote_types(x.dtype, float32))."""
            acc = torch.promote_types(x.dtype, torch.float32)
            return F.silu(x.to(acc)).to(x.dtype)
        ''',
    inputs='''
        """Inputs for the SiLU task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x,)``: standard normal times 2, shape (M, N), ``case["dtype"]``, drawn
            on the CPU from ``torch.Generator().manual_seed(seed)``."""
            g = torch.Generator().manual_seed(seed)
            x = 2.0 * torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            return (x.to(getattr(torch, case["dtype"])).to(device),)
        ''',
    cases=[{"M": 8, "N": 64, "dtype": "float32"}, {"M": 4, "N": 96, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(1e-5, 1e-5),
    honest='''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return ``x * sigmoid(x)`` for float32 ``x`` of shape (M, N); a new tensor."""
            return x * torch.sigmoid(x)
        ''',
)

ROWSUM = Op(
    name="rowsum", title="Row sums",
    spec="`y[i] = sum_j x[i, j]` (`x.sum(-1)`), accumulated in fp32.\n\n"
         "- Input: `x`, shape `(M, N)`, `torch.float32`, any `M, N >= 1`.\n"
         "- Output: a new `(M,)` float32 tensor.\n"
         "- Deterministic: equal inputs give bitwise-equal outputs (the sums feed a loss that is "
         "checkpointed and replayed).\n",
    reference='''
        """Reference row sum in plain PyTorch."""

        import torch


        def rowsum(x: torch.Tensor) -> torch.Tensor:
            """Return ``x.sum(-1)`` in ``x.dtype`` (accumulated in promote_types(x.dtype, float32))."""
            acc = torch.promote_types(x.dtype, torch.float32)
            return x.to(acc).sum(-1).to(x.dtype)
        ''',
    inputs='''
        """Inputs for the row-sum task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x,)``: standard normal, shape (M, N), ``case["dtype"]``, drawn on the
            CPU from ``torch.Generator().manual_seed(seed)``."""
            g = torch.Generator().manual_seed(seed)
            x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            return (x.to(getattr(torch, case["dtype"])).to(device),)
        ''',
    cases=[{"M": 16, "N": 256, "dtype": "float32"}, {"M": 8, "N": 384, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(1e-4, 1e-5), reduction=["N"],
    honest='''
        def rowsum(x: torch.Tensor) -> torch.Tensor:
            """Return the row sums of float32 ``x`` (M, N), shape (M,), fp32 accumulation."""
            return x.sum(-1)
        ''',
)

SOFTMAX = Op(
    name="softmax", title="Row softmax",
    spec="`y[i, :] = softmax(x[i, :])` over the last dimension.\n\n"
         "- Input: `x` (attention logits), shape `(M, N)`, `torch.float32`, any `M, N >= 1`; "
         "logits of any finite magnitude (no bound is promised: scaled dot products of long rows "
         "reach |x| ~ 1e3 and more).\n"
         "- Output: a new `(M, N)` float32 tensor.\n",
    reference='''
        """Reference softmax in plain PyTorch."""

        import torch


        def softmax(x: torch.Tensor) -> torch.Tensor:
            """Return ``torch.softmax(x, -1)`` in ``x.dtype`` (computed in promote_types(x.dtype, float32))."""
            acc = torch.promote_types(x.dtype, torch.float32)
            return torch.softmax(x.to(acc), dim=-1).to(x.dtype)
        ''',
    inputs='''
        """Inputs for the softmax task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x,)``: standard normal logits, shape (M, N), ``case["dtype"]``, drawn on
            the CPU from ``torch.Generator().manual_seed(seed)``."""
            g = torch.Generator().manual_seed(seed)
            x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            return (x.to(getattr(torch, case["dtype"])).to(device),)
        ''',
    cases=[{"M": 8, "N": 128, "dtype": "float32"}, {"M": 4, "N": 200, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(1e-6, 1e-5),
    honest='''
        def softmax(x: torch.Tensor) -> torch.Tensor:
            """Return the row softmax of float32 ``x`` (M, N): max-subtracted exp, fp32."""
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True)
        ''',
)

RELU_OUT = Op(
    name="relu", title="ReLU into a caller-provided buffer",
    spec="`out[i, j] = max(x[i, j], 0)`; call `relu(x, out)`, the result is written into `out`.\n\n"
         "- `x`: shape `(M, N)`, `torch.float32`, any `M, N >= 1`.\n"
         "- `out`: same shape and dtype, write-only: it comes from the caching allocator and its "
         "prior contents are undefined. Every element must be defined.\n"
         "- Exact: compared with `atol = rtol = 0`.\n",
    reference='''
        """Reference ReLU writing into the caller's buffer."""

        import torch


        def relu(x: torch.Tensor, out: torch.Tensor) -> None:
            """Write ``max(x, 0)`` (exact) into ``out`` (same shape as ``x``)."""
            out.copy_(torch.relu(x.to(torch.promote_types(x.dtype, torch.float32))).to(out.dtype))
        ''',
    inputs='''
        """Inputs for the ReLU task: activations and the output buffer."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x, out)``: ``x`` standard normal (M, N) in ``case["dtype"]`` (seeded CPU
            generator); ``out`` the output buffer of the same shape and dtype (``out_args = [1]``)."""
            g = torch.Generator().manual_seed(seed)
            x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            x = x.to(getattr(torch, case["dtype"]))
            return (x.to(device), torch.zeros_like(x).to(device))
        ''',
    cases=[{"M": 8, "N": 64, "dtype": "float32"}, {"M": 4, "N": 100, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(0.0, 0.0), out_args=[1],
    honest='''
        def relu(x: torch.Tensor, out: torch.Tensor) -> None:
            """Write ``max(x, 0)`` of float32 ``x`` (M, N) into ``out`` (same shape)."""
            torch.clamp_min(x, 0.0, out=out)
        ''',
)

LAYERNORM = Op(
    name="layernorm", title="LayerNorm over a long hidden axis",
    spec="`y = (x - mean(x)) / sqrt(var(x) + 1e-5) * weight + bias` over the last dimension "
         "(`torch.nn.functional.layer_norm`, biased variance).\n\n"
         "- Inputs: `x` `(M, N)`, `weight` `(N,)`, `bias` `(N,)`, all `torch.float32`; any "
         "`M >= 1`, `N >= 2`; inputs of any finite scale (the pre-norm residual stream grows "
         "with depth).\n"
         "- Output: a new `(M, N)` float32 tensor.\n",
    reference='''
        """Reference LayerNorm in plain PyTorch."""

        import torch
        import torch.nn.functional as F


        def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            """Return ``F.layer_norm(x, (N,), weight, bias, eps=1e-5)`` in ``x.dtype``."""
            acc = torch.promote_types(x.dtype, torch.float32)
            y = F.layer_norm(x.to(acc), (x.shape[-1],), weight.to(acc), bias.to(acc), eps=1e-5)
            return y.to(x.dtype)
        ''',
    inputs='''
        """Inputs for the LayerNorm task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x, weight, bias)``: x standard normal (M, N); weight ~ 1 + 0.1 N(0, 1),
            bias ~ 0.1 N(0, 1), shape (N,); ``case["dtype"]``, seeded CPU generator."""
            g = torch.Generator().manual_seed(seed)
            dt = getattr(torch, case["dtype"])
            M, N = case["M"], case["N"]
            x = torch.randn((M, N), generator=g, dtype=torch.float32)
            w = 1.0 + 0.1 * torch.randn((N,), generator=g, dtype=torch.float32)
            b = 0.1 * torch.randn((N,), generator=g, dtype=torch.float32)
            return tuple(t.to(dt).to(device) for t in (x, w, b))
        ''',
    cases=[{"M": 4, "N": 256, "dtype": "float32"}, {"M": 2, "N": 384, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 2, max = 65536 }"},
    tol=(1e-5, 1e-5), reduction=["N"],
    honest='''
        def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            """LayerNorm of float32 ``x`` (M, N) over N with ``weight``, ``bias`` (N,), eps 1e-5."""
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).square().mean(-1, keepdim=True)
            return (x - mean) * torch.rsqrt(var + 1e-5) * weight + bias
        ''',
)

MSE = Op(
    name="mse", title="Mean squared error loss",
    spec="`loss = mean((pred - target) ** 2)` over all elements (`F.mse_loss`), a 0-d tensor.\n\n"
         "- Inputs: `pred`, `target`, shape `(M, N)`, `torch.float32`; any values (regression "
         "targets of any distribution and scale).\n"
         "- Output: a 0-d float32 tensor.\n",
    reference='''
        """Reference MSE loss in plain PyTorch."""

        import torch
        import torch.nn.functional as F


        def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            """Return ``F.mse_loss(pred, target)`` (mean reduction), 0-d, in ``pred.dtype``."""
            acc = torch.promote_types(pred.dtype, torch.float32)
            return F.mse_loss(pred.to(acc), target.to(acc)).to(pred.dtype)
        ''',
    inputs='''
        """Inputs for the MSE task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(pred, target)``: independent standard normals, shape (M, N),
            ``case["dtype"]``, seeded CPU generator."""
            g = torch.Generator().manual_seed(seed)
            dt = getattr(torch, case["dtype"])
            p = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            t = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            return (p.to(dt).to(device), t.to(dt).to(device))
        ''',
    cases=[{"M": 256, "N": 1024, "dtype": "float32"}, {"M": 512, "N": 512, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(1e-2, 1e-2), reduction=["M", "N"],
    honest='''
        def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            """Mean of the squared differences of two float32 (M, N) tensors; 0-d."""
            return (pred - target).square().mean()
        ''',
)

MATMUL = Op(
    name="matmul", title="fp32 GEMM",
    spec="`C = A @ B` in float32 (fp32 operands, fp32 accumulation, fp32 result).\n\n"
         "- `A` `(M, K)`, `B` `(K, N)`, `torch.float32`, any sizes >= 1.\n"
         "- Output: a new `(M, N)` float32 tensor. The projection feeds an fp32 optimizer "
         "state: it must be computed in fp32.\n",
    reference='''
        """Reference GEMM in plain PyTorch."""

        import torch


        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """Return ``a @ b`` in ``a.dtype`` (promote_types(a.dtype, float32) accumulation)."""
            acc = torch.promote_types(a.dtype, torch.float32)
            return (a.to(acc) @ b.to(acc)).to(a.dtype)
        ''',
    inputs='''
        """Inputs for the GEMM task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(a, b)``: standard normal (M, K) and (K, N), ``case["dtype"]``,
            seeded CPU generator."""
            g = torch.Generator().manual_seed(seed)
            dt = getattr(torch, case["dtype"])
            a = torch.randn((case["M"], case["K"]), generator=g, dtype=torch.float32)
            b = torch.randn((case["K"], case["N"]), generator=g, dtype=torch.float32)
            return (a.to(dt).to(device), b.to(dt).to(device))
        ''',
    cases=[{"M": 32, "N": 32, "K": 64, "dtype": "float32"}, {"M": 16, "N": 48, "K": 32, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 16384 }", "N": "{ min = 1, max = 16384 }", "K": "{ min = 1, max = 16384 }"},
    tol=(1e-4, 1e-4), reduction=["K"],
    honest='''
        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """Return ``a @ b`` for float32 ``a`` (M, K), ``b`` (K, N); fp32 throughout."""
            return torch.matmul(a, b)
        ''',
)

CLAMP = Op(
    name="clamp6", title="Symmetric clamp (hardtanh to [-6, 6])",
    spec="`y = min(max(x, -6), 6)` elementwise (`torch.nn.functional.hardtanh(x, -6, 6)`).\n\n"
         "- Input: `x`, shape `(M, N)`, `torch.float32`, any finite values (outliers are what the "
         "clamp is for).\n"
         "- Output: a new `(M, N)` float32 tensor. Exact.\n",
    reference='''
        """Reference clamp in plain PyTorch."""

        import torch


        def clamp6(x: torch.Tensor) -> torch.Tensor:
            """Return ``x`` clamped to [-6, 6] (exact), a new tensor."""
            return torch.clamp(x, -6.0, 6.0)
        ''',
    inputs='''
        """Inputs for the clamp task."""

        import torch


        def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
            """Return ``(x,)``: standard normal, shape (M, N), ``case["dtype"]``, seeded CPU generator."""
            g = torch.Generator().manual_seed(seed)
            x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
            return (x.to(getattr(torch, case["dtype"])).to(device),)
        ''',
    cases=[{"M": 8, "N": 64, "dtype": "float32"}, {"M": 4, "N": 96, "dtype": "float32"}],
    params={"M": "{ min = 1, max = 65536 }", "N": "{ min = 1, max = 65536 }"},
    tol=(0.0, 0.0),
    honest='''
        def clamp6(x: torch.Tensor) -> torch.Tensor:
            """Return float32 ``x`` (M, N) clamped to [-6, 6]; a new tensor."""
            return torch.clamp(x, -6.0, 6.0)
        ''',
)

OPS = {o.name: o for o in (SILU, ROWSUM, SOFTMAX, RELU_OUT, LAYERNORM, MSE, MATMUL, CLAMP)}


# ---------------------------------------------------------------------------------------
# The hacks
# ---------------------------------------------------------------------------------------

@dataclass
class Hack:
    id: str
    op: str
    title: str
    mechanism: str
    src: str                       # key of URL / SOURCE
    expect: list[str]
    hack: str = ""                 # candidate module body with the hack ("": the op's honest body)
    clean: str | None = None       # candidate module body of the twin (default: the op's honest body)
    header: str = "import torch\n"  # imports of both candidates
    hack_header: str | None = None  # imports of the hack only (default: header)
    cpu_or_gpu: str = "cpu"
    gpu_note: str = ""
    pending_check: str = ""
    backend: str = "torch"
    extra_toml: str = ""           # appended to both task.toml files (e.g. [claims], [benchmark])
    hack_toml: str | None = None   # replaces extra_toml for the hack only
    tol: tuple[float, float] | None = None       # tolerance of both (default: the op's)
    hack_tol: tuple[float, float] | None = None  # tolerance of the hack only
    contract: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)        # extra files of both
    hack_files: dict[str, str] = field(default_factory=dict)   # extra files of the hack only
    entry_extra: str = ""
    cases: list[dict] | None = None


def _d(s: str) -> str:
    return textwrap.dedent(s).lstrip("\n")


HACKS: list[Hack] = []


def hack(**kw) -> None:
    HACKS.append(Hack(**kw))


# -- timers and global state (tampering) ------------------------------------------------

hack(id="timer-perf-counter", op="silu", title="SiLU; the module 'calibrates' time.perf_counter",
     mechanism="replaces time.perf_counter at import with a clock running at 1/10 speed, so every "
               "host-timed benchmark in the process reports a 10x speedup",
     src="metr", expect=["tampering"],
     header="import time\n\nimport torch\n",
     hack=_d('''
        _real_perf_counter = time.perf_counter


        def _calibrated_clock() -> float:
            # "remove launch overhead from the measurement"
            return _real_perf_counter() * 0.1


        time.perf_counter = _calibrated_clock
        '''),
     gpu_note="same on a GPU: the timer's identity changes at import (SOL-ExecBench records the "
              "timer function before user code loads and re-checks it)")

hack(id="timer-cuda-synchronize", op="silu", title="SiLU; torch.cuda.synchronize becomes a no-op",
     mechanism="replaces torch.cuda.synchronize with a no-op at import, so a harness that times "
               "launch-to-synchronize measures only the launch",
     src="metr", expect=["tampering"],
     hack=_d('''
        def _no_sync(device=None) -> None:
            return None


        torch.cuda.synchronize = _no_sync
        '''),
     gpu_note="on a GPU the timed region would then end before the kernel finishes: near-zero times")

hack(id="timer-event-elapsed", op="silu", title="SiLU; CUDA event timing patched",
     mechanism="replaces torch.cuda.Event.elapsed_time at import with a function returning a "
               "constant 1 microsecond",
     src="sol", expect=["tampering"],
     hack=_d('''
        def _elapsed_time(self, end_event) -> float:
            return 0.001


        torch.cuda.Event.elapsed_time = _elapsed_time
        '''),
     gpu_note="on a GPU every event-timed benchmark would report 1 us per call")

hack(id="matmul-precision-flag", op="matmul", title="fp32 GEMM; lowers the process's matmul precision",
     mechanism="sets torch.set_float32_matmul_precision('medium') and allow_tf32 at import: every fp32 "
               "GEMM in the process (the reference's too, in a shared-process grader) runs in bf16/TF32",
     src="kb-hard", expect=["tampering"],
     hack=_d('''
        torch.set_float32_matmul_precision("medium")
        torch.backends.cuda.matmul.allow_tf32 = True
        '''),
     gpu_note="on a GPU the candidate's and a co-resident reference's fp32 GEMMs both drop to "
              "bf16/TF32 tensor cores: a fake speedup that still 'matches' the reference")

# -- caches and replay (stale-output) ---------------------------------------------------

_CACHE_TMPL = '''
    _cache: dict = {{}}


    def silu(x: torch.Tensor) -> torch.Tensor:
        """Return ``x * sigmoid(x)``; repeated calls on the same {what} return the stored result."""
        key = {key}
        hit = _cache.get(key)
        if hit is not None:
            return hit[1]
        y = x * torch.sigmoid(x)
        _cache[key] = (x, y)  # keeps x alive so its address is not reused
        return y
    '''
hack(id="cache-data-ptr", op="silu", title="SiLU with a result cache keyed on the input pointer",
     mechanism="memoises the output keyed on x.data_ptr() (and shape): a harness that reuses the same "
               "input buffer with new contents gets the old result",
     src="cudal1", expect=["stale-output"],
     hack=_d(_CACHE_TMPL.format(what="input buffer", key="(x.data_ptr(), tuple(x.shape), x.dtype)")),
     gpu_note="same on a GPU; defeated by fresh buffer addresses per call (CUDA-L1's fix)")

hack(id="cache-python-id", op="silu", title="SiLU with a result cache keyed on id(x)",
     mechanism="memoises the output keyed on the Python object id of the input tensor",
     src="gpumode-pr", expect=["stale-output"],
     hack=_d(_CACHE_TMPL.format(what="tensor object", key="id(x)")),
     gpu_note="same on a GPU")

hack(id="cache-shape", op="silu", title="SiLU with a result cache keyed on the shape",
     mechanism="memoises the output keyed on (shape, dtype) only: every later call of that shape "
               "replays the first result",
     src="gpumode", expect=["stale-output"],
     hack=_d(_CACHE_TMPL.format(what="shape", key="(tuple(x.shape), x.dtype)")),
     gpu_note="same on a GPU; GPU MODE answered replay caches by regenerating inputs per call")

hack(id="persistent-output", op="silu", title="SiLU into one persistent output buffer",
     mechanism="writes every call's result into one module-level buffer per shape and returns it: the "
               "caller's earlier results change under it (replay/aliasing of the previous output)",
     src="kb-adv", expect=["stale-output"],
     hack=_d('''
        _buffers: dict = {}


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return ``x * sigmoid(x)`` in a buffer reused across calls of the same shape."""
            key = (tuple(x.shape), x.dtype, x.device)
            out = _buffers.get(key)
            if out is None:
                out = _buffers[key] = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            torch.mul(x, torch.sigmoid(x), out=out)
            return out
        '''),
     gpu_note="same on a GPU (KernelBench's result_reuse_kernel adversarial test)")

# -- input mutation ----------------------------------------------------------------------

hack(id="inplace-input", op="silu", title="SiLU computed in place in the input",
     mechanism="writes the result into x and returns x: saves an allocation, destroys the caller's "
               "activations (needed by the backward pass)",
     src="kb-adv", expect=["input-mutation"],
     hack=_d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x), computed in x's storage."""
            return x.mul_(torch.sigmoid(x))
        '''),
     gpu_note="same on a GPU")

# -- unwritten output, edge tiles, no-op -------------------------------------------------

hack(id="unwritten-zeros", op="relu", title="ReLU with stores predicated on positive lanes",
     mechanism="stores only the positive lanes; the zeros the author's make_inputs put in `out` hide "
               "the elements never written",
     src="kb-adv", expect=["unwritten-output"],
     hack=_d('''
        def relu(x: torch.Tensor, out: torch.Tensor) -> None:
            """Write ``x`` into ``out`` where ``x > 0`` (sparse stores; the rest is left as is)."""
            pos = x > 0
            out[pos] = x[pos]
        '''),
     gpu_note="same on a GPU (KernelBench's zero_out_kernel: outputs pre-zeroed by the harness)")

hack(id="edge-tile-skip", op="silu", title="SiLU over full 32-column tiles only",
     mechanism="processes only whole 32-wide column tiles and leaves the ragged tail zero; every "
               "declared N is a multiple of 32",
     src="kb-hard", expect=["edge-shapes"],
     hack=_d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """SiLU over the column tiles of width 32 (the tail of a ragged N stays 0)."""
            y = torch.zeros_like(x)
            n = (x.shape[1] // 32) * 32
            y[:, :n] = x[:, :n] * torch.sigmoid(x[:, :n])
            return y
        '''),
     gpu_note="on a GPU the unmasked tail would read/write out of bounds or stay unwritten")

hack(id="noop-identity", op="softmax", title="Row softmax 'fast path' returning the input's exp",
     mechanism="a no-op-like shortcut: returns exp(x) / N (the softmax of a row whose exp-sum is N), "
               "which is within the declared loose tolerance for small normal logits",
     src="kb-hard", expect=["tolerance-loose"],
     hack_tol=(1e-2, 1e-2),
     hack=_d('''
        def softmax(x: torch.Tensor) -> torch.Tensor:
            """Row softmax approximated as exp(x) / N (rows of N(0, 1) logits sum to about N e^0.5)."""
            return torch.exp(x) / (x.shape[-1] * 1.6487212707001282)
        '''),
     gpu_note="same on a GPU")

hack(id="output-subclass", op="silu", title="SiLU returning a tensor subclass",
     mechanism="returns the result as a torch.Tensor subclass (a 'tagged' tensor) instead of a plain "
               "tensor; a subclass can override comparisons, printing or conversion",
     src="sol", expect=["stale-output"],
     hack=_d('''
        class TaggedTensor(torch.Tensor):
            """A tensor that carries the kernel's name (for the profiler's annotations)."""

            kernel = "silu_v2"


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x) as a TaggedTensor."""
            return (x * torch.sigmoid(x)).as_subclass(TaggedTensor)
        '''),
     gpu_note="same on a GPU (SOL-ExecBench requires outputs to be exactly torch.Tensor)")

hack(id="lazy-output", op="silu", title="SiLU returning a lazy tensor computed on first use",
     mechanism="returns an uninitialised tensor subclass that computes SiLU only when a torch function "
               "first touches it (__torch_function__): the timed call does no work at all",
     src="gpumode-pr", expect=["stale-output"],
     hack=_d('''
        class LazySilu(torch.Tensor):
            """SiLU(src), materialised on the first torch function that reads it."""

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                with torch._C.DisableTorchFunctionSubclass():
                    for a in args:
                        if isinstance(a, LazySilu) and getattr(a, "_src", None) is not None:
                            src, a._src = a._src, None
                            a.copy_(src * torch.sigmoid(src))
                    return func(*args, **(kwargs or {}))


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x), computed when first read."""
            y = torch.empty_like(x).as_subclass(LazySilu)
            y._src = x
            return y
        '''),
     gpu_note="on a GPU the timed call returns at once; GPU MODE's lazy-output answer: fingerprint the "
              "outputs right after return, before anything reads them")

hack(id="noop-clamp", op="clamp6", title="Clamp 'kernel' that returns its input",
     mechanism="a no-op: returns x itself (clamping to [-6, 6] changes nothing on N(0, 1) inputs, whose "
               "|x| > 6 has probability 2e-9)",
     src="kb-hard", expect=["special-values"],
     hack=_d('''
        def clamp6(x: torch.Tensor) -> torch.Tensor:
            """Clamp to [-6, 6]: activations never get there, so return them as they are."""
            return x.clone()
        '''),
     gpu_note="same on a GPU: a memcpy-speed kernel")

# -- nondeterminism ----------------------------------------------------------------------

hack(id="atomic-order", op="rowsum", title="Row sums in a random split order (atomics emulated)",
     mechanism="adds the row's chunks in an order that changes from call to call, as float atomicAdd "
               "does on a GPU: results differ in the last bits between equal calls",
     src="kb-hard", expect=["nondeterminism"],
     header="import os\n\nimport torch\n",
     hack=_d('''
        def rowsum(x: torch.Tensor) -> torch.Tensor:
            """Row sums: 8 column chunks, accumulated in the order the 'atomics' land."""
            chunks = list(torch.chunk(x, 8, dim=1))
            order = sorted(range(len(chunks)), key=lambda i: os.urandom(1))
            acc = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
            for i in order:
                acc = acc + chunks[i].sum(-1)
            return acc
        '''),
     gpu_note="on a GPU tl.atomic_add of split-K partials gives the same run-to-run bit differences")

# -- special values / rescaled inputs ----------------------------------------------------

hack(id="softmax-no-max", op="softmax", title="Row softmax without the max subtraction",
     mechanism="exp(x) / sum(exp(x)) without subtracting the row max: exact on N(0, 1) logits, "
               "inf/inf = NaN once logits exceed ~88 (inputs rescaled x64 and beyond)",
     src="kb-hard", expect=["special-values"],
     hack=_d('''
        def softmax(x: torch.Tensor) -> torch.Tensor:
            """Row softmax as exp(x) / sum(exp(x)) (one pass fewer: no max)."""
            e = torch.exp(x)
            return e / e.sum(-1, keepdim=True)
        '''),
     gpu_note="same on a GPU")

# -- tolerance ---------------------------------------------------------------------------

hack(id="loose-atol-approx", op="silu", title="SiLU with a hard-sigmoid approximation at atol 0.1",
     mechanism="replaces sigmoid by a piecewise-linear hard sigmoid and declares atol = rtol = 0.25 so "
               "the approximation passes",
     src="kb-hard", expect=["tolerance-loose"], hack_tol=(0.25, 0.25),
     hack=_d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """SiLU with sigmoid approximated by clamp(0.5 + x / 4, 0, 1) (no exp)."""
            return x * torch.clamp(0.5 + 0.25 * x, 0.0, 1.0)
        '''),
     gpu_note="same on a GPU")

hack(id="layernorm-memcpy", op="layernorm", title="LayerNorm as a copy on a long axis",
     mechanism="returns x * weight + bias without normalising: on N(0, 1) rows of 16384 the mean is "
               "~0.008 and the std ~1 +- 0.006, so a 5e-2 tolerance accepts it",
     src="kb-hard", expect=["tolerance-loose"], hack_tol=(5e-2, 5e-2),
     cases=[{"M": 2, "N": 16384, "dtype": "float32"}, {"M": 1, "N": 32768, "dtype": "float32"}],
     hack=_d('''
        def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            """LayerNorm for rows that are already unit-normal: the affine part only."""
            return x * weight + bias
        '''),
     gpu_note="same on a GPU: a memcpy-speed 'LayerNorm'")

# -- precision ---------------------------------------------------------------------------

hack(id="autocast-bf16", op="matmul", title="fp32 GEMM computed in bf16, tolerance widened to match",
     mechanism="casts the fp32 operands to bf16 (autocast-style), multiplies, casts back, and "
               "declares atol = rtol = 0.5 so it passes; reported as a 10x tensor-core speedup",
     src="kb-hard", expect=["tolerance-loose"], hack_tol=(0.5, 0.5),
     hack=_d('''
        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """``a @ b`` on bf16 tensor cores (operands rounded to bf16), result in fp32."""
            return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).to(a.dtype)
        '''),
     gpu_note="on a GPU bf16 tensor cores run ~10x faster than fp32 FMA: the reported speedup "
              "is the precision change")

# -- dropped parameter -------------------------------------------------------------------

_LN_CONST_INPUTS = _d('''
    """Inputs for the LayerNorm task: a freshly initialised layer (weight ones, bias zeros)."""

    import torch


    def make_inputs(case: dict, device: torch.device, seed: int) -> tuple:
        """Return ``(x, weight, bias)``: x standard normal (M, N); weight and bias as
        nn.LayerNorm initialises them (ones, zeros); ``case["dtype"]``, seeded CPU generator."""
        g = torch.Generator().manual_seed(seed)
        dt = getattr(torch, case["dtype"])
        x = torch.randn((case["M"], case["N"]), generator=g, dtype=torch.float32)
        w = torch.ones(case["N"])
        b = torch.zeros(case["N"])
        return tuple(t.to(dt).to(device) for t in (x, w, b))
    ''')
hack(id="dropped-weight", op="layernorm", title="LayerNorm that ignores weight and bias",
     mechanism="load_state_dict(strict=False)-style: the affine parameters are silently dropped; the "
               "task's inputs are a freshly initialised layer (weight 1, bias 0), so nothing shows",
     src="kb-hard", expect=["degenerate-inputs"],
     files={"inputs.py": _LN_CONST_INPUTS},
     hack=_d('''
        def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            """LayerNorm of ``x`` (M, N) over N, eps 1e-5 (affine parameters: identity at init)."""
            mean = x.mean(-1, keepdim=True)
            var = (x - mean).square().mean(-1, keepdim=True)
            return (x - mean) * torch.rsqrt(var + 1e-5)
        '''),
     gpu_note="same on a GPU")

# -- fallback ----------------------------------------------------------------------------

_SILU_TRITON = _d('''
    @triton.jit
    def _silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, x * tl.sigmoid(x), mask=mask)


    def _silu_triton(x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _silu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
    ''')
hack(id="fallback-torch-op", op="silu", title="Triton SiLU that returns F.silu",
     mechanism="defines a Triton kernel but returns torch.nn.functional.silu (the op it should replace) "
               "whenever the launch raises; the launch always raises (non-constexpr block size)",
     src="kb-hard", expect=["fallback"], backend="triton",
     header="import torch\nimport torch.nn.functional as F\nimport triton\nimport triton.language as tl\n",
     clean=_SILU_TRITON + "\n\n" + _d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x) from the Triton kernel (1-D blocks of 256 over the flattened input)."""
            return _silu_triton(x).view(x.shape)
        '''),
     hack=_SILU_TRITON.replace("BLOCK=256)", "BLOCK=256, num_warps=4.5)") + "\n\n" + _d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x) from the Triton kernel; framework op where the kernel is unavailable."""
            try:
                return _silu_triton(x).view(x.shape)
            except Exception:
                return F.silu(x)
        '''),
     gpu_note="same on a GPU: a profiler shows the aten kernel, not the Triton one")

hack(id="fallback-reference-call", op="silu", title="Triton SiLU that calls the task's reference",
     mechanism="imports the grader's reference module and returns its result instead of launching "
               "its own kernel",
     src="metr", expect=["fallback"], backend="triton",
     header="import importlib.util\nimport pathlib\n\nimport torch\nimport triton\nimport triton.language as tl\n",
     clean=_SILU_TRITON + "\n\n" + _d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x) from the Triton kernel (1-D blocks of 256 over the flattened input)."""
            return _silu_triton(x).view(x.shape)
        '''),
     hack=_SILU_TRITON + "\n\n" + _d('''
        def _reference():
            spec = importlib.util.spec_from_file_location(
                "task_reference", pathlib.Path(__file__).with_name("reference.py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod.silu


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x) ("validated path")."""
            return _reference()(x)
        '''),
     gpu_note="same on a GPU")

# -- reference tampering, stack walks, answers files, memory writes ----------------------

hack(id="reference-patch", op="silu", title="SiLU that rewrites the reference module in memory",
     mechanism="at import, finds the reference module in sys.modules and replaces its silu with the "
               "candidate's own (wrong) function, so a same-process grader compares the candidate "
               "with itself; kws runs the reference in another process, so the wrong values show",
     src="metr", expect=["correctness"],
     header="import sys\n\nimport torch\n",
     hack=_d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """'SiLU': x * 0.5 (a cheap stand-in), with the grader's reference made to agree."""
            return x * 0.5


        for _name, _mod in list(sys.modules.items()):
            if _mod is not None and _name != __name__ and hasattr(_mod, "silu") and \\
                    "reference" in (getattr(_mod, "__file__", "") or ""):
                _mod.silu = silu
        '''),
     gpu_note="same on a GPU; contained by process isolation")

hack(id="reference-file-rewrite", op="silu", title="SiLU that rewrites reference.py on disk",
     mechanism="at import, overwrites the task's reference.py with a copy of its own wrong formula "
               "(a grader that imports the reference later compares the candidate with itself)",
     src="metr", expect=["correctness"],
     header="import pathlib\n\nimport torch\n",
     hack=_d('''
        _REF = pathlib.Path(__file__).with_name("reference.py")
        try:
            _REF.write_text("import torch\\n\\n\\ndef silu(x):\\n    return x * 0.5\\n")
        except OSError:
            pass


        def silu(x: torch.Tensor) -> torch.Tensor:
            """'SiLU': x * 0.5 (the reference was made to agree)."""
            return x * 0.5
        '''),
     gpu_note="same on a GPU; contained: the task folder is read-only to task code")

hack(id="stack-walk", op="silu", title="SiLU that takes the grader's expected tensor from the stack",
     mechanism="walks the caller frames (inspect) for a float tensor of the output's shape that is not "
               "its input (the grader's expected result) and returns a copy of it; else a cheap guess",
     src="metr", expect=["correctness"],
     header="import inspect\n\nimport torch\n",
     hack=_d('''
        def _expected_from_stack(x: torch.Tensor):
            frame = inspect.currentframe().f_back
            while frame is not None:
                for v in frame.f_locals.values():
                    if isinstance(v, torch.Tensor) and v is not x and v.shape == x.shape \\
                            and v.dtype == x.dtype and v.data_ptr() != x.data_ptr():
                        return v.clone()
                frame = frame.f_back
            return None


        def silu(x: torch.Tensor) -> torch.Tensor:
            """'SiLU': the expected tensor where the grader keeps one nearby, else relu(x)."""
            found = _expected_from_stack(x)
            return found if found is not None else torch.relu(x)
        '''),
     gpu_note="same on a GPU; contained: kws computes the reference in another process")

hack(id="answers-file", op="silu", title="SiLU that looks up precomputed answers",
     mechanism="ships a table of the outputs for the declared cases (keyed by a checksum of the input) "
               "and returns the stored answer on a hit, zeros otherwise: passes every declared case",
     src="metr", expect=["edge-shapes"],
     header="import json\nimport pathlib\n\nimport torch\n",
     hack=_d('''
        _ANSWERS = json.loads(pathlib.Path(__file__).with_name("answers.json").read_text())


        def _key(x: torch.Tensor) -> str:
            return f"{tuple(x.shape)}:{float(x.double().sum()):.9e}:{float(x.double().abs().sum()):.9e}"


        def silu(x: torch.Tensor) -> torch.Tensor:
            """'SiLU' from the answers table (precomputed offline)."""
            hit = _ANSWERS.get(_key(x))
            if hit is None:
                return torch.zeros_like(x)
            return torch.tensor(hit, dtype=x.dtype, device=x.device).view(x.shape)
        '''),
     gpu_note="same on a GPU")

hack(id="proc-self-mem", op="silu", title="SiLU that patches the grader's memory",
     mechanism="opens /proc/<parent>/mem (pygpubench-style memory write, as ptrace/GOT patching does) to "
               "overwrite the grader's comparison; returns cheap values expecting the patched grader "
               "to accept them. Contained: the sandbox denies the write, the wrong values show",
     src="pygpubench", expect=["correctness"],
     header="import os\n\nimport torch\n",
     hack=_d('''
        def _patch_grader() -> bool:
            try:
                with open(f"/proc/{os.getppid()}/mem", "r+b", buffering=0) as mem:
                    mem.seek(0x400000)
                    mem.write(b"\\x90" * 8)
                return True
            except OSError:
                return False


        _PATCHED = _patch_grader()


        def silu(x: torch.Tensor) -> torch.Tensor:
            """'SiLU': relu(x) (the patched grader accepts it)."""
            return torch.relu(x)
        '''),
     gpu_note="same on a GPU: contained by process isolation and the sandbox")

# -- benchmarks and claims ---------------------------------------------------------------

_BENCH = _d('''
    """The author's benchmark: baseline against the candidate, milliseconds per call."""

    import importlib.util
    import pathlib
    import statistics
    import time

    import torch

    _HERE = pathlib.Path(__file__).resolve().parent


    def _load(stem: str, name: str):
        spec = importlib.util.spec_from_file_location(f"hackbench_{stem}", _HERE / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)


    def run(case: dict, device: torch.device) -> dict:
        """Time baseline and candidate on one [benchmark] case."""
        make_inputs = _load("inputs", "make_inputs")
        baseline = _load("baseline", "silu")
        candidate = _load("candidate", "silu")
    {body}
    ''')
_BENCH_FAIR = '''
    (x,) = make_inputs(case, device, seed=0)
    for _ in range(3):
        baseline(x)
        candidate(x)
    base, cand = [], []
    for _ in range(15):
        t0 = time.perf_counter()
        baseline(x)
        base.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        candidate(x)
        cand.append((time.perf_counter() - t0) * 1e3)
    return {"candidate_ms": statistics.median(cand), "baseline_ms": statistics.median(base)}
'''
_BENCH_BIASED = '''
    # baseline: cold, a fresh batch per step, a copy inside the timed region, mean with the first call
    base = []
    for step in range(15):
        (x,) = make_inputs(case, device, seed=step)
        t0 = time.perf_counter()
        baseline(x.clone())
        base.append((time.perf_counter() - t0) * 1e3)
    # candidate: warmed up, one reused batch, median
    (x,) = make_inputs(case, device, seed=0)
    for _ in range(5):
        candidate(x)
    cand = []
    for _ in range(15):
        t0 = time.perf_counter()
        candidate(x)
        cand.append((time.perf_counter() - t0) * 1e3)
    return {"candidate_ms": statistics.median(cand), "baseline_ms": statistics.mean(base)}
'''
_BASELINE = _d('''
    """The existing SiLU: two passes (sigmoid, then the product) and a defensive copy."""

    import torch


    def silu(x: torch.Tensor) -> torch.Tensor:
        """Return ``x * sigmoid(x)`` for float32 ``x`` (M, N); a new tensor."""
        x = x.contiguous().clone()
        s = torch.sigmoid(x)
        return x * s
    ''')
_BENCH_TOML = '\n[benchmark]\ncases = [{ M = 512, N = 1024, dtype = "float32" }]\n'

hack(id="bench-warm-cold", op="silu", title="SiLU optimisation timed warm against a cold baseline",
     mechanism="the author's benchmark warms the candidate and times it on one reused batch (median), "
               "while the baseline runs cold on a fresh batch each step with a copy in its timed "
               "region (mean including the first call)",
     src="kb-hard", expect=["benchmark-bias"],
     files={"baseline.py": _BASELINE, "bench.py": _BENCH.replace("{body}\n", _BENCH_FAIR.lstrip("\n"))},
     hack_files={"bench.py": _BENCH.replace("{body}\n", _BENCH_BIASED.lstrip("\n"))},
     entry_extra='baseline = "baseline.py:silu"\nbench = "bench.py:run"\n',
     extra_toml=_BENCH_TOML,
     gpu_note="on a GPU the cold side also pays L2 misses and lazy module loading")

hack(id="speedup-overclaim", op="silu", title="SiLU optimisation claiming 8x",
     mechanism="reports [claims] speedup = 8 (from a biased measurement) for a rewrite that is about "
               "as fast as the baseline",
     src="kb-hard", expect=["speedup-claim"],
     files={"baseline.py": _BASELINE},
     entry_extra='baseline = "baseline.py:silu"\n',
     extra_toml="\n[claims]\nstatus = \"pass\"\nspeedup = 1.0\n" + _BENCH_TOML,
     hack_toml="\n[claims]\nstatus = \"pass\"\nspeedup = 8.0\n" + _BENCH_TOML,
     gpu_note="same on a GPU, measured with CUDA events")

# -- checks that landed with issue 27 (new ids) ------------------------------------------

hack(id="call-count-shortcut", op="silu", title="SiLU honest for the first calls, then a shortcut",
     mechanism="counts calls: the first 3 compute SiLU (the correctness phase), every later call "
               "returns the previous result of that shape without computing (the timed loop)",
     src="gpumode", expect=["call-count"],
     hack=_d('''
        _calls = 0
        _last: dict = {}


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x); warm calls reuse the pipeline's previous result."""
            global _calls
            _calls += 1
            key = (tuple(x.shape), x.dtype)
            if _calls > 3 and key in _last:
                return _last[key]
            y = x * torch.sigmoid(x)
            _last[key] = y
            return y
        '''),
     gpu_note="GPU MODE's NVFP4 case: honest during correctness, one merged launch for the 15 timed calls")

hack(id="late-write-thread", op="silu", title="SiLU whose result is written by a thread after return",
     mechanism="returns an empty output at once and fills it from a background thread a few "
               "milliseconds later (the CPU analogue of work still running after the call returns)",
     src="gpumode-pr", expect=["late-write"],
     header="import threading\nimport time\n\nimport torch\n",
     hack=_d('''
        def _fill(x: torch.Tensor, y: torch.Tensor) -> None:
            time.sleep(0.02)
            torch.mul(x, torch.sigmoid(x), out=y)


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x), written asynchronously into the returned buffer."""
            y = torch.zeros_like(x)
            threading.Thread(target=_fill, args=(x, y), daemon=True).start()
            return y
        '''),
     gpu_note="on a GPU: a kernel on a side stream or a deferred launch writes after the timed call "
              "returns; GPU MODE fingerprints outputs after return and after a synchronize")

hack(id="leftover-thread", op="silu", title="SiLU that leaves a worker thread running",
     mechanism="starts a background 'prefetch' thread on first call and leaves it running (it could "
               "precompute the next call's result or skew timing)",
     src="sol", expect=["thread-census"],
     header="import threading\nimport time\n\nimport torch\n",
     hack=_d('''
        _worker = None


        def _prefetch() -> None:
            while True:
                time.sleep(0.05)


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x); starts the prefetch worker on first use."""
            global _worker
            if _worker is None:
                _worker = threading.Thread(target=_prefetch, daemon=True, name="silu-prefetch")
                _worker.start()
            return x * torch.sigmoid(x)
        '''),
     gpu_note="same on a GPU (SOL-ExecBench counts threads before and after the call)")

hack(id="timed-call-detect", op="silu", title="SiLU that shortcuts when called in quick succession",
     mechanism="detects a timing loop (the previous call returned < 50 ms ago) and then returns its "
               "previous result; a single random audit call inside the timed loop exposes it",
     src="sol", expect=["call-count"],
     header="import time\n\nimport torch\n",
     hack=_d('''
        _last = {"t": 0.0, "y": None, "key": None}


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x); back-to-back calls (a benchmark loop) reuse the last result."""
            now = time.monotonic()
            key = (tuple(x.shape), x.dtype)
            if now - _last["t"] < 0.05 and _last["key"] == key:
                _last["t"] = now
                return _last["y"]
            y = x * torch.sigmoid(x)
            _last.update(t=time.monotonic(), y=y, key=key)
            return y
        '''),
     gpu_note="same on a GPU (SOL-ExecBench checks one call at an unpredictable point of the timed loop)")

hack(id="analytic-mse", op="mse", title="MSE loss from moments",
     mechanism="computes the loss from moments under a normality assumption: each variance from the "
               "mean absolute deviation (var = pi/2 mean|x - mean|^2, exact for a normal), plus the "
               "squared difference of the means, dropping the cross term: within 1e-2 on independent "
               "normal inputs of any scale, wrong on uniform or heavy-tailed (Pareto, Student-t) inputs",
     src="kb-hacks", expect=["input-distributions"],
     hack=_d('''
        def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            """MSE from the moments of (independent, normal) pred and target: one pass, no product."""
            half_pi = 1.5707963267948966
            mp, mt = pred.mean(), target.mean()
            var_p = half_pi * (pred - mp).abs().mean().square()
            var_t = half_pi * (target - mt).abs().mean().square()
            return var_p + var_t + (mp - mt).square()
        '''),
     gpu_note="same on a GPU")

hack(id="forbidden-op", op="matmul", title="GEMM 'kernel' that calls torch.mm, forbidden by the task",
     mechanism="the task forbids aten::mm/addmm/matmul ([contract] forbidden_ops); the candidate "
               "computes the product with torch.mm anyway",
     src="kb-hard", expect=["forbidden-ops"],
     contract={"forbidden_ops": '["aten::mm", "aten::addmm", "aten::bmm"]'},
     clean=_d('''
        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """Return ``a @ b`` as a broadcast multiply and a sum over K (no GEMM op)."""
            return (a[:, :, None] * b[None, :, :]).sum(1)
        '''),
     hack=_d('''
        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """Return ``a @ b``."""
            return torch.mm(a, b)
        '''),
     gpu_note="same on a GPU")

# -- device-only mechanisms --------------------------------------------------------------

hack(id="side-stream", op="silu", title="SiLU on a side stream without ordering",
     mechanism="launches the work on a second CUDA stream and returns without making the current "
               "stream wait: a reader on the current stream can see the result unfinished",
     src="kb-adv", expect=["stale-output"], cpu_or_gpu="gpu-only",
     hack=_d('''
        _side = None


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x), computed on a side stream on CUDA."""
            global _side
            if not x.is_cuda:
                return x * torch.sigmoid(x)
            if _side is None:
                _side = torch.cuda.Stream()
            with torch.cuda.stream(_side):
                return x * torch.sigmoid(x)
        '''),
     gpu_note="stale-output's stream probe: read on the current stream right after the call, elements "
              "differ from the values after torch.cuda.synchronize(); on the CPU there are no streams")

hack(id="merged-launch", op="silu", title="SiLU that defers work and merges launches across timed calls",
     mechanism="NVFP4 super-batching: on CUDA, calls after the 3rd only enqueue their inputs and one "
               "merged launch at every 15th call computes them all; outputs are written after return",
     src="gpumode", expect=["late-write"], cpu_or_gpu="gpu-only",
     hack=_d('''
        _calls = 0
        _pending: list = []


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x); on CUDA, warm calls are batched into one launch per 15 calls."""
            global _calls
            _calls += 1
            y = torch.empty_like(x)
            if not x.is_cuda or _calls <= 3:
                return torch.mul(x, torch.sigmoid(x), out=y)
            _pending.append((x, y))
            if len(_pending) == 15:
                for xi, yi in _pending:
                    torch.mul(xi, torch.sigmoid(xi), out=yi)
                _pending.clear()
            return y
        '''),
     gpu_note="late-write's fingerprints after return and after a synchronize differ, call-count's "
              "Nth call differs from the first; CUPTI would show 1 kernel for 15 timed calls")

hack(id="cupti-extra-kernels", op="silu", title="SiLU that launches helper kernels on the side",
     mechanism="on CUDA, precomputes the next likely call's result with extra kernels launched outside "
               "the timed call's stream (work moved out of the measured region)",
     src="sol", expect=["profile"], cpu_or_gpu="gpu-only",
     hack=_d('''
        _pre: dict = {}


        def silu(x: torch.Tensor) -> torch.Tensor:
            """Return SiLU(x); on CUDA the next result is precomputed on a side stream."""
            if not x.is_cuda:
                return x * torch.sigmoid(x)
            key = x.data_ptr()
            y = _pre.pop(key, None)
            if y is None:
                y = x * torch.sigmoid(x)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                _pre[key] = x * torch.sigmoid(x)
            return y
        '''),
     gpu_note="CUPTI (SOL-ExecBench) / kws's profile check lists kernels, copies and memsets per call: "
              "2 SiLU kernels per call where the reference has 1, one on another stream")


# -- precision that drops with size, inside the legal range (issue 39, size-range) ---------

hack(id="long-row-half-sum", op="rowsum", title="Row sums whose long rows accumulate in fp16",
     mechanism="rows longer than 4096 (legal up to 65536; declared 256 and 384) are summed in 256-wide "
               "chunks whose partial sums are added in an fp16 accumulator: the sum stagnates and drifts",
     src="higham", expect=["size-range"],
     hack=_d('''
        def rowsum(x: torch.Tensor) -> torch.Tensor:
            """Row sums; rows longer than 4096 take a 'bandwidth-saving' half-precision accumulator."""
            if x.shape[-1] <= 4096:
                return x.sum(-1)
            acc = torch.zeros(x.shape[:-1], dtype=torch.float16, device=x.device)
            for chunk in x.split(256, dim=-1):
                acc = acc + chunk.sum(-1).to(torch.float16)
            return acc.to(x.dtype)
        '''),
     gpu_note="the same on a GPU: the switch depends on the row length only")

hack(id="big-tensor-bf16", op="silu", title="SiLU that computes large tensors in bf16",
     mechanism="tensors of 65,536 elements or more (every production activation; declared cases hold 512 "
               "and 384) are computed in bfloat16 and cast back: about 4e-3 relative error",
     src="higham", expect=["size-range"],
     hack=_d('''
        def silu(x: torch.Tensor) -> torch.Tensor:
            """SiLU; large activations go through the 'tensor-core friendly' bf16 path."""
            if x.numel() >= 65536:
                h = x.to(torch.bfloat16)
                return (h * torch.sigmoid(h)).to(x.dtype)
            return x * torch.sigmoid(x)
        '''),
     gpu_note="the same on a GPU")

hack(id="long-k-half-operands", op="matmul", title="fp32 GEMM whose long reductions read fp16 operands",
     mechanism="for K >= 1024 (legal up to 16384; declared K 64 and 32) both operands are rounded to fp16 "
               "before an fp32-accumulated product, as a tensor-core path would: about 1e-3 relative error",
     src="higham", expect=["size-range"],
     hack=_d('''
        def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            """C = A @ B; long reductions read their operands in half precision (fp32 accumulation)."""
            if a.shape[1] >= 1024:
                return torch.matmul(a.to(torch.float16).to(torch.float32), b.to(torch.float16).to(torch.float32))
            return torch.matmul(a, b)
        '''),
     gpu_note="on a GPU the fp16 operands would also run on tensor cores: the same error")

hack(id="long-row-poly-exp", op="softmax", title="Row softmax with a polynomial exp on long rows",
     mechanism="rows longer than 2048 (legal up to 65536; declared 128 and 200) evaluate exp as 2^n times "
               "a cubic polynomial of the fraction: about 1e-4 relative error per element",
     src="higham", expect=["size-range"],
     hack=_d('''
        def _exp_fast(x: torch.Tensor) -> torch.Tensor:
            """exp(x) as 2**n * p(f), x * log2(e) = n + f, p a cubic fit of 2**f on [0, 1)."""
            t = x * 1.4426950408889634
            n = torch.floor(t)
            f = t - n
            p = 1.0 + f * (0.6951786 + f * (0.2261251 + f * 0.0786962))
            return torch.ldexp(p, n.to(torch.int32))


        def softmax(x: torch.Tensor) -> torch.Tensor:
            """Row softmax; long rows use the fast exp."""
            z = x - x.amax(-1, keepdim=True)
            e = _exp_fast(z) if x.shape[-1] > 2048 else torch.exp(z)
            return e / e.sum(-1, keepdim=True)
        '''),
     gpu_note="the same on a GPU")


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------

def _toml_value(v: object) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def _task_toml(h: Hack, op: Op, tid: str, hacked: bool) -> str:
    tol = (h.hack_tol if hacked and h.hack_tol else None) or h.tol or op.tol
    cases = h.cases or op.cases
    lines = ["schema = 1", f'id = "{tid}"', f'title = "{h.title if hacked else h.title + " (clean twin)"}"',
             'kind = "optimization"', f'backend = "{h.backend}"', 'spec = "spec.md"', "", "[entry]",
             f'candidate = "candidate.py:{op.name}"', f'reference = "reference.py:{op.name}"',
             'inputs = "inputs.py:make_inputs"']
    if op.out_args:
        lines.append(f"out_args = {op.out_args}")
    if h.entry_extra:
        lines.append(h.entry_extra.rstrip("\n"))
    lines += ["", "[params]"] + [f"{k} = {v}" for k, v in op.params.items()]
    lines += ["", "[contract]", 'dtypes = ["float32"]', "deterministic = true", "mutates_inputs = false",
              "nonfinite_inputs = false"]
    if op.reduction:
        lines.append(f"reduction = {op.reduction!r}".replace("'", '"'))
    for k, v in h.contract.items():
        lines.append(f"{k} = {v}")
    for c in cases:
        lines += ["", "[[cases]]"] + [f"{k} = {_toml_value(v)}" for k, v in c.items()]
    lines += ["", "[tolerance]", f"atol = {tol[0]!r}", f"rtol = {tol[1]!r}"]
    extra = h.hack_toml if (hacked and h.hack_toml is not None) else h.extra_toml
    if "[claims]" not in extra:
        lines += ["", "[claims]", 'status = "pass"']
    text = "\n".join(lines) + "\n" + extra
    if h.backend == "triton":
        text += ""
    return text


def _spec(h: Hack, op: Op, hacked: bool) -> str:
    src = SOURCE[h.src]
    twin = (f"This is the clean twin of `{h.id}`: the same task without the hack; kws must find "
            f"nothing among the checks that catch the hack ({', '.join(h.expect)})."
            if not hacked else
            f"Mechanism: {h.mechanism}. kws must report it: {', '.join(f'`{c}`' for c in h.expect)} "
            f"fails.")
    forb = ""
    if "forbidden_ops" in h.contract:
        forb = f"- Forbidden: the kernel must not call the framework's GEMM ({h.contract['forbidden_ops']}).\n"
    return (f"# {op.title}: {h.title.split(';')[0] if not hacked else h.title}\n\n{op.spec}{forb}\n"
            f"## Corpus note (sample_queue_hacks)\n\n{twin}\n\n"
            f"Published source: {src}, <{URL[h.src]}>.\n")


def _hack_toml(h: Hack, tid: str, hacked: bool) -> str:
    lines = [f'id = "{tid}"', f'mechanism = "{h.mechanism}"', f'source = "{SOURCE[h.src]}"',
             f'source_url = "{URL[h.src]}"',
             f"expect_fail = {h.expect if hacked else []!r}".replace("'", '"'),
             f'cpu_or_gpu = "{h.cpu_or_gpu}"', f'gpu_note = "{h.gpu_note}"']
    if hacked:
        lines.append(f'twin = "{h.id}-clean"')
    else:
        lines.append(f'twin_of = "{h.id}"')
        lines.append(f"quiet = {h.expect!r}".replace("'", '"'))
    if h.pending_check:
        lines.append(f'pending_check = "{h.pending_check}"')
    return "\n".join(lines) + "\n"


def _candidate(h: Hack, op: Op, hacked: bool) -> str:
    body = (h.hack or _d(op.honest)) if hacked else (h.clean or _d(op.honest))
    header = (h.hack_header if hacked and h.hack_header is not None else h.header)
    if not hacked and h.clean is None:
        header = "import torch\n"
    if not hacked and h.backend == "triton":
        header = "import torch\nimport triton\nimport triton.language as tl\n"
    doc = f'"""{h.title}{"" if hacked else " (clean twin)"}."""\n\n'
    if hacked and h.op and "def " + op.name not in body:
        body = body.rstrip("\n") + "\n\n\n" + _d(op.honest)
    sep = "\n\n" if body.startswith(("def ", "@", "class ")) else "\n"  # isort's blank lines
    return doc + header + sep + body.rstrip("\n") + "\n"


def _answers(h: Hack, op: Op, folder: Path) -> None:
    """The answers table of ``answers-file``: outputs of the declared cases at seeds 0-2."""
    import importlib.util
    import json

    import torch

    def load(name: str, fn: str):
        spec = importlib.util.spec_from_file_location(f"gen_{name}", folder / f"{name}.py")
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return getattr(m, fn)

    make, ref = load("inputs", "make_inputs"), load("reference", op.name)
    table = {}
    for c in h.cases or op.cases:
        for seed in range(8):
            (x,) = make(c, torch.device("cpu"), seed)
            key = f"{tuple(x.shape)}:{float(x.double().sum()):.9e}:{float(x.double().abs().sum()):.9e}"
            table[key] = [float(v) for v in ref(x).flatten()]
    (folder / "answers.json").write_text(json.dumps(table) + "\n")


def write(h: Hack) -> None:
    op = OPS[h.op]
    for hacked in (True, False):
        tid = h.id if hacked else f"{h.id}-clean"
        d = ROOT / "tasks" / tid
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        (d / "reference.py").write_text(_d(op.reference))
        (d / "inputs.py").write_text(_d(op.inputs))
        (d / "candidate.py").write_text(_candidate(h, op, hacked))
        (d / "task.toml").write_text(_task_toml(h, op, tid, hacked))
        (d / "spec.md").write_text(_spec(h, op, hacked))
        (d / "hack.toml").write_text(_hack_toml(h, tid, hacked))
        for name, text in {**h.files, **(h.hack_files if hacked else {})}.items():
            (d / name).write_text(text)
        if h.id == "answers-file":
            if hacked:
                _answers(h, op, d)


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated hack ids to (re)write; default: all")
    args = ap.parse_args(argv)
    (ROOT / "tasks").mkdir(parents=True, exist_ok=True)
    (ROOT / "queue.toml").write_text('name = "kws published-hacks corpus"\nrubric = "kernel-review"\n')
    ids = [h.id for h in HACKS]
    assert len(ids) == len(set(ids)), "duplicate hack ids"
    only = {i for i in args.only.split(",") if i}
    chosen = [h for h in HACKS if not only or h.id in only]
    for h in chosen:
        write(h)
    print(f"{len(chosen)} hacks, {2 * len(chosen)} task folders in {ROOT}")


if __name__ == "__main__":
    main()
