"""The input budget: how many bytes one case's inputs may take in a job child, and how a
case that needs more is recognised (before allocating it where it looks large, or from the
allocation that failed). Used by :meth:`workstation.harness.core.JobContext.make_inputs`,
which refuses such a case as a task-format problem naming it (``cases``), never as a
defect of a role.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

from workstation.protocol import childenv

#: The largest input budget on the CPU (bytes), whatever the host's memory.
CPU_INPUT_BUDGET = 8 << 30


def input_budget(device: torch.device) -> int:
    """The most bytes one case's inputs may take on ``device``: ``$KWS_INPUT_BUDGET``
    (bytes; :data:`workstation.protocol.childenv.INPUT_BUDGET`, set by the runner from the
    parent's ``input_budget`` setting) when set; on CUDA half of the device's free memory
    (``torch.cuda.mem_get_info``); on the CPU half of the host's available memory
    (``MemAvailable`` in ``/proc/meminfo``, else physical memory), at most
    :data:`CPU_INPUT_BUDGET` (8 GiB: inputs that large would take hours under the Triton
    interpreter) and at most half of the address-space limit when one is set. The candidate and the reference need room
    for their outputs and workspace beside the inputs, hence the half."""
    env = os.environ.get(childenv.INPUT_BUDGET)
    if env:
        try:
            return max(1, int(float(env)))
        except ValueError:
            pass
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free // 2
    avail = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        avail = 0
    if not avail:
        try:
            avail = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            avail = 1 << 34
    budget = min(avail // 2, CPU_INPUT_BUDGET)
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            budget = min(budget, soft // 2)
    except (ImportError, OSError, ValueError):
        pass
    return budget


def gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 28 else f"{n / (1 << 20):.1f} MiB"


def case_text(case: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k} = {v!r}" for k, v in case.items()) + "}"


def storage_bytes(values: Any) -> int:
    """Bytes of the distinct tensor storages in ``values`` (a tuple of inputs)."""
    seen: set[int] = set()
    total = 0
    for v in values if isinstance(values, tuple | list) else (values,):
        if isinstance(v, torch.Tensor):
            try:
                st = v.untyped_storage()
                key = id(st) if v.device.type == "meta" or type(v).__name__ == "FakeTensor" else st.data_ptr()
                if key not in seen:
                    seen.add(key)
                    total += st.nbytes()
            except (RuntimeError, NotImplementedError):
                total += v.numel() * v.element_size()
    return total


def looks_large(case: dict[str, Any], budget: int) -> bool:
    """Whether ``case`` may need a large share of ``budget``: the product of its integer
    parameters, or the square of the largest (a square matrix of one size parameter),
    times 8 bytes reaches a quarter of it."""
    ints = [v for v in case.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if not ints:
        return False
    prod = 1
    for v in ints:
        prod = min(prod * v, 1 << 62)
    return max(prod, max(ints) ** 2) * 8 >= budget // 4


def oom_bytes(e: BaseException) -> int | None:
    """The bytes an out-of-memory error says were asked for (None: not an OOM)."""
    text = str(e)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    m = re.search(r"allocate (\d+) bytes", text)
    if m:
        return int(m.group(1))
    m = re.search(r"allocate ([0-9.]+) (GiB|MiB|KiB)", text)
    if m:
        return int(float(m.group(1)) * {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}[m.group(2)])
    return 0
