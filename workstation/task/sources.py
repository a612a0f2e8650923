"""A task's Python sources, read statically: the one import walker of kws.

Every static scan (the fallback and tampering scans, the autotune discovery, the bench
reading, the reference-imports-candidate scan, the hash-order scan, the author's-test
reading) reads task code through this module and never imports it. Files are parsed once
per content (a process-wide cache keyed by path, size and modification time) under one
lock: CPython's parser is not safe to call from several threads at once (it raised
``SystemError: AST constructor recursion depth mismatch`` when checks parsed in parallel).

Import resolution follows what the job child does: the task folder is first on
``sys.path``, so ``import a.b`` executes ``a/__init__.py``, ``a/b/__init__.py`` or
``a/b.py`` found there (``a.py`` for a plain module), and ``from . import x`` resolves
against the importing file's folder. Imports that resolve to no file of the task are the
task's *external* imports (torch, triton, a library); :meth:`TaskSources.closure` follows
only the task's own files.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workstation.protocol.parsing import AST_LOCK

_PARSE_LOCK = AST_LOCK  # shared with the parent's npz reading (workstation.protocol.parsing)
_CACHE: dict[tuple[str, int, int], SourceFile | str] = {}
_CACHE_LIMIT = 4096


def parse_python(source: str, filename: str = "<task>", mode: str = "exec") -> ast.AST:
    """``ast.parse`` under the process-wide parser lock (``mode="eval"`` for an expression).

    Raises:
        SyntaxError: the source does not parse.
    """
    with _PARSE_LOCK:
        return ast.parse(source, filename, mode=mode)


def parse_module(source: str, filename: str = "<task>") -> ast.Module:
    """A module's source parsed as :func:`parse_python` does (mode ``exec``), typed as the
    module it is.

    Raises:
        SyntaxError: the source does not parse.
    """
    with _PARSE_LOCK:
        return ast.parse(source, filename, mode="exec")


@dataclass(frozen=True)
class ImportRef:
    """One import statement's target as written: ``module`` (dotted, ``""`` for ``from . import x``),
    ``names`` (for ``from m import a, b``), ``level`` (leading dots), ``line``."""

    module: str
    names: tuple[str, ...]
    level: int
    line: int
    node: ast.stmt = field(compare=False, repr=False)


@dataclass(eq=False)
class SourceFile:
    """One parsed Python file.

    Attributes:
        path: absolute path.
        rel: the path relative to the task folder (``"candidate.py"``, ``"pkg/ops.py"``).
        source: its text; tree: its :mod:`ast` module.
        aliases: local name -> the dotted name it was imported as (``{"tl":
            "triton.language", "F": "torch.nn.functional", "mm": "torch.mm"}``).
        imports: every import statement, anywhere in the file (functions included).
    """

    path: Path
    rel: str
    source: str
    tree: ast.Module
    aliases: dict[str, str]
    imports: list[ImportRef]

    def dotted(self, node: ast.AST) -> str | None:
        """The resolved dotted name of a Name/Attribute chain (``F.softmax`` ->
        ``torch.nn.functional.softmax``), or None for other expressions."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id, node.id)
        return ".".join([base, *reversed(parts)])

    def text(self, node: ast.AST, limit: int = 160) -> str:
        """The source of ``node`` on one line, at most ``limit`` characters."""
        seg = ast.get_source_segment(self.source, node) or ""
        return " ".join(seg.split())[:limit]

    def top_level_defs(self) -> dict[str, ast.AST]:
        """Module-level functions and classes by name."""
        return {n.name: n for n in self.tree.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}

    def is_kernel_def(self, node: ast.AST) -> bool:
        """A ``@triton.jit`` / ``@triton.autotune`` / ``@triton.heuristics`` function (also
        ``@nki.jit``), or a Pallas kernel (:meth:`pallas_kernel_names`)."""
        if getattr(node, "name", None) in self.pallas_kernel_names():
            return True
        for d in getattr(node, "decorator_list", []):
            target = d.func if isinstance(d, ast.Call) else d
            name = self.dotted(target) or ""
            if name.startswith("triton.") or name in ("jit", "triton_jit") or name.endswith(".jit"):
                return True
        return False

    def pallas_kernel_names(self) -> set[str]:
        """Names of the functions passed as the kernel (first argument) of a ``pallas_call``
        in this file, directly or through ``functools.partial``: Pallas kernels."""
        cached = self.__dict__.get("_pallas_kernels")
        if cached is not None:
            return cached
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            fn = self.dotted(node.func) or ""
            if not fn.endswith("pallas_call"):
                continue
            k = node.args[0]
            if isinstance(k, ast.Call) and (self.dotted(k.func) or "").endswith("partial") and k.args:
                k = k.args[0]
            if isinstance(k, ast.Name):
                names.add(k.id)
        self.__dict__["_pallas_kernels"] = names
        return names

    def imported_modules(self) -> set[str]:
        """Every module name the file imports, with ``from m import a`` also as ``m.a``."""
        mods: set[str] = set()
        for imp in self.imports:
            if imp.level:
                continue
            if isinstance(imp.node, ast.Import):
                mods.add(imp.module)
            else:
                mods.add(imp.module)
                mods.update(f"{imp.module}.{n}" for n in imp.names)
        return mods


def _aliases(tree: ast.Module) -> dict[str, str]:
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    alias[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    alias[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
    return alias


def _imports(tree: ast.Module) -> list[ImportRef]:
    out: list[ImportRef] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(ImportRef(a.name, (), 0, node.lineno, node) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append(ImportRef(node.module or "", tuple(a.name for a in node.names), node.level, node.lineno, node))
    return out


def read_source(path: Path, rel: str) -> SourceFile | str:
    """The parsed file at ``path`` (cached by path, size and mtime), or the reason it could
    not be read or parsed (``"syntax error at line 3: ..."``)."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot read {rel}: {e.strerror or e}"
    key = (str(path), st.st_size, st.st_mtime_ns)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit if isinstance(hit, str) or hit.rel == rel else SourceFile(
            hit.path, rel, hit.source, hit.tree, hit.aliases, hit.imports)
    try:
        source = path.read_text(encoding="utf-8")
        tree = parse_python(source, str(path))
        assert isinstance(tree, ast.Module)
        got: SourceFile | str = SourceFile(path, rel, source, tree, _aliases(tree), _imports(tree))
    except SyntaxError as e:
        got = f"syntax error in {rel} at line {e.lineno}: {e.msg}"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as e:
        got = f"cannot parse {rel}: {type(e).__name__}"
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = got
    return got


class TaskSources:
    """The Python files of one task folder and the imports between them.

    Args:
        task_dir: the task folder (the first entry of the child's ``sys.path``).
    """

    def __init__(self, task_dir: Path | str):
        self.task_dir = Path(task_dir)
        self.problems: dict[str, str] = {}

    def file(self, rel: str) -> SourceFile | None:
        """The parsed task file ``rel`` (relative to the task folder), or None when it does
        not exist, read or parse (the reason is in :attr:`problems`)."""
        got = read_source(self.task_dir / rel, rel)
        if isinstance(got, str):
            self.problems[rel] = got
            return None
        return got

    def resolve(self, imp: ImportRef, importer: str) -> list[str]:
        """The task files (relative paths) that executing ``imp`` in ``importer`` runs, in
        import order (packages' ``__init__.py`` first); empty for an external import."""
        if imp.level:
            base = Path(importer).parent
            for _ in range(imp.level - 1):
                base = base.parent
            parts = [p for p in imp.module.split(".") if p]
            prefix = list(base.parts)
        else:
            parts = imp.module.split(".")
            prefix = []
        out: list[str] = []
        for k in range(1, len(parts) + 1):
            found = self._module_file([*prefix, *parts[:k]])
            if found is None:
                if k == 1 and not imp.level:
                    return []  # the top-level name is not a task module
                break
            out.append(found)
        if imp.names and not isinstance(imp.node, ast.Import):  # from m import sub: a submodule
            for n in imp.names:
                sub = self._module_file([*prefix, *parts, n])
                if sub is not None:
                    out.append(sub)
        return list(dict.fromkeys(out))

    def _module_file(self, parts: list[str]) -> str | None:
        if not parts:
            init = self.task_dir / "__init__.py"
            return "__init__.py" if init.is_file() else None
        rel = "/".join(parts)
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            if (self.task_dir / cand).is_file():
                return cand
        return None

    def closure(self, rel: str, *, exclude: Iterable[str] = ()) -> Iterator[tuple[SourceFile, tuple[str, ...]]]:
        """``rel`` and every task file it imports, transitively (breadth first), each with
        its import chain from ``rel`` (``("reference.py", "helpers.py")``). Files in
        ``exclude`` are not entered; files that do not parse are skipped (see
        :attr:`problems`)."""
        seen: set[str] = set(exclude) - {rel}
        todo: list[tuple[str, tuple[str, ...]]] = [(rel, (rel,))]
        while todo:
            cur, chain = todo.pop(0)
            if cur in seen:
                continue
            seen.add(cur)
            sf = self.file(cur)
            if sf is None:
                continue
            yield sf, chain
            for imp in sf.imports:
                for target in self.resolve(imp, cur):
                    if target not in seen:
                        todo.append((target, (*chain, target)))

    def all_imports(self, rel: str) -> set[str]:
        """Every module name imported by ``rel`` and the task files it imports (see
        :meth:`SourceFile.imported_modules`)."""
        mods: set[str] = set()
        for sf, _ in self.closure(rel):
            mods |= sf.imported_modules()
        return mods


#: top-level packages the walker never enters (the framework itself, not the candidate's code).
FRAMEWORK_PACKAGES = frozenset({"torch", "triton", "numpy", "scipy", "jax", "jaxlib", "sympy", "workstation"})
#: the most installed-package files one walk reads (a library's __init__ imports hundreds).
MAX_PACKAGE_FILES = 48
#: import hops followed inside an installed package from the module the task imports.
MAX_PACKAGE_DEPTH = 2


def find_installed_module(name: str) -> Path | None:
    """The file of the installed module ``name`` (``"flag_gems.ops.mm"``), found on
    ``sys.path`` by path alone (never imported): ``a/b/c.py`` or ``a/b/c/__init__.py``
    under the folder of the top-level package ``a``; None when not found."""
    import importlib.machinery
    import sys

    parts = name.split(".")
    if not parts[0] or parts[0] in FRAMEWORK_PACKAGES or parts[0] in getattr(sys, "stdlib_module_names", ()):
        return None
    spec = importlib.machinery.PathFinder.find_spec(parts[0], [p for p in sys.path if p])
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    if len(parts) == 1:
        return origin if origin.suffix == ".py" else None
    if origin.name != "__init__.py":
        return None
    base = origin.parent.joinpath(*parts[1:])
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def package_closure(sources: TaskSources, rel: str) -> Iterator[tuple[SourceFile, tuple[str, ...]]]:
    """The installed-package modules that ``rel`` and the task files it imports import
    (``from liger_kernel.ops.rms_norm import ...`` -> ``liger_kernel/ops/rms_norm.py``), and
    the modules of the same package those import, up to :data:`MAX_PACKAGE_DEPTH` hops and
    :data:`MAX_PACKAGE_FILES` files; framework and standard-library modules are not
    entered, nor the packages' ``__init__`` chains. Each file's ``rel`` is its path from
    the site folder (``flag_gems/ops/mm.py``); the chain starts at the task file."""
    seen: set[str] = set()
    todo: list[tuple[str, tuple[str, ...], int]] = []
    for sf, chain in sources.closure(rel):
        for imp in sf.imports:
            if imp.level or sources.resolve(imp, sf.rel):
                continue
            names = [imp.module] + ([f"{imp.module}.{n}" for n in imp.names] if imp.names else [])
            todo += [(n, chain, 0) for n in names]
    count = 0
    while todo and count < MAX_PACKAGE_FILES:
        name, chain, depth = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        path = find_installed_module(name)
        if path is None:
            continue
        top = name.split(".")[0]
        site = path.parents[len(name.split(".")) - (1 if path.name != "__init__.py" else 0)]
        got = read_source(path, str(path.relative_to(site)))
        if isinstance(got, str):
            sources.problems[name] = got
            continue
        count += 1
        yield got, (*chain, name)
        if depth >= MAX_PACKAGE_DEPTH or path.name == "__init__.py":
            continue
        pkg = name.rsplit(".", 1)[0] if "." in name else name
        for imp in got.imports:
            if imp.level:
                base = pkg.split(".")
                base = base[: len(base) - (imp.level - 1)] if imp.level > 1 else base
                mod = ".".join([*base, imp.module] if imp.module else base)
            else:
                mod = imp.module
            if mod.split(".")[0] != top:
                continue
            todo.append((mod, (*chain, name), depth + 1))
            todo += [(f"{mod}.{n}", (*chain, name), depth + 1) for n in imp.names]


def installed_versions(sources: TaskSources, files: Iterable[str]) -> dict[str, str]:
    """Versions of the installed distributions that ``files`` of the task (and the task
    files they import) import, by distribution name (``{"liger_kernel": "0.8.5"}``): read
    from package metadata (``importlib.metadata``), never by importing. The standard
    library and modules of the task itself are left out."""
    import importlib.metadata as md
    import sys

    tops: set[str] = set()
    for f in files:
        for m in sources.all_imports(f):
            tops.add(m.split(".")[0])
    tops -= set(getattr(sys, "stdlib_module_names", ()))
    dists = md.packages_distributions()
    out: dict[str, str] = {}
    for top in sorted(tops):
        for dist in dists.get(top, ()):
            try:
                out[dist.replace("-", "_").lower()] = md.version(dist)
            except md.PackageNotFoundError:
                continue
    return out
