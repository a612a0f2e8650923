"""Which backend each role of a task is written in, read statically, and what each backend
needs to run here.

The task format says only the *candidate's* backend (``backend = "triton" | "torch" |
"cuda" | "pallas" | "nki"``). The baseline (the code before the change, or the source of a
translation) and the reference may be written in another one (a CUDA source translated to
Triton, a Pallas kernel migrated to Triton), so :func:`role_backend` reads the role's file
and the task files it imports (:class:`~workstation.task.sources.TaskSources`, never
importing them): ``torch.utils.cpp_extension`` (``load_inline`` / ``load``) makes a role
``cuda``, ``jax.experimental.pallas`` ``pallas``, ``nki`` / ``neuronxcc`` ``nki``, ``triton``
``triton``, else ``torch``.

:func:`cannot_run` says why a backend cannot run on the device kws found (``None`` when it
can), from what the fork server reported (``versions``: ``jax`` when JAX is importable for
kws, ``nki`` when an NKI with ``simulate_kernel`` is):

- ``triton``, ``torch``: anywhere (Triton under its interpreter on the CPU);
- ``pallas``: where JAX is installed (the ``kws[pallas]`` extra); interpret mode on the CPU;
- ``cuda``: on a CUDA GPU only (``load_inline`` compiles and links against a CUDA build of
  torch); on the CPU the ``cuda-build`` check compiles the captured sources with nvcc and
  reads PTX/SASS instead;
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


def role_backend(task: Task, role: str, sources: TaskSources | None = None) -> str | None:
    """The backend the ``role``'s code is written in (see module doc); the candidate's is
    the task's declared ``backend``. ``None`` when the task has no such role."""
    if role == "candidate":
        return task.backend
    ep = task.entry.get(role)
    if ep is None:
        return None
    mods = (sources or TaskSources(task.dir)).all_imports(ep.file)
    for prefix, backend in _MARKERS:
        if any(m == prefix or m.startswith(prefix + ".") for m in mods):
            return backend
    return "torch"


def cannot_run(backend: str | None, device_kind: str, versions: Mapping[str, str]) -> str | None:
    """Why code of ``backend`` cannot run on this device (``device_kind``: ``cpu`` /
    ``cuda``; ``versions``: what the fork server reported), or ``None`` when it can."""
    if backend == "pallas" and "jax" not in versions:
        return f"JAX is not installed for kws, so a Pallas kernel cannot run here: {PALLAS_HINT}"
    if backend == "cuda" and device_kind != "cuda":
        return ("a CUDA extension runs only on a CUDA GPU (load_inline links against a CUDA build of torch); "
                "without one kws compiles its sources and reads PTX/SASS (cuda-build)")
    if backend == "nki" and "nki" not in versions:
        return f"no NKI simulator is importable here, so an NKI kernel cannot run: {NKI_HINT}"
    return None
