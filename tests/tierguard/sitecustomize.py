"""The fast tier's guard: refuses to start a process that runs task code.

tests/conftest.py installs :func:`install` in the pytest process when the selected tests
include no ``battery`` or ``system`` test, and puts this folder first on ``PYTHONPATH`` so
that every Python child of a test (an app started by a script, ``kws`` under a test's own
subprocess) imports this module at start-up and installs it too. ``KWS_TEST_TIER_GUARD``
names the file each refusal is appended to (one line each), so the test fails with the
message even when the refusal happened in a grandchild or a worker thread that swallowed it.
Outside such a run (the variable unset) importing this module does nothing but chain to a
``sitecustomize`` it shadows.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ENV = "KWS_TEST_TIER_GUARD"
HERE = Path(__file__).resolve().parent
TASK_COMMANDS = ("check", "profile", "recheck", "screen")  # the kws commands that run task code


class StartsTaskCode(RuntimeError):
    """A test outside the battery and system tiers started task code."""


def task_code_in(args: Any) -> str | None:
    """What the command line ``args`` (as ``subprocess.Popen`` takes it) starts that runs task
    code, in words; None when it starts none."""
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = os.fsdecode(args).split()
    else:
        argv = [os.fsdecode(a) for a in args]
    if "workstation.harness.forkserver" in argv:
        return "a fork server (workstation.runner.Runner)"
    if "workstation.engine.server" in argv:
        return "the check server (python -m workstation.engine.server)"
    for i, a in enumerate(argv):  # kws (the script or the module), then a command that runs task code
        if a == "workstation.cli.main" or (i == 0 and Path(a).name == "kws"):
            sub = [x for x in argv[i + 1:] if x in TASK_COMMANDS][:1]
            return f"kws {sub[0]}" if sub else None
    return None


def install(log: Path, current: Any = lambda: os.environ.get("PYTEST_CURRENT_TEST", "a test")) -> Any:
    """Make ``subprocess.Popen`` refuse task code: each refusal is appended to ``log`` and raised
    as :class:`StartsTaskCode`. ``current()`` names the running test. Returns the original
    ``Popen.__init__`` (to restore)."""
    init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen, args: Any, *a: Any, **kw: Any) -> None:
        what = task_code_in(args)
        if what:
            test = str(current()).removesuffix(" (call)").removesuffix(" (setup)").removesuffix(" (teardown)")
            msg = (f"{test}: this test starts task code ({what}); its module belongs in the battery tier "
                   "(tests/conftest.py: MODULE_TIER, or TEST_TIER for one test)")
            with open(log, "a", encoding="utf-8") as f:
                f.write(msg + "\n")
            raise StartsTaskCode(msg)
        init(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    return init


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if the interpreter has one."""
    rest = [p for p in sys.path if p and Path(p).resolve() != HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "sitecustomize":
    if os.environ.get(ENV):
        install(Path(os.environ[ENV]))
    _chain()
