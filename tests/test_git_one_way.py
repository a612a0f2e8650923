"""One way to run git: :func:`workstation.repo.gitqueue.git_result` (behind ``run_git`` /
``git_text``) is the only code that starts git, so every git command kws runs has the
hardened environment (``harden``: no hooks, no repository-configured programs).

An AST scan of ``workstation/`` fails on any other way: a GitPython command call
(``repo.git.<cmd>(...)``, ``git.Git(...)``, ``Repo.init`` / ``Repo.clone_from``, a remote's
``fetch`` / ``push`` / ``pull``, ``repo.index.commit`` ...) or a process started with a
literal ``"git"`` argv (``subprocess.run(["git", ...])``, ``os.system("git ...")``).
GitPython's object reads (``repo.head.commit.tree``, ``repo.rev_parse``) are not commands
and stay allowed."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "workstation"

#: (module path relative to the package, function) allowed to start git.
ALLOWED = {("repo/gitqueue.py", "git_result")}

#: ``<x>.git.<attr>`` calls that only read or set GitPython's persistent environment.
_ENV_ONLY = {"environment", "update_environment"}
_REPO_COMMANDS = {"init", "clone_from"}
_REMOTE_COMMANDS = {"fetch", "push", "pull"}
_INDEX_COMMANDS = {"add", "commit", "remove", "move", "reset", "write_tree"}
_SHELL_CALLS = {"system", "popen", "getoutput", "getstatusoutput"}


def _name(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _is_git_argv(node: ast.AST) -> bool:
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        first = node.elts[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and (
            first.value == "git" or first.value.endswith("/git"))
    return False


def _is_git_shell(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lstrip().startswith("git ")


def _why(call: ast.Call) -> str | None:
    """Why ``call`` runs git some other way, or None."""
    func = call.func
    if call.args and _is_git_argv(call.args[0]):
        return "starts a process with a literal git argv"
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Attribute) and owner.attr == "git" and func.attr not in _ENV_ONLY:
            return f"runs a GitPython command (.git.{func.attr})"
        if func.attr in _REPO_COMMANDS and _name(owner).split(".")[-1] == "Repo":
            return f"runs git through Repo.{func.attr}"
        if func.attr in _REMOTE_COMMANDS and (
            (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) and owner.func.attr == "remote")
            or ".remotes." in f".{_name(owner)}."
        ):
            return f"runs git through a GitPython remote's {func.attr}"
        if func.attr in _INDEX_COMMANDS and isinstance(owner, ast.Attribute) and owner.attr == "index":
            return f"runs git through GitPython's index.{func.attr}"
        if func.attr in _SHELL_CALLS and call.args and _is_git_shell(call.args[0]):
            return f"runs git through a shell ({func.attr})"
    if _name(func).split(".")[-1] == "Git":
        return "makes a GitPython command runner (git.Git)"
    return None


def violations(source: str, rel: str) -> list[str]:
    """``"<rel>:<line> <function>: <why>"`` for every call in ``source`` that runs git
    outside :data:`ALLOWED`."""
    out: list[str] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            if isinstance(child, ast.Call) and (rel, func) not in ALLOWED:
                why = _why(child)
                if why:
                    out.append(f"{rel}:{child.lineno} {func or '<module>'}: {why}")
            visit(child, inner)

    visit(ast.parse(source), "")
    return out


def test_only_git_result_starts_git():
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found += violations(path.read_text(encoding="utf-8"), rel)
    assert found == [], "run git through workstation.repo.gitqueue.run_git instead:\n" + "\n".join(found)


def test_the_one_allowed_function_exists_and_is_the_only_exception():
    source = (PACKAGE / "repo/gitqueue.py").read_text(encoding="utf-8")
    # the allowed function does run git through GitPython (so the scan would see it)...
    body = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "git_result")
    assert any(isinstance(c, ast.Call) and _why(c) for c in ast.walk(body))
    # ...and the same code anywhere else is refused
    assert violations(ast.unparse(body), "repo/plumbing.py")


def test_the_scan_sees_every_other_way():
    bad = textwrap.dedent(
        """
        import subprocess, os, git
        from git import Git, Repo
        def f(repo, path):
            repo.git.status("--porcelain")
            repo.git.execute(["git", "log"])
            self.repo.git.log()
            subprocess.run(["git", "status"], check=True)
            subprocess.Popen(("/usr/bin/git", "fetch"))
            os.system("git gc")
            git.Git().config("--get", "user.name")
            Git(path).log()
            git.Repo.init(path)
            Repo.clone_from("url", path)
            repo.remote("origin").fetch()
            repo.remotes.origin.push()
            repo.index.commit("msg")
        """
    )
    found = violations(bad, "records/x.py")
    # one finding on each line of f's body (lines 5 to 17), none elsewhere
    assert sorted(int(f.split(":")[1].split()[0]) for f in found) == list(range(5, 18)), "\n".join(found)
    assert all(" f: " in f for f in found)


def test_the_scan_lets_object_reads_and_the_environment_be():
    fine = textwrap.dedent(
        """
        def f(repo, q, items):
            repo.git.environment()
            repo.git.update_environment(X="1")
            tree = repo.head.commit.tree
            obj = repo.rev_parse("HEAD")
            url = repo.remote("origin").url
            n = q.index.pending
            i = items.index("git")
            subprocess.run(["python", "-m", "git"])
            print("git status")
        """
    )
    assert violations(fine, "records/x.py") == []
