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

from workstation.harness import libdevice, lowprec
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
    got = lowprec.f32_to_bf16(x.numpy())
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got, want)
    assert np.array_equal(lowprec.bf16_to_f32(want), x.to(torch.bfloat16).float().numpy())


def test_libdevice_symbols_map_to_numpy():
    assert libdevice.libdevice_function("__nv_tanhf")[0] == "tanh"
    assert libdevice.libdevice_function("__nv_fast_expf")[0] == "exp"
    assert libdevice.libdevice_function("__nv_rsqrtf")[0] == "rsqrt"
    assert libdevice.libdevice_function("__nv_fmaf_rn")[0] == "fma"
    assert libdevice.libdevice_function("__nv_isnanf")[0] == "isnan"
    assert libdevice.libdevice_function("__nv_fadd_rz") is None  # directed rounding: not emulated
    assert libdevice.libdevice_function("__nv_brev") is None


def test_scalar_output_keeps_shape_empty():
    meta, arr = encode_tensor(torch.tensor(3.5))
    assert meta.shape == [] and arr.shape == ()


@pytest.mark.slow
def test_selftest_passes_under_the_fidelity_layer_and_fails_without():
    got = _run("""
        import json, msgspec
        from workstation.harness.selftest import interpreter_selftest
        before = interpreter_selftest()
        from workstation.harness import fidelity
        fidelity.install()
        after = interpreter_selftest()
        flat = lambda st: {name: msgspec.to_builtins(p) for name, p in st.items()}  # item name -> its result
        print(json.dumps({"before": flat(before), "after": flat(after)}))
    """)
    before, after = got["before"], got["after"]
    assert not before["bfloat16"]["ok"] and not before["scalar_args"]["ok"] and not before["libdevice"]["ok"]
    for k in ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2", "scalar_args", "libdevice"):
        assert after[k]["ok"], (k, after[k])


@pytest.mark.slow
def test_masked_loads_without_other_read_poison():
    got = _run("""
        import json, msgspec, torch, triton, triton.language as tl
        from workstation.harness import fidelity
        from workstation.protocol.extras.monitors import PoisonMaskedLoadsReport
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
        rep = PoisonMaskedLoadsReport()
        with fidelity.poisoned_masked_loads(rep):
            k[(1,)](x, y, 10, B=16)
        print(json.dumps({"plain": plain, "poison": [str(v) for v in y.tolist()], "rep": msgspec.to_builtins(rep)}))
    """)
    assert got["plain"] == [10.0, 10.0]
    assert got["poison"][0] == "nan" and got["poison"][1] == "10.0"
    assert got["rep"]["poisoned_lanes"] == 6  # the 6 masked lanes of the load without other=


# ----------------------------------------------------------------------------- device stand-in


def test_device_stand_in_answers_as_the_declared_target():
    """Without CUDA, in the job child: Triton's active driver, torch.accelerator and
    torch.cuda answer as the task's declared target (H100 by default, H200 from
    [target] device), each call counted; torch's own code keeps seeing the CPU."""
    out = _run("""
        import json, types
        import torch, triton
        from workstation.harness import fidelity, standin
        patched = fidelity.device_stand_in()
        standin.job_target(types.SimpleNamespace(target="H200"))  # the job file's target
        t = triton.runtime.driver.active.get_current_target()
        props = torch.cuda.get_device_properties(0)
        with torch.random.fork_rng():  # torch's own caller of torch.cuda.device_count: the real 0
            pass
        rec = fidelity.take_standin_calls()
        standin.job_target(types.SimpleNamespace(target=None))
        print(json.dumps({
            "patched": patched, "target": [t.backend, t.arch, t.warp_size], "name": props.name,
            "total_memory": props.total_memory, "sms": props.multi_processor_count,
            "cap": list(torch.cuda.get_device_capability()), "count": torch.cuda.device_count(),
            "acc": [torch.accelerator.is_available(), str(torch.accelerator.current_accelerator()),
                    torch.accelerator.device_count()],
            "smem": triton.runtime.driver.active.utils.get_device_properties(0)["max_shared_mem"],
            "torch_device": str(triton.runtime.driver.active.get_active_torch_device()),
            "rec": rec, "default": torch.cuda.get_device_name(), "cuda_available": torch.cuda.is_available()}))
    """)
    assert "triton.runtime.driver.active" in out["patched"] and "torch.accelerator.current_accelerator" in out["patched"]
    assert out["target"] == ["cuda", 90, 32]
    assert out["name"] == "NVIDIA H200" and out["total_memory"] == 143771 * 2**20 and out["sms"] == 132
    assert out["rec"]["target"] == "H200"
    assert out["rec"]["calls"] == {"triton.runtime.driver.active.get_current_target": 1,
                                   "torch.cuda.get_device_properties": 1}  # fork_rng's call is torch's, not counted
    assert out["default"] == "NVIDIA H100 80GB HBM3"  # a task that declares no target
    assert out["cap"] == [9, 0] and out["count"] == 1 and out["acc"] == [True, "cuda", 1]
    assert out["smem"] == 232448 and out["torch_device"] == "cpu" and out["cuda_available"] is False


def test_device_stand_in_limits_are_named_not_blamed():
    """What the stand-in cannot give (a CUDA tensor, a driver call that launches) raises;
    limit_of tells the harness it is the stand-in's limit, and error_info carries it as
    device_standin_limit (the parent then does not judge: engine.context)."""
    out = _run("""
        import json
        import torch, triton
        from workstation.harness import fidelity
        from workstation.harness.core import error_info
        fidelity.device_stand_in()
        res = {}
        try:
            torch.zeros(4, device="cuda:0")
        except Exception as e:
            res["tensor"] = fidelity.limit_of(e)
            res["info"] = error_info(e, "import").as_evidence().get("device_standin_limit")
        try:
            triton.runtime.driver.active.launcher_cls
        except fidelity.DeviceStandInLimit as e:
            res["driver"] = fidelity.limit_of(e)
        res["plain"] = fidelity.limit_of(ValueError("shapes do not match"))
        print(json.dumps(res))
    """)
    assert "cannot place tensors" in out["tensor"] and out["info"] == out["tensor"]
    assert "launcher_cls needs a GPU driver" in out["driver"]
    assert out["plain"] is None


def test_device_targets_table_and_declared_target():
    from workstation.protocol.devices import (
        DEFAULT_TARGET,
        DEVICE_TARGETS,
        declared_target,
        device_target,
    )
    from workstation.task.model import DEVICE_TARGET_NAMES

    assert set(DEVICE_TARGET_NAMES) == set(DEVICE_TARGETS) and DEFAULT_TARGET == "H100"
    assert device_target(None).arch == 90 and device_target("A100").arch == 80
    assert device_target("H100").triton_properties()["multiprocessor_count"] == 132
    assert declared_target("H200") == "H200"
    assert declared_target("B200") == "H100"  # the loader refuses it; the child falls back
    assert declared_target(None) == "H100"


def test_the_loader_reads_the_declared_target_for_the_job_file(tmp_path):
    """task.toml's ``[target] device`` is read by the parent's loader (the schema layer)
    and carried to the job child by the job file (``Job.target``), never parsed there."""
    import msgspec

    from tests.conftest import TASK_TOML, write_task
    from workstation.protocol.steps import Job, encode_job
    from workstation.schema.problem import Problem
    from workstation.task.format import load_task

    base = TASK_TOML.format(id="add", status="pass", failure_class="")
    t = load_task(write_task(tmp_path / "a", toml=base + '\n[target]\ndevice = "H200"\n'))
    assert t.extensions.target == "H200"
    assert load_task(write_task(tmp_path / "b", toml=base)).extensions.target is None
    with pytest.raises(Problem) as ei:
        load_task(write_task(tmp_path / "c", toml=base + '\n[target]\ndevice = "B200"\n'))
    assert ei.value.key == "target.device"
    job = Job(task_dir="/t", out_dir="/o", steps=[], target=t.extensions.target)
    assert msgspec.json.decode(encode_job(job), type=Job).target == "H200"
