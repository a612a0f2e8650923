"""The device stand-in: the device queries that packages make at import and at launch,
answered on a machine without CUDA with the values of the task's declared target (``[target]
device``, :mod:`workstation.protocol.devices`; an H100, sm_90, by default): ``torch.cuda``
(device name, properties, capability, count, current device), ``torch.accelerator``
(available, the current accelerator ``cuda``, count) and Triton's active driver
(:class:`StandInDriver`: ``get_current_target()`` is the target's ``GPUTarget("cuda", 90,
32)``, ``utils.get_device_properties`` its figures). ``torch.cuda.is_available()`` stays
False and no tensor is ever placed on a CUDA device: what needs one raises, and
:func:`limit_of` tells the harness it is the stand-in's limit, not a defect (the parent then
does not judge). Each step reports the probes task code called (:func:`take_standin_calls`;
the report's ``device_standin``). Part of the fidelity layer
(:mod:`workstation.harness.fidelity`, which registers :func:`job_target` as a job hook).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

from workstation.harness import excchain


class DeviceStandInLimit(RuntimeError):
    """Raised by the device stand-in where a library needs more of the GPU than it can
    answer on the CPU (a CUDA stream, an event, a driver call that launches or loads a
    binary). The harness reports the error with ``device_standin_limit`` (:func:`limit_of`),
    and the parent does not judge the role's calls (an environment limit, not a defect)."""


#: the target the stand-in answers for in this job (set per job from the task's
#: ``[target] device``, :func:`job_target`), the probes task code called since the last
#: :func:`take_standin_calls`, what is patched, and what could not be (mutated, never
#: rebound: kws's module namespaces are watched).
_standin: dict[str, Any] = {"target": None, "calls": {}, "installed": [], "errors": []}

#: torch's own messages for a CUDA device it does not have (``torch.cuda._lazy_init``).
_NO_CUDA_TEXTS = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available")


def _target() -> Any:
    from workstation.protocol.devices import device_target

    return device_target(_standin["target"])


def _called(name: str) -> None:
    calls = _standin["calls"]
    calls[name] = calls.get(name, 0) + 1


def take_standin_calls() -> dict[str, Any] | None:
    """The stand-in's record of this step (``None`` when no stand-in is installed):
    ``{"target": name, "calls": {probe: count}}`` for the probes task code called since the
    last take (the harness sends it with each step's result), then starts a new count."""
    if not _standin["installed"]:
        return None
    from workstation.protocol.devices import DEFAULT_TARGET

    calls, _standin["calls"] = _standin["calls"], {}
    return {"target": _standin["target"] or DEFAULT_TARGET, "calls": calls}


def limit_of(e: BaseException) -> str | None:
    """Why ``e`` (or an exception in its chain) is a limit of the CPU stand-in rather than
    a defect of the task code: the stand-in's :class:`DeviceStandInLimit`, or torch refusing
    a CUDA tensor or stream on a build without CUDA. ``None`` otherwise, and always when no
    stand-in is installed (on a GPU such an error is the code's)."""
    if not _standin["installed"]:
        return None
    for cur in excchain.chain(e):
        if isinstance(cur, DeviceStandInLimit):
            return str(cur)[:500]
        text = str(cur)
        if any(t in text for t in _NO_CUDA_TEXTS):
            return (f"the code asked for a CUDA device ({type(cur).__name__}: {text.splitlines()[0][:200] if text else ''}); "
                    "kws's CPU stand-in answers device queries but cannot place tensors, streams or events on a GPU")
    return None


class _Props:
    """The target's properties as ``torch.cuda.get_device_properties`` returns them."""

    def __init__(self, t: Any):
        self.name = t.name
        self.major, self.minor = t.major, t.minor
        self.multi_processor_count = t.multi_processor_count
        self.total_memory = t.total_memory
        self.L2_cache_size = t.L2_cache_size
        self.max_threads_per_multi_processor = t.max_threads_per_multi_processor
        self.warp_size = t.warp_size
        self.regs_per_multiprocessor = t.regs_per_multiprocessor
        self.shared_memory_per_block = t.shared_memory_per_block
        self.shared_memory_per_block_optin = t.shared_memory_per_block_optin
        self.shared_memory_per_multiprocessor = t.shared_memory_per_block_optin + 1024
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.gcnArchName = ""
        self.uuid = "kws-stand-in"

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count})")


class _DriverUtils:
    """``driver.active.utils`` of the stand-in driver: ``get_device_properties`` answers,
    anything that loads or launches a binary raises :class:`DeviceStandInLimit`."""

    def get_device_properties(self, device: Any = 0) -> dict[str, int]:
        _called("triton.runtime.driver.active.utils.get_device_properties")
        return _target().triton_properties()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise DeviceStandInLimit(f"triton.runtime.driver.active.utils.{name} needs a GPU driver; kws's CPU "
                                 "stand-in answers only get_device_properties (docs/backends.md, 'Device stand-in')")


class StandInDriver:
    """Triton's active driver on a machine without CUDA, under the interpreter: the
    target's ``GPUTarget`` (``get_current_target``), its properties, the CPU as the torch
    device the interpreter computes on, and a benchmarker that runs the function (timing
    under the interpreter says nothing; kws times separately). Anything else raises
    :class:`DeviceStandInLimit` naming the method."""

    def __init__(self) -> None:
        self.utils = _DriverUtils()

    @classmethod
    def is_active(cls) -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        _called("triton.runtime.driver.active.get_current_target")
        t = _target()
        return GPUTarget("cuda", t.arch, t.warp_size)

    def get_active_torch_device(self) -> Any:
        import torch

        _called("triton.runtime.driver.active.get_active_torch_device")
        return torch.device("cpu")

    def get_current_device(self) -> int:
        _called("triton.runtime.driver.active.get_current_device")
        return 0

    def set_current_device(self, device: Any) -> None:
        _called("triton.runtime.driver.active.set_current_device")

    def get_device_interface(self) -> Any:
        import torch

        _called("triton.runtime.driver.active.get_device_interface")
        return torch.cuda

    def get_benchmarker(self) -> Any:
        _called("triton.runtime.driver.active.get_benchmarker")

        def bench(fn: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
            import time

            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
            return [ms] * len(quantiles) if quantiles else ms

        return bench

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(1024, dtype=torch.int8)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise DeviceStandInLimit(f"triton.runtime.driver.active.{name} needs a GPU driver; kws's CPU stand-in "
                                 "does not answer it (docs/backends.md, 'Device stand-in')")


def job_target(job: Any) -> None:
    """Per job: the target the stand-in answers for, the task's ``[target] device`` as the
    job file carries it (``Job.target``: read and validated by the parent's task loader),
    and a fresh call count."""
    from workstation.protocol.devices import declared_target

    _standin["target"] = declared_target(getattr(job, "target", None))
    _standin["calls"] = {}


def device_stand_in(interpreter_only: bool = True) -> list[str]:
    """Answer device queries on a machine without CUDA (module doc; docs/backends.md,
    "Device stand-in"): under the interpreter, or also without it (``interpreter_only=False``:
    the AOT compile child, which imports library modules to compile their kernels). Values
    are those of the task's declared target (:mod:`workstation.protocol.devices`, H100 by
    default). ``torch.cuda.is_available()`` stays False and no tensor is placed on a CUDA
    device. Returns the names patched ([] when CUDA is available, or when not interpreting
    and ``interpreter_only``)."""
    if interpreter_only and os.environ.get("TRITON_INTERPRET") != "1":
        return []
    import torch

    if torch.cuda.is_available():
        return []
    if _standin["installed"]:
        return list(_standin["installed"])
    cuda: Any = torch.cuda  # its attributes are replaced below
    patched: list[str] = []

    def _set(owner: Any, prefix: str, name: str, fn: Callable[..., Any]) -> None:
        full = f"{prefix}.{name}"
        real = getattr(owner, name, None)

        def answer(*a: Any, **k: Any) -> Any:
            # torch's own machinery (dynamo, inductor, fork_rng, ...) keeps seeing the CPU
            # it runs on: answering it "cuda" would send it to streams and devices there
            # are none of; the stand-in answers the libraries' probes
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if real is not None and (caller == "torch" or caller.startswith("torch.")):
                return real(*a, **k)
            _called(full)
            return fn(*a, **k)

        answer.__name__ = name
        answer.__qualname__ = full
        setattr(owner, name, answer)
        patched.append(full)

    _set(cuda, "torch.cuda", "get_device_name", lambda device=None: _target().name)
    _set(cuda, "torch.cuda", "get_device_properties", lambda device=None: _Props(_target()))
    _set(cuda, "torch.cuda", "get_device_capability", lambda device=None: (_target().major, _target().minor))
    _set(cuda, "torch.cuda", "device_count", lambda: 1)
    _set(cuda, "torch.cuda", "current_device", lambda: 0)
    _set(cuda, "torch.cuda", "set_device", lambda device: None)
    _set(cuda, "torch.cuda", "synchronize", lambda device=None: None)
    _set(cuda, "torch.cuda", "is_bf16_supported", lambda including_emulation=True: _target().major >= 8)
    _set(cuda, "torch.cuda", "mem_get_info", lambda device=None: (_target().total_memory, _target().total_memory))

    class _Device(contextlib.nullcontext):
        def __init__(self, device: Any = None):
            super().__init__()
            _called("torch.cuda.device")
            self.idx = 0

    cuda.device = _Device
    patched.append("torch.cuda.device")
    acc = getattr(torch, "accelerator", None)
    if acc is not None:
        # torch.accelerator names the device libraries pick their backend by ("cuda"); the
        # tensors they then place there fail, and limit_of tells that apart from a defect
        _set(acc, "torch.accelerator", "is_available", lambda: True)
        _set(acc, "torch.accelerator", "current_accelerator", lambda check_available=False: torch.device("cuda"))
        _set(acc, "torch.accelerator", "device_count", lambda: 1)
        _set(acc, "torch.accelerator", "current_device_index", lambda: 0)
        _set(acc, "torch.accelerator", "synchronize", lambda device=None: None)
    try:
        from triton.runtime import driver as triton_driver

        triton_driver.set_active(StandInDriver())
        patched.append("triton.runtime.driver.active")
    except Exception as e:  # noqa: BLE001  (a Triton without the driver config: no stand-in for it)
        _standin["errors"].append(f"device stand-in: triton driver: {type(e).__name__}: {e}")
    os.environ.setdefault("GEMS_VENDOR", "nvidia")  # FlagGems' own vendor override
    _standin["installed"] = patched
    return patched


def errors() -> list[str]:
    """What the stand-in could not patch in this process (a copy)."""
    return list(_standin["errors"])
