"""CUDA emulation: a ``cuda`` candidate's extension compiled as host C++ and run on the CPU.

On a machine without a GPU, ``load_inline`` (and ``load``) cannot build a CUDA extension.
Where the kernels are simple enough, this module builds them anyway, as host code with a
small shim (``cuda_emu_include/``, placed before torch's include folders so that its
``cuda_runtime.h``, ``cuda_fp16.h``, ``ATen/cuda/CUDAContext.h``, ``c10/cuda/CUDAGuard.h``
... win), so the whole battery judges the kernel's own index arithmetic, coverage and
accumulation dtype on CPU tensors:

- each CUDA source is rewritten (:func:`rewrite_cuda`): ``k<<<grid, block[, smem[,
  stream]]>>>(args)`` becomes a call of the shim's launcher (found with a balanced-bracket
  scanner that skips comments and literals, not a regex), ``extern __shared__ T a[]`` the
  launch's dynamic shared buffer, ``__shared__`` a function-scope ``static`` (right because
  the emulation runs a launch's blocks one at a time, in order; such memory is not reset
  between blocks); after the source's last ``#include`` a post-include maps ``is_cuda`` to
  ``is_cpu`` and ``kCUDA`` to ``kCPU`` (the tensors are CPU tensors);
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

What the emulation cannot run is refused before compiling (:func:`unsupported`: inline
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
import re
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from workstation.harness import excchain
from workstation.protocol import childenv

#: the shim's folder (package data), first on the include path.
SHIM_DIR = Path(__file__).with_name("cuda_emu_include")
#: bumped when the shim or the rewriting changes (part of the cache key).
SHIM_VERSION = 3
#: the prefix of an emulation limit raised from C++ (the shim's ``raise_pending``).
LIMIT_PREFIX = "KwsCudaEmulationError: "
_IMPLICIT_CUDA = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
_IMPLICIT_CPP = "#include <torch/extension.h>\n"
_POST_INCLUDE = ("// kws CUDA emulation: the tensors are CPU tensors\n"
                 "#define is_cuda is_cpu\n#define kCUDA kCPU\n"
                 "#ifndef __noinline__\n#define __noinline__ __attribute__((noinline))\n#endif\n")
#: constructs the emulation cannot run: (pattern over the source with comments and
#: literals blanked, what to call it).
UNSUPPORTED: tuple[tuple[str, str], ...] = (
    (r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\(", "inline assembly (asm)"),
    (r"\bwmma\b|\bmma_sync\b|\bmma\.sync\b|\bwgmma\b|\bldmatrix\b", "tensor-core matrix instructions (wmma/mma)"),
    (r"\bcooperative_groups\b|\bthis_grid\s*\(|\bcudaLaunchCooperativeKernel\b", "cooperative groups"),
    (r"\btex[123]D\w*\b|\btex1Dfetch\b|\bcudaTextureObject_t\b|\bsurf[123]D\w*\b|\bcudaSurfaceObject_t\b",
     "textures and surfaces"),
    (r"\b__nanosleep\b", "__nanosleep"),
    (r"\b__pipeline_\w+|\bmemcpy_async\b|\bcp\.async\b|\bcuda::(?:barrier|pipeline)\b|#\s*include\s*<cuda/",
     "asynchronous copies and libcu++ (cuda::) barriers"),
    (r"\bcublas\w*|\bcudnn\w*|\bcutlass\b|\bcute::|\bthrust::|\bcub::|\bcurand\w*|\bcufft\w*",
     "a CUDA library (cuBLAS, cuDNN, CUTLASS, CUB, Thrust, cuRAND, cuFFT)"),
    (r"\b__CUDA_ARCH__\b", "code conditional on __CUDA_ARCH__ (the emulation compiles no device pass)"),
    (r"\bcudaLaunchKernel\w*\b|\bcuLaunchKernel\b", "the launch API (cudaLaunchKernel)"),
    (r"\b__shfl(?:_up|_down|_xor)?\s*\(", "warp shuffles without _sync (removed in CUDA 9)"),
)
_FIBER_TOKENS = re.compile(r"\b(?:__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync)\b")

#: per-process state (mutated, never rebound: kws's module namespaces are watched).
_state: dict[str, Any] = {"installed": False, "modules": {}, "builds": [], "gxx": None, "task_dir": None}


class KwsCudaEmulationError(RuntimeError):
    """What the CPU emulation of a CUDA extension cannot run or build (a limit of kws's
    emulation, not a defect of the candidate: the checks that needed the run are not
    judged)."""


# -- source rewriting ----------------------------------------------------------------------

def mask(text: str) -> str:
    """``text`` with comments and the contents of string and character literals replaced
    by spaces (newlines kept): the same length and the same line numbers, safe to scan."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


_OPEN, _CLOSE = "([{", ")]}"


def _match_forward(m: str, i: int) -> int:
    """Index just after the bracket that closes the one at ``m[i]``, or -1."""
    depth = 0
    for j in range(i, len(m)):
        c = m[j]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _split_top(s: str, ms: str) -> list[str]:
    """``s`` split at the commas of its masked twin ``ms`` outside brackets."""
    parts, depth, last = [], 0, 0
    for j, c in enumerate(ms):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[last:j])
            last = j + 1
    parts.append(s[last:])
    return [p.strip() for p in parts]


def _callee_start(m: str, end: int) -> int:
    """Start of the kernel expression that ends at ``end`` (exclusive) before a ``<<<``: a
    possibly qualified name with template arguments, or a parenthesised expression."""
    j = end - 1
    while j >= 0 and m[j].isspace():
        j -= 1
    if j >= 0 and m[j] == ")":
        depth = 0
        while j >= 0:
            depth += m[j] == ")"
            depth -= m[j] == "("
            if depth == 0:
                return j
            j -= 1
        return -1
    while j >= 0:
        if m[j] == ">":  # template arguments, balanced backwards
            depth = paren = 0
            while j >= 0:
                paren += m[j] in _CLOSE
                paren -= m[j] in _OPEN
                if paren == 0:
                    depth += m[j] == ">"
                    depth -= m[j] == "<"
                j -= 1
                if depth == 0 and paren == 0:
                    break
            while j >= 0 and m[j].isspace():
                j -= 1
        k = j
        while k >= 0 and (m[k].isalnum() or m[k] == "_"):
            k -= 1
        if k == j:
            return -1
        j = k
        if j >= 1 and m[j] == ":" and m[j - 1] == ":":
            j -= 2
            while j >= 0 and m[j].isspace():
                j -= 1
            continue
        return j + 1
    return 0


def rewrite_launches(text: str) -> tuple[str, list[dict[str, Any]]]:
    """``text`` with every ``k<<<grid, block[, smem[, stream]]>>>(args)`` replaced by a call
    of the shim's launcher, and what each launch was (``kernel``, ``config``, ``args``,
    ``line``).

    Raises:
        KwsCudaEmulationError: a launch the scanner cannot take apart.
    """
    m = mask(text)
    out: list[str] = []
    launches: list[dict[str, Any]] = []
    pos = 0
    i = m.find("<<<")
    while i >= 0:
        line = text.count("\n", 0, i) + 1
        start = _callee_start(m, i)
        close = -1
        depth = 0
        for j in range(i + 3, len(m) - 2):
            c = m[j]
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE:
                depth -= 1
            elif depth == 0 and m.startswith(">>>", j):
                close = j
                break
        if start < pos or close < 0:
            raise KwsCudaEmulationError(f"line {line}: a kernel launch (<<< ... >>>) kws's emulation cannot take apart")
        k = close + 3
        while k < len(m) and m[k].isspace():
            k += 1
        if k >= len(m) or m[k] != "(":
            raise KwsCudaEmulationError(f"line {line}: a kernel launch without an argument list after >>>")
        end = _match_forward(m, k)
        if end < 0:
            raise KwsCudaEmulationError(f"line {line}: a kernel launch whose argument list does not close")
        kernel = text[start:i].strip()
        cfg = _split_top(text[i + 3:close], m[i + 3:close])
        if not 2 <= len(cfg) <= 4 or not all(cfg):
            raise KwsCudaEmulationError(f"line {line}: a launch configuration of {len(cfg)} part(s)")
        smem = cfg[2] if len(cfg) > 2 else "0"
        stream = cfg[3] if len(cfg) > 3 else "nullptr"
        args_text = text[k + 1:end - 1]
        args = [a for a in _split_top(args_text, m[k + 1:end - 1]) if a]
        call = (f"::kws_emu::launch(KWS_EMU_FIBERS, dim3({cfg[0]}), dim3({cfg[1]}), (size_t)({smem}), ({stream}), "
                f"[&](auto&... kws_a) {{ {kernel}(kws_a...); }}" + (f", {args_text.strip()}" if args else "") + ")")
        call += "\n" * (text.count("\n", start, end) - call.count("\n"))  # keep the line numbers
        out.append(text[pos:start])
        out.append(call)
        launches.append({"kernel": kernel, "config": cfg, "args": args, "line": line})
        pos = end
        i = m.find("<<<", end)
    out.append(text[pos:])
    return "".join(out), launches


_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\b([^;\[\]{}()]*?(?:\([^()]*\)[^;\[\]{}()]*?)*)\b(\w+)\s*\[\s*\]\s*;")
_SHARED = re.compile(r"(?<![\w])(?:static\s+)?__shared__(?![\w])")


def _function_scope(m: str, at: int) -> bool:
    """Whether position ``at`` lies inside a function body: some enclosing ``{`` follows a
    ``)`` (a parameter list, a condition)."""
    depth = 0
    for j in range(at - 1, -1, -1):
        c = m[j]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth:
                depth -= 1
                continue
            k = j - 1
            while k >= 0 and m[k].isspace():
                k -= 1
            tail = m[max(0, k - 40):k + 1]
            if tail.endswith(")") or re.search(r"\)\s*(?:const|noexcept|mutable)$", tail) or \
                    re.search(r"\b(?:else|do|try)$", tail):
                return True
    return False


def rewrite_shared(text: str) -> str:
    """``extern __shared__ T a[];`` -> the launch's dynamic shared buffer (a local pointer in
    a function, a macro at namespace scope); every other ``__shared__`` -> ``static``."""
    m = mask(text)
    out, pos = [], 0
    for hit in _EXTERN_SHARED.finditer(m):
        ty = re.sub(r"__align__\s*\([^()]*\)|\balignas\s*\([^()]*\)", " ", text[hit.start(1):hit.end(1)]).strip()
        name = hit.group(2)
        if _function_scope(m, hit.start()):
            rep = f"{ty}* {name} = reinterpret_cast<{ty}*>(::kws_emu::dyn_smem());"
        else:
            rep = f"\n#define {name} (reinterpret_cast<{ty}*>(::kws_emu::dyn_smem()))\n"
        rep += "\n" * max(0, text.count("\n", hit.start(), hit.end()) - rep.count("\n"))
        out += [text[pos:hit.start()], rep]
        pos = hit.end()
    out.append(text[pos:])
    text = "".join(out)
    m = mask(text)
    out, pos = [], 0
    for hit in _SHARED.finditer(m):
        out += [text[pos:hit.start()], "static"]
        pos = hit.end()
    out.append(text[pos:])
    return "".join(out)


def unsupported(text: str) -> list[str]:
    """The constructs of :data:`UNSUPPORTED` in ``text`` (comments and literals ignored),
    each with its first line: ``"inline assembly (asm) (line 12)"``."""
    m = mask(text)
    found = []
    for pat, what in UNSUPPORTED:
        hit = re.search(pat, m)
        if hit:
            found.append(f"{what} (line {m.count(chr(10), 0, hit.start()) + 1})")
    return found


def _after_includes(text: str, post: str, file: str) -> str:
    """``post`` inserted after the last ``#include`` line of ``text`` (or at its top), and a
    ``#line`` directive so the compiler's messages keep the source's line numbers."""
    m = mask(text)
    lines = text.splitlines(keepends=True)
    mlines = m.splitlines(keepends=True)
    last = -1
    for i, ln in enumerate(mlines):
        if re.match(r"\s*#\s*include\b", ln):
            last = i
    head = "".join(lines[:last + 1])
    if head and not head.endswith("\n"):
        head += "\n"
    return head + post + f'#line {last + 2} "{file}"\n' + "".join(lines[last + 1:])


def rewrite_cuda(text: str, file: str = "cuda.cu") -> tuple[str, dict[str, Any]]:
    """A CUDA source as host C++ for the shim (module doc): launches, shared memory, the
    post-include, and ``KWS_EMU_FIBERS`` (1 when the source has a barrier, shuffle or vote).
    Returns the text and ``{"launches", "fibers"}``.

    Raises:
        KwsCudaEmulationError: a construct the emulation cannot run, or a launch the scanner
            cannot take apart.
    """
    bad = unsupported(text)
    if bad:
        raise KwsCudaEmulationError(f"{file} uses what kws's CPU emulation of CUDA cannot run: {'; '.join(bad)}")
    fibers = bool(_FIBER_TOKENS.search(mask(text)))
    body, launches = rewrite_launches(text)
    body = rewrite_shared(body)
    body = _after_includes(body, _POST_INCLUDE, file)
    return f"#define KWS_EMU_FIBERS {int(fibers)}\n#line 1 \"{file}\"\n" + body, {"launches": launches,
                                                                                  "fibers": fibers}


def rewrite_cpp(text: str, file: str = "main.cpp") -> str:
    """A host C++ source of the extension with the post-include after its last ``#include``."""
    return _after_includes(text, _POST_INCLUDE, file)


def bindings(functions: Any, error_handling: bool = True) -> str:
    """The ``PYBIND11_MODULE`` block ``load_inline`` appends for ``functions`` (a name, a
    list of names, or a name -> docstring mapping)."""
    if functions is None:
        return ""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list | tuple):
        functions = {f: f for f in functions}
    lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for name, doc in dict(functions).items():
        fn = f"torch::wrap_pybind_function({name})" if error_handling else name
        lines.append(f'm.def("{name}", {fn}, "{doc}");')
    lines.append("}")
    return "\n".join(lines) + "\n"


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
        p = subprocess.run(link, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        if p.returncode:
            raise KwsCudaEmulationError("the emulated extension does not link: " + (p.stdout + p.stderr)[-1500:])
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
    import torch.utils.cpp_extension as ext

    from workstation.harness import job_hook

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

