"""Poisoned stores (workstation.harness.interp_ops.poisoned_stores, the ``poison_stores``
monitor of ``kernel-work``): every kernel store and atomic writes poison into memory while
the kernels read their own stores back, so kernels compute as in a plain call and only code
outside them sees poison. Runs the interpreter in a fresh Python (the fidelity layer patches
it in-process)."""

from __future__ import annotations

import pytest

from tests.test_fidelity import _run

_KERNELS = """
    import json, msgspec, numpy as np, torch, triton, triton.language as tl
    from workstation.harness import fidelity, interp_ops
    from workstation.protocol.extras.monitors import PoisonStoresReport
    fidelity.install()

    @triton.jit
    def k_scale(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < n
        tl.store(y + o, tl.load(x + o, mask=m) * 2, mask=m)

    @triton.jit
    def k_idx(idx, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(idx + o, (n - 1 - o).to(tl.int32), mask=o < n)

    @triton.jit
    def k_gather(x, idx, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < n
        i = tl.load(idx + o, mask=m)                      # an index a kernel stored: read back
        tl.store(y + o, tl.load(x + i, mask=m), mask=m)

    @triton.jit
    def k_lock(x, acc, lock, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        s = tl.sum(tl.load(x + o, mask=o < n, other=0.0))
        while tl.atomic_cas(lock, 0, 1) == 1:           # a spin lock: it must not hang
            pass
        tl.store(acc, tl.load(acc) + s)
        tl.atomic_xchg(lock, 0)

    @triton.jit
    def k_atomic(x, acc, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.atomic_add(acc, tl.sum(tl.load(x + o, mask=o < n, other=0.0)))

    @triton.jit
    def k_bf16_twopass(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < n
        tl.store(y + o, tl.load(x + o, mask=m) + 1.0, mask=m)
        tl.store(y + o, tl.load(y + o, mask=m) * 2, mask=m)

    @triton.jit
    def k_desc(xd, yd):
        r = tl.program_id(0)
        yd.store([r, 0], xd.load([r, 0]) + 1)

    x = torch.randn(100, generator=torch.Generator().manual_seed(0))

    def cases():
        def scale():
            y = torch.empty(100); k_scale[(4,)](x, y, 100, B=32); return y
        def gather():
            idx = torch.empty(100, dtype=torch.int32); y = torch.empty(100)
            k_idx[(4,)](idx, 100, B=32); k_gather[(4,)](x, idx, y, 100, B=32); return y
        def lock():
            acc = torch.zeros(1); lk = torch.zeros(1, dtype=torch.int32)
            k_lock[(4,)](x, acc, lk, 100, B=32); return acc
        def atomic():
            acc = torch.zeros(1); k_atomic[(4,)](x, acc, 100, B=32); return acc
        def bf16():
            y = torch.empty(100, dtype=torch.bfloat16); k_bf16_twopass[(4,)](x.bfloat16(), y, 100, B=32)
            return y
        def desc():  # tensor descriptors (TMA): their stores too
            from triton.tools.tensor_descriptor import TensorDescriptor
            y = torch.empty(5, 20)
            k_desc[(5,)](TensorDescriptor.from_tensor(x.view(5, 20), [1, 32]), TensorDescriptor.from_tensor(y, [1, 32]))
            return y
        def tail():  # whole tiles by the kernel, the ragged tail by torch
            y = torch.empty(100); k_scale[(3,)](x, y, 96, B=32); y[96:] = x[96:] * 2; return y
        def cast():  # the kernel's output cast by torch: it depends on the kernel's stores
            y = torch.empty(100); k_scale[(4,)](x, y, 100, B=32); return y.to(torch.float16)
        return [scale, gather, lock, atomic, bf16, desc, tail, cast]
"""


@pytest.mark.slow
def test_poisoned_stores_reach_outside_code_only():
    got = _run(_KERNELS + """
    out = {}
    for f in cases():
        plain = f()
        rep = PoisonStoresReport()
        seen = {}
        with interp_ops.poisoned_stores(rep):
            pois = f()
        unchanged = (plain == pois) | (torch.isnan(plain) & torch.isnan(pois))
        out[f.__name__] = {"unchanged": int(unchanged.sum()), "n": plain.numel(), "rep": msgspec.to_builtins(rep)}
    print(json.dumps(out))
    """)
    for name in ("scale", "gather", "lock", "atomic", "bf16", "desc", "cast"):
        assert got[name]["unchanged"] == 0, (name, got[name])
    assert got["tail"]["unchanged"] == 4  # the 4 elements torch wrote
    assert got["gather"]["rep"]["restored"] == 100  # the stored indices read back unpoisoned
    assert got["atomic"]["rep"]["atomics"] == 4 and got["lock"]["rep"]["atomics"] >= 8


@pytest.mark.slow
def test_kernels_compute_as_in_a_plain_call_under_poison():
    """What the kernels stored (the shadow) is bit for bit what a plain call leaves in memory,
    multi-kernel pipelines, atomics, locks and re-read bf16 stores included."""
    got = _run(_KERNELS + """
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    out = {}
    for f in cases()[:6]:
        plain = f()
        with interp_ops.poisoned_stores():
            pois = f()
            size = pois.element_size()
            addrs = np.arange(pois.numel(), dtype=np.uint64) * np.uint64(size) + np.uint64(pois.data_ptr())
            found, bits = interp_ops._lookup(addrs)
            host = pois.clone()
        want = plain.contiguous().view(-1).view(getattr(torch, f"uint{8 * size}") if size > 1 else torch.uint8)
        out[f.__name__] = {"found": bool(found.all()),
                           "same": bool(np.array_equal(bits.astype(uint[size]), want.numpy().astype(uint[size]))),
                           "host_poison": bool(torch.isnan(host.float()).all())}
    print(json.dumps(out))
    """)
    for name, v in got.items():
        assert v == {"found": True, "same": True, "host_poison": True}, (name, v)


@pytest.mark.slow
def test_poison_is_off_outside_the_block_and_counts_are_reported():
    got = _run(_KERNELS + """
    f = cases()[0]
    rep = PoisonStoresReport()
    with interp_ops.poisoned_stores(rep):
        f()
    after = f()
    print(json.dumps({"rep": msgspec.to_builtins(rep), "after_finite": bool(torch.isfinite(after).all()),
                      "shadow": len(interp_ops._stores["shadow"])}))
    """)
    assert got["after_finite"] and got["shadow"] == 0
    assert got["rep"]["stores"] == 4 and got["rep"]["elements"] == 100 and got["rep"]["exempt"] == 0
