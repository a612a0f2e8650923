"""The bubblewrap sandbox every process that runs task code lives in.

kws starts the fork server (:mod:`workstation.harness.forkserver`) as ``bwrap ... --
python -m workstation.harness.forkserver``; its job children, the fresh interpreters
they start and the AOT compile child are all descendants, so all of them are inside.
The sandbox (:func:`sandbox_argv`):

- new user, pid, IPC, UTS, network and (where the kernel has it) cgroup namespaces;
  ``--die-with-parent`` (the sandbox ends when kws does, even on ``SIGKILL``),
  ``--new-session`` (no ``TIOCSTI`` keystroke injection into the reviewer's terminal);
  every capability dropped except ``CAP_SYS_ADMIN``, ``CAP_SYS_PTRACE`` and
  ``CAP_SETPCAP`` *of the sandbox's own user namespace*, which the fork server keeps to
  give each job namespaces of its own and to read a job's memory from outside; every job
  drops all three before task code runs (:mod:`workstation.harness.jobns`);
- the root is an empty tmpfs. Read-only: ``/usr``, ``/etc`` (without the entries only
  root may read: ``/etc/shadow``, private host keys; see :func:`etc_masks`), ``/opt``,
  the ``/bin``, ``/sbin``, ``/lib*`` links, ``/sys``, the Python installation (base and
  virtual-environment prefixes, the site-packages folders of ``sys.path``) and kws's own
  package (at ``/kws/lib/workstation``, nothing else of its checkout). A fresh ``/proc``
  of the sandbox's pid namespace, a minimal ``/dev``, a private ``/tmp`` (``HOME`` lies in
  it). Writable: only ``/kws/jobs`` (the run's job folders: task copies and results) and
  ``/kws/caches`` (per task and role compiler caches), and each job sees only its own
  folder and cache (:mod:`workstation.harness.jobns`);
- not there: the reviewer's home, the queue repository (``.git``, records, ``gold/``),
  the original task folder, ``/run`` (sockets, the SSH agent), ``/root``, ``/home``,
  ``/mnt``, ``/media``, ``/srv``, ``/var``; kws's own processes (the pid namespace shows
  only the sandbox's);
- on a GPU box, :func:`gpu_binds`: ``/dev/nvidiactl``, ``/dev/nvidia-uvm``,
  ``/dev/nvidia-uvm-tools``, ``/dev/nvidia-modeset``, ``/dev/nvidia-caps`` and
  ``/dev/nvidia<minor>`` only for the GPUs ``CUDA_VISIBLE_DEVICES`` names (indices in PCI
  bus order, or ``GPU-<uuid>``); inside, ``CUDA_VISIBLE_DEVICES`` lists those GPUs' UUIDs.
  The driver's libraries are part of ``/usr`` (read-only already).

:func:`probe` tells whether bubblewrap works here (installed, and allowed to create the
namespaces); :data:`INSTALL_HINT` says how to get it.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

from workstation import settings

#: how to get bubblewrap (shown when it is missing or cannot run).
INSTALL_HINT = (
    "kws runs task code only inside bubblewrap (bwrap). Install it: Debian/Ubuntu `sudo apt-get install "
    "bubblewrap`, Fedora `sudo dnf install bubblewrap`, Arch `sudo pacman -S bubblewrap` (or run "
    "scripts/setup.sh). On Ubuntu 23.10+ unprivileged user namespaces may be restricted by AppArmor: the "
    "bubblewrap package's profile allows bwrap. To run task code without a sandbox anyway (it can then "
    "read your files and keys), pass --no-sandbox or set `sandbox = \"none\"` in ~/.config/kws/config.toml; "
    "reports then say \"sandbox\": \"none\"."
)
#: system folders bound read-only when they exist (a symlink stays a symlink).
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: inside the sandbox.
KWS_LIB = "/kws/lib"
JOBS = "/kws/jobs"
CACHES = "/kws/caches"
HOME = "/tmp/home"
#: where a job builds its private /tmp before moving it into place (:mod:`workstation.harness.jobns`).
TMP_STAGING = "/kws/tmp-staging"
#: at most this many /etc entries are masked (a machine with more is unusual).
MAX_MASKS = 256
#: the capabilities the fork server keeps (of the sandbox's user namespace only).
SERVER_CAPS = ("CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SETPCAP")
NAMESPACE_FLAGS = ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
                   "--unshare-cgroup-try", "--die-with-parent", "--new-session")


def find_bwrap() -> str | None:
    """The bwrap binary: the ``bwrap`` setting (``$KWS_BWRAP``; an empty value: none), else
    ``bwrap`` on PATH."""
    chosen = settings.current().bwrap
    if chosen is not None:
        return chosen or None
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def probe(bwrap: str) -> str:
    """"" when ``bwrap`` can create the sandbox's namespaces here, else why not (its
    error output)."""
    argv = [bwrap, *NAMESPACE_FLAGS, "--cap-drop", "ALL", *_cap_args(), "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{bwrap} did not run: {e}"
    if p.returncode != 0:
        return f"{bwrap} cannot create the sandbox here (exit {p.returncode}): {p.stderr.strip()[:500]}"
    return ""


def _cap_args() -> list[str]:
    out: list[str] = []
    for c in SERVER_CAPS:
        out += ["--cap-add", c]
    return out


def etc_masks(root: str = "/etc") -> list[tuple[str, bool]]:
    """Entries under ``root`` that a user other than their owner may not read: (path,
    is_dir). The sandbox hides them, so even a kws run as root shows task code only what
    an unprivileged user could read there (``/etc/shadow``, ``/etc/ssh`` host keys,
    ``/etc/sudoers``). Symlinks are not followed."""
    out: list[tuple[str, bool]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames):
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and (st.st_mode & 0o005) != 0o005:
                out.append((p, True))
        dirnames[:] = [d for d in dirnames if (os.path.join(dirpath, d), True) not in out]
        for name in filenames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o004:
                out.append((p, False))
        if len(out) > MAX_MASKS:
            break
    return out[:MAX_MASKS]


#: the host's shared scratch folders: never bound into the sandbox (it has its own).
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def _script_dir() -> Path | None:
    """The folder of the script Python was started with (``sys.argv[0]`` a file), else None."""
    arg0 = sys.argv[0] if sys.argv else ""
    if not arg0 or arg0 in ("-c", "-m"):
        return None
    try:
        p = Path(arg0).resolve()
    except OSError:
        return None
    return p.parent if p.is_file() else None


def python_dirs(pkg_root: Path) -> list[str]:
    """Folders of this Python installation task code needs read-only: the base and
    virtual-environment prefixes and the existing folders of ``sys.path``, except
    ``pkg_root`` (kws's checkout: only its package is bound, elsewhere), any folder that
    holds it, and anything inside it other than the prefixes and site-packages folders
    (a virtual environment inside the checkout is bound; its ``sample_queue`` is not).

    Never bound: the folder of the script that started Python (``sys.path[0]`` for
    ``python /some/dir/script.py``: the caller's folder, not an installation; a script in
    ``/tmp`` would otherwise put the host's whole ``/tmp`` in view, read-only over the
    sandbox's private one), and :data:`SCRATCH_DIRS` or any folder holding one."""
    prefixes = {Path(p).resolve() for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)}
    cands = [*prefixes, *(Path(p) for p in sys.path if p and p != ".")]
    root = pkg_root.resolve()
    script = _script_dir()
    out: list[str] = []
    for c in cands:
        try:
            p = c.resolve()
        except OSError:
            continue
        if not p.is_dir() or p == Path("/") or p == root or root.is_relative_to(p):
            continue
        if p not in prefixes and ((p == script and p.name not in ("site-packages", "dist-packages")) or any(Path(d).is_relative_to(p) for d in SCRATCH_DIRS)):
            continue
        if p.is_relative_to(root) and p not in prefixes and p.name not in ("site-packages", "dist-packages"):
            continue
        s = str(p)
        if any(s == d or s.startswith(d + "/") for d in SYSTEM_DIRS) or s in out:
            continue
        out.append(s)
    out.sort(key=len)
    kept: list[str] = []
    for s in out:  # the outermost of nested folders
        if not any(s.startswith(k + "/") for k in kept):
            kept.append(s)
    return kept


def gpu_binds(visible: str | None) -> tuple[list[str], list[str], str]:
    """The bwrap arguments that bind the NVIDIA device nodes of the GPUs in
    ``visible`` (``CUDA_VISIBLE_DEVICES``; ``None``: every GPU), the UUIDs those GPUs have
    (``CUDA_VISIBLE_DEVICES`` inside), and a note ("" or what could not be resolved).

    GPU indices are in PCI bus order (``nvidia-smi``'s; kws sets
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` inside). The minor number of each GPU's node comes
    from ``/proc/driver/nvidia/gpus/<bus id>/information``.
    """
    if not os.path.exists("/dev/nvidiactl"):
        return [], [], ""
    gpus = _nvidia_gpus()
    if not gpus:
        return [], [], "nvidia-smi did not list the GPUs: no GPU device node is bound"
    chosen, note = _visible_gpus(gpus, visible)
    args: list[str] = []
    for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
                 "/dev/nvidia-caps"):
        if chosen and os.path.exists(node):
            args += ["--dev-bind", node, node]
    for g in chosen:
        node = f"/dev/nvidia{g['minor']}"
        if os.path.exists(node):
            args += ["--dev-bind", node, node]
    if chosen and os.path.isdir("/proc/driver/nvidia"):
        pass  # the sandbox's own /proc shows the driver's files
    return args, [g["uuid"] for g in chosen], note


def _visible_gpus(gpus: list[dict[str, str]], visible: str | None) -> tuple[list[dict[str, str]], str]:
    """The GPUs of ``gpus`` (:func:`_nvidia_gpus`) that ``visible`` (``CUDA_VISIBLE_DEVICES``:
    indices or UUID prefixes; ``None``: all, empty: none) names, in its order, and a note
    ("" or the first entry that names no GPU: CUDA ignores it and the entries after it)."""
    if visible is None or visible.strip() == "":
        return (gpus if visible is None else []), ""
    chosen: list[dict[str, str]] = []
    for item in (x.strip() for x in visible.split(",")):
        if not item:
            continue
        if item.isdigit():
            match = [g for g in gpus if g["index"] == item]
        else:
            match = [g for g in gpus if g["uuid"].startswith(item) or g["uuid"] == f"GPU-{item}"]
        if not match:
            return chosen, (f"CUDA_VISIBLE_DEVICES entry {item!r} names no GPU nvidia-smi lists "
                            "(MIG instances are not bound)")
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen, ""


def _nvidia_gpus() -> list[dict[str, str]]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        p = subprocess.run([smi, "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    out = []
    for line in p.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 3:
            continue
        index, uuid, bus = parts
        minor = _minor_of(bus)
        if minor is not None:
            out.append({"index": index, "uuid": uuid, "bus": bus, "minor": minor})
    return out


def _minor_of(bus: str) -> str | None:
    base = Path("/proc/driver/nvidia/gpus")
    if not base.is_dir():
        return None
    want = bus.lower()[-12:]  # nvidia-smi prints 00000000:3B:00.0, /proc uses 0000:3b:00.0
    for d in base.iterdir():
        if d.name.lower()[-12:] == want:
            try:
                for line in (d / "information").read_text().splitlines():
                    if line.startswith("Device Minor:"):
                        return line.split(":", 1)[1].strip()
            except OSError:
                return None
    return None


def sandbox_hostname() -> str:
    """The host name task code sees: the machine's own (what a task on this box would see
    outside kws, so the name does not tell kws's sandbox apart), or ``localhost`` when it
    has none a UTS namespace accepts (empty, or over 64 bytes)."""
    name = socket.gethostname()
    return name if 0 < len(name.encode()) <= 64 else "localhost"


def sandbox_argv(bwrap: str, *, jobs: Path, caches: Path, pkg_dir: Path, gpu: list[str] | None = None) -> list[str]:
    """The bwrap command line before ``--`` (see the module doc): ``jobs`` and ``caches``
    are the run's host folders bound writable at :data:`JOBS` / :data:`CACHES`,
    ``pkg_dir`` the ``workstation`` package bound read-only under :data:`KWS_LIB`, ``gpu``
    the device binds of :func:`gpu_binds`."""
    argv = [bwrap, *NAMESPACE_FLAGS, "--cap-drop", "ALL", *_cap_args(), "--hostname", sandbox_hostname()]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for path, is_dir in etc_masks():
        argv += (["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path])
    # the private /tmp first: a Python installation that lives under /tmp (a CI checkout's
    # .venv) is bound over it, not hidden by it (each job keeps those binds, harness.jobns)
    argv += ["--tmpfs", "/tmp", "--dir", HOME, "--tmpfs", "/var/tmp", "--dir", TMP_STAGING]
    for d in python_dirs(pkg_dir.parent):
        argv += ["--ro-bind", d, d]
    argv += ["--ro-bind", str(pkg_dir), f"{KWS_LIB}/workstation"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    if os.path.isdir("/sys"):
        argv += ["--ro-bind", "/sys", "/sys"]
    argv += ["--bind", str(jobs), JOBS, "--bind", str(caches), CACHES, "--dir", "/kws/job", "--dir", "/kws/cache"]
    argv += list(gpu or [])
    argv += ["--chdir", "/kws"]
    return argv
