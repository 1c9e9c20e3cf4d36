"""The launcher of a bubblewrap command: bwrap below a supervisor.

``python -I -S .../bwrap_exec.py --sockets JSON -- BWRAP-ARGV...`` is what
:attr:`ConfinedCommand.argv` holds for a command without network, for callers that can only
spawn an argv (hook commands); :func:`tether.sandbox.spawn` gets the same from a fork-server
pair instead. With network, ``--roots JSON`` instead: no socket rules, and the calls that make
names counted from those writable roots (:mod:`._creation_calls`); it is what every spawn of
such a command runs. This process becomes the supervisor (:mod:`._supervisor`); the command it forks
installs the filter (:mod:`._seccomp_filter`; bwrap and everything it starts inherit it), puts the
filter bwrap adds for the command itself at descriptor :data:`PROGRAM_FD` (the bwrap command line
says ``--seccomp 3``), and execs bwrap. The command keeps its capabilities, which bwrap needs as
root and drops for the sandboxed command itself; the supervisor drops its own once the command is
forked. A network namespace isolates IP sockets, but not the host's pathname Unix sockets nor
``AF_VSOCK``: those the filter and the supervisor refuse.

Standard library only. Failures print one ``tether-landlock: ...`` line on stderr and exit
125 (the backends' runner-failure rule): nothing ran.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import sys
from typing import Final, NoReturn

if __package__:
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _supervisor as supervisor
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox._socket_calls import SocketRules
else:  # the launcher: ``-I`` leaves this directory off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _supervisor as supervisor  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    from _socket_calls import SocketRules  # type: ignore[import-not-found,no-redef,unused-ignore]


PROGRAM_FD: Final = 3
"""Where bwrap finds the filter it installs on the command (``--seccomp``):
:func:`~._seccomp_filter.no_user_namespaces`."""


def program_file(arch: str) -> int:
    """A descriptor (close-on-exec) of a memfd holding that filter, read from its start."""
    fd = os.memfd_create("tether-bwrap-filter", os.MFD_CLOEXEC)
    os.write(fd, seccomp_filter.no_user_namespaces(arch))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def place_program(fd: int) -> None:
    """Put the filter at :data:`PROGRAM_FD`, inherited by bwrap (``dup2`` onto itself would
    leave it close-on-exec)."""
    if fd == PROGRAM_FD:
        os.set_inheritable(fd, True)
        return
    os.dup2(fd, PROGRAM_FD)
    os.close(fd)


_CLONE_NEWNET: Final = 0x40000000
_SIOCGIFFLAGS: Final = 0x8913
_SIOCSIFFLAGS: Final = 0x8914
_IFF_UP: Final = 0x1
_IFREQ: Final = struct.Struct("16sH14x")
"""``struct ifreq`` with its ``ifr_flags`` (40 bytes)."""
SHARE_NET: Final = "--share-net"
"""What a fork-server pair adds to bwrap's command line: bwrap joins the network namespace
the pair made (:func:`private_network`) instead of making one."""


def private_network(arch: str) -> None:
    """Move this process into a network namespace of its own with its loopback up (the
    kernel gives it 127.0.0.1/8 and ::1, as bwrap's own set-up does; nothing else is in it).
    A fork-server pair does this while it waits for its command, so bwrap, below, need not
    (``--share-net``): its two netlink sends at start, each a call the supervisor would
    serve, and the namespace's creation leave the spawn's critical path. Raises ``OSError``:
    then nothing may run (with ``--share-net`` bwrap would share this namespace, whatever
    it is)."""
    if syscalls.syscall(arch, "unshare", ctypes.c_ulong(_CLONE_NEWNET)) < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot make a network namespace: {os.strerror(code)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = _IFREQ.pack(b"lo", 0)
        flags = _IFREQ.unpack(fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))


def filter_key(arch: str, network: bool = False) -> seccomp_filter.FilterKey:
    """The filter of a bubblewrap command: the calls that make names, and without network the
    socket rules, IP sockets allowed (they live in its own network namespace); no metadata
    rules (read-only mounts refuse those changes)."""
    return (arch, None, None if network else "ip", True)


def _parse(args: list[str]) -> tuple[supervisor.Rules, list[str]]:
    if len(args) < 4 or args[0] not in ("--sockets", "--roots") or args[2] != "--":
        raise ValueError("usage: _bwrap_exec.py (--sockets JSON | --roots JSON) -- BWRAP-ARGV...")
    value = json.loads(args[1])
    if args[0] == "--sockets":
        return supervisor.Rules((), SocketRules.from_json(value)), args[3:]
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise ValueError("--roots: a list of paths")
    return supervisor.Rules(tuple(value)), args[3:]


def main(args: list[str]) -> NoReturn:
    try:
        rules, argv = _parse(args)
        arch = syscalls.machine()
        if arch is None:
            raise OSError(f"no seccomp filter for architecture {os.uname().machine}")
        syscalls.prepare()
        key = filter_key(arch, network=rules.sockets is None)
        seccomp_filter.compiled(key)

        def command(channel: socket.socket) -> None:
            syscalls.set_no_new_privs()
            supervisor.offer_listener(channel, seccomp_filter.install(key))
            supervisor.send_rules(channel, rules.encode())

        supervisor.launch(
            arch, before=lambda: None, command=command, after=syscalls.drop_privileges, bwrap=True
        )
        place_program(program_file(arch))
    except Exception as err:
        supervisor.fail(err)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        supervisor.fail(OSError(err.errno, f"cannot execute {argv[0]}: {err.strerror}"))


if __name__ == "__main__":
    main(sys.argv[1:])
