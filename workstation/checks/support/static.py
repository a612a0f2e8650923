"""Static (AST) reading of a task's Python files (through :mod:`workstation.task.sources`):
framework work and fallbacks (``fallback``), global-state writes (``tampering``), hash-order
sites (``nondeterminism``), the reference importing the candidate (``reference-suspect``),
and what language a role is written in (the timing checks).

Nothing here imports or runs task code. Names are resolved through the module's imports
(``import torch.nn.functional as F``, ``from torch import matmul``...), so ``F.linear``,
``torch.nn.functional.linear`` and a bare ``linear`` imported from there all read as
``torch.nn.functional.linear``. Private to the battery.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workstation.task.model import Task
from workstation.task.sources import SourceFile, TaskSources, package_closure

#: framework namespaces whose functions count as "the framework doing the work".
FRAMEWORK_PREFIXES = ("torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.fft.",
                      "torch.ops.aten.", "torch._C._nn.", "torch.Tensor.", "torch.", "numpy.", "jax.numpy.",
                      "jax.nn.", "jax.lax.", "scipy.special.")

#: op families (by the last name component) and the aten ops that confirm them at run time.
FAMILIES: dict[str, set[str]] = {
    "matmul": {"matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "linear", "tensordot", "mv",
               "addmv", "dot", "inner", "outer", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
               "conv_transpose2d", "conv_transpose3d", "_scaled_mm", "scaled_dot_product_attention",
               "chain_matmul", "bilinear", "@"},
    "softmax": {"softmax", "log_softmax", "softmin"},
    "norm": {"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize",
             "local_response_norm"},
    "activation": {"relu", "relu_", "gelu", "silu", "sigmoid", "tanh", "softplus", "mish", "elu", "selu",
                   "leaky_relu", "hardswish", "hardsigmoid", "glu", "threshold", "erf", "relu6"},
    "reduction": {"sum", "mean", "max", "amax", "min", "amin", "prod", "var", "std", "var_mean", "std_mean",
                  "logsumexp", "cumsum", "cumprod", "norm", "argmax", "argmin", "topk", "sort", "nansum"},
}
#: aten ops (overload packet names, without ``aten.``) per family, for dynamic confirmation.
ATEN_FAMILIES: dict[str, set[str]] = {
    "matmul": {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot", "vdot",
               "_scaled_mm", "_int_mm", "convolution", "_convolution", "conv1d", "conv2d", "conv3d",
               "mkldnn_convolution", "cudnn_convolution", "_addmm_activation", "einsum", "tensordot",
               "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
               "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
               "scaled_dot_product_attention", "_fused_sdp_choice", "bilinear"},
    "softmax": {"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"},
    "norm": {"native_layer_norm", "layer_norm", "_fused_rms_norm", "rms_norm", "native_group_norm",
             "group_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
             "batch_norm", "instance_norm", "linalg_vector_norm", "norm", "renorm"},
    "activation": {"relu", "relu_", "gelu", "gelu_", "silu", "silu_", "sigmoid", "sigmoid_", "tanh", "tanh_",
                   "softplus", "mish", "elu", "selu", "leaky_relu", "hardswish", "hardsigmoid", "glu",
                   "threshold", "erf", "hardtanh", "relu6", "clamp_min"},
    "reduction": {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
                  "logsumexp", "cumsum", "cumprod", "argmax", "argmin", "topk", "sort", "nansum", "aminmax"},
    "elementwise": {"exp", "exp_", "log", "sqrt", "rsqrt", "add", "add_", "mul", "mul_", "sub", "sub_", "div",
                    "div_", "where", "clamp", "clamp_", "maximum", "minimum", "pow", "abs", "neg", "reciprocal",
                    "square", "addcmul", "addcdiv", "lerp", "exp2", "log1p", "expm1", "sin", "cos", "tan",
                    "floor", "ceil", "round", "sign", "fmod", "remainder", "bitwise_and", "eq", "ne", "lt", "le",
                    "gt", "ge", "logical_and", "logical_or", "logical_not", "masked_fill", "masked_fill_",
                    "index_select", "gather", "scatter", "scatter_add", "index_add", "embedding"},
}
#: families whose work, done by the framework, is the work a kernel task replaces.
HEAVY = ("matmul", "softmax", "norm")
#: tensor methods read as framework ops when called on an unresolved receiver.
METHOD_NAMES = {"matmul", "mm", "bmm", "addmm", "softmax", "log_softmax", "sum", "mean", "max", "amax",
                "norm", "var", "std", "cumsum", "logsumexp", "relu", "relu_", "sigmoid", "tanh"}


def family_of(name: str) -> str | None:
    """The op family of a resolved framework function name's last component."""
    last = name.rsplit(".", 1)[-1]
    for fam, names in FAMILIES.items():
        if last in names:
            return fam
    return None


def aten_family(op: str) -> str | None:
    """The family of an aten op (overload packet name without ``aten.``)."""
    for fam, names in ATEN_FAMILIES.items():
        if op in names:
            return fam
    return None


@dataclass
class StaticHit:
    """A place in the source where the framework (or the reference) does work.

    ``kind``: ``framework-op`` (a call into torch/numpy/jax compute ops, or ``@``),
    ``method`` (a tensor-method call on a receiver not resolved statically),
    ``except-fallback`` (an ``except`` handler around a kernel launch that calls the
    framework or the reference), ``reference`` (the candidate imports or calls the
    task's reference module).
    """

    kind: str
    name: str
    family: str | None
    line: int
    function: str
    text: str
    in_except: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "family": self.family, "line": self.line,
                "function": self.function, "text": self.text, "in_except": self.in_except, **self.detail}


_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _reachable(mod: SourceFile, entry: str) -> list[_Def]:
    """Module-level functions (and classes) reachable from ``entry`` by name: calls, and
    names passed as values (``pool.submit(_partial, ...)``); kernels excluded."""
    functions = mod.top_level_defs()
    seen: dict[str, _Def] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        node = functions.get(name)
        # top_level_defs holds only _Def nodes; the isinstance narrows (and rules out None)
        if not isinstance(node, _Def) or name in seen or mod.is_kernel_def(node):
            continue
        seen[name] = node
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in functions:
                todo.append(sub.id)
    return list(seen.values())


def _launches(mod: SourceFile, node: ast.AST) -> list[ast.Call]:
    """Kernel launches ``kernel[grid](...)`` inside ``node``."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript):
            out.append(sub)
    return out


@dataclass
class ScanResult:
    """Static facts of one candidate file: ``hits`` (framework work), ``functions`` (the
    entry's call graph), ``launch_lines`` (lines of ``kernel[grid](...)``), ``reference``
    (the reference module's name), ``error`` (a syntax error, if any)."""

    hits: list[StaticHit]
    functions: list[str]
    launch_lines: list[int]
    error: str = ""


def _root_name(node: ast.AST) -> str | None:
    """The local name at the root of an attribute chain (``a`` of ``a.b.c``), or None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def scan_fallback(sources: TaskSources, rel: str, entry: str, reference_module: str | None) -> ScanResult:
    """Framework calls and try/except fallbacks in ``entry``'s call graph in the task file
    ``rel``."""
    mod = sources.file(rel)
    if mod is None:
        return ScanResult([], [], [], error=sources.problems.get(rel, f"cannot read {rel}"))
    funcs = _reachable(mod, entry)
    launching: set[str] = set()
    for f in funcs:
        if _launches(mod, f):
            launching.add(f.name)
    changed = True
    while changed:  # functions that call a launching function launch too
        changed = False
        for f in funcs:
            if f.name in launching:
                continue
            if any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id in launching
                   for s in ast.walk(f)):
                launching.add(f.name)
                changed = True
    hits: list[StaticHit] = []
    launch_lines: list[int] = []
    ref = reference_module

    def is_ref(name: str | None) -> bool:
        return bool(ref and name and (name == ref or name.startswith(ref + ".")))

    for f in funcs:
        except_nodes: set[int] = set()
        for t in ast.walk(f):
            if isinstance(t, ast.Try):
                for h in t.handlers:
                    for s in ast.walk(h):
                        except_nodes.add(id(s))
        for sub in ast.walk(f):
            in_exc = id(sub) in except_nodes
            if isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Subscript):
                    launch_lines.append(sub.lineno)
                    continue
                name = mod.dotted(sub.func)
                if is_ref(name):
                    hits.append(StaticHit("reference", name or "", "reference", sub.lineno, f.name, mod.text(sub),
                                          in_exc))
                    continue
                if name and name.startswith(FRAMEWORK_PREFIXES) and family_of(name):
                    hits.append(StaticHit("framework-op", name, family_of(name), sub.lineno, f.name,
                                          mod.text(sub), in_exc))
                elif name is None and isinstance(sub.func, ast.Attribute) and sub.func.attr in METHOD_NAMES:
                    hits.append(StaticHit("method", f".{sub.func.attr}()", family_of(sub.func.attr), sub.lineno,
                                          f.name, mod.text(sub), in_exc))
                elif (name and isinstance(sub.func, ast.Attribute) and sub.func.attr in METHOD_NAMES
                      and not name.startswith(FRAMEWORK_PREFIXES) and _root_name(sub.func) not in mod.aliases):
                    # a method on a local value (x.matmul(y)); an attribute of an imported module
                    # (jax's own Pallas ops: `from jax.experimental.pallas.ops.tpu import matmul`,
                    # `matmul.matmul(x, y)`) is a function of that module, not a tensor method
                    hits.append(StaticHit("method", f".{sub.func.attr}()", family_of(sub.func.attr), sub.lineno,
                                          f.name, mod.text(sub), in_exc))
            elif isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
                hits.append(StaticHit("framework-op", "@", "matmul", sub.lineno, f.name, mod.text(sub), in_exc))
        for t in ast.walk(f):
            if not isinstance(t, ast.Try):
                continue
            body_launches = any(
                (isinstance(s, ast.Call) and isinstance(s.func, ast.Subscript))
                or (isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id in launching)
                for b in t.body for s in ast.walk(b))
            if not body_launches:
                continue
            for h in t.handlers:
                inner = [x for x in hits if x.in_except and h.lineno <= x.line <= (h.end_lineno or h.lineno)
                         and x.kind != "except-fallback"]
                if inner:
                    texts = [x.text for x in inner]
                    inner = [x for x in inner if not any(x.text != o and x.text in o for o in texts)]
                    caught = mod.text(h.type) if h.type is not None else "everything"
                    hits.append(StaticHit(
                        "except-fallback", ", ".join(sorted({x.name for x in inner})),
                        inner[0].family, h.lineno, f.name, f"except {caught}: " + "; ".join(x.text for x in inner[:3]),
                        True, {"try_line": t.lineno, "ops": [x.as_dict() for x in inner]}))
    if ref:
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(is_ref(n) for n in names):
                    hits.append(StaticHit("reference", names[0], "reference", node.lineno, "<module>",
                                          mod.text(node), False, {"import": True}))
    return ScanResult(hits, [getattr(f, "name", "?") for f in funcs], sorted(set(launch_lines)))


#: global-state setters and the snapshot keys they change (``tampering``).
STATE_SETTERS: dict[str, tuple[str, ...]] = {
    "torch.set_float32_matmul_precision": ("torch.get_float32_matmul_precision()",
                                           "torch.backends.cuda.matmul.fp32_precision",
                                           "torch.backends.mkldnn.matmul.fp32_precision"),
    "torch.set_flush_denormal": ("flush_denormal (CPU FTZ/DAZ)",),
    "torch.use_deterministic_algorithms": ("torch.are_deterministic_algorithms_enabled()",
                                           "torch.is_deterministic_algorithms_warn_only_enabled()"),
    "torch.set_deterministic_debug_mode": ("torch.are_deterministic_algorithms_enabled()",),
    "torch.set_default_dtype": ("torch.get_default_dtype()",),
    "torch.set_default_tensor_type": ("torch.get_default_dtype()",),
    "torch.set_default_device": ("torch.get_default_device()",),
    "torch.set_num_threads": ("torch.get_num_threads()",),
    "torch.set_num_interop_threads": ("torch.get_num_interop_threads()",),
    "torch.set_grad_enabled": ("torch.is_grad_enabled()",),
    "torch.autograd.set_grad_enabled": ("torch.is_grad_enabled()",),
    "torch.manual_seed": ("torch.initial_seed()",),
    "torch.random.manual_seed": ("torch.initial_seed()",),
    "torch.seed": ("torch.initial_seed()",),
    "torch.autograd.set_detect_anomaly": ("torch.is_anomaly_enabled()",),
    "torch.backends.cuda.enable_flash_sdp": ("torch.backends.cuda.flash_sdp_enabled()",),
    "torch.backends.cuda.enable_mem_efficient_sdp": ("torch.backends.cuda.mem_efficient_sdp_enabled()",),
    "torch.backends.cuda.enable_math_sdp": ("torch.backends.cuda.math_sdp_enabled()",),
    "numpy.seterr": ("numpy.geterr()",),
    "sys.settrace": ("sys.gettrace()",),
    "sys.setprofile": ("sys.getprofile()",),
    "signal.signal": ("signal handlers",),
    "threading.Thread": ("threads",),
    "torch.cuda.Stream": ("streams",),
    "torch.cuda.set_stream": ("streams",),
    "os.putenv": ("env",),
    "os.environ.update": ("env",),
    "os.environ.setdefault": ("env",),
    "os.environ.pop": ("env",),
}
#: flag keys an attribute assignment changes, for assignments the snapshot reads back.
ASSIGN_KEYS = {
    "torch.backends.cuda.matmul.allow_tf32": ("torch.backends.cuda.matmul.allow_tf32",
                                              "torch.backends.cuda.matmul.fp32_precision"),
    "torch.backends.cudnn.allow_tf32": ("torch.backends.cudnn.allow_tf32", "torch.backends.cudnn.conv.fp32_precision"),
}


@dataclass
class StateSite:
    """A statement that may change global state: ``target`` (the dotted name assigned or
    called), the snapshot ``keys`` it affects, line and source text."""

    target: str
    keys: tuple[str, ...]
    line: int
    text: str


def scan_state_writes(sources: TaskSources, rel: str) -> list[StateSite]:
    """Every statement of the task file ``rel`` (import-time code and functions alike) that
    assigns an attribute of an imported module (``torch.backends.cuda.matmul.allow_tf32 =
    True``, ``torch.allclose = ...``, ``setattr(torch, "x", ...)``), writes ``os.environ``,
    or calls a known global-state setter (:data:`STATE_SETTERS`)."""
    mod = sources.file(rel)
    if mod is None:
        return []
    roots = {v.split(".")[0] for v in mod.aliases.values()} | set(mod.aliases)
    sites: list[StateSite] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript):
                    name = mod.dotted(t.value)
                    if name == "os.environ":
                        sites.append(StateSite("os.environ", ("env",), node.lineno, mod.text(node)))
                    continue
                if not isinstance(t, ast.Attribute):
                    continue
                name = mod.dotted(t)
                if name and name.split(".")[0] in roots and "." in name:
                    sites.append(StateSite(name, ASSIGN_KEYS.get(name, (name,)), node.lineno, mod.text(node)))
        elif isinstance(node, ast.Call):
            name = mod.dotted(node.func)
            if name in STATE_SETTERS:
                sites.append(StateSite(name, STATE_SETTERS[name], node.lineno, mod.text(node)))
            elif name in ("setattr", "builtins.setattr") and len(node.args) >= 2:
                obj = mod.dotted(node.args[0])
                arg1 = node.args[1]
                attr = arg1.value if isinstance(arg1, ast.Constant) and isinstance(arg1.value, str) else None
                if obj and attr and obj.split(".")[0] in roots:
                    sites.append(StateSite(f"{obj}.{attr}", (f"{obj}.{attr}",), node.lineno, mod.text(node)))
    return sites


def scan_hash_order(sources: TaskSources, entry_file: str) -> list[dict[str, Any]]:
    """Places in ``entry_file``, the task-local modules it imports (transitively) and the
    installed-package modules they import (:func:`package_closure`) where Python's hash
    seed can reach the order of work: set/frozenset displays, comprehensions and
    constructors, and ``hash()`` calls.

    ``PYTHONHASHSEED`` randomises the hashes of str, bytes and datetime objects (and of
    tuples and frozensets holding them); among the built-in containers only set and
    frozenset iteration order follows hashes (dicts keep insertion order, Python 3.7+).
    Each item: ``{"file", "line", "text"}``.
    """
    hits: list[dict[str, Any]] = []
    for mod, _chain in [*sources.closure(entry_file), *package_closure(sources, entry_file)]:
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Set | ast.SetComp):
                hits.append({"file": mod.rel, "line": node.lineno, "text": mod.text(node)})
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("set", "frozenset", "hash"):
                hits.append({"file": mod.rel, "line": node.lineno, "text": mod.text(node)})
    return hits


def scan_reference_imports(task_dir: Path, ref_file: str, cand_file: str) -> list[dict[str, Any]]:
    """Places where the reference (or a task-local module it imports) imports or loads the
    candidate's file: ``import candidate``, ``from candidate import ...``,
    ``importlib.import_module("candidate")`` and any string literal naming the file
    (``spec_from_file_location(..., "candidate.py")``, ``exec(open("candidate.py"))``).

    Returns ``[{"file", "line", "what", "via"}]`` (``via``: the import chain from the
    reference). Files that do not parse are skipped.
    """
    cand_stem = Path(cand_file).stem
    cand_name = Path(cand_file).name
    hits: list[dict[str, Any]] = []
    for sf, chain in TaskSources(task_dir).closure(ref_file, exclude=[cand_file]):
        rel, via = sf.rel, list(chain)
        for imp in sf.imports:
            names = [imp.module] if imp.module else list(imp.names)
            for n in names:
                if n.split(".")[0] == cand_stem:
                    hits.append({"file": rel, "line": imp.line, "what": f"imports {n}", "via": via})
        for node in ast.walk(sf.tree):
            if isinstance(node, ast.Call):
                fn = node.func
                fname = fn.attr if isinstance(fn, ast.Attribute) else (fn.id if isinstance(fn, ast.Name) else "")
                if fname in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] == cand_stem:
                    hits.append({"file": rel, "line": node.lineno, "what": f"{fname}({node.args[0].value!r})",
                                 "via": via})
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                v = node.value
                if v == cand_name or v.endswith("/" + cand_name) or v.endswith("\\" + cand_name):
                    hits.append({"file": rel, "line": node.lineno, "what": f"names the candidate's file {v!r}",
                                 "via": via})
    uniq: dict[tuple[str, int, str], dict[str, Any]] = {}
    for h in hits:
        uniq.setdefault((h["file"], h["line"], h["what"]), h)
    return sorted(uniq.values(), key=lambda h: (h["file"], h["line"]))


#: imports that make a role "other" than triton/pytorch for timing purposes.
_OTHER_BACKENDS = ("jax", "cupy", "numba", "ctypes", "cffi", "torch.utils.cpp_extension", "pycuda", "neuronxcc", "nki")


def source_kind(task: Task, role: str) -> str:
    """``"triton"`` when the role's file (or a task module it imports) imports triton,
    ``"other"`` for JAX, CuPy, Numba, ctypes, C++/CUDA extensions, NKI, else
    ``"pytorch"`` when it imports torch, else ``"other"``."""
    ep = task.entry.get(role)
    if ep is None:
        return "other"
    mods = TaskSources(task.dir).all_imports(ep.file)
    top = {m.split(".")[0] for m in mods}
    if "triton" in top:
        return "triton"
    if any(m == o or m.startswith(o + ".") for m in mods for o in _OTHER_BACKENDS):
        return "other"
    return "pytorch" if "torch" in top else "other"
