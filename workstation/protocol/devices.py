"""The GPUs a task can declare as its target (``[target] device``, a kws extension of
task.toml) and the values kws's device stand-in answers for them.

On a machine without CUDA the job child answers the device queries libraries make at import
and at launch (``torch.cuda.get_device_properties``, ``torch.accelerator``, Triton's active
driver and its ``GPUTarget``; :func:`workstation.harness.fidelity.device_stand_in`) with the
values of the task's declared target, :data:`DEFAULT_TARGET` when it declares none. The
parent reads the same table to list, in the report's ``device_standin`` key, what was stood
in for. Torch-free: the parent and the task loader import it.

Sources of the values: the CUDA C Programming Guide, "Compute Capabilities" table (shared
memory per block opt-in, registers per SM, threads per SM, warp size) and NVIDIA's data
sheets (SM count, L2, memory); ``total_memory`` is what ``torch.cuda.get_device_properties``
reports on the SXM parts (81559 MiB for the H100 80GB HBM3, 143771 MiB for the H200, 81038
MiB for the A100-SXM4-80GB); clocks are the boost SM clock and the memory clock as
``cudaDeviceProp.clockRate`` / ``memoryClockRate`` give them (kHz).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MiB = 1024 * 1024


@dataclass(frozen=True)
class DeviceTarget:
    """One GPU as ``torch.cuda.get_device_properties`` and Triton's CUDA driver describe it.

    Attributes:
        name: ``torch.cuda.get_device_name`` spelling.
        major, minor: compute capability (sm_<major><minor>).
        multi_processor_count: streaming multiprocessors.
        total_memory: bytes of device memory.
        L2_cache_size: bytes.
        shared_memory_per_block_optin: bytes (Triton's ``max_shared_mem``).
        shared_memory_per_block: bytes without opt-in.
        regs_per_multiprocessor: 32-bit registers per SM (Triton's ``max_num_regs``).
        max_threads_per_multi_processor: threads.
        warp_size: threads per warp.
        sm_clock_khz, mem_clock_khz: clocks in kHz; mem_bus_width: bits.
    """

    name: str
    major: int
    minor: int
    multi_processor_count: int
    total_memory: int
    L2_cache_size: int
    shared_memory_per_block_optin: int
    shared_memory_per_block: int = 49152
    regs_per_multiprocessor: int = 65536
    max_threads_per_multi_processor: int = 2048
    warp_size: int = 32
    sm_clock_khz: int = 1980000
    mem_clock_khz: int = 2619000
    mem_bus_width: int = 5120

    @property
    def arch(self) -> int:
        """Triton's ``GPUTarget.arch`` for CUDA: ``10 * major + minor`` (90 for sm_90)."""
        return 10 * self.major + self.minor

    def triton_properties(self) -> dict[str, int]:
        """``triton.runtime.driver.active.utils.get_device_properties(i)`` as Triton's CUDA
        driver returns it (``triton/backends/nvidia/driver.c``, ``getDeviceProperties``)."""
        return {"max_shared_mem": self.shared_memory_per_block_optin, "max_num_regs": self.regs_per_multiprocessor,
                "multiprocessor_count": self.multi_processor_count, "warpSize": self.warp_size,
                "sm_clock_rate": self.sm_clock_khz, "mem_clock_rate": self.mem_clock_khz,
                "mem_bus_width": self.mem_bus_width}

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "capability": [self.major, self.minor], "triton_target": ["cuda", self.arch, self.warp_size]}


#: the targets a task may declare (``[target] device``), by their short name.
DEVICE_TARGETS: dict[str, DeviceTarget] = {
    "H100": DeviceTarget(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                         total_memory=81559 * MiB, L2_cache_size=50 * MiB, shared_memory_per_block_optin=232448,
                         sm_clock_khz=1980000, mem_clock_khz=2619000, mem_bus_width=5120),
    "H200": DeviceTarget(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                         total_memory=143771 * MiB, L2_cache_size=60 * MiB, shared_memory_per_block_optin=232448,
                         sm_clock_khz=1980000, mem_clock_khz=3201000, mem_bus_width=6144),
    "A100": DeviceTarget(name="NVIDIA A100-SXM4-80GB", major=8, minor=0, multi_processor_count=108,
                         total_memory=81038 * MiB, L2_cache_size=40 * MiB, shared_memory_per_block_optin=166912,
                         sm_clock_khz=1410000, mem_clock_khz=1593000, mem_bus_width=5120),
}

#: the target of a task that declares none (the AOT compile's default, sm_90).
DEFAULT_TARGET = "H100"

#: the task.toml table and key a task declares its target with.
TARGET_KEY = "target.device"


def device_target(name: str | None) -> DeviceTarget:
    """The :class:`DeviceTarget` named ``name`` (``None`` or ``""``: :data:`DEFAULT_TARGET`).

    Raises:
        KeyError: a name not in :data:`DEVICE_TARGETS`.
    """
    return DEVICE_TARGETS[name or DEFAULT_TARGET]


def declared_target(name: object) -> str:
    """The target the job child's stand-in answers as: ``name`` (the task's ``[target]
    device`` as the job file carries it, ``Job.target``: read through the schema layer and
    validated by the parent's task loader) when it is a name of :data:`DEVICE_TARGETS`,
    else :data:`DEFAULT_TARGET` (``None``: the task declares none)."""
    return name if isinstance(name, str) and name in DEVICE_TARGETS else DEFAULT_TARGET
