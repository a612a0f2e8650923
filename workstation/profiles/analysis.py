"""What a profile says: the candidate's own kernels, time shares, launches per call, and
where the work sits on the device's roofline. Pure functions on :class:`Profile` data; the
checks (``profile``, ``profile-attached``) turn them into findings and the report's
``profile`` key.

Kernel names are compared after :func:`kernel_base`: the part before any ``(`` or ``<``,
without a leading ``void`` and namespaces, so ``void my_kernel<float>(float*, int)``,
``my_kernel`` and ``ns::my_kernel`` match, and a kernel matches an own name it starts
with (Triton before 3.0 appended a signature suffix such as ``_0d1d2de``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from workstation.analysis.roofline import DTYPE_CLASS, gpu_peaks
from workstation.profiles.model import KernelStat, Profile

#: aten ops that launch no kernel (views, metadata, allocation): not counted as launches
#: when kernels are counted from host ops (on the CPU, where no device events exist).
NO_KERNEL_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "_unsafe_view", "reshape",
    "as_strided", "expand", "permute", "transpose", "t", "select", "slice", "unsqueeze", "squeeze", "detach",
    "alias", "lift_fresh", "_reshape_alias", "split", "split_with_sizes", "chunk", "unbind", "narrow", "flatten",
    "unflatten", "view_as_real", "view_as_complex", "resolve_conj", "resolve_neg", "set_", "resize_",
    "sym_size", "sym_stride", "sym_numel", "size", "stride", "numel", "dim", "is_contiguous", "contiguous",
    "expand_as", "view_as", "item", "_local_scalar_dense", "promote_types", "result_type", "is_floating_point",
    "is_complex", "is_nonzero", "equal", "_has_compatible_shallow_copy_type", "lift_fresh_copy",
}
_PREFIXES = ("aten::", "aten.", "torch.nn.functional.", "torch.", "F.", "prims::")


def op_base(name: str) -> str:
    """``aten::mm`` / ``aten.mm.default`` / ``torch.matmul`` / ``F.linear`` -> ``mm`` /
    ``mm`` / ``matmul`` / ``linear`` (the name a task's list of delegated ops uses)."""
    n = name.strip()
    for p in _PREFIXES:
        if n.startswith(p):
            n = n[len(p):]
            break
    return n.split(".")[0]


def kernel_base(name: str) -> str:
    """A kernel name without return type, namespaces, template and parameter lists."""
    n = name.strip()
    if n.startswith("void "):
        n = n[5:]
    n = re.split(r"[(<]", n, maxsplit=1)[0]
    return n.rsplit("::", 1)[-1].strip()


def is_own(kernel: str, own: Iterable[str]) -> bool:
    """True when ``kernel`` is one of the candidate's own kernels (module doc)."""
    k = kernel_base(kernel)
    return any(k == o or (len(o) >= 3 and k.startswith(o)) for o in (kernel_base(x) for x in own) if o)


def is_delegated(op: str, delegated: Iterable[str], family_of: Callable[[str], str | None] | None = None) -> bool:
    """True when framework op ``op`` is one the task lets the candidate delegate to: its
    base name is listed, or its family (``family_of``) is."""
    base = op_base(op)
    names = {op_base(d) for d in delegated}
    if not names or not base:
        return False
    return base in names or (family_of is not None and family_of(base) in names)


def role_summary(p: Profile, *, own: Iterable[str] = (), delegated: Iterable[str] = (),
                 family_of: Callable[[str], str | None] | None = None, judge_own: bool = True) -> dict[str, Any]:
    """A role's profile as JSON-ready data (the report's ``profile.roles[]``; docs/profiles.md).

    ``own``: the candidate's own kernel names (launch tracing, the extension's
    ``__global__`` names); ``delegated``: framework ops the task allows it to delegate to;
    ``judge_own``: classify kernels as own/framework (the candidate of a non-torch task).
    Times are ns per call; ``share`` is a kernel's fraction of the device time (GPU) or an
    op's fraction of the host op time.
    """
    own = list(own)
    delegated = list(delegated)
    dev_ns = p.device_time_ns()
    kernels = []
    own_ns = fw_ns = del_ns = 0.0
    for k in p.kernels:
        mine = judge_own and k.kind == "kernel" and is_own(k.name, own)
        deleg = (not mine) and bool(k.launched_by) and is_delegated(k.launched_by, delegated, family_of)
        if k.total_ns is not None:
            if mine:
                own_ns += k.total_ns
            elif deleg:
                del_ns += k.total_ns
            elif k.kind == "kernel":
                fw_ns += k.total_ns
        kernels.append({**_stat(k, p.calls, dev_ns), "own": mine if judge_own else None, "delegated": deleg})
    op_ns = sum(o.total_ns or 0.0 for o in p.ops)
    ops = [{**_stat(o, p.calls, op_ns), "delegated": is_delegated(o.name, delegated, family_of)} for o in p.ops]
    launches = p.launches
    if launches is None:  # launch tracing + host ops (the CPU): kernels that would be launched
        launches = sum(k.count for k in p.kernels if k.kind == "kernel") + sum(
            o.count for o in p.ops if op_base(o.name) not in NO_KERNEL_OPS)
        launch_basis = "Triton launches + host ops that launch kernels"
    else:
        launch_basis = "device kernel launches"
    judged = (dev_ns or 0.0) - del_ns
    doc: dict[str, Any] = {
        "role": p.role, "source": p.source, "format": p.format, "device": p.device, "device_kind": p.device_kind,
        "calls": p.calls, "timed": p.timed, "launches_per_call": launches / p.calls if launches is not None else None,
        "launch_basis": launch_basis,
        "device_ns_per_call": p.per_call(dev_ns), "busy_ns_per_call": p.per_call(p.busy_ns),
        "wall_ns_per_call": p.per_call(p.wall_ns),
        "kernels": kernels, "ops": ops, "notes": list(p.notes),
    }
    if judge_own:
        doc["own_kernels"] = sorted({k.name for k in p.kernels if k.kind == "kernel" and is_own(k.name, own)})
        doc["own_kernels_expected"] = sorted(set(own))
        if p.timed:
            doc.update(own_ns_per_call=p.per_call(own_ns), framework_ns_per_call=p.per_call(fw_ns),
                       delegated_ns_per_call=p.per_call(del_ns),
                       own_share=own_ns / judged if judged > 0 else None)
    return doc


def _stat(k: KernelStat, calls: int, total: float | None) -> dict[str, Any]:
    d = k.as_dict()
    d["per_call"] = k.count / max(1, calls)
    d["mean_ns"] = k.mean_ns
    d["share"] = (k.total_ns / total) if (k.total_ns is not None and total) else None
    return d


def device_peaks(device: str, device_info: Mapping[str, Any] | None = None, dtype: str = "") -> dict[str, Any] | None:
    """The peaks to place a profile's kernels against: the datasheet peaks of ``device``
    (:func:`workstation.analysis.roofline.gpu_peaks`), else proton's derived bandwidth.
    ``flops`` is the peak of ``dtype``'s class (the highest peak of the device when the
    dtype is not known: a true upper bound). ``None`` when nothing is known."""
    peaks = gpu_peaks(device) if device else None
    if peaks is not None:
        cls = DTYPE_CLASS.get(dtype)
        pf = peaks.flops.get(cls) if cls else max(peaks.flops.values())
        return {"bandwidth": peaks.bandwidth, "flops": pf, "flops_class": cls or "max",
                "source": f"{peaks.model} datasheet ({peaks.source})"}
    bw = (device_info or {}).get("peak_bandwidth")
    if isinstance(bw, int | float) and bw > 0:
        return {"bandwidth": float(bw), "flops": None, "flops_class": None,
                "source": "proton's device record (2 x bus width x memory clock)"}
    return None


def roofline_position(nbytes: float | None, flops: float | None, ns: float | None,
                      peaks: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Achieved bandwidth (bytes/s) and FLOP/s of work that took ``ns``, and their
    fractions of ``peaks``; ``None`` without a time or any work."""
    if not ns or ns <= 0 or (nbytes is None and flops is None):
        return None
    s = ns * 1e-9
    out: dict[str, Any] = {"bytes": nbytes, "flops": flops, "ns": ns,
                           "bandwidth": nbytes / s if nbytes is not None else None,
                           "flops_per_s": flops / s if flops is not None else None,
                           "intensity": flops / nbytes if flops is not None and nbytes else None}
    if peaks:
        out["peak_bandwidth"] = peaks.get("bandwidth")
        out["peak_flops"] = peaks.get("flops")
        out["peaks_source"] = peaks.get("source")
        out["bandwidth_fraction"] = (out["bandwidth"] / peaks["bandwidth"]
                                     if out["bandwidth"] is not None and peaks.get("bandwidth") else None)
        out["flops_fraction"] = (out["flops_per_s"] / peaks["flops"]
                                 if out["flops_per_s"] is not None and peaks.get("flops") else None)
    return out


def kernel_rooflines(p: Profile, peaks: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """:func:`roofline_position` of every timed kernel of ``p`` with bytes or FLOPs."""
    out = []
    for k in p.device_kernels:
        pos = roofline_position(k.bytes, k.flops, k.total_ns, peaks)
        if pos is not None:
            out.append({"name": k.name, **pos})
    return out


def names_overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    """True when some kernel of ``a`` matches some kernel of ``b`` (:func:`is_own` rule)."""
    bs = list(b)
    return any(is_own(x, bs) or is_own(y, [x]) for x in a for y in bs)


def finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
