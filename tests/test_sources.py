"""The one import walker: Python's resolution rules over a task folder, parse-once cache,
problems recorded instead of raised, thread-safe parsing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from workstation.task.sources import TaskSources, read_source


def _tree(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_closure_follows_python_resolution_and_records_chains(tmp_path):
    _tree(tmp_path, {
        "candidate.py": "import torch\nimport pkg.ops as ops\nfrom helpers import scale\n",
        "helpers.py": "from . import consts\nimport triton.language as tl\n",
        "consts.py": "BLOCK = 128\n",
        "pkg/__init__.py": "",
        "pkg/ops.py": "from .kernels import k\n",
        "pkg/kernels.py": "import triton\n",
        "unrelated.py": "import jax\n",
    })
    src = TaskSources(tmp_path)
    got = {sf.rel: chain for sf, chain in src.closure("candidate.py")}
    assert set(got) == {"candidate.py", "helpers.py", "consts.py", "pkg/__init__.py", "pkg/ops.py",
                        "pkg/kernels.py"}
    assert got["pkg/kernels.py"] == ("candidate.py", "pkg/ops.py", "pkg/kernels.py")
    assert got["consts.py"] == ("candidate.py", "helpers.py", "consts.py")
    mods = src.all_imports("candidate.py")
    assert {"torch", "triton", "triton.language"} <= mods and "jax" not in mods
    assert [sf.rel for sf, _ in src.closure("candidate.py", exclude=["helpers.py"])] == [
        "candidate.py", "pkg/__init__.py", "pkg/ops.py", "pkg/kernels.py"]


def test_aliases_resolve_dotted_names(tmp_path):
    _tree(tmp_path, {"c.py": "import torch.nn.functional as F\nfrom torch import mm as matmul\n"
                             "y = F.softmax(x)\nz = matmul(a, b)\n"})
    sf = TaskSources(tmp_path).file("c.py")
    calls = [n for n in __import__("ast").walk(sf.tree) if n.__class__.__name__ == "Call"]
    assert sorted(sf.dotted(c.func) for c in calls) == ["torch.mm", "torch.nn.functional.softmax"]


def test_unparsable_files_are_problems_not_exceptions(tmp_path):
    _tree(tmp_path, {"a.py": "import b\n", "b.py": "def f(:\n"})
    src = TaskSources(tmp_path)
    assert [sf.rel for sf, _ in src.closure("a.py")] == ["a.py"]
    assert "syntax error in b.py at line 1" in src.problems["b.py"]
    assert src.file("missing.py") is None and "cannot read missing.py" in src.problems["missing.py"]


def test_each_content_is_parsed_once_and_threads_can_parse_together(tmp_path):
    body = "\n".join(f"def f{i}(x):\n    return " + "(" * 50 + "x" + ")" * 50 for i in range(200))
    for i in range(16):
        (tmp_path / f"m{i}.py").write_text(body)
    first = read_source(tmp_path / "m0.py", "m0.py")
    assert read_source(tmp_path / "m0.py", "m0.py").tree is first.tree
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: TaskSources(tmp_path).file(f"m{i}.py"), range(16)))
    assert all(g is not None for g in got)
