"""CUDA emulation: a ``cuda`` candidate's extension compiled as host C++ and run on the CPU.

On a machine without a GPU, ``load_inline`` (and ``load``) cannot build a CUDA extension.
Where the kernels are simple enough, this module builds them anyway, as host code with a
small shim (``cuda_emu_include/``, placed before torch's include folders so that its
``cuda_runtime.h``, ``cuda_fp16.h``, ``ATen/cuda/CUDAContext.h``, ``c10/cuda/CUDAGuard.h``
... win), so the whole battery judges the kernel's own index arithmetic, coverage and
accumulation dtype on CPU tensors:

- each CUDA source is rewritten (:mod:`workstation.harness.cuda_rewrite`):
  ``k<<<grid, block[, smem[, stream]]>>>(args)`` becomes a call of the shim's launcher
  (found with a balanced-bracket scanner that skips comments and literals, not a regex),
  ``extern __shared__ T a[]`` the launch's dynamic shared buffer, ``__shared__`` a
  function-scope ``static`` (right because the emulation runs a launch's blocks one at a
  time, in order; such memory is not reset between blocks); after the source's last
  ``#include`` a post-include maps ``is_cuda`` to ``is_cpu`` and ``kCUDA`` to ``kCPU`` (the
  tensors are CPU tensors);
- the shim runs each block's threads as fibers (``ucontext``) so ``__syncthreads()`` is a
  real barrier (a thread that returned is out of it) and warp shuffles and votes meet at a
  warp barrier; a source with no barrier, shuffle or vote runs its threads as plain calls;
  atomics are plain read-modify-writes (threads switch only at barriers); math intrinsics
  (``__expf``, ``__fdividef``, ``rsqrtf``, ``tanhf`` ...) are libm's, NOT the GPU's
  approximate instructions (``cuda-build`` judges ``.approx``/fast-math statically);
  ``__half`` is IEEE binary16 (``_Float16``) with each operation computed in float and
  rounded once (``__hfma``: the float fma rounded to half); ``cudaMalloc``/``cudaMemcpy``/
  ``cudaMemset``/``cudaDeviceSynchronize``/``cudaGetLastError``/``C10_CUDA_KERNEL_LAUNCH_CHECK``
  are host equivalents; a launch a GPU refuses (0 blocks, more than 1024 threads) does not
  run and sets the error ``cudaGetLastError`` returns, as on a GPU;
- the pybind11 bindings of ``functions`` are generated as ``load_inline`` does, and the
  translation units are compiled with g++ (torch's include and library folders, its C++11
  ABI and pybind11 ABI flags, ``-O2``, ``-ffp-contract=fast -mfma`` where the host has FMA:
  nvcc contracts ``a*b+c`` into FMA by default; host-only units at ``-O1``) into
  ``<cache>/kws-cuda-emu/<sha256 of sources, flags, shim version>.so`` through a temporary
  file and an atomic rename (no lock a killed job could leave), under
  :func:`workstation.harness.import_phase` so the compiler's CPU is charged to the job's
  import budget. The cache folder is the run's and principal's (``$TRITON_CACHE_DIR/..``),
  so a run compiles each extension once.

What the emulation cannot run is refused before compiling (:func:`~workstation.harness.cuda_rewrite.unsupported`: inline
``asm``, ``wmma``/``mma``, cooperative groups, textures and surfaces, ``__nanosleep``,
asynchronous copies and ``cuda::`` barriers, CUDA libraries, code conditional on
``__CUDA_ARCH__``, ``cudaLaunchKernel``) or by the compiler: the build raises
:class:`KwsCudaEmulationError` naming the construct, and the harness reports the error with
``cuda_emulation_limit`` (:func:`limit_of`), so the checks that needed a run are not judged,
never failed. Not emulated at all: timing (the timing checks do not judge a CUDA candidate
on the CPU), the GPU's fast-math intrinsics, the memory model and races beyond barrier
order (threads of a block never interleave between barriers here), out-of-bounds reads (not
detected; ``cuda-build`` reads guards statically) and writes (seen only where they land in
kws's guard bands around the outputs, or crash the job).

:func:`install` replaces ``torch.utils.cpp_extension.load_inline``/``load`` in the fork
server (before its snapshot of the watched modules: kws's own patch is the baseline, not
tampering) when the device is the CPU, the ``cuda_emulation`` setting is on
(``KWS_CUDA_EMULATION``, :data:`workstation.protocol.childenv.CUDA_EMULATION`) and g++ is
found; :func:`available` says so for the versions the fork server reports
(``versions["cuda-emu"]``). ``cuda_build``'s recorder replaces the emulating builder for
its own step only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from workstation.harness import excchain
from workstation.harness.cuda_rewrite import (
    KwsCudaEmulationError,
    bindings,
    rewrite_cpp,
    rewrite_cuda,
)
from workstation.protocol import childenv

#: the shim's folder (package data), first on the include path.
SHIM_DIR = Path(__file__).with_name("cuda_emu_include")
#: bumped when the shim or the rewriting changes (part of the cache key).
SHIM_VERSION = 3
#: the prefix of an emulation limit raised from C++ (the shim's ``raise_pending``).
LIMIT_PREFIX = "KwsCudaEmulationError: "
_IMPLICIT_CUDA = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
_IMPLICIT_CPP = "#include <torch/extension.h>\n"
#: per-process state (mutated, never rebound: kws's module namespaces are watched).
_state: dict[str, Any] = {"installed": False, "modules": {}, "builds": [], "gxx": None, "task_dir": None}


# -- building --------------------------------------------------------------------------------

def gxx() -> str | None:
    """The host C++ compiler: ``$CXX`` when it names a g++/c++ found on PATH, else ``g++``."""
    for cand in (os.environ.get("CXX") or "", "g++", "c++"):
        if cand and (hit := shutil.which(cand)):
            return hit
    return None


def gxx_version(path: str | None = None) -> str | None:
    """g++'s first ``--version`` line (``None`` without one)."""
    path = path or gxx()
    if not path:
        return None
    if _state["gxx"] is not None:
        return str(_state["gxx"])
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    got = (p.stdout.splitlines() or ["?"])[0].strip() if p.returncode == 0 else None
    if got:
        _state["gxx"] = got
    return got


def enabled() -> bool:
    """The ``cuda_emulation`` setting as the child sees it (default on)."""
    return os.environ.get(childenv.CUDA_EMULATION, "1").strip().lower() not in ("0", "false", "no", "off")


def available(versions: dict[str, str] | Any) -> bool:
    """Whether the fork server reported the emulation usable (``versions["cuda-emu"]``)."""
    return "cuda-emu" in versions


def host_has_fma() -> bool:
    """Whether this CPU has FMA (``/proc/cpuinfo``'s ``fma`` flag)."""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("flags"):
                    return " fma " in f" {ln.split(':', 1)[1].strip()} "
    except OSError:
        pass
    return False


def _cache_dir() -> Path:
    for var in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR"):
        base = os.environ.get(var)
        if base:
            return Path(base).parent / "kws-cuda-emu"
    return Path(tempfile.gettempdir()) / "kws-cuda-emu"


def compile_flags() -> list[str]:
    """g++ flags shared by every translation unit (module doc)."""
    import sysconfig

    import torch
    import torch.utils.cpp_extension as ext

    flags = ["-std=c++17", "-O2", "-fPIC", "-w", "-fno-strict-aliasing", "-pthread", "-U_FORTIFY_SOURCE"]
    if host_has_fma():
        flags += ["-ffp-contract=fast", "-mfma"]
    else:
        flags += ["-ffp-contract=fast"]
    flags += [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    abi = getattr(ext, "_get_pybind11_abi_build_flags", None)
    if abi is not None:
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch >= 2.9 deprecates it (pybind11 handles its ABI)
            flags += list(abi())
    flags += [f"-I{SHIM_DIR}", *[f"-I{p}" for p in ext.include_paths()], f"-I{sysconfig.get_paths()['include']}"]
    return flags


def _host_flags(flags: list[str]) -> list[str]:
    """The ``-D``/``-U``/``-I`` flags of a build's nvcc or host flags (the rest is nvcc's or
    picks a GPU target: dropped)."""
    out, take = [], False
    for f in flags:
        if take:
            out.append(f)
            take = False
        elif f in ("-D", "-U", "-I"):
            out.append(f)
            take = True
        elif f.startswith(("-D", "-U", "-I")):
            out.append(f)
    return out


def build(name: str, units: list[tuple[str, str, bool]], include_paths: list[str], task_dir: Path,
          flags: list[str], timeout: float = 600.0) -> tuple[Path, dict[str, Any]]:
    """Compile ``units`` (``(file, text, is_cuda)``, texts already rewritten) into one
    extension module and return the ``.so`` and a record (``key``, ``cached``,
    ``seconds``, ``command``).

    Raises:
        KwsCudaEmulationError: g++ is missing, or a unit did not compile or link as host code.
    """
    cxx = gxx()
    if cxx is None:
        raise KwsCudaEmulationError("no host C++ compiler (g++) is installed, so kws cannot emulate CUDA here")
    import torch

    common = compile_flags()
    user = _host_flags(flags)
    incs = [f"-I{p}" for p in include_paths] + [f"-I{task_dir}"]
    shim = sorted((str(p.relative_to(SHIM_DIR)), p.read_text()) for p in SHIM_DIR.rglob("*.h*"))
    key = hashlib.sha256(json.dumps([units, user, include_paths, SHIM_VERSION, shim, gxx_version(cxx),
                                     torch.__version__, common]).encode()).hexdigest()[:32]
    modname = f"kws_cuda_emu_{key[:16]}"
    out = _cache_dir() / f"{key}.so"
    rec: dict[str, Any] = {"name": name, "module": modname, "key": key, "so": str(out), "cached": True, "seconds": 0.0}
    if out.is_file():
        return out, rec
    out.parent.mkdir(parents=True, exist_ok=True)
    # one compile per key even when jobs of the run start together: an flock (released by the
    # kernel when its holder dies, so a killed job leaves no lock), then look again
    # (a build that failed is remembered too: every job of the run gets its error at once)
    failed = out.with_suffix(".err")
    with open(out.with_suffix(".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_file():
            return out, rec
        if failed.is_file():
            raise KwsCudaEmulationError(failed.read_text(errors="replace"))
        rec["cached"] = False
        try:
            return _compile(units, common, user, incs, modname, out, rec, cxx, timeout)
        except KwsCudaEmulationError as e:
            with contextlib.suppress(OSError):
                part = failed.with_suffix(f".tmp{os.getpid()}")
                part.write_text(str(e))
                os.replace(part, failed)
            raise


def _compile(units: list[tuple[str, str, bool]], common: list[str], user: list[str], incs: list[str], modname: str,
             out: Path, rec: dict[str, Any], cxx: str, timeout: float) -> tuple[Path, dict[str, Any]]:
    import torch.utils.cpp_extension as ext

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kws-cuda-emu-") as tmp:
        procs, objs = [], []
        for i, (file, text, is_cuda) in enumerate(units):
            src = Path(tmp) / f"u{i}_{Path(file).name}.cpp"
            src.write_text(text)
            obj = src.with_suffix(".o")
            # host-only units (the torch wrapper, the bindings) at -O1: about 20% less g++ time
            # than -O2 on a torch/extension.h unit; the kernels' units keep -O2
            opt = common if is_cuda else ["-O1" if f == "-O2" else f for f in common]
            cmd = [cxx, "-x", "c++", *opt, f"-DTORCH_EXTENSION_NAME={modname}", *user, *incs]
            if is_cuda:
                cmd += ["-include", str(SHIM_DIR / "kws_cuda_emu.h")]
            cmd += ["-c", str(src), "-o", str(obj)]
            procs.append((file, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                 cwd=tmp)))
            objs.append(str(obj))
        errors = []
        for file, p in procs:
            try:
                log, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                errors.append(f"{file}: g++ did not finish within {timeout:g} s")
                continue
            if p.returncode:
                errors.append(_first_error(log, tmp, file))
        if errors:
            raise KwsCudaEmulationError("the extension does not compile as host code under kws's CUDA emulation "
                                        "shim (a construct it does not emulate): " + " | ".join(errors))
        tmp_so = Path(tmp) / "ext.so"
        libs = [f"-L{p}" for p in ext.library_paths()] + [f"-Wl,-rpath,{p}" for p in ext.library_paths()]
        link = [cxx, "-shared", *objs, "-o", str(tmp_so), *libs, "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
        linked = subprocess.run(link, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if linked.returncode:
            raise KwsCudaEmulationError("the emulated extension does not link: "
                                        + (linked.stdout + linked.stderr)[-1500:])
        part = out.with_suffix(f".tmp{os.getpid()}")
        shutil.copyfile(tmp_so, part)
        os.replace(part, out)
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return out, rec


def _first_error(log: str, tmp: str, file: str) -> str:
    lines = [ln.replace(tmp + "/", "") for ln in log.splitlines()]
    errs = [ln for ln in lines if " error: " in ln or ln.startswith("error:")]
    return f"{file}: " + ("; ".join(errs[:3]) if errs else "\n".join(lines[-6:]))[:1200]


def _load_so(path: Path, modname: str) -> Any:
    import importlib.machinery
    import importlib.util

    if modname in _state["modules"]:
        return _state["modules"][modname]
    loader = importlib.machinery.ExtensionFileLoader(modname, str(path))
    spec = importlib.util.spec_from_file_location(modname, str(path), loader=loader)
    if spec is None:
        raise KwsCudaEmulationError(f"cannot load the emulated extension {path}")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    _state["modules"][modname] = mod
    return mod


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, list | tuple) else [v]


def _task_dir() -> Path:
    """The job's task folder (relative source paths and ``-I`` resolve against it, as
    ``cuda_build`` resolves them); the working directory outside a job."""
    return Path(_state["task_dir"]) if _state["task_dir"] else Path.cwd()


def _emulate(name: str, units: list[tuple[str, str, bool]], include_paths: list[str], task_dir: Path,
             flags: list[str], info: dict[str, Any]) -> Any:
    from workstation.harness import import_phase

    record: dict[str, dict[str, float]] = {}
    with import_phase(f"cuda-emulation build of {name}", record):
        so, rec = build(name, units, include_paths, task_dir, flags)
    rec.update(info)
    rec["cpu_s"] = record.get(f"cuda-emulation build of {name}", {}).get("cpu_s")
    _state["builds"].append(rec)
    return _load_so(so, rec["module"])


def load_inline(name: str, cpp_sources: Any = None, cuda_sources: Any = None, functions: Any = None,
                extra_cflags: Any = None, extra_cuda_cflags: Any = None, extra_ldflags: Any = None,
                extra_include_paths: Any = None, build_directory: Any = None, verbose: bool = False,
                with_cuda: Any = None, is_python_module: bool = True, with_pytorch_error_handling: bool = True,
                keep_intermediates: bool = True, use_pch: bool = False, no_implicit_headers: bool = False,
                **_: Any) -> Any:
    """``torch.utils.cpp_extension.load_inline`` emulated on the CPU (module doc)."""
    task_dir = _task_dir()
    cpp = "\n".join(str(s) for s in _as_list(cpp_sources))
    if not no_implicit_headers:
        cpp = _IMPLICIT_CPP + cpp
    cpp = rewrite_cpp(cpp, "main.cpp") + "\n" + bindings(functions, with_pytorch_error_handling)
    units = [("main.cpp", cpp, False)]
    info: dict[str, Any] = {"via": "load_inline", "launches": [], "fibers": False}
    cuda = "\n".join(str(s) for s in _as_list(cuda_sources))
    if cuda:
        if not no_implicit_headers:
            cuda = _IMPLICIT_CUDA + cuda
        text, meta = rewrite_cuda(cuda, "cuda.cu")
        info["launches"] += meta["launches"]
        info["fibers"] = meta["fibers"]
        units.append(("cuda.cu", text, True))
    flags = [str(f) for f in _as_list(extra_cflags) + _as_list(extra_cuda_cflags)]
    return _emulate(str(name), units, [str(p) for p in _as_list(extra_include_paths)], task_dir, flags, info)


def load(name: str, sources: Any = None, extra_cflags: Any = None, extra_cuda_cflags: Any = None,
         extra_ldflags: Any = None, extra_include_paths: Any = None, **_: Any) -> Any:
    """``torch.utils.cpp_extension.load`` emulated on the CPU (module doc): ``.cu``/``.cuh``
    files are rewritten as CUDA sources, the others compiled as they are (they hold their
    own ``PYBIND11_MODULE``)."""
    task_dir = _task_dir()
    units = []
    info: dict[str, Any] = {"via": "load", "launches": [], "fibers": False}
    for s in _as_list(sources):
        p = Path(str(s))
        p = p if p.is_absolute() else task_dir / p
        text = p.read_text(errors="replace")
        if p.suffix in (".cu", ".cuh"):
            text, meta = rewrite_cuda(text, p.name)
            info["launches"] += meta["launches"]
            info["fibers"] = info["fibers"] or meta["fibers"]
            units.append((p.name, text, True))
        else:
            units.append((p.name, rewrite_cpp(text, p.name), False))
    flags = [str(f) for f in _as_list(extra_cflags) + _as_list(extra_cuda_cflags)]
    incs = [str(p) for p in _as_list(extra_include_paths)]
    incs += sorted({str((task_dir / str(s)).parent) for s in _as_list(sources)} - {str(task_dir)})
    return _emulate(str(name), units, incs, task_dir, flags, info)


def install() -> bool:
    """Replace ``load_inline``/``load`` with the emulating builders (once per process) when
    the device is the CPU, the setting is on and g++ is found (module doc). Returns whether
    the emulation is installed."""
    if _state["installed"]:
        return True
    if os.environ.get("TRITON_INTERPRET") != "1" or not enabled() or not gxx_version():
        return False
    import torch.utils.cpp_extension

    from workstation.harness import job_hook

    ext: Any = torch.utils.cpp_extension  # its two builders are replaced
    ext.load_inline = load_inline
    ext.load = load
    job_hook(_note_job)
    _state["installed"] = True
    return True


def _note_job(job: Any) -> None:
    _state["task_dir"] = str(job.task_dir)


def builds() -> list[dict[str, Any]]:
    """The builds of this process so far (and forget them): per build ``name``, ``via``,
    ``cached``, ``seconds``, ``cpu_s``, ``launches``, ``fibers``."""
    got = list(_state["builds"])
    _state["builds"].clear()
    return got


def limit_of(e: BaseException) -> str | None:
    """Why ``e`` (or an exception in its chain) is a limit of the CUDA emulation rather than a
    defect of the candidate: :class:`KwsCudaEmulationError`, or the shim's error raised
    from C++ (a ``RuntimeError`` whose message starts with :data:`LIMIT_PREFIX`). ``None``
    otherwise, and always when the emulation is not installed."""
    if not _state["installed"]:
        return None
    for cur in excchain.chain(e):
        if isinstance(cur, KwsCudaEmulationError):
            return str(cur)[:1500]
        text = str(cur)
        if LIMIT_PREFIX in text:
            return text[text.index(LIMIT_PREFIX) + len(LIMIT_PREFIX):][:1500]
    return None

