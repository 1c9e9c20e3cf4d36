"""Who is at the other end of an approval socket, and whether it may take part.

The kernel says who connected (``SO_PEERCRED``: pid and uid, taken at ``connect``). Whether
that process is confined is decided from facts a confined process cannot shed, because the
kernel makes them irrevocable and inherited by everything it starts:

- every tether sandbox sets ``no_new_privs`` (bubblewrap and Landlock alike);
- bubblewrap also puts the command in new user and PID namespaces;
- Landlock also installs a seccomp filter;
- every command a run starts stays below the run's process in the process tree for its whole
  life: bubblewrap's PID namespace dies with its init, and Landlock's supervisor is a child
  subreaper that inherits whatever the command double-forks.

The pid is pinned with a pidfd (``SO_PEERPIDFD``, or ``pidfd_open`` right after ``accept``
on kernels before 6.5) and must still be alive after the checks, so a process that connects
and exits cannot have its pid's next owner checked in its place.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from typing import Final, Literal, NamedTuple

SO_PEERPIDFD: Final = 77
"""``<asm-generic/socket.h>`` (Linux 6.5); Python 3.11's ``socket`` does not name it."""
TREE_WALK_LIMIT: Final = 4096
"""More ancestors than any real process tree has; a longer walk is refused, not trusted."""

PeerProblem = Literal["other-user", "confined", "started-by-this-run", "unverifiable"]
"""Why a peer may not take part: another uid; a sandbox confines it; the checking process
started it (so a command of this run, confined or not); or its identity could not be read."""


class Peer(NamedTuple):
    pid: int
    """As seen from this process's PID namespace."""
    uid: int


class PeerRefused(NamedTuple):
    problem: PeerProblem
    detail: str
    """A sentence saying what was found, for the log and for the refused side."""
    pid: int | None


class _Marks(NamedTuple):
    """What a process carries that tether's sandboxes set and nothing can unset."""

    user_ns: str
    pid_ns: str
    no_new_privs: bool
    seccomp_mode: int
    seccomp_filters: int | None
    """``None`` before Linux 5.9, which has no ``Seccomp_filters`` line."""


def check_peer(
    sock: socket.socket, *, restrictions: bool, outside_tree_of: int | None
) -> Peer | PeerRefused:
    """Whether the process at the other end of ``sock`` may take part in an approval.

    Always: the same uid as this process, the same user and PID namespaces, alive throughout
    the check. ``restrictions``: also no ``no_new_privs`` and no more seccomp filters than this
    process has. ``outside_tree_of``: also not a descendant of (nor) that pid.
    """
    accepted = _boot_ticks()
    pid, uid, _gid = struct.unpack(
        "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    )
    if pid <= 0:
        return PeerRefused("unverifiable", "its process is outside this PID namespace", None)
    if uid != os.getuid():
        return PeerRefused(
            "other-user", f"it runs as uid {uid}, not as this run's uid {os.getuid()}", pid
        )
    try:
        pidfd = _pin(sock, pid)
    except OSError as err:
        return PeerRefused("unverifiable", f"its process could not be pinned ({err})", pid)
    try:
        try:
            problem = _problem(pid, accepted, restrictions, outside_tree_of)
        except (OSError, ValueError, LookupError) as err:
            return PeerRefused("unverifiable", f"its /proc entry could not be read ({err})", pid)
        if problem is None and not _alive(pidfd):
            problem = PeerRefused("unverifiable", "it exited before it could be checked", pid)
    finally:
        os.close(pidfd)
    return problem or Peer(pid, uid)


def _problem(
    pid: int, accepted: float, restrictions: bool, outside_tree_of: int | None
) -> PeerRefused | None:
    _, started = _stat(pid)
    if started > accepted:
        return PeerRefused(
            "unverifiable", f"pid {pid} now belongs to a process started after it connected", pid
        )
    theirs, ours = _marks(str(pid)), _marks("self")
    if (theirs.user_ns, theirs.pid_ns) != (ours.user_ns, ours.pid_ns):
        return PeerRefused(
            "confined",
            "it runs in another user or PID namespace (as a bubblewrap sandbox does)",
            pid,
        )
    if restrictions:
        if theirs.no_new_privs and not ours.no_new_privs:
            return PeerRefused(
                "confined", "it runs with no_new_privs, which every tether sandbox sets", pid
            )
        if _more_filtered(theirs, ours):
            return PeerRefused(
                "confined",
                "it runs under more seccomp filters than this process (as a Landlock sandbox does)",
                pid,
            )
    if outside_tree_of is not None and _descends(pid, outside_tree_of):
        return PeerRefused(
            "started-by-this-run",
            "this run started it (every command of the run stays below the run's process)",
            pid,
        )
    return None


def _more_filtered(theirs: _Marks, ours: _Marks) -> bool:
    if theirs.seccomp_filters is not None and ours.seccomp_filters is not None:
        return theirs.seccomp_filters > ours.seccomp_filters
    return theirs.seccomp_mode > ours.seccomp_mode


def _descends(pid: int, ancestor: int) -> bool:
    current = pid
    for _ in range(TREE_WALK_LIMIT):
        if current == ancestor:
            return True
        if current <= 1:
            return False
        current, _ = _stat(current)
    raise ValueError(f"the process tree above pid {pid} is deeper than {TREE_WALK_LIMIT}")


def _stat(pid: int) -> tuple[int, int]:
    """``(ppid, starttime in clock ticks since boot)`` from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        text = handle.read().decode("ascii", "replace")
    # The command name may hold spaces and parentheses: fields start after the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def _marks(which: str) -> _Marks:
    status: dict[str, str] = {}
    with open(f"/proc/{which}/status", "rb") as handle:
        for line in handle.read().decode("ascii", "replace").splitlines():
            key, _, value = line.partition(":")
            status[key] = value.strip()
    filters = status.get("Seccomp_filters")
    return _Marks(
        os.readlink(f"/proc/{which}/ns/user"),
        os.readlink(f"/proc/{which}/ns/pid"),
        status["NoNewPrivs"] == "1",
        int(status["Seccomp"]),
        int(filters) if filters is not None else None,
    )


def _pin(sock: socket.socket, pid: int) -> int:
    try:
        fd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return os.pidfd_open(pid)
    os.set_inheritable(fd, False)
    return fd


def _alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    return True


def _boot_ticks() -> float:
    # /proc/PID/stat counts start times in clock ticks since boot (CLOCK_BOOTTIME).
    return time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")


__all__ = ["Peer", "PeerProblem", "PeerRefused", "check_peer"]
