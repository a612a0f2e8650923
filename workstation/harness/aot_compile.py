"""The AOT compile child: compiles recorded Triton launches for a GPU target without a GPU.

Run as ``python -m workstation.harness.aot_compile [--preload CANDIDATE.py]`` with
``TRITON_INTERPRET`` removed from its environment (the ``triton_aot`` step starts it). It
reads a JSON request on stdin (``task_dir``, ``launches``: records of
:mod:`workstation.harness.aot_capture`, ``targets``: ``[backend, arch, warp size]``
lists), imports each launch's file by path, finds the kernel's ``JITFunction``, compiles it
with ``ASTSource(fn, signature, constexprs)`` for each target (Triton's stage pipeline up to
PTX; ptxas is not needed) and writes the :func:`workstation.harness.ir.analyze` of each
compile as JSON on stdout. ``--preload`` imports the candidate (torch, triton, its
kernels) while the job child is still capturing launches.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from workstation.harness.ir import analyze

#: launch keyword arguments that are compile options (a launch record's ``options``).
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")


def task_relative(path: str, task_dir: Path) -> str:
    """``path`` relative to the task folder when it lies in it, else unchanged."""
    try:
        return str(Path(path).resolve().relative_to(task_dir.resolve()))
    except ValueError:
        return path


def run_child(task_dir: Path, req: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """Run this module as a child on the request ``req`` (module doc) with ``TRITON_INTERPRET``
    removed, in ``task_dir``, for at most ``timeout`` wall seconds: its ``kernels`` list.

    Raises:
        subprocess.TimeoutExpired: the child did not finish in ``timeout`` s.
        ValueError, KeyError, TypeError: it wrote no JSON result with ``kernels``.
    """
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "workstation.harness.aot_compile"], input=json.dumps(req), text=True,
                       capture_output=True, env=env, cwd=str(task_dir), timeout=timeout)
    return json.loads(p.stdout)["kernels"]


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "tl_dtype" in v:
        import triton.language as tl

        name = str(v["tl_dtype"])
        names = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}
        return getattr(tl, names.get(name, name))
    return v


def installed_module_name(path: str) -> str | None:
    """The dotted module name of a file that lies in an installed package (under a
    ``site-packages``/``dist-packages`` entry of ``sys.path``), else None. Such a file is
    imported by name, as the job child imported it, so its package's relative imports and
    ``__init__`` run (``flag_gems/ops/mm.py`` -> ``flag_gems.ops.mm``)."""
    real = Path(os.path.realpath(path))
    for entry in sys.path:
        if not entry or not ("site-packages" in entry or "dist-packages" in entry):
            continue
        try:
            rel = real.relative_to(Path(os.path.realpath(entry)))
        except ValueError:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            return ".".join(parts)
    return None


def _import_by_path(path: str, cache: dict[str, Any]) -> Any:
    import importlib
    import importlib.util

    if path not in cache:
        name = installed_module_name(path)
        if name is not None:
            try:
                cache[path] = importlib.import_module(name)
            except BaseException as e:  # noqa: BLE001
                raise ImportError(f"cannot import the installed module {name} (from {path}) in the AOT child, "
                                  f"which compiles without the interpreter and without a GPU: "
                                  f"{type(e).__name__}: {str(e)[:400]}") from None
            return cache[path]
        stem = Path(path).stem
        spec = importlib.util.spec_from_file_location(stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[stem] = mod
        spec.loader.exec_module(mod)
        cache[path] = mod
    return cache[path]


def _jit_function(mod: Any, qualname: str) -> Any:
    from triton.runtime.jit import JITFunction

    obj: Any = mod
    for part in qualname.split("."):
        if part == "<locals>":
            raise LookupError(f"{qualname} is defined inside a function: not reachable by name")
        obj = getattr(obj, part)
    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            break
    raise LookupError(f"{qualname} is not a triton.jit function")


def compile_launch(rec: dict[str, Any], target: list[Any], modules: dict[str, Any], task_dir: str,
                   ttir_only: bool = False) -> dict[str, Any]:
    """Compile one recorded launch for ``target`` ([backend, arch, warp size]) and analyse it;
    with ``ttir_only``, lower it only to TTIR and return that text (``{"ttir": ...}``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    jit = _jit_function(_import_by_path(rec["file"], modules), rec["qualname"])
    sig, consts = {}, {}
    for name in jit.arg_names:
        t = rec["signature"].get(name)
        if t is None:
            raise KeyError(f"the launch recorded no argument {name!r}")
        sig[name] = t
        if t == "constexpr":
            consts[name] = _decode(rec["constexprs"].get(name))
    opts = {k: v for k, v in rec.get("options", {}).items() if k in LAUNCH_OPTIONS}
    t0 = time.perf_counter()
    src = ASTSource(fn=jit, signature=sig, constexprs=consts)
    if ttir_only:
        ttir = _compile_to_ptx(src, GPUTarget(*target), opts, last="ttir")["ttir"]
        return {"ttir": ttir, "compile_seconds": time.perf_counter() - t0, "compiled_by": "stages ttir"}
    try:
        asm = _compile_to_ptx(src, GPUTarget(*target), opts)
        how = "stages ttir..ptx"
    except Exception:  # noqa: BLE001  (internal API moved: the public entry point, cubin included)
        k = triton.compile(src, target=GPUTarget(*target), options=opts)
        asm = {n: v for n, v in k.asm.items() if n in ("ttir", "ttgir", "ptx") and isinstance(v, str)}
        how = "triton.compile"
    return {"analysis": analyze(asm, task_dir), "compile_seconds": time.perf_counter() - t0, "compiled_by": how}


def _compile_to_ptx(src: Any, target: Any, opts: dict[str, Any], last: str = "ptx") -> dict[str, str]:
    """``triton.compile``'s pipeline (Triton 3.x) run up to PTX: the cubin stage (ptxas) is
    skipped, since kws reads IR and never launches. Uses the backend's stage table, as
    ``triton.compiler.compiler.compile`` does."""
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    options = backend.parse_options(dict(opts, **src.parse_options()))
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)
    metadata: dict[str, Any] = {"hash": src.hash(), "target": target, **options.__dict__}
    out: dict[str, str] = {}
    for ext, stage in stages.items():
        if ext not in ("ttir", "ttgir", "llir", "ptx"):
            break
        module = stage(module, metadata)
        if ext in ("ttir", "ttgir", "ptx"):
            out[ext] = module if isinstance(module, str) else str(module)
        if ext == last:
            break
    if last not in out:
        raise RuntimeError(f"the pipeline produced no {last.upper()}")
    return out


def main() -> None:
    """The AOT child: a JSON request on stdin (``task_dir``, ``launches``, ``targets``), a
    JSON result on stdout (``{"kernels": [...]}``; per launch and target: ``launch``
    (index into ``launches``), ``target``, ``qualname``, ``file`` and
    :func:`compile_launch`'s result or an ``error``). Must run without TRITON_INTERPRET."""
    os.environ.pop("TRITON_INTERPRET", None)
    # packages that ask the device at import (FlagGems) load as in the job child: the
    # device stand-in answers, the interpreter patches stay out (this child compiles)
    from workstation.harness import fidelity

    fidelity.device_stand_in(interpreter_only=False)
    modules: dict[str, Any] = {}
    if len(sys.argv) > 2 and sys.argv[1] == "--preload":
        # import the candidate (torch, triton, its kernels) while the job child is still
        # capturing launches; a failure here is reported per kernel below
        sys.path.insert(0, str(Path(sys.argv[2]).parent))
        try:
            _import_by_path(os.path.realpath(sys.argv[2]), modules)
        except BaseException:  # noqa: BLE001  (task code failed to import: reported per kernel below)
            modules.clear()
    req = json.loads(sys.stdin.read())
    task_dir = req["task_dir"]
    sys.path.insert(0, task_dir)
    kernels = []
    for li, rec in enumerate(req["launches"]):
        for target in req["targets"]:
            entry: dict[str, Any] = {"launch": li, "target": f"{target[0]} sm_{target[1]}",
                                     "qualname": rec["qualname"], "file": task_relative(rec["file"], Path(task_dir))}
            try:
                entry.update(compile_launch(rec, target, modules, task_dir, bool(req.get("ttir_only"))))
            except BaseException as e:  # noqa: BLE001
                entry["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
            kernels.append(entry)
    sys.stdout.write(json.dumps({"kernels": kernels}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
