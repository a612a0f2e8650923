"""CUDA source as host C++ for kws's CUDA emulation (:mod:`workstation.harness.cuda_emu`):
the rewriting of a ``.cu`` source and of the extension's host sources, and what the
emulation cannot run.

- :func:`rewrite_cuda`: ``k<<<grid, block[, smem[, stream]]>>>(args)`` becomes a call of
  the shim's launcher (found with a balanced-bracket scanner that skips comments and
  literals, :func:`mask`, not a regex), ``extern __shared__ T a[]`` the launch's dynamic
  shared buffer, ``__shared__`` a function-scope ``static``; after the source's last
  ``#include`` a post-include maps ``is_cuda`` to ``is_cpu`` and ``kCUDA`` to ``kCPU``;
  ``KWS_EMU_FIBERS`` says whether the source has a barrier, shuffle or vote;
- :func:`rewrite_cpp`: a host source with the post-include; :func:`bindings`: the
  ``PYBIND11_MODULE`` block ``load_inline`` appends;
- :func:`unsupported`: the constructs of :data:`UNSUPPORTED`, refused before compiling
  (:class:`KwsCudaEmulationError`).
"""

from __future__ import annotations

import re
from typing import Any

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


def _paren_start(m: str, j: int) -> int:
    """Index of the ``(`` that opens the parenthesis closing at ``m[j]``, or -1."""
    depth = 0
    while j >= 0:
        depth += m[j] == ")"
        depth -= m[j] == "("
        if depth == 0:
            return j
        j -= 1
    return -1


def _before_template_args(m: str, j: int) -> int:
    """Index of the last non-space character before the template argument list that ends
    with the ``>`` at ``m[j]`` (balanced backwards, brackets inside skipped)."""
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
    return j


def _callee_start(m: str, end: int) -> int:
    """Start of the kernel expression that ends at ``end`` (exclusive) before a ``<<<``: a
    possibly qualified name with template arguments, or a parenthesised expression; -1 when
    there is none."""
    j = end - 1
    while j >= 0 and m[j].isspace():
        j -= 1
    if j >= 0 and m[j] == ")":
        return _paren_start(m, j)
    while j >= 0:
        if m[j] == ">":
            j = _before_template_args(m, j)
        k = j
        while k >= 0 and (m[k].isalnum() or m[k] == "_"):
            k -= 1
        if k == j:
            return -1
        j = k
        if not (j >= 1 and m[j] == ":" and m[j - 1] == ":"):
            return j + 1
        j -= 2  # a qualified name: the scope before the ::
        while j >= 0 and m[j].isspace():
            j -= 1
    return 0


def _config_end(m: str, i: int) -> int:
    """Index of the ``>>>`` that ends the launch configuration starting at ``m[i]`` (outside
    brackets), or -1."""
    depth = 0
    for j in range(i, len(m) - 2):
        c = m[j]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif depth == 0 and m.startswith(">>>", j):
            return j
    return -1


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
        close = _config_end(m, i + 3)
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

