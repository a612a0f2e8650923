"""Linux namespaces, mounts and capabilities of one job, set up in the fork server's child.

Runs in the fork server (inside the bubblewrap sandbox, see
:mod:`workstation.runner.bwrap`), never in the parent. The fork server keeps three
capabilities of the sandbox's user namespace (``CAP_SYS_ADMIN``, ``CAP_SYS_PTRACE``,
``CAP_SETPCAP``; they mean nothing outside it) so that each job can get namespaces of its
own; it never runs task code. A job is two processes:

- the job's *init*: pid 1 of a fresh pid namespace, made by :class:`PidNamespaces` from a
  small process (the *nursery*) that the server forks before it imports torch, so that
  making it costs a fork of a few MB, not of the server's hundreds. It has a mount
  namespace of its own without any job's or cache's folder, drops every capability and is
  not dumpable (the job cannot read its memory, environment or ``/proc/1/root``), and does
  nothing but reap: when it ends, the kernel kills every process left in that namespace (a
  double-forked ``setsid`` daemon dies with it), and the server ends it when the job
  process ends;
- the *job process*: forked by the server itself into that pid namespace
  (:meth:`PidNamespaces.fork_into`: ``setns`` on the server's pid-namespace-for-children,
  the only heavy fork of a job), pid 2 there (not pid 1: the kernel ignores signals a pid
  1 sends itself, so ``os.abort()`` or the file-size limit's ``SIGXFSZ`` would not end
  it). It unshares its own mount, IPC, network and UTS namespaces, and
  :func:`enter_job_view` gives it a private file-system view: its own job folder at
  ``/kws/job`` (the task copy and the output folder, on a size-capped tmpfs the server
  mounted over it, :func:`job_folder_on_tmpfs`; with its private ``/tmp``, ``/dev/shm``
  and ``/var/tmp`` and its role's compiler cache at ``/kws/cache`` the only places it can
  write), a ``/dev`` of its own holding only the nodes task code needs (:func:`_private_dev`),
  a fresh ``/proc`` that lists only its namespace's processes (with ``sys``,
  ``sysrq-trigger``, ``irq`` and ``bus`` read-only, as bubblewrap does), the folder of every
  other job unmounted, and the sandbox's root (one tmpfs every job would share) read-only.
  :func:`drop_privileges` then drops every capability (bounding set, ambient,
  effective/permitted/inheritable), locks the secure bits and sets ``no_new_privs``, and
  :func:`deny_keyrings` refuses the kernel's keyrings (one user keyring per uid of the
  sandbox), before any task code is imported. Its parent, the server, is outside its pid namespace
  (``getppid()`` is 0 there): it cannot name, signal or trace it.

A candidate job and a reference job therefore never share a writable file, a pid
namespace (neither can see, signal or trace the other), SysV IPC, a keyring or a network
namespace (abstract Unix sockets are per network namespace); two jobs of one principal
share only that principal's compiler cache (docs/architecture.md, "Isolation").

All system calls go through :mod:`ctypes` (Python 3.11 has no ``os.unshare`` or
``os.setns``). Errors raise :class:`OSError` naming the call.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import select
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
JOB_NAMESPACES = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS
#: what the job process unshares itself (its pid namespace comes from :class:`PidNamespaces`).
JOB_OWN_NAMESPACES = JOB_NAMESPACES & ~CLONE_NEWPID

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_CHILD_SUBREAPER = 36
#: SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | ..._LOCKED |
#: SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | ..._LOCKED: uid 0 gains no
#: capability on execve, and nobody can undo it.
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

#: where a job sees its own folder, its cache, and (in the server) all of them.
JOB_MOUNT = "/kws/job"
CACHE_MOUNT = "/kws/cache"
JOBS_ROOT = "/kws/jobs"
CACHES_ROOT = "/kws/caches"
#: size cap of a job's private /tmp (a tmpfs: memory); the runner passes the
#: ``job_tmp_bytes`` setting instead.
TMP_SIZE = "2g"
#: size of each job's private ``/dev/shm`` and ``/var/tmp`` (tmpfs, in the job's own mount
#: namespace): what one job writes there no other job sees, and a write past it fails with
#: ``ENOSPC`` in the job. tmpfs pages count as the job's memory where a cgroup caps it.
SHM_SIZE = "256m"
#: an empty folder of the sandbox where the private /tmp is built (``runner.bwrap.TMP_STAGING``).
TMP_STAGING = "/kws/tmp-staging"
#: parts of a fresh /proc made read-only (bubblewrap's list).
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus")
#: the device nodes a job's private /dev holds (bind mounts of the sandbox's), when there.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
#: and the GPU nodes the sandbox bound (``runner.bwrap.gpu_binds``: ``nvidiactl``,
#: ``nvidia-uvm``, ``nvidia<minor>``, the ``nvidia-caps`` folder, ...).
DEV_GPU_PREFIX = "nvidia"
#: the links of a job's /dev (bubblewrap's).
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}

_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    """The C library with the prototypes used here."""
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        lib.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.unshare.argtypes = [ctypes.c_int]
        lib.setns.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        lib.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _libc = lib
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """``unshare(2)``.

    Raises:
        OSError: the kernel refused (the message names the call).
    """
    _check(libc().unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    """``setns(2)``: join the namespace ``fd`` refers to (for ``CLONE_NEWPID``: the
    namespace this process's next children are born in).

    Raises:
        OSError: the kernel refused (the message names the call).
    """
    _check(libc().setns(fd, nstype), f"setns({nstype:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """``mount(2)``; raises :class:`OSError` naming the target."""
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(libc().mount(enc(source), target.encode(), enc(fstype), flags,
                        ctypes.c_char_p(data.encode()) if data is not None else None),
           f"mount {source or fstype} on {target}")


def umount(target: str) -> None:
    """Detach the mount at ``target`` (``MNT_DETACH``)."""
    _check(libc().umount2(target.encode(), MNT_DETACH), f"umount {target}")


def prctl(option: int, arg2: int = 0) -> None:
    """``prctl(2)`` with one argument; raises :class:`OSError`."""
    _check(libc().prctl(option, arg2, 0, 0, 0), f"prctl({option}, {arg2})")


def set_parent_death_signal(sig: int) -> None:
    """``PR_SET_PDEATHSIG``: ``sig`` arrives when the parent thread ends."""
    prctl(PR_SET_PDEATHSIG, sig)


def set_child_subreaper() -> None:
    """``PR_SET_CHILD_SUBREAPER``: orphaned descendants are re-parented to this process
    (the fork server kills them)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def _bind_readonly(path: str) -> None:
    mount(path, path, None, MS_BIND | MS_REC)
    mount(path, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _mounts_below(prefix: str) -> list[str]:
    """The outermost mount points strictly below ``prefix`` (``/proc/self/mountinfo``)."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            mp = line.split()[4]
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp)  # \040 is a space
            if mp.startswith(prefix + "/"):
                points.append(mp)
    points.sort(key=len)
    return [p for i, p in enumerate(points) if not any(p.startswith(q + "/") for q in points[:i])]


def _private_tmp(size: str = TMP_SIZE) -> None:
    """A fresh tmpfs at ``/tmp`` of ``size`` (tmpfs's ``size=`` syntax) that keeps the
    read-only binds the sandbox made below it (a Python installation under ``/tmp``): built
    at :data:`TMP_STAGING`, the binds copied in read-only, then moved over ``/tmp``
    (``MS_MOVE``)."""
    keep = _mounts_below("/tmp")
    if not keep or not os.path.isdir(TMP_STAGING):
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
        return
    mount("tmpfs", TMP_STAGING, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    for mp in keep:
        dst = TMP_STAGING + mp[len("/tmp"):]
        os.makedirs(dst, exist_ok=True)
        mount(mp, dst, None, MS_BIND | MS_REC)
        mount(dst, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount(TMP_STAGING, "/tmp", None, MS_MOVE)


def _unmount_all_jobs() -> None:
    """Detach :data:`JOBS_ROOT` and :data:`CACHES_ROOT` (every job's folder and cache) from
    this mount namespace; a root that is not there or not a mount point is fine."""
    for root in (JOBS_ROOT, CACHES_ROOT):
        try:
            umount(root)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EINVAL):  # no such folder, or not a mount point
                raise


def job_folder_on_tmpfs(job_folder: str, size: int) -> None:
    """In the fork server, before it forks the job: put ``job_folder`` (the task copy, the
    job file and the output folder the runner made) on a tmpfs of ``size`` bytes of its
    own: mounted at :data:`TMP_STAGING`, the folder's contents copied in, then moved over
    the folder (``MS_MOVE``). What the job writes there past ``size`` fails with
    ``ENOSPC``; the runner reads the results through the server's view
    (``/proc/<server>/root``) and asks for :func:`release_job_folder` when done.

    Raises:
        OSError: a mount or the copy failed.
    """
    import shutil

    mount("tmpfs", TMP_STAGING, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0755")
    try:
        shutil.copytree(job_folder, TMP_STAGING, symlinks=True, dirs_exist_ok=True)
        mount(TMP_STAGING, job_folder, None, MS_MOVE)
    except BaseException:
        umount(TMP_STAGING)
        raise


def release_job_folder(job_folder: str) -> None:
    """Detach the tmpfs :func:`job_folder_on_tmpfs` put over ``job_folder`` (it is freed
    when the last descriptor of it closes)."""
    try:
        umount(job_folder)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.EINVAL):
            raise


def _private_dev(shm: str) -> None:
    """A ``/dev`` of the job's own: a fresh tmpfs, built at :data:`TMP_STAGING` and moved
    over the sandbox's ``/dev`` (which every job shares otherwise), holding bind mounts of
    :data:`DEV_NODES` and of the GPU nodes the sandbox bound (:data:`DEV_GPU_PREFIX`), the
    ``fd``/``stdin``/``stdout``/``stderr`` links, and ``shm``, a tmpfs of ``shm`` (tmpfs's
    ``size=`` syntax) of its own; the tmpfs itself is then made read-only, so nothing
    else can be created in it."""
    mount("tmpfs", TMP_STAGING, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755")
    names = sorted(n for n in os.listdir("/dev") if n in DEV_NODES or n.startswith(DEV_GPU_PREFIX))
    for name in names:
        src, dst = f"/dev/{name}", f"{TMP_STAGING}/{name}"
        if os.path.islink(src):
            continue
        if os.path.isdir(src):
            os.mkdir(dst)
            mount(src, dst, None, MS_BIND | MS_REC)
        else:
            os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o600))
            mount(src, dst, None, MS_BIND)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{TMP_STAGING}/{name}")
    os.mkdir(f"{TMP_STAGING}/shm")
    mount("tmpfs", f"{TMP_STAGING}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm},mode=1777")
    mount(None, TMP_STAGING, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount(TMP_STAGING, "/dev", None, MS_MOVE)


def enter_job_view(job_folder: str, cache_folder: str | None, tmp_bytes: int = 0, shm_bytes: int = 0) -> None:
    """In the job process (pid 1 of a fresh pid namespace, in a fresh mount namespace):
    make the mount tree private, bind ``job_folder`` at :data:`JOB_MOUNT` and
    ``cache_folder`` at :data:`CACHE_MOUNT`, unmount the folders of every job and cache,
    mount a private ``/tmp`` (tmpfs of ``tmp_bytes``, else :data:`TMP_SIZE`), a private
    ``/var/tmp`` where the sandbox has one and a private ``/dev`` with its own ``/dev/shm``
    (:func:`_private_dev`; tmpfs of ``shm_bytes`` each, else :data:`SHM_SIZE`), a fresh
    ``/proc``, and make the sandbox's root read-only in this view (its folders are one
    tmpfs every job of the sandbox shares: a file one job left in ``/`` or ``/kws`` would
    be every later job's). What the job can write afterwards is only its own: the job
    folder, its role's compiler cache, ``/tmp``, ``/var/tmp``, ``/dev/shm``
    (docs/architecture.md, "Isolation").

    Raises:
        OSError: a mount failed (the message names it).
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount(job_folder, JOB_MOUNT, None, MS_BIND | MS_REC)
    if cache_folder:
        mount(cache_folder, CACHE_MOUNT, None, MS_BIND | MS_REC)
    _unmount_all_jobs()
    _private_tmp(str(tmp_bytes) if tmp_bytes > 0 else TMP_SIZE)
    shm = str(shm_bytes) if shm_bytes > 0 else SHM_SIZE
    if os.path.isdir("/var/tmp") and not os.path.islink("/var/tmp"):
        mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm},mode=1777")
    if os.path.isdir("/dev") and os.path.isdir(TMP_STAGING):
        _private_dev(shm)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_READONLY:
        p = f"/proc/{name}"
        if os.path.exists(p):
            _bind_readonly(p)
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges() -> None:
    """Drop every capability for good: the bounding set (needs ``CAP_SETPCAP``), the
    ambient set, the secure bits (:data:`SECURE_BITS`), ``no_new_privs``, then the
    effective, permitted and inheritable sets (``capset``).

    Raises:
        OSError: a step failed (the job must not run task code then).
    """
    try:
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        rc = libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        if rc != 0 and ctypes.get_errno() != errno.EINVAL:  # a capability this kernel lacks
            _check(rc, f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(libc().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    _check(libc().prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc().capset(ctypes.byref(header), ctypes.byref(data)), "capset(0)")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_X32_BIT = 0x40000000
#: per audit architecture, the numbers of ``add_key``, ``request_key`` and ``keyctl``
#: (x86-64 also under the x32 bit, i386 for 32-bit calls on an x86-64 kernel).
KEYRING_SYSCALLS: dict[int, tuple[int, ...]] = {
    0xC000003E: (248, 249, 250, _X32_BIT | 248, _X32_BIT | 249, _X32_BIT | 250),  # x86-64, x32
    0x40000003: (286, 287, 288),  # i386
    0xC00000B7: (217, 218, 219),  # aarch64
}


def keyring_filter() -> list[tuple[int, int, int, int]]:
    """The seccomp program of :func:`deny_keyrings` as (code, jt, jf, k) instructions: for
    each architecture of :data:`KEYRING_SYSCALLS`, its three calls fail with ``EPERM``;
    every other call (and every call of another architecture) is allowed."""
    prog: list[tuple[int, int, int, int]] = [(_BPF_LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    blocks = []
    for arch, nrs in KEYRING_SYSCALLS.items():
        body = [(_BPF_LD_W_ABS, 0, 0, 0)] + [(_BPF_JEQ_K, -1, 0, nr) for nr in nrs] + [(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW)]
        blocks.append([(_BPF_JEQ_K, 0, len(body), arch), *body])
    for b in blocks:
        prog.extend(b)
    prog.append((_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    deny = len(prog)
    prog.append((_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.EPERM))
    return [(c, deny - i - 1 if jt == -1 else jt, jf, k) for i, (c, jt, jf, k) in enumerate(prog)]


def deny_keyrings() -> None:
    """Install a seccomp filter that makes ``add_key``, ``request_key`` and ``keyctl`` fail
    with ``EPERM`` in this process and every process it starts (:func:`keyring_filter`):
    the kernel's user keyring is one per uid of the sandbox's user namespace, so every job
    could read what another left there. Needs ``no_new_privs`` (:func:`drop_privileges`
    sets it).

    Raises:
        OSError: the kernel refused the filter.
    """
    ins = keyring_filter()
    arr = (_SockFilter * len(ins))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in ins])
    prog = _SockFprog(len(ins), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    rc = libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0)
    _check(rc, "prctl(PR_SET_SECCOMP)")


def capabilities() -> dict[str, str]:
    """The ``Cap*`` lines of ``/proc/self/status`` (hex masks), for tests and reports."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cap"):
                k, _, v = line.partition(":")
                out[k] = v.strip()
    return out


def close_fds(keep: set[int]) -> None:
    """Close every inherited descriptor >= 3 except ``keep``."""
    try:
        fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd >= 3 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def detach_stdio() -> None:
    """Point stdin and stdout at /dev/null: the server's pipes to the parent must never
    reach a job (stderr stays the server's log until the job redirects it)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)


def _init_of_namespace() -> None:
    """pid 1 of a job's pid namespace (see the module docstring); never returns."""
    try:
        set_parent_death_signal(signal.SIGKILL)  # the nursery's end (the server's) ends it
        unshare(CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        _unmount_all_jobs()
        prctl(PR_SET_DUMPABLE, 0)
        drop_privileges()
    except BaseException:  # noqa: BLE001  (no job may join a namespace whose init is not confined)
        os._exit(120)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # re-parented orphans are reaped by the kernel
    while True:
        signal.pause()


def _nursery(req_r: int, rep_w: int) -> None:
    """The nursery's loop: one byte on ``req_r`` asks for a pid namespace; it answers
    ``I <pid>`` (its init, in the server's pid namespace) or ``E <why>`` on ``rep_w``;
    never returns (exits when ``req_r`` closes: the server ended)."""
    try:
        set_parent_death_signal(signal.SIGKILL)
    except OSError:
        pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # inits are reaped by the kernel
    detach_stdio()  # the server's pipes to the parent stay the server's
    own = os.open("/proc/self/ns/pid", os.O_RDONLY)
    close_fds({req_r, rep_w, own})
    while True:
        try:
            if not os.read(req_r, 1):
                os._exit(0)
        except InterruptedError:
            continue
        try:
            setns(own, CLONE_NEWPID)  # back to this namespace, so that unshare may make a new one
            unshare(CLONE_NEWPID)
            pid = os.fork()
            if pid == 0:
                os.close(req_r)
                os.close(rep_w)
                os.close(own)
                _init_of_namespace()
            os.write(rep_w, f"I {pid}\n".encode())
        except OSError as e:
            os.write(rep_w, f"E {str(e)[:300]}\n".replace("\n", " ").encode() + b"\n")


class NurseryGone(OSError):
    """The nursery of :class:`PidNamespaces` has exited or closed its end."""


class PidNamespaces:
    """Pid namespaces for jobs, each with a small confined init (module docstring).

    Create it before the fork server imports anything large: it forks the nursery. Not
    thread-safe (the fork server is single-threaded where it uses it).
    """

    #: seconds to wait for the nursery's answer.
    TIMEOUT = 10.0

    def __init__(self) -> None:
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        self._own = os.open("/proc/self/ns/pid", os.O_RDONLY)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(self._req)
                os.close(self._rep)
                _nursery(req_r, rep_w)
            finally:
                os._exit(121)
        os.close(req_r)
        os.close(rep_w)
        self.nursery = pid
        self._buf = b""

    def new(self) -> int:
        """A new pid namespace: the pid of its init in this process's namespace.

        Raises:
            OSError: the nursery is gone, did not answer within :data:`TIMEOUT`, or the
                kernel refused (its message).
        """
        try:
            os.write(self._req, b"n")
        except BrokenPipeError as e:
            raise NurseryGone(0, "the pid-namespace nursery is gone") from e
        while b"\n" not in self._buf:
            r, _, _ = select.select([self._rep], [], [], self.TIMEOUT)
            if not r:
                raise OSError(0, f"the pid-namespace nursery did not answer within {self.TIMEOUT:g} s")
            chunk = os.read(self._rep, 256)
            if not chunk:
                raise NurseryGone(0, "the pid-namespace nursery is gone")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        if line.startswith(b"I "):
            return int(line[2:])
        raise OSError(0, f"no pid namespace for the job: {line[2:].decode(errors='replace')}")

    def fork_into(self, init: int) -> int:
        """``os.fork()`` with the child born in the pid namespace of ``init`` (pid 2 or
        later there); returns as :func:`os.fork` does. This process's own children are
        born in its own namespace again afterwards.

        Raises:
            OSError: ``init`` is gone or ``setns`` was refused (nothing was forked).
        """
        fd = os.open(f"/proc/{init}/ns/pid", os.O_RDONLY)
        try:
            setns(fd, CLONE_NEWPID)
        finally:
            os.close(fd)
        try:
            pid = os.fork()
        except BaseException:
            setns(self._own, CLONE_NEWPID)
            raise
        if pid != 0:
            setns(self._own, CLONE_NEWPID)
        return pid

    def close(self) -> None:
        """Close the pipes (the nursery exits) and reap the nursery."""
        for fd in (self._req, self._rep, self._own):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.nursery, 0)
        except ChildProcessError:
            pass
