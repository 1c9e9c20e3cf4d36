"""The command-to-be of a *prepared* pair: confined before its command is known.

A fork-server pair can confine itself for the command it expects before the command exists
(:mod:`._landlock_server`, ``PREPARE``; :mod:`._prepared`): a bubblewrap pair runs bwrap,
which makes the namespaces and every mount, drops its capabilities and installs its filter,
and runs this program in place of the command, as ``python -I -S -c SOURCE FD EXIT PREFIX
RUNNER`` (the source travels in the argv, so that nothing but the interpreter and its
standard library need be visible to it); a Landlock pair enters its Landlock domain and runs
:func:`main` itself.

It says :data:`READY` on the pair socket ``FD``, then waits for one request: :data:`REQUEST`
with the command's stdin, stdout and stderr and a memfd holding the argv and environment
(:func:`encode`). It puts the stdio in place, closes every other descriptor (the pair socket
among them: the command can never write on it), restores the signal dispositions Python
changed, and execs the command with that environment, plus the ``PWD`` bwrap set for this
program (bwrap sets it for the command it runs). A command that cannot be executed ends as it
would have without the waiter: under bwrap (``RUNNER`` ``bwrap``) ``bwrap: execvp NAME:
REASON`` and exit status 1, else ``NAME: REASON`` and 126 or 127. End of file instead of a
request (the harness let the pair go): it exits. A malformed request: one ``PREFIX`` line on
stderr and exit status ``EXIT`` (the runner-failure rule): nothing ran.

Standard library only, and only what an interpreter started with ``-I -S`` has at hand
cheaply (no ``socket``, ``signal`` or ``typing``, which import ``enum`` or ``re``): it starts
once per prepared pair, between commands.
"""

from __future__ import annotations

import _socket
import errno
import os
import sys

TYPE_CHECKING = False  # ``typing`` itself would cost this program half its start-up
if TYPE_CHECKING:
    import signal as _signal
    from typing import NoReturn
else:
    # ``signal`` without its enums (the same functions and constants, as plain ints).
    import _signal

READY = b"W"
"""Sent once this program runs: the pair is confined and waits for its command."""
REQUEST = b"R"
BWRAP = "bwrap"
"""``RUNNER`` under bubblewrap."""
_FDS = 4
"""stdin, stdout, stderr, the body."""
_INT_SIZE = 4


def encode(argv: list[str], env: dict[str, str]) -> bytes:
    """A request body: the argv count, the argv and ``KEY=VALUE`` items, NUL-separated (the
    caller refuses a NUL inside any of them)."""
    items = [str(len(argv)), *argv, *(f"{k}={v}" for k, v in env.items())]
    return "\0".join(items).encode("utf-8", "surrogateescape")


def parse(body: bytes) -> tuple[list[bytes], dict[bytes, bytes]]:
    """The argv and environment of a body :func:`encode` made (``ValueError`` otherwise)."""
    count, *rest = body.split(b"\0")
    n = int(count)
    if n < 1 or n > len(rest):
        raise ValueError("malformed argv")
    env: dict[bytes, bytes] = {}
    for item in rest[n:]:
        key, sep, value = item.partition(b"=")
        if not sep or not key:
            raise ValueError("malformed environment")
        env[key] = value
    return rest[:n], env


def rehearse() -> None:
    """Run the per-command Python once while waiting: a forked waiter copies every page it
    first writes to (reference counts), and those copies are better made now."""
    parse(encode(["true"], {"PATH": "/"}))
    _received([(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, bytes(_FDS * _INT_SIZE))])


def _received(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % _INT_SIZE
            fds += [
                int.from_bytes(data[i : i + _INT_SIZE], sys.byteorder, signed=True)
                for i in range(0, usable, _INT_SIZE)
            ]
    return fds


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _fail(code: int, line: str) -> NoReturn:
    try:
        os.write(2, f"{line}\n".encode(errors="replace"))
    finally:
        os._exit(code)


def main(args: list[str]) -> NoReturn:
    fd, code, prefix, runner = int(args[0]), int(args[1]), args[2], args[3]
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
    try:
        sock.send(READY)
        message, ancillary, _, _ = sock.recvmsg(16, _socket.CMSG_SPACE(_FDS * _INT_SIZE))
    except OSError:
        os._exit(0)
    if not message:
        os._exit(0)  # the harness let this pair go unused
    fds = _received(ancillary)
    try:
        if message != REQUEST or len(fds) != _FDS:
            raise ValueError("malformed request from the harness")
        # Received descriptors are numbered from 3 up (0-2 are open), so none is overwritten.
        for target, received in enumerate(fds[:3]):
            os.dup2(received, target)
        argv, env = parse(_read_all(fds[3]))
    except (OSError, ValueError) as err:
        _fail(code, f"{prefix}{err}")
    pwd = os.environb.get(b"PWD")
    if pwd is not None:
        env[b"PWD"] = pwd
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    for signo in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(signo, _signal.SIG_DFL)  # Python ignores them; a command must not
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as err:
        name = argv[0].decode(errors="replace")
        if runner == BWRAP:
            _fail(1, f"bwrap: execvp {name}: {err.strerror}")
        _fail(126 if err.errno == errno.EACCES else 127, f"{name}: {err.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
