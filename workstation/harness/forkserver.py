"""The fork server: imports torch and triton once, then forks one child per job.

Run by :class:`workstation.runner.sandbox.Runner` as ``python -m
workstation.harness.forkserver NICE`` in the scrubbed environment. Protocol, one JSON
object per line: the parent writes ``{"op": "run", "id", "job", "cwd", "limits"}``; the
server answers ``{"op": "ready", ...}`` once, then ``{"op": "started", "id", "pid"}`` and
``{"op": "exited", "id", "pid", "status"}`` per job (``status``: exit code, or minus the
signal number). The server never runs task code itself and never initialises CUDA
(children would inherit a broken context): it asks NVML whether a GPU exists.

Device choice: ``KWS_DEVICE`` (``cpu``/``cuda``) when set, else CUDA when available.
On the CPU, ``TRITON_INTERPRET=1`` is set before triton is imported.

Optional backends: ``versions`` names ``jax`` when JAX is installed (the ``kws[pallas]``
extra) and ``nki`` when an NKI with ``simulate_kernel`` imports. JAX is imported into the
server (``workstation.harness.pallas.install``: JAX, Pallas, the ``pallas_call`` wrapper;
about 1.5 s) before forking the first job whose task files import it, so that its
children do not each pay the import; the server never creates a JAX array (a child
forked after one deadlocks).
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys

from workstation.protocol.steps import read_job


def _choose_device() -> tuple[str, bool]:
    forced = os.environ.get("KWS_DEVICE", "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced, forced == "cpu"
    import torch  # noqa: F401  (only the NVML-based availability check; no CUDA init)

    return ("cuda", False) if torch.cuda.is_available() else ("cpu", True)


def _optional_versions() -> dict[str, str]:
    """Versions of the optional backends that can run here (module doc), without importing
    JAX."""
    import importlib.metadata
    import importlib.util

    out: dict[str, str] = {}
    if importlib.util.find_spec("jax") is not None and importlib.util.find_spec("jaxlib") is not None:
        try:
            out["jax"] = importlib.metadata.version("jax")
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        import nki  # noqa: F401  (the PyPI placeholder raises ImportError here)

        if hasattr(nki, "simulate_kernel"):
            out["nki"] = str(getattr(nki, "__version__", "unknown"))
    except Exception:  # noqa: BLE001,S110  (no usable NKI: the entry stays absent)
        pass
    return out


def _preload_for(req: dict, state: dict) -> None:
    """Import JAX into the server before forking a job whose task uses it (once)."""
    if state.get("jax_loaded") or "jax" not in state.get("versions", {}):
        return
    try:
        from workstation.harness import pallas

        if pallas.jax_wanted(read_job(req["job"]).task_dir):
            state["jax_loaded"] = pallas.install()
    except Exception:  # noqa: BLE001  (the child imports JAX itself then)
        state["jax_loaded"] = True


def _emit(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _child(req: dict) -> None:
    """In the forked child: new session, limits, stdio to files, run the job."""
    os.setsid()
    # CPython ignores SIGXFSZ (writes then fail with EFBIG); restore the default so that a
    # stdout/stderr flood past the file-size limit ends the child with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    limits = req.get("limits") or {}
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("fsize"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
    if limits.get("as"):
        resource.setrlimit(resource.RLIMIT_AS, (limits["as"], limits["as"]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    job = read_job(req["job"])
    out_dir = job.out_dir
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    so = os.open(os.path.join(out_dir, "stdout.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    se = os.open(os.path.join(out_dir, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(so, 1)
    os.dup2(se, 2)
    sys.stdin = open(0)  # noqa: SIM115
    os.chdir(req["cwd"])
    code = 0
    try:
        from workstation.harness import run_job

        run_job(job)
    except BaseException:  # noqa: BLE001  (the harness reports step errors itself)
        import traceback

        traceback.print_exc()
        code = 70
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main() -> None:
    nice = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    if nice:
        os.nice(nice)
    device, interpret = _choose_device()
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    import numpy  # noqa: F401
    import torch

    versions = {"torch": torch.__version__.split("+")[0], "python": sys.version.split()[0]}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    import workstation
    import workstation.harness

    workstation.harness.load_plugins()  # preload the harness and its step modules

    versions["kws"] = workstation.__version__
    versions.update(_optional_versions())
    preload = {"versions": versions}
    if device == "cuda":
        label = "cuda"
    else:
        label = "cpu (triton interpreter)" if "triton" in versions else "cpu"
    _emit({"op": "ready", "device": device, "label": label, "interpreter": interpret,
           "versions": versions})

    running: dict[int, int] = {}  # pid -> job id
    # Read stdin unbuffered: select() reports the fd, so a buffered readline() could pull
    # two requests from the pipe and leave the second in Python's buffer, unseen by the
    # next select() (a job that never starts when two are submitted at once).
    pending = b""
    open_in = True
    while open_in or running:
        if open_in:
            r, _, _ = select.select([0], [], [], 0.02)
            if r:
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    open_in = False
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not line.strip():
                        continue
                    req = json.loads(line)
                    if req.get("op") == "run":
                        _preload_for(req, preload)
                        pid = os.fork()
                        if pid == 0:
                            _child(req)
                        running[pid] = req["id"]
                        _emit({"op": "started", "id": req["id"], "pid": pid})
        else:
            select.select([], [], [], 0.02)
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                running.clear()
                break
            if pid == 0:
                break
            jid = running.pop(pid, None)
            if jid is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            _emit({"op": "exited", "id": jid, "pid": pid, "status": code})


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown of torch/triton: the runner waits for this exit
