"""Which backend each role of a task is written in, and what each backend needs to run here.

The task format says only the *candidate's* backend (``backend = "triton" | "torch" |
"cuda" | "pallas" | "nki"``). The baseline (the code before the change, or the source of a
translation) and the reference may be written in another one (a CUDA source translated to
Triton, a Pallas kernel migrated to Triton): the task declares it in the kws extension
``[backends]`` (``baseline = "cuda"``; a role not listed is ``torch``). :func:`role_backend`
returns the declaration, never a reading of the imports: a file that mentions ``neuronxcc``
under ``if False:`` is still the backend its task declares. :func:`imported_backend` reads
what the role's imports suggest (its file and the task files it imports,
:class:`~workstation.task.sources.TaskSources`, never importing them:
``torch.utils.cpp_extension`` makes ``cuda``, ``jax.experimental.pallas`` ``pallas``,
``nki`` / ``neuronxcc`` ``nki``, ``triton`` ``triton``, else ``torch``), and
:func:`backend_mismatch` says when that differs from the declaration, for a note in the
report (never a decision).

:func:`cannot_run` says why a backend cannot run on the device kws found (``None`` when it
can), from what the fork server reported (``versions``: ``jax`` when JAX is importable for
kws, ``nki`` when an NKI with ``simulate_kernel`` is):

- ``triton``, ``torch``: anywhere (Triton under its interpreter on the CPU);
- ``pallas``: where JAX is installed (the ``kws[pallas]`` extra); interpret mode on the CPU;
- ``cuda``: on a CUDA GPU (``load_inline`` compiles and links against a CUDA build of
  torch), or on the CPU under kws's CUDA emulation (``versions["cuda-emu"]``: the fork server
  found g++ and the ``cuda_emulation`` setting is on; :mod:`workstation.harness.cuda_emu`
  compiles the kernels as host code); in both cases, and when neither, the ``cuda-build``
  check compiles the captured sources with nvcc and reads PTX/SASS;
- ``nki``: where a real ``nki`` with ``simulate_kernel`` is importable (the Neuron SDK's
  package, from AWS's Neuron pip repository; the ``nki`` and ``neuronx-cc`` names on PyPI
  are placeholders that raise ImportError) or on a Trainium/Inferentia device.
"""

from __future__ import annotations

from collections.abc import Mapping

from workstation.task.model import Task
from workstation.task.sources import TaskSources

#: module prefixes that make a role's backend, most specific first.
_MARKERS: tuple[tuple[str, str], ...] = (
    ("torch.utils.cpp_extension", "cuda"),
    ("jax.experimental.pallas", "pallas"),
    ("neuronxcc", "nki"),
    ("nki", "nki"),
    ("triton", "triton"),
)

PALLAS_HINT = "install kws's Pallas extra (pip install 'kws[pallas]': jax and jaxlib for the CPU)"
NKI_HINT = ("install the Neuron SDK's neuronx-cc (it provides nki.simulate_kernel) from AWS's Neuron pip "
            "repository; the `nki` and `neuronx-cc` packages on PyPI are placeholders that raise ImportError")


#: install hints for libraries task files import, by top-level module name.
LIBRARY_HINTS: dict[str, str] = {
    "jax": PALLAS_HINT,
    "jaxlib": PALLAS_HINT,
    "neuronxcc": NKI_HINT,
    "nki": NKI_HINT,
    "liger_kernel": "pip install liger-kernel (kws's real-kernel samples: python scripts/install_realkernels.py)",
    "flag_gems": "pip install flag-gems (kws's real-kernel samples: python scripts/install_realkernels.py)",
}

#: what the report says of a CUDA candidate run under kws's CPU emulation (harness.cuda_emu).
CUDA_EMULATION_NOTE = (
    "the CUDA extension ran on the CPU under kws's emulation: its kernels compiled as host C++ (g++) with kws's shim, "
    "each launch's blocks run one at a time, a block's threads as fibers (__syncthreads and warp shuffles are real "
    "barriers; between barriers threads run one after another, one legal schedule), so the run judges the kernel's "
    "index arithmetic, launch coverage and accumulation dtype. Not emulated: timing (not judged), the GPU's "
    "approximate/fast-math intrinsics (libm is used; cuda-build reads them statically), the memory model and races "
    "beyond barrier order, out-of-bounds reads (not detected; cuda-build reads bounds guards statically; writes are seen "
    "only where they hit kws's guard bands or crash the job)")


def library_hint(top: str) -> str:
    """How to install the library whose top-level module is ``top`` (a guess from its name
    when kws does not know it: ``pip install some-lib`` for ``some_lib``)."""
    return LIBRARY_HINTS.get(top) or f"pip install {top.replace('_', '-')} (or the package that provides {top})"


def role_backend(task: Task, role: str) -> str | None:
    """The declared backend of ``role``'s code (see module doc): the task's ``backend`` for
    the candidate, ``[backends]`` for the others (default ``torch``); ``None`` when the task
    has no such role."""
    return task.backend_of(role)


def imported_backend(task: Task, role: str, sources: TaskSources | None = None) -> str | None:
    """The backend ``role``'s imports suggest (see module doc; a hint, never a decision),
    ``None`` when the task has no such role."""
    ep = task.entry.get(role)
    if ep is None:
        return None
    mods = (sources or TaskSources(task.dir)).all_imports(ep.file)
    for prefix, backend in _MARKERS:
        if any(m == prefix or m.startswith(prefix + ".") for m in mods):
            return backend
    return "torch"


def backend_mismatch(task: Task, role: str, sources: TaskSources | None = None) -> str | None:
    """A sentence when the imports of ``role``'s code suggest another backend than the one
    declared (``None`` when they agree, when they suggest only ``torch``: a library the file
    imports may launch kernels of its own, or when the role is absent): a note for the
    reviewer, the declaration still decides."""
    declared = role_backend(task, role)
    if declared is None:
        return None
    seen = imported_backend(task, role, sources)
    if seen is None or seen in (declared, "torch"):
        return None
    if role == "candidate":
        key = "backend"
    elif role in dict(task.extensions.role_backends):
        key = f"[backends] {role}"
    else:
        key = f"[backends] {role} not given: the default"
    return (f"the {role}'s imports suggest {seen} ({task.entry[role].file} or a task file it imports), but task.toml "
            f"declares {declared} ({key}); kws runs it as {declared}")


def cannot_run(backend: str | None, device_kind: str, versions: Mapping[str, str]) -> str | None:
    """Why code of ``backend`` cannot run on this device (``device_kind``: ``cpu`` /
    ``cuda``; ``versions``: what the fork server reported), or ``None`` when it can."""
    if backend == "pallas" and "jax" not in versions:
        return f"JAX is not installed for kws, so a Pallas kernel cannot run here: {PALLAS_HINT}"
    if backend == "cuda" and device_kind != "cuda" and "cuda-emu" not in versions:
        return ("a CUDA extension runs only on a CUDA GPU (load_inline links against a CUDA build of torch), and kws's "
                "CPU emulation of CUDA is off (the cuda_emulation setting, KWS_CUDA_EMULATION) or has no g++ here; "
                "kws compiles its sources and reads PTX/SASS instead (cuda-build)")
    if backend == "nki" and "nki" not in versions:
        return f"no NKI simulator is importable here, so an NKI kernel cannot run: {NKI_HINT}"
    return None
