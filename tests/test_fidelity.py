"""The interpreter fidelity layer (workstation.harness.fidelity), the formats it
decodes, the self-test, masked-load poison and scalar outputs.

The layer patches the Triton interpreter in-process, so everything that needs
``TRITON_INTERPRET=1`` runs in a fresh Python (``_run``), never in the test process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from workstation.harness import fidelity
from workstation.harness.core import encode_tensor


def _run(code: str) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_bf16_encoding_rounds_to_nearest_even_like_torch():
    x = torch.randn(10000, generator=torch.Generator().manual_seed(0)) * 3
    x = torch.cat([x, torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.4e38, float("inf"), -0.0])])
    got = fidelity.f32_to_bf16(x.numpy())
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got, want)
    assert np.array_equal(fidelity.bf16_to_f32(want), x.to(torch.bfloat16).float().numpy())


def test_libdevice_symbols_map_to_numpy():
    assert fidelity.libdevice_function("__nv_tanhf")[0] == "tanh"
    assert fidelity.libdevice_function("__nv_fast_expf")[0] == "exp"
    assert fidelity.libdevice_function("__nv_rsqrtf")[0] == "rsqrt"
    assert fidelity.libdevice_function("__nv_fmaf_rn")[0] == "fma"
    assert fidelity.libdevice_function("__nv_isnanf")[0] == "isnan"
    assert fidelity.libdevice_function("__nv_fadd_rz") is None  # directed rounding: not emulated
    assert fidelity.libdevice_function("__nv_brev") is None


def test_scalar_output_keeps_shape_empty():
    meta, arr = encode_tensor(torch.tensor(3.5))
    assert meta["shape"] == [] and arr.shape == ()


@pytest.mark.slow
def test_selftest_passes_under_the_fidelity_layer_and_fails_without():
    got = _run("""
        import json
        from workstation.harness.selftest import interpreter_selftest
        before = interpreter_selftest()
        from workstation.harness import fidelity
        fidelity.install()
        after = interpreter_selftest()
        print(json.dumps({"before": before, "after": after}))
    """)
    before, after = got["before"], got["after"]
    assert not before["bfloat16"]["ok"] and not before["scalar_args"]["ok"] and not before["libdevice"]["ok"]
    for k in ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "scalar_args", "libdevice"):
        assert after[k]["ok"], (k, after[k])


@pytest.mark.slow
def test_masked_loads_without_other_read_poison():
    got = _run("""
        import json, torch, triton, triton.language as tl
        from workstation.harness import fidelity
        fidelity.install()

        @triton.jit
        def k(x_ptr, y_ptr, N, B: tl.constexpr):
            o = tl.arange(0, B)
            a = tl.load(x_ptr + o, mask=o < N)              # no other=: undefined lanes
            b = tl.load(x_ptr + o, mask=o < N, other=0.0)   # defined
            tl.store(y_ptr, tl.sum(a, axis=0))
            tl.store(y_ptr + 1, tl.sum(b, axis=0))

        x = torch.ones(10); y = torch.zeros(2)
        k[(1,)](x, y, 10, B=16)
        plain = y.tolist()
        rep = {}
        with fidelity.poisoned_masked_loads(rep):
            k[(1,)](x, y, 10, B=16)
        print(json.dumps({"plain": plain, "poison": [str(v) for v in y.tolist()], "rep": rep}))
    """)
    assert got["plain"] == [10.0, 10.0]
    assert got["poison"][0] == "nan" and got["poison"][1] == "10.0"
    assert got["rep"]["poisoned_lanes"] == 6  # the 6 masked lanes of the load without other=
