"""The fork server: confined commands forked from a small process, ahead of time.

Forking the harness for every confined command is what made Landlock slow (no ``vfork`` with
a ``preexec_fn``, page tables and copy-on-write faults that grow with the harness's memory,
then a second fork for the supervisor). Instead, :mod:`tether.sandbox._landlock_client` starts
this program once per harness process, as ``python -E -s -S _landlock_server.py FD``: a small
interpreter with nothing but the standard library and the sandbox's stdlib-only modules (found
next to this file; ``-S`` keeps site-packages, and so ``tether``, out of its image). It holds
no secret: its environment is ``PATH`` only. It serves both backends: Landlock commands, and
bubblewrap commands, which run below the same kind of supervisor for their socket rules.

Control socket ``FD`` (``SOCK_SEQPACKET``; the harness holds the other end):

* one byte per pair wanted, its *kind* (:data:`LANDLOCK`, :data:`LANDLOCK_NET`,
  :data:`BWRAP`): fork one *pair* and send back ``P <kind> <pid>`` with two descriptors: a
  pidfd of the pair's supervisor and the harness's end of the pair's socket; or
  ``E <kind> <reason>`` when it could not (out of processes, say), and go on serving.
* end of file (the harness closed it, or died): exit. Running commands are not affected: each
  belongs to the harness's end of its pair socket (below), not to the server.

A pair is forked before any command is known, so a spawn costs the harness one message:

* the **supervisor** starts a session, becomes a child subreaper and not dumpable
  (:func:`supervisor.become_supervisor`), drops every capability and sets ``no_new_privs``,
  and forks the command-to-be (a bubblewrap pair's supervisor drops its capabilities only
  after the fork: bwrap needs them as root, and drops them for the command itself). It stays
  outside any Landlock domain: from ABI 6 a domain may not signal processes outside it, and
  it may never ptrace them, so the command cannot touch its supervisor (the launcher's
  supervisor enters a domain of its own first; that is needed there only because it was
  forked from the harness with the harness's privileges). Bubblewrap's command lives in PID
  and mount namespaces of its own, from which the supervisor is not visible at all.
* the **command-to-be** installs its filter (:mod:`seccomp_filter`: Landlock's metadata and
  socket rules, or bubblewrap's socket rules; a bubblewrap pair's enters a network namespace
  of its own first, :func:`bwrap_exec.private_network`, which its bwrap joins with
  ``--share-net``), hands the supervisor its listener, and waits
  on the pair socket for one request: the descriptors (stdin, stdout, stderr, for Landlock
  the two rulesets the harness built, and a memfd holding the JSON body: argv, env, cwd, the
  writable roots, the supervisor's rules). It puts its stdio in place, enters cwd, enters the
  Landlock domain, forwards the rules to the supervisor as they came, and execs (the command,
  or bwrap). End of file instead of a request (the harness let the pair go): it exits.
  Or, usually, the harness *prepares* the pair before its command exists (:data:`PREPARE`,
  :mod:`._prepared`): the same, for the command the harness expects, with its stdio on
  ``/dev/null`` and :mod:`._waiter` in place of the command (bwrap runs it; a Landlock pair
  becomes it), which takes the command's request later.
* when the command exits, or the supervisor is told to stop (SIGTERM from the harness, or the
  harness's end of the pair socket hanging up: the harness closed it or died), the supervisor
  kills everything left below it, sends ``X <returncode>`` on the pair socket (``subprocess``
  convention: ``-N`` for signal N), and waits for the harness to close its end before
  exiting, so its process group id is not recycled while the harness may still signal it.

This server is a child subreaper too: processes left by a supervisor that was killed outright
(SIGKILL from the harness's last resort) are reparented here, and are killed here.

A command-to-be that cannot confine itself (or cannot execute bwrap) writes one
``tether-landlock: ...`` line on its stderr and exits 125 (the backends' runner-failure rule),
without running anything.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import select
import signal
import socket
import sys
from typing import Final, NoReturn

if __package__:
    from tether.sandbox import _bwrap_exec as bwrap_exec
    from tether.sandbox import _landlock_exec as ll
    from tether.sandbox import _seccomp_filter as seccomp_filter
    from tether.sandbox import _socket_calls as socket_calls
    from tether.sandbox import _supervisor as supervisor
    from tether.sandbox import _syscalls as syscalls
    from tether.sandbox import _waiter as waiter
else:  # run as the server program: this directory is sys.path[0]
    import _bwrap_exec as bwrap_exec  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _landlock_exec as ll  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _seccomp_filter as seccomp_filter  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _socket_calls as socket_calls  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _supervisor as supervisor  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]
    import _waiter as waiter  # type: ignore[import-not-found,no-redef,unused-ignore]

MAX_REQUEST: Final = 8 << 20
"""Largest request body (argv, env, cwd, roots), in bytes."""
REQUEST: Final = b"R"
"""The request message; its body travels in the memfd (a message is limited by the socket's
send buffer, an environment is not)."""
LANDLOCK: Final = b"L"
"""A pair for a Landlock command without network: metadata and socket rules."""
LANDLOCK_NET: Final = b"N"
"""A pair for a Landlock command with network: metadata rules only."""
BWRAP: Final = b"B"
"""A pair that execs bwrap: socket rules only, capabilities kept (bwrap drops them)."""
KINDS: Final = (LANDLOCK, LANDLOCK_NET, BWRAP)
REQUEST_FDS: Final = {LANDLOCK: 6, LANDLOCK_NET: 6, BWRAP: 4}
"""Descriptors of a request: stdin, stdout, stderr, the two rulesets (Landlock: its read and
write layers), the body."""
PREPARE: Final = b"P"
"""Instead of a request: confine this pair now, for the command the harness expects, and run
:mod:`._waiter` in its place; the waiter says :data:`~._waiter.READY` on the pair socket, and
takes the command's request itself. Its body is a request's, but for the argv: a bubblewrap
pair's is bwrap's command line up to its ``--`` (the waiter comes after it), a Landlock
pair's is empty."""
PREPARE_FDS: Final = {LANDLOCK: 3, LANDLOCK_NET: 3, BWRAP: 1}
"""Descriptors of a prepare message: the two rulesets (Landlock), the body."""
WAITER_FD: Final = bwrap_exec.PROGRAM_FD + 1
"""Where a prepared pair's waiter finds the pair socket."""
with open(waiter.__file__, encoding="utf-8") as _source:
    _WAITER_SOURCE: Final = _source.read()
_SAMPLE: Final = json.dumps(
    {
        "argv": ["true"],
        "env": {"PATH": os.defpath},
        "cwd": "/",
        "writable": ["/"],
        "rules": supervisor.Rules().encode().decode(),
    }
).encode()


def filters(arch: str) -> dict[bytes, seccomp_filter.FilterKey]:
    """The filter each kind of pair installs."""
    return {
        LANDLOCK: ll.filter_key(arch, False, True),
        LANDLOCK_NET: ll.filter_key(arch, True, True),
        BWRAP: bwrap_exec.filter_key(arch),
    }


def serve(control_fd: int) -> NoReturn:
    """Fork pairs on request until the control socket reaches end of file."""
    # Nothing the harness may have left inheritable stays open here (or in any pair).
    (control_fd,) = supervisor.isolate_fds([control_fd])
    control = socket.socket(fileno=control_fd)
    arch = syscalls.machine()
    if arch is None:
        raise ll.LandlockError(errno.ENOTSUP, f"no seccomp filter for {os.uname().machine}")
    syscalls.prepare()
    keys = filters(arch)
    for key in keys.values():
        seccomp_filter.compiled(key)  # built once here, inherited by every pair
    syscalls.become_subreaper()  # see "killed outright" above
    syscalls.default_internal_signals(arch)  # as subprocess would leave them for the commands
    # Everything alive now lives as long as the server: keep the collector from touching (and
    # so copying, page by page) these objects in every pair.
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda _signo, _frame: None)
    pairs: set[int] = set()
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        for fd, events in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 512)
                continue
            wanted = b""
            if events & select.POLLIN:
                with contextlib.suppress(OSError):  # reset by a harness that died: the same
                    wanted = control.recv(64)
            if not wanted:
                os._exit(0)
            for kind in (bytes([b]) for b in wanted):
                if kind not in keys:
                    continue
                try:
                    pairs.add(_fork_pair(control, kind, keys[kind], (wake_r, wake_w)))
                except OSError as err:  # out of processes or descriptors: this pair only
                    with contextlib.suppress(OSError):
                        control.send(b"E " + kind + f" cannot fork a pair: {err}".encode())
        _reap(pairs)


def _reap(pairs: set[int]) -> None:
    """Reap exited supervisors; kill any other child (left by a supervisor killed outright)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        pairs.discard(pid)
    try:
        orphans = [pid for pid in supervisor.children() if pid not in pairs]
    except OSError:
        return  # out of descriptors, say: the next SIGCHLD tries again
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _fork_pair(
    control: socket.socket, kind: bytes, key: seccomp_filter.FilterKey, private: tuple[int, int]
) -> int:
    harness_end, pair_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # The supervisor is born with the signals it handles blocked: the harness may stop the
    # pair (SIGTERM) the moment it is announced, before its supervisor has run a line, and
    # a signal then must wait for the supervisor, not kill it unreported.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, supervisor.SIGNALS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        harness_end.close()
        pair_end.close()
        raise
    if pid == 0:
        try:
            control.close()
            harness_end.close()
            for fd in private:
                os.close(fd)
            _supervisor(pair_end, kind, key, mask)
        except BaseException:
            os._exit(supervisor.LAUNCHER_EXIT)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    pair_end.close()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.kill(pid, signal.SIGKILL)
        harness_end.close()
        raise
    try:
        socket.send_fds(control, [b"P " + kind + b" %d" % pid], [pidfd, harness_end.fileno()])
    except OSError:
        os.kill(pid, signal.SIGKILL)  # the harness is gone: nobody will use this pair
    finally:
        os.close(pidfd)
        harness_end.close()
    return pid


def _supervisor(
    pair: socket.socket, kind: bytes, key: seccomp_filter.FilterKey, old_mask: set[int]
) -> NoReturn:
    """``old_mask``: the server's signal mask, which the command gets back."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    if kind != BWRAP:
        syscalls.drop_privileges()
    channel, _ = supervisor.become_supervisor()  # (its mask is ours: blocked at the fork)
    me = os.getpid()
    command = os.fork()
    if command == 0:
        syscalls.die_with_parent(signal.SIGKILL, me, supervisor.LAUNCHER_EXIT)
        channel[0].close()
        _command(pair, channel[1], old_mask, kind, key)
    channel[1].close()
    status: int | None = None
    try:
        listener = supervisor.take_listener(channel[0], command, key[0])
        if kind == BWRAP:
            syscalls.drop_privileges()  # bwrap, below, needs them; the supervisor does not
        pair_fd, handover, listener = supervisor.isolate_fds(
            [pair.detach(), channel[0].detach(), listener]
        )
        _rehearse_supervisor(key[0])
        status = supervisor.supervise(
            command, handover, key[0], listener, owner=pair_fd, bwrap=kind == BWRAP
        )
    except BaseException:
        with contextlib.suppress(BaseException):
            supervisor.sweep()
        os._exit(supervisor.LAUNCHER_EXIT)
    with socket.socket(fileno=pair_fd) as report, contextlib.suppress(OSError):
        report.send(b"X %d" % _returncode(status))
        while report.recv(16):  # until the harness closes its end
            pass
    os._exit(0)


def _returncode(status: int | None) -> int:
    """What ``returncode`` would be for the command run directly; 143 when stopped first (what
    the launcher's supervisor exits with then)."""
    if status is None:
        return 128 + signal.SIGTERM
    return os.waitstatus_to_exitcode(status)


def _command(
    pair: socket.socket,
    handover: socket.socket,
    old_mask: set[int],
    kind: bytes,
    key: seccomp_filter.FilterKey,
) -> NoReturn:
    """The command-to-be: install the filter, wait for the request, confine, exec."""
    try:
        # The filter does not depend on the request: install it (and give the supervisor its
        # listener) now, off the spawn's critical path. Until the rules arrive the
        # supervisor refuses every call it serves.
        program = -1
        # A prepared pair's stdio until its command comes (opened now: from here on the
        # filter refuses every open for writing until the rules arrive).
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        if kind == BWRAP:
            # bwrap's command line says --share-net for this namespace (see _bwrap_exec.py).
            bwrap_exec.private_network(key[0])
            syscalls.set_no_new_privs()  # the Landlock kinds' supervisor set it already
            program = bwrap_exec.program_file(key[0])
        supervisor.offer_listener(handover, seccomp_filter.install(key))
        _parse(_SAMPLE, kind)  # rehearsal: see _rehearse_supervisor
    except BaseException:
        os._exit(supervisor.LAUNCHER_EXIT)
    try:
        message, fds = supervisor.recv_with_fds(pair, 16, REQUEST_FDS[kind])
    except OSError:
        os._exit(0)
    if not message:
        os._exit(0)  # the harness let this pair go unused
    try:
        prepare = message == PREPARE and len(fds) == PREPARE_FDS[kind]
        if prepare:
            # Until the waiter takes a request, the pair's stdio (and bwrap's own messages)
            # go nowhere: a pair that cannot be prepared is the harness's to notice (no
            # READY), and to confine again with the command's stdio.
            stdio = [devnull] * 3
        elif message == REQUEST and len(fds) == REQUEST_FDS[kind]:
            stdio = fds[:3]
        else:
            raise ll.LandlockError(errno.EPROTO, "malformed request from the harness")
        # Received descriptors are numbered from 3 up (0-2 are open), so none is overwritten.
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        rulesets = tuple(fds[len(fds) - 3 : -1]) if kind != BWRAP else ()
        argv, env, cwd, plan, rules = _parse(_read_body(fds[-1]), kind, rulesets, prepare)
        if prepare and kind == BWRAP:
            argv = [*argv, "--", *_waiter_argv(waiter.BWRAP)]
        if cwd is not None:
            os.chdir(cwd)
        if plan is not None:
            ll.enter_domain(plan)
        supervisor.send_rules(handover, rules)
        handover.close()
        held = fcntl.fcntl(pair.fileno(), fcntl.F_DUPFD_CLOEXEC, 10) if prepare else -1
        pair.close()
        keep = 3
        if program >= 0:  # for bwrap's --seccomp
            bwrap_exec.place_program(program)
            keep = bwrap_exec.PROGRAM_FD + 1
        if held >= 0:
            os.closerange(keep, WAITER_FD)
            os.dup2(held, WAITER_FD)  # inheritable (bwrap passes it on to the waiter)
            keep = WAITER_FD + 1
        os.closerange(keep, supervisor.max_fd())  # the rulesets and the stdio originals
        for signo in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signo, signal.SIG_DFL)  # as subprocess's restore_signals does
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    except BaseException as err:
        supervisor.fail(err)
    if prepare and kind != BWRAP:
        # Confined: this process waits for its command itself (a second interpreter would
        # cost a start-up per command, and exec from it no less than from here).
        waiter.rehearse()
        waiter.main(_waiter_args(""))
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as err:
        if kind == BWRAP:  # bwrap is the runner: not executing it means nothing was confined
            supervisor.fail(OSError(err.errno, f"cannot execute {argv[0]}: {err.strerror}"))
        with contextlib.suppress(OSError):
            os.write(2, f"{argv[0]}: {err.strerror}\n".encode())
        os._exit(126 if err.errno == errno.EACCES else 127)


def _waiter_args(runner: str) -> list[str]:
    """The arguments of :func:`._waiter.main` in a prepared pair."""
    return [str(WAITER_FD), str(supervisor.LAUNCHER_EXIT), supervisor.LAUNCHER_PREFIX, runner]


def _waiter_argv(runner: str) -> list[str]:
    """What a prepared bubblewrap pair's bwrap runs in place of the command: :mod:`._waiter`,
    by the real path of this interpreter (a virtual environment's link may lie where the
    sandbox does not show it: under ``/tmp``), its source in the argv (this file may lie
    there too)."""
    python = os.path.realpath(sys.executable)
    return [python, "-I", "-S", "-c", _WAITER_SOURCE, *_waiter_args(runner)]


def _read_body(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    if size > MAX_REQUEST:
        raise ValueError(f"request body of {size} bytes (limit {MAX_REQUEST})")
    body = b""
    while len(body) < size and (chunk := os.pread(fd, size - len(body), len(body))):
        body += chunk
    return body


def _parse(
    body: bytes, kind: bytes, rulesets: tuple[int, ...] = (), prepare: bool = False
) -> tuple[list[str], dict[str, str], str | None, ll.Plan | None, bytes]:
    """A request's (or, ``prepare``, a prepare message's) argv, env, cwd, Landlock plan
    (``None`` for bubblewrap) and the supervisor's rules (encoded: the supervisor decodes
    and checks them)."""
    request = json.loads(body)
    argv = [str(a) for a in request["argv"]]
    env = {str(k): str(v) for k, v in request["env"].items()}
    if not argv and not (prepare and kind != BWRAP):
        raise ValueError("empty argv")
    cwd = request["cwd"]
    plan = None
    if kind != BWRAP:
        writable = tuple(str(r) for r in request["writable"])
        plan = ll.plan_for(rulesets, ll.LandlockSpec(writable))
    rules = request["rules"]
    if not isinstance(rules, str):
        raise ValueError("malformed rules")
    return argv, env, None if cwd is None else str(cwd), plan, rules.encode()


def _rehearse_supervisor(arch: str) -> None:
    """Run the supervisor's per-command Python once before any command exists. A forked
    process copies every memory page it first writes to (reference counts, allocator pools):
    doing it now, while the pair waits, keeps those copies off the spawn's critical path (a
    bubblewrap command's first served calls are bwrap's own, on every start)."""
    supervisor.children()
    supervisor.Rules.decode(json.loads(_SAMPLE)["rules"].encode())
    socket_calls.rehearse(arch)
    _returncode(0)


if __name__ == "__main__":
    try:
        serve(int(sys.argv[1]))
    except Exception as exc:
        sys.stderr.write(f"tether-landlock-server: {exc}\n")
        sys.exit(supervisor.LAUNCHER_EXIT)
