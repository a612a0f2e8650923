"""Print the code-shape figures of the ``workstation`` package (issue 38's table).

Usage: ``python scripts/shape_figures.py [--list]``

Prints, for ``workstation/``:

- modules over 700 lines (physical lines);
- functions and methods over 80 lines (``def`` line to the last line of the body, nested
  functions counted on their own too);
- functions with a McCabe complexity over 10 (``ruff check --select C901`` with
  ``max-complexity = 10``: ruff's own count, not ours);
- broad exception handlers that swallow silently: ``except:``, ``except Exception`` or
  ``except BaseException`` whose body neither raises, nor logs, nor binds the exception and
  uses it, and that carries no ``# noqa: BLE001`` with a reason in parentheses;
- inert ``# noqa`` comments (ruff's RUF100: a code that is unused or not enabled);
- ``type: ignore`` comments without an error code.

``--list`` also names every item. Nothing here is asserted by a test: the figures are for
the issue's note and for a reviewer of a change; ``ruff`` (BLE001, RUF100) and the type
checker enforce the rules that matter.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "workstation"
BROAD = {"Exception", "BaseException"}
LOG_CALLS = {"exception", "error", "warning", "warn", "debug", "info", "critical", "log", "print", "note",
             "could_not_judge", "append", "add", "setdefault"}


def _is_broad(h: ast.ExceptHandler) -> bool:
    t = h.type
    if t is None:
        return True
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(isinstance(n, ast.Name) and n.id in BROAD for n in names)


def _swallows(h: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=h.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return False
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in LOG_CALLS:
                return False
        if h.name and isinstance(node, ast.Name) and node.id == h.name:
            return False
    return True


def silent_handlers(path: Path, tree: ast.AST, lines: list[str]) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and _is_broad(node) and _swallows(node):
            line = lines[node.lineno - 1]
            if re.search(r"noqa: BLE001\s+\(.+\)", line):
                continue
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return out


def long_functions(path: Path, tree: ast.AST, limit: int = 80) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if n > limit:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    return out


def ruff_rows(select: str, extra: list[str]) -> list[str]:
    """ruff's rows of rule ``select`` over the package (the project's own rule set plus it,
    so RUF100 judges each ``noqa`` against the rules the project enables)."""
    cmd = [sys.executable, "-m", "ruff", "check", "--extend-select", select, "--output-format", "json",
           "--no-cache", *extra, str(PKG)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        rows = json.loads(res.stdout or "[]")
    except ValueError:
        raise SystemExit(f"ruff did not answer in JSON: {res.stderr[:500]}") from None
    return [f"{Path(r['filename']).relative_to(ROOT)}:{r['location']['row']} {r['message']}" for r in rows
            if r["code"] == select]


def main(argv: list[str]) -> int:
    show = "--list" in argv
    big, longf, silent, bare_ignores = [], [], [], []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > 700:
            big.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
        tree = ast.parse(text)
        longf += long_functions(path, tree)
        silent += silent_handlers(path, tree, lines)
        bare_ignores += [f"{path.relative_to(ROOT)}:{i}" for i, ln in enumerate(lines, 1)
                         if re.search(r"type:\s*ignore(?!\[)", ln)]
    c901 = ruff_rows("C901", ["--config", "lint.mccabe.max-complexity=10"])
    inert = ruff_rows("RUF100", [])
    figures = [("modules over 700 lines", big), ("functions over 80 lines", longf),
               ("C901 > 10", c901), ("silent broad except handlers", silent),
               ("inert # noqa (RUF100)", inert), ("type: ignore without a code", bare_ignores)]
    for name, items in figures:
        print(f"{name}: {len(items)}")
        if show:
            for it in items:
                print(f"    {it}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
