"""Roofline bounds: the least time a case can take on a device, from its bytes and flops.

``t_min = max(bytes / peak_bandwidth, flops / peak_flops)``. A measured time below
``t_min`` means the measurement does not time the work (an unsynchronised launch, a
cached result); a claimed time below it (the baseline's measured time divided by the
claimed speedup) means the claim is physically impossible on that device.

GPU peaks are the vendor's datasheet figures (dense, without structured sparsity), per
model; for compute, the highest peak a kernel of that input dtype could use (fp16/bf16
tensor cores for fp16/bf16, TF32 tensor cores for fp32, FP8 tensor cores for fp8, FP64
tensor cores for fp64), so the bound stays a true lower bound. On the CPU there is no
datasheet: kws measures the copy bandwidth of the timing child (one thread, as the task
code runs) and has no compute peak.

Sources:

- H100 SXM5 / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet,
  https://www.nvidia.com/en-us/data-center/h100/ (FP16 tensor 1979 / 1513 / 1671 TFLOPS
  *with sparsity*, halved here; HBM3 3.35 / 2.0 / 3.9 TB/s).
- H200 SXM: https://www.nvidia.com/en-us/data-center/h200/ (4.8 TB/s; same tensor peaks
  as H100 SXM).
- A100 40/80 GB SXM and PCIe: NVIDIA A100 datasheet,
  https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
  (312 TFLOPS FP16 tensor, 156 TF32, 19.5 FP64 tensor; 1.555 / 2.039 / 1.935 TB/s).
- L40S: https://www.nvidia.com/en-us/data-center/l40s/ (864 GB/s; 362 TFLOPS FP16
  tensor dense, 183 TF32, 733 FP8).
- L4: https://www.nvidia.com/en-us/data-center/l4/ (300 GB/s; 121 TFLOPS FP16 tensor
  dense, 60 TF32, 242 FP8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DevicePeaks:
    """Datasheet peaks of one GPU model: ``bandwidth`` in bytes/s, ``flops`` per dtype
    class (``fp16``, ``tf32``, ``fp8``, ``fp64``) in flop/s, and where they come from."""

    model: str
    bandwidth: float
    flops: dict[str, float]
    source: str


_T = 1e12
GPU_PEAKS: tuple[tuple[tuple[str, ...], DevicePeaks], ...] = (
    (("h200",), DevicePeaks("H200 SXM", 4.8e12, {"fp16": 989.5 * _T, "tf32": 494.7 * _T, "fp8": 1979 * _T, "fp64": 67 * _T},
                            "nvidia.com/en-us/data-center/h200")),
    (("h100", "nvl"), DevicePeaks("H100 NVL", 3.9e12, {"fp16": 835.5 * _T, "tf32": 417.5 * _T, "fp8": 1670.5 * _T, "fp64": 60 * _T},
                                  "H100 datasheet")),
    (("h100", "pcie"), DevicePeaks("H100 PCIe", 2.0e12, {"fp16": 756.5 * _T, "tf32": 378 * _T, "fp8": 1513 * _T, "fp64": 51 * _T},
                                   "H100 datasheet")),
    (("h100",), DevicePeaks("H100 SXM", 3.35e12, {"fp16": 989.5 * _T, "tf32": 494.7 * _T, "fp8": 1979 * _T, "fp64": 67 * _T},
                            "H100 datasheet")),
    (("a100", "80gb", "pcie"), DevicePeaks("A100 80GB PCIe", 1.935e12, {"fp16": 312 * _T, "tf32": 156 * _T, "fp64": 19.5 * _T},
                                           "A100 datasheet")),
    (("a100", "80gb"), DevicePeaks("A100 80GB SXM", 2.039e12, {"fp16": 312 * _T, "tf32": 156 * _T, "fp64": 19.5 * _T},
                                   "A100 datasheet")),
    (("a100",), DevicePeaks("A100 40GB", 1.555e12, {"fp16": 312 * _T, "tf32": 156 * _T, "fp64": 19.5 * _T},
                            "A100 datasheet")),
    (("l40s",), DevicePeaks("L40S", 864e9, {"fp16": 362 * _T, "tf32": 183 * _T, "fp8": 733 * _T},
                            "nvidia.com/en-us/data-center/l40s")),
    ((" l4",), DevicePeaks("L4", 300e9, {"fp16": 121 * _T, "tf32": 60 * _T, "fp8": 242 * _T},
                           "nvidia.com/en-us/data-center/l4")),
)

#: dtype name -> the peak class a kernel of that input dtype can reach at best.
DTYPE_CLASS = {
    "float16": "fp16", "bfloat16": "fp16", "float32": "tf32", "float64": "fp64",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
}

#: on the CPU the bandwidth is a measurement, not a peak: a time must beat it by this
#: factor to be flagged (a read-mostly kernel can stream faster than a copy).
CPU_BANDWIDTH_MARGIN = 1.5
#: on a GPU, datasheet peaks: a time must beat the bound by this factor (clock and
#: rounding of the published figures).
GPU_MARGIN = 1.05


def gpu_peaks(device_name: str) -> DevicePeaks | None:
    """The datasheet peaks for a CUDA device name (``torch.cuda.get_device_name``), or
    ``None`` for a model kws does not know."""
    n = " " + device_name.lower()
    for keys, peaks in GPU_PEAKS:
        if all(k in n for k in keys):
            return peaks
    return None


@dataclass(frozen=True)
class Bound:
    """The roofline lower bound of one case on one device.

    ``t_mem_ms`` (bytes / bandwidth), ``t_read_ms`` (input bytes / bandwidth: a cold
    sample, after the cache flush, must at least read its inputs from memory), ``t_flop_ms`` (flops / peak, None without a peak),
    ``t_min_ms`` their maximum; ``margin``: the factor a time must beat ``t_min_ms`` by to
    be flagged; ``memory_applies``: False when the working set fits in the cache, so a
    warm time may legitimately beat DRAM bandwidth (the memory bound is then not used for
    claims).
    """

    t_mem_ms: float
    t_read_ms: float
    t_flop_ms: float | None
    t_min_ms: float
    margin: float
    bandwidth: float
    bandwidth_source: str
    peak_flops: float | None
    bytes: int
    flops: int | None
    memory_applies: bool

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def bound(*, device: str, device_name: str, dtype: str, read_bytes: int, write_bytes: int,
          flops: int | None, cache_bytes: int, measured_bandwidth: float | None) -> Bound | None:
    """The roofline bound of one case (see module doc); ``None`` when no bandwidth is known.

    The memory term uses ``read_bytes + write_bytes`` (each input read once, each output
    written once: the least traffic); it applies to claims only when that working set is
    larger than the device cache (``cache_bytes``: the L2 or the LLC).
    """
    peaks = gpu_peaks(device_name) if device == "cuda" else None
    if peaks is not None:
        bw, src = peaks.bandwidth, f"{peaks.model} datasheet ({peaks.source})"
        pf = peaks.flops.get(DTYPE_CLASS.get(dtype, "fp16"))
        margin = GPU_MARGIN
    elif measured_bandwidth:
        bw, src, pf = measured_bandwidth, "measured copy bandwidth", None
        margin = CPU_BANDWIDTH_MARGIN
    else:
        return None
    nbytes = int(read_bytes + write_bytes)
    t_mem = nbytes / bw * 1e3
    t_flop = flops / pf * 1e3 if (pf and flops) else None
    t_min = max(t_mem, t_flop or 0.0)
    return Bound(t_mem_ms=t_mem, t_read_ms=read_bytes / bw * 1e3, t_flop_ms=t_flop, t_min_ms=t_min, margin=margin, bandwidth=bw,
                 bandwidth_source=src, peak_flops=pf, bytes=nbytes, flops=flops,
                 memory_applies=nbytes > cache_bytes)


def beats(time_ms: float, b: Bound, *, memory: str) -> bool:
    """True when ``time_ms`` is below the bound by more than its margin. ``memory``:
    ``"read"`` (a cold measured time: inputs come from memory), ``"all"`` (a claimed time,
    inputs and outputs, used only when the working set exceeds the cache) or ``"none"``."""
    mem = {"read": b.t_read_ms, "all": b.t_mem_ms if b.memory_applies else 0.0, "none": 0.0}[memory]
    floor = max(mem, b.t_flop_ms or 0.0)
    return floor > 0 and time_ms * b.margin < floor
