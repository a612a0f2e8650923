"""The ``cuda_build`` step: a CUDA candidate's sources captured, compiled with nvcc and
disassembled, without a GPU.

A ``cuda`` candidate is a Python module that builds its kernel with
``torch.utils.cpp_extension.load_inline`` (or ``load``) and exposes the callable (task format
v1). On a GPU box that build and the run are the candidate's own. On a machine without a
GPU (``load_inline`` links against a CUDA build of torch, which a CPU machine lacks) this
step:

1. replaces ``load_inline`` and ``load`` with a recorder that keeps the build's arguments
   (name, ``cuda_sources`` / the ``.cu`` files of ``sources``, ``cpp_sources``,
   ``extra_cuda_cflags``, ``extra_include_paths``, ``no_implicit_headers``) and raises
   :class:`KwsBuildCaptured`, then imports the role's module (a build at import) and, if no
   build was seen, calls the role once on the step's case (a lazy build on first call);
2. writes each CUDA source as ``load_inline`` would (``#include <torch/types.h>``,
   ``<cuda.h>``, ``<cuda_runtime.h>`` first unless ``no_implicit_headers``) and compiles it
   with -lineinfo (PTX .loc lines name the source line of each instruction) and ``nvcc -fatbin -gencode arch=compute_XX,code=[sm_XX,compute_XX] -Xptxas -v`` with
   torch's extension flags (``COMMON_NVCC_FLAGS``, ``-std=c++17``, torch's include folders)
   and the build's own flags (an ``-arch``/``-gencode`` among them picks the target);
   otherwise the step's ``arch``, else ``sm_90``, ``sm_90a`` where the source mentions
   ``wgmma`` or ``setmaxnreg`` (Hopper's arch-specific instructions);
3. reads the fat binary with ``cuobjdump -sass`` and ``-ptx`` (PATH, ``$CUDA_HOME/bin``, or
   the PyPI ``nvidia-cuda-cuobjdump`` package) and demangles kernel names with ``c++filt``
   when it is installed.

``extra`` (:class:`~workstation.protocol.extras.backends.CudaBuildExtra`): ``builds``: per
captured build ``name``, ``via`` (``load_inline`` / ``load``), ``functions``, ``sources``
(per CUDA source: ``file``, ``lines``, ``sha256``, ``text``), ``flags``, ``target`` and
``target_reason``, and per source a ``compile`` record (``ok``, ``returncode``,
``command``, ``log`` (nvcc and ptxas output), ``seconds``, ``sass``, ``ptx``, ``names``
(mangled -> demangled), ``cached``). ``tools``: the nvcc and cuobjdump paths and nvcc's
version line, or why they are missing. Results are
cached under ``$TRITON_CACHE_DIR/../kws-cuda/`` by the source, flags, target and nvcc
version. The parent reads the texts (``workstation.checks.support.cuda_read``).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from workstation.harness import StepOutput, step
from workstation.protocol.extras.backends import (
    CapturedBuild,
    CudaBuildExtra,
    CudaSource,
    CudaTools,
    NvccCompile,
)
from workstation.protocol.results import encodable
from workstation.protocol.steps import CudaBuildStep

#: the largest SASS / PTX text sent back per source (characters).
MAX_TEXT = 600_000
_ARCH_FLAG = re.compile(r"(?:sm|compute)_(\d+a?)")
_IMPLICIT = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


class KwsBuildCaptured(RuntimeError):
    """Raised in place of an extension build whose sources kws captured (no GPU here)."""


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, list | tuple) else [v]


def _function_names(functions: Any) -> list[str]:
    """The names of ``load_inline``'s ``functions`` (a name, a list of names, or a dict of
    name -> docstring)."""
    if isinstance(functions, dict):
        return [str(k) for k in functions]
    return [str(f) for f in _as_list(functions)]


@contextlib.contextmanager
def capturing(builds: list[dict[str, Any]], task_dir: Path) -> Iterator[None]:
    """Replace ``load_inline``/``load`` with recorders that append to ``builds`` and raise
    :class:`KwsBuildCaptured` (restored on exit)."""
    import torch.utils.cpp_extension as ext

    saved = {n: getattr(ext, n) for n in ("load", "load_inline")}

    def load_inline(name: str, cpp_sources: Any = None, cuda_sources: Any = None, *args: Any, **kw: Any) -> Any:
        cuda = [str(s) for s in _as_list(cuda_sources if cuda_sources is not None else kw.get("cuda_sources"))]
        implicit = not kw.get("no_implicit_headers", False)
        builds.append({"name": str(name), "via": "load_inline", "functions": _function_names(kw.get("functions")),
                       "cpp_sources": [str(s)[:20000] for s in _as_list(cpp_sources)],
                       "cuda": [("cuda.cu", (_IMPLICIT if implicit else "") + "\n".join(cuda))] if cuda else [],
                       "flags": [str(f) for f in _as_list(kw.get("extra_cuda_cflags"))],
                       "include_paths": [str(p) for p in _as_list(kw.get("extra_include_paths"))]})
        raise KwsBuildCaptured(f"kws captured the sources of extension {name!r} (no CUDA build here)")

    def load(name: str, sources: Any = None, *args: Any, **kw: Any) -> Any:
        files = []
        for s in _as_list(sources if sources is not None else kw.get("sources")):
            p = Path(str(s))
            p = p if p.is_absolute() else task_dir / p
            if p.suffix in (".cu", ".cuh") and p.is_file():
                files.append((os.path.relpath(p, task_dir), p.read_text(errors="replace")))
        builds.append({"name": str(name), "via": "load", "functions": [], "cpp_sources": [], "cuda": files,
                       "flags": [str(f) for f in _as_list(kw.get("extra_cuda_cflags"))],
                       "include_paths": [str(p) for p in _as_list(kw.get("extra_include_paths"))]})
        raise KwsBuildCaptured(f"kws captured the sources of extension {name!r} (no CUDA build here)")

    ext.load_inline = load_inline
    ext.load = load
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(ext, n, fn)


def find_tool(name: str) -> str | None:
    """``name`` on PATH, under ``$CUDA_HOME``/``/usr/local/cuda``, or in an ``nvidia-cuda-*``
    PyPI package (``site-packages/nvidia/*/bin``)."""
    hit = shutil.which(name)
    if hit:
        return hit
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and os.access(os.path.join(base, "bin", name), os.X_OK):
            return os.path.join(base, "bin", name)
    try:
        import nvidia  # the namespace package of NVIDIA's PyPI wheels

        for root in getattr(nvidia, "__path__", []):
            for cand in sorted(glob.glob(os.path.join(root, "*", "bin", name))):
                if os.access(cand, os.X_OK):
                    return cand
    except ImportError:
        pass
    return None


def choose_target(flags: list[str], text: str, requested: str | None) -> tuple[str, str]:
    """The ``sm_XX`` to compile for and why (module doc)."""
    for f in flags:
        m = _ARCH_FLAG.search(f)
        if m and ("arch" in f or "gencode" in f or f.startswith(("sm_", "compute_"))):
            return f"sm_{m.group(1)}", f"the build's own flag {f!r}"
    if requested:
        return requested, "the step's target"
    if "wgmma" in text or "setmaxnreg" in text:
        return "sm_90a", "the source uses wgmma/setmaxnreg (Hopper arch-specific: sm_90a)"
    return "sm_90", "kws's default target (Hopper, sm_90)"


def _user_flags(flags: list[str]) -> list[str]:
    """The build's nvcc flags minus those that choose the target or the output (kws sets
    those): ``-arch``, ``-gencode``, ``-code``, ``-o``, ``-c``."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
            continue
        if f in ("-gencode", "-arch", "-code", "-o", "--generate-code", "--gpu-architecture"):
            skip = True
            continue
        if f.startswith(("-arch=", "-gencode=", "--generate-code=", "--gpu-architecture=", "-code=", "-o")) or f == "-c":
            continue
        out.append(f)
    return out


def _torch_flags() -> list[str]:
    import torch
    import torch.utils.cpp_extension as ext

    inc = os.path.join(os.path.dirname(torch.__file__), "include")
    # Python's headers, as load_inline passes them: a .cu that includes torch/extension.h
    # (the usual KernelBench layout) needs Python.h
    py = sysconfig.get_paths().get("include") or ""
    return [*getattr(ext, "COMMON_NVCC_FLAGS", []), "-std=c++17", f"-I{inc}",
            f"-I{os.path.join(inc, 'torch', 'csrc', 'api', 'include')}", *([f"-I{py}"] if py else [])]


def _cache_file(key: str) -> Path | None:
    base = os.environ.get("TRITON_CACHE_DIR")
    return Path(base).parent / "kws-cuda" / f"{key}.json" if base else None


def _demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {}
    try:
        p = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    got = p.stdout.splitlines()
    return dict(zip(names, got, strict=False)) if len(got) == len(names) else {}


def compile_source(text: str, file: str, flags: list[str], target: str, include_paths: list[str], task_dir: Path,
                   nvcc: str, cuobjdump: str | None, timeout: float, nvcc_version: str) -> NvccCompile:
    """Compile one CUDA source for ``target`` and read it back (module doc)."""
    arch = target.removeprefix("sm_")
    user = _user_flags(flags)
    # 3: the entry is an NvccCompile (an older one would not decode: a miss either way)
    key = hashlib.sha256(json.dumps([text, user, target, include_paths, nvcc_version, 3]).encode()).hexdigest()[:32]
    cfile = _cache_file(key)
    if cfile is not None and cfile.is_file():
        try:  # an entry that does not decode (another kws wrote it): a miss
            got = msgspec.convert(json.loads(cfile.read_text()), type=NvccCompile)
            got.cached = True
            return got
        except (OSError, ValueError):
            pass
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kws-cuda-") as tmp:
        src = Path(tmp) / Path(file).name
        src.write_text(text)
        out = Path(tmp) / "k.fatbin"
        cmd = [nvcc, "-fatbin", "-gencode", f"arch=compute_{arch},code=[sm_{arch},compute_{arch}]", "-Xptxas", "-v",
               "-O3", "-lineinfo", *_torch_flags(), f"-I{task_dir}", *[f"-I{p}" for p in include_paths], *user,
               "-o", str(out), str(src)]
        rec: dict[str, Any] = {"command": " ".join(cmd[:1] + [c for c in cmd[1:] if not c.startswith("-I")]),
                               "target": target}
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
            rec.update(ok=p.returncode == 0 and out.is_file(), returncode=p.returncode,
                       log=(p.stdout + p.stderr).replace(tmp + "/", "")[-60000:])
        except subprocess.TimeoutExpired:
            rec.update(ok=False, returncode=None, timed_out=True, log=f"nvcc did not finish within {timeout:g} s")
        rec["seconds"] = time.perf_counter() - t0
        if rec["ok"] and cuobjdump:
            for what in ("sass", "ptx"):
                try:
                    q = subprocess.run([cuobjdump, f"-{what}", str(out)], capture_output=True, text=True, timeout=120)
                    rec[what] = q.stdout[:MAX_TEXT]
                    if q.returncode:
                        rec[f"{what}_error"] = q.stderr[-2000:]
                except (OSError, subprocess.TimeoutExpired) as e:
                    rec[f"{what}_error"] = f"{type(e).__name__}: {e}"
            names = sorted(set(re.findall(r"Function : (\S+)", rec.get("sass", ""))))
            rec["names"] = _demangle(names)
    rec["cached"] = False
    result = msgspec.convert(rec, type=NvccCompile)
    if cfile is not None and result.returncode is not None:
        try:
            cfile.parent.mkdir(parents=True, exist_ok=True)
            tmpf = cfile.with_suffix(f".tmp{os.getpid()}")
            tmpf.write_text(json.dumps(encodable(result)))
            os.replace(tmpf, cfile)
        except OSError:
            pass
    return result


@step(CudaBuildStep)
def cuda_build_step(ctx: Any, spec: CudaBuildStep) -> StepOutput:
    """Capture, compile and read the role's CUDA sources (module doc)."""
    from workstation.harness.core import error_info

    t0 = time.perf_counter()
    task_dir = Path(ctx.task_dir)
    builds: list[dict[str, Any]] = []
    role_error = None
    with capturing(builds, task_dir):
        try:
            fn = ctx.callable(spec.role)
            if not builds:
                inputs = ctx.make_inputs(spec.case, spec.seed)
                fn(*inputs)
        except BaseException as e:  # noqa: BLE001  (the capture itself raises)
            if not builds:
                role_error = error_info(e, getattr(e, "_kws_phase", "call"))
    nvcc = find_tool("nvcc")
    cuobjdump = find_tool("cuobjdump")
    tools = CudaTools(nvcc=nvcc, cuobjdump=cuobjdump)
    if nvcc:
        try:
            v = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
            tools.nvcc_version = next((ln for ln in v.splitlines() if "release" in ln), v.strip()[-200:])
        except (OSError, subprocess.TimeoutExpired) as e:
            tools.nvcc_error = f"{type(e).__name__}: {e}"
    out = []
    for b in builds:
        text_all = "\n".join(t for _, t in b["cuda"])
        target, why = choose_target(b["flags"], text_all, spec.arch)
        entry = CapturedBuild(name=b["name"], via=b["via"], functions=b["functions"], flags=b["flags"],
                          include_paths=b["include_paths"], target=target, target_reason=why,
                          cpp_sources=b["cpp_sources"])
        for file, text in b["cuda"]:
            src = CudaSource(file=file, lines=text.count("\n") + 1, sha256=hashlib.sha256(text.encode()).hexdigest(),
                             text=text[:200000])
            if nvcc:
                version = tools.nvcc_version if isinstance(tools.nvcc_version, str) else ""
                src.compile = compile_source(text, file, b["flags"], target, b["include_paths"], task_dir, nvcc,
                                             cuobjdump, spec.timeout, version)
            entry.sources.append(src)
        out.append(entry)
    return StepOutput(ok=True, extra=CudaBuildExtra(builds=out, tools=tools, seconds=time.perf_counter() - t0,
                                                    role_error=role_error))
