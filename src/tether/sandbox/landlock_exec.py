"""Landlock confinement of one command: syscalls, the ruleset, and a supervisor.

This module imports nothing but the standard library, because it runs two ways:

* imported by the Landlock backend, which builds the ruleset in the harness and applies it in
  the forked child through ``preexec_fn`` (the fast path, about 2 ms per spawn);
* as a launcher script, ``python -I -S .../landlock_exec.py [options] -- ARGV...`` (about
  10 ms more), which is what :attr:`ConfinedCommand.argv` holds, so a caller that only knows
  how to spawn an argv still gets a confined command.

Either way the command is confined in two layers. The process that forks it (the
*supervisor*) restricts itself first, becomes a child subreaper, forks, and waits; the command
restricts itself once more (a nested Landlock domain) and execs. The nesting matters: from ABI
6 a domain may not signal or ptrace processes outside itself, so the command cannot kill its
supervisor. When the command exits, or the supervisor is told to stop (SIGTERM, SIGINT,
SIGHUP; the harness dying sends SIGTERM through ``PR_SET_PDEATHSIG``), the supervisor kills
every process left below it, including ones that called ``setsid`` (they were reparented to
it), then exits with the command's status. That gives Landlock what bubblewrap's PID
namespace gives for free: nothing a command starts outlives the call.

Both layers also drop every capability (bounding set, ambient, effective/permitted/
inheritable) and set ``PR_SET_NO_NEW_PRIVS``, so root inside is a plain uid 0 (as with
``bwrap --cap-drop ALL``): it cannot mount, create device nodes, chroot or load modules.

Launcher failures print one ``tether-landlock: ...`` line on stderr and exit 125 (the
backend's runner-failure rule); a command that cannot be executed exits 127 like a shell.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

LAUNCHER_EXIT = 125
"""Exit status of the launcher when it could not confine (the command never ran)."""
LAUNCHER_PREFIX = "tether-landlock: "
"""Prefix of the one stderr line the launcher writes before exiting with ``LAUNCHER_EXIT``."""

# Syscall numbers: Landlock came after the syscall tables were unified, so these are the
# same on x86_64, aarch64, riscv64 and the other generic-table architectures.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522

# Filesystem access rights (include/uapi/linux/landlock.h).
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
"""Rights a rule on a non-directory may carry (others make ``landlock_add_rule`` fail)."""
# Device nodes are never creatable (MAKE_CHAR/MAKE_BLOCK are handled and granted nowhere).
# LANDLOCK_ACCESS_FS_IOCTL_DEV (ABI 5) is deliberately not handled: every capability is dropped,
# the command has no controlling terminal, and handling it breaks ordinary terminal ioctls.
_WRITE_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_SYM
)

FULL_ENFORCEMENT_ABI = 3
"""From ABI 3 (``TRUNCATE``) every file effect of the modes is covered; below it ``truncate``
of an outside file cannot be refused, so enforcement is reported ``partial``."""
NETWORK_ABI = 4
SCOPE_ABI = 6


class LandlockError(OSError):
    """Landlock is unusable here, or a rule could not be built."""


@dataclass(frozen=True, slots=True)
class LandlockSpec:
    """What one confined command may do.

    ``writable``: directories the command may modify (empty for read-only; ``/dev/null`` is
    always writable). ``hidden``: paths whose contents must not be readable (credential
    directories); everything else is readable. ``network``: leave TCP alone.
    """

    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    network: bool = False


@dataclass(slots=True)
class _Libc:
    syscall: Callable[..., int]
    prctl: Callable[..., int]
    capset: Callable[..., int]


_libc_cache: list[_Libc] = []


def _libc() -> _Libc:
    if not _libc_cache:
        lib = ctypes.CDLL(None, use_errno=True)
        syscall = lib.syscall
        syscall.restype = ctypes.c_long
        prctl = lib.prctl
        prctl.restype = ctypes.c_int
        # Five arguments always: PR_SET_NO_NEW_PRIVS and PR_CAP_AMBIENT reject non-zero unused ones.
        prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        capset = lib.capset
        capset.restype = ctypes.c_int
        _libc_cache.append(_Libc(syscall, prctl, capset))
    return _libc_cache[0]


def abi_version() -> int:
    """The kernel's Landlock ABI version; raises :class:`LandlockError` when unavailable.

    This is the probe platform.md prescribes (``/sys/kernel/security/lsm`` may be absent).
    """
    try:
        libc = _libc()
    except (OSError, AttributeError) as err:
        raise LandlockError(errno.ENOSYS, f"cannot load libc: {err}") from err
    value = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_CREATE_RULESET_VERSION),
    )
    if value < 0:
        code = ctypes.get_errno()
        why = {
            errno.ENOSYS: "the kernel was built without Landlock",
            errno.EOPNOTSUPP: "Landlock is disabled at boot (lsm= does not list it)",
        }.get(code, os.strerror(code))
        raise LandlockError(code, f"landlock_create_ruleset: {why}")
    return int(value)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def handled_fs(abi: int) -> int:
    access = FS_READ | _WRITE_V1 | FS_MAKE_CHAR | FS_MAKE_BLOCK
    if abi >= 2:
        access |= FS_REFER
    if abi >= FULL_ENFORCEMENT_ABI:
        access |= FS_TRUNCATE
    return access


def writable_access(abi: int) -> int:
    """Rights granted beneath a writable root: everything but device nodes."""
    return handled_fs(abi) & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK)


def readable_roots(hidden: Sequence[str]) -> list[str]:
    """The smallest set of paths whose subtrees cover everything except ``hidden``.

    Landlock only grants, it cannot carve out, so hiding ``~/.ssh`` means granting read on
    every sibling of every directory on the way down to it: ``/`` minus ``/root``, then
    ``/root`` minus ``/root/.ssh``. Symbolic links are skipped (a link in ``$HOME`` pointing
    into ``~/.ssh`` must not re-grant it; its target is covered where it really lives).
    Entries created later under those directories are unreadable for this call only.
    """
    hide = {os.path.normpath(p) for p in hidden if p and os.path.isabs(p)}
    hide.discard("/")
    if not hide:
        return ["/"]
    roots: list[str] = []

    def on_path(directory: str) -> bool:
        prefix = directory.rstrip("/") + "/"
        return any(h.startswith(prefix) for h in hide)

    def walk(directory: str) -> None:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            path = os.path.join(directory, name)
            if path in hide:
                continue
            if on_path(path):
                if os.path.isdir(path) and not os.path.islink(path):
                    walk(path)
                continue
            if os.path.islink(path):
                continue
            roots.append(path)

    walk("/")
    return roots


def build_ruleset(spec: LandlockSpec, abi: int | None = None) -> int:
    """A ruleset file descriptor (close-on-exec) for ``spec``. Creating it restricts nothing;
    :func:`restrict_self` in the child does. The caller closes it after spawning."""
    abi = abi_version() if abi is None else abi
    libc = _libc()
    attr = _RulesetAttr(handled_fs(abi), 0, 0)
    size = 8
    if abi >= NETWORK_ABI:
        size = 16
        if not spec.network:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= SCOPE_ABI:
        size = 24
        attr.scoped = SCOPE_SIGNAL | (0 if spec.network else SCOPE_ABSTRACT_UNIX_SOCKET)
    fd = libc.syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise LandlockError(code, f"landlock_create_ruleset: {os.strerror(code)}")
    try:
        # Listing is allowed everywhere (``ls /`` must work); reading and executing only
        # outside the hidden paths. A hidden directory's entry names stay visible.
        _add_rule(libc, fd, "/", FS_READ_DIR, must_exist=True)
        for path in readable_roots(spec.hidden):
            _add_rule(libc, fd, path, FS_READ, must_exist=False)
        for path in spec.writable:
            _add_rule(libc, fd, path, writable_access(abi), must_exist=True)
        _add_rule(libc, fd, "/dev/null", FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE, True)
    except BaseException:
        os.close(fd)
        raise
    return int(fd)


def _add_rule(libc: _Libc, ruleset: int, path: str, access: int, must_exist: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as err:
        if not must_exist:
            return  # vanished between listing and opening: nothing to grant
        raise LandlockError(err.errno, f"cannot open {path}: {err.strerror}") from err
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_ONLY
        rule = _PathBeneathAttr(access, fd)
        result = libc.syscall(
            ctypes.c_long(_SYS_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        if result < 0:
            code = ctypes.get_errno()
            raise LandlockError(code, f"landlock_add_rule {path}: {os.strerror(code)}")
    finally:
        os.close(fd)


# -- in the child -------------------------------------------------------------------------------
_SUPERVISOR_SIGNALS = frozenset({signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


@dataclass(slots=True)
class _ChildPlan:
    """Everything the child needs, built in the parent so the child allocates little."""

    ruleset: int
    last_cap: int
    libc: _Libc = field(default_factory=_libc)
    cap_header: ctypes.Array[ctypes.c_uint32] = field(
        default_factory=lambda: (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    )
    cap_data: ctypes.Array[ctypes.c_uint32] = field(default_factory=lambda: (ctypes.c_uint32 * 6)())


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 63


def _restrict(plan: _ChildPlan) -> None:
    """Drop every capability, forbid privilege gain, and enter a (new, nested) domain."""
    libc = plan.libc
    for cap in range(plan.last_cap + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.capset(plan.cap_header, plan.cap_data) != 0:
        _fail_errno("capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail_errno("prctl(PR_SET_NO_NEW_PRIVS)")
    result = libc.syscall(
        ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(plan.ruleset), ctypes.c_uint32(0)
    )
    if result != 0:
        _fail_errno("landlock_restrict_self")


def _fail_errno(what: str) -> NoReturn:
    code = ctypes.get_errno()
    raise LandlockError(code, f"{what}: {os.strerror(code)}")


def confine_and_fork(plan: _ChildPlan) -> None:
    """Run in the process that will become the command. Returns in the command process, ready
    to exec; the calling process itself becomes the supervisor and never returns."""
    libc = plan.libc
    parent = os.getppid()
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:  # the harness died before the death signal was armed
        os._exit(LAUNCHER_EXIT)
    _restrict(plan)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SUPERVISOR_SIGNALS)
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != supervisor:
            os._exit(LAUNCHER_EXIT)
        _restrict(plan)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    _supervise(pid)


def _supervise(command: int) -> NoReturn:
    status: int | None = None
    try:
        # Keep stderr (for a last-resort message); drop everything else, above all the
        # parent's exec-error pipe, whose EOF tells the harness the exec happened.
        null = os.open("/dev/null", os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.closerange(3, _max_fd())
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == command:
                status = wait_status
                break
            if pid != 0:
                continue
            info = signal.sigwaitinfo(_SUPERVISOR_SIGNALS)
            if info.si_signo != signal.SIGCHLD:
                break
        _sweep()
    except BaseException:
        os._exit(LAUNCHER_EXIT)
    _exit_like(status)


def _max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (OSError, ValueError):
        return 65536


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == me:
                found.append(int(name))
    return found


def _sweep() -> None:
    """Kill everything below the supervisor until it has no children left.

    Killing a process reparents its children to us (we are a subreaper), so repeat until
    ``waitpid`` reports no children at all.
    """
    while True:
        for pid in _children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            signal.sigtimedwait({signal.SIGCHLD}, 0.005)


def _exit_like(status: int | None) -> NoReturn:
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    # Die of the same signal so the harness sees what an unconfined run would show; no core.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def make_preexec(ruleset: int) -> Callable[[], None]:
    """The ``preexec_fn`` for the fast path. Everything is prepared here, in the parent.

    ``preexec_fn`` is documented as unsafe with threads because the child may need a lock
    another thread held at fork time. This one runs only syscalls through prepared ctypes
    objects plus ``os.fork`` (whose at-fork hooks CPython re-initialised for the child, since
    ``subprocess`` calls ``PyOS_BeforeFork``/``AfterFork_Child`` around a ``preexec_fn``): it
    takes no logging, import or I/O lock.
    """
    plan = _ChildPlan(ruleset, _last_cap())

    def preexec() -> None:
        confine_and_fork(plan)

    return preexec


# -- launcher -------------------------------------------------------------------------------
def _parse(args: list[str]) -> tuple[LandlockSpec, dict[str, str], list[str]]:
    writable: list[str] = []
    hidden: list[str] = []
    env: dict[str, str] = {}
    network = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            argv = args[i + 1 :]
            if not argv:
                raise ValueError("no command after --")
            return LandlockSpec(tuple(writable), tuple(hidden), network), env, argv
        if arg == "--net":
            network = True
            i += 1
        elif arg in ("--rw", "--hide") and i + 1 < len(args):
            (writable if arg == "--rw" else hidden).append(args[i + 1])
            i += 2
        elif arg == "--setenv" and i + 2 < len(args):
            env[args[i + 1]] = args[i + 2]
            i += 3
        else:
            raise ValueError(f"unknown or incomplete option {arg!r}")
    raise ValueError("missing -- before the command")


def main(args: list[str]) -> NoReturn:
    try:
        spec, env, argv = _parse(args)
        ruleset = build_ruleset(spec)
        plan = _ChildPlan(ruleset, _last_cap())
        confine_and_fork(plan)
    except Exception as err:
        sys.stderr.write(f"{LAUNCHER_PREFIX}{err}\n")
        sys.stderr.flush()
        os._exit(LAUNCHER_EXIT)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as err:
        sys.stderr.write(f"{argv[0]}: {err.strerror}\n")
        sys.stderr.flush()
        os._exit(126 if err.errno == errno.EACCES else 127)


if __name__ == "__main__":
    main(sys.argv[1:])
