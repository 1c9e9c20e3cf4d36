"""Sockets: a confined command without network reaches no host service, on every backend.

Listeners of the host (the test process, unconfined) wait outside the writable roots: a
pathname stream and datagram socket (what ``/var/run/docker.sock``, D-Bus, ``/dev/log`` or an
agent socket are), abstract ones, a UDP socket and a DNS resolver on the loopback, a TCP
listener. Each attempt runs on every backend variant (and bubblewrap's launcher argv, which
hook commands spawn) in both restricted modes; afterwards the host side is checked: nothing
was accepted or received, and nothing outside the workspace changed. The command prints the
errno of the call that failed (``socket_probe.py``), compared exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sandbox_support import PYTHON, RESTRICTED, VARIANTS, Host, make_provider, run_confined

from tether.sandbox import SandboxError, SandboxProvider

pytestmark = pytest.mark.timeout(60)

SANDBOX_DIR = Path(__file__).parents[2] / "src" / "tether" / "sandbox"

# The three backend variants, and bubblewrap through its launcher argv (what a caller that
# can only spawn an argv gets, as hook commands do).
LAUNCHERS = (
    *VARIANTS,
    pytest.param("bwrap-launcher", marks=pytest.mark.bwrap, id="bwrap-launcher"),
)


def backend_of(variant: str) -> str:
    return "landlock" if variant.startswith("landlock") else "bwrap"


@dataclass
class Listeners:
    """The host's side: everything here must end up untouched."""

    stream: socket.socket
    dgram: socket.socket
    abstract_stream: socket.socket
    abstract_dgram: socket.socket
    abstract: str
    udp: socket.socket
    tcp: socket.socket
    dns_queries: list[bytes] = field(default_factory=list)

    def untouched(self) -> list[str]:
        """The listeners that were reached (accepted a connection, or received anything)."""
        reached = []
        for name in ("stream", "abstract_stream", "tcp"):
            try:
                getattr(self, name).accept()[0].close()
                reached.append(name)
            except BlockingIOError:
                pass
        for name in ("dgram", "abstract_dgram", "udp"):
            try:
                getattr(self, name).recv(64)
                reached.append(name)
            except BlockingIOError:
                pass
        if self.dns_queries:
            reached.append("dns")
        return reached


class Resolver:
    """A real DNS resolver on the loopback: it answers every query with 10.0.0.1."""

    def __init__(self, seen: list[bytes]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.seen = seen
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                query, peer = self.sock.recvfrom(512)
            except TimeoutError:
                continue
            self.seen.append(query)
            answer = query[:2] + b"\x81\x80" + query[4:6] + b"\x00\x01\x00\x00\x00\x00"
            answer += (
                query[12:] + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x0a\x00\x00\x01"
            )
            self.sock.sendto(answer, peer)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # a query after the last loop counts too
            self.seen.append(self.sock.recv(512))
        self.sock.close()


def unix_listener(kind: int, address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(address)
    if kind == socket.SOCK_STREAM:
        sock.listen(8)
    sock.setblocking(False)
    return sock


@pytest.fixture
def listeners(host: Host) -> Iterator[Listeners]:
    abstract = f"tether-test-{uuid.uuid4().hex[:12]}"
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    found = Listeners(
        unix_listener(socket.SOCK_STREAM, str(host.outside / "stream.sock")),
        unix_listener(socket.SOCK_DGRAM, str(host.outside / "dgram.sock")),
        unix_listener(socket.SOCK_STREAM, "\0" + abstract),
        unix_listener(socket.SOCK_DGRAM, "\0" + abstract + "-dgram"),
        abstract,
        udp,
        tcp,
    )
    (host.ws / "link.sock").symlink_to(host.outside / "stream.sock")
    (host.ws / "dirlink").symlink_to(host.outside)
    yield found
    for sock in (found.stream, found.dgram, found.abstract_stream, found.abstract_dgram, udp, tcp):
        sock.close()


def workspace_dir(host: Host) -> Path:
    """A directory inside the workspace: the workspace root itself takes no new entry from a
    command under workspace-write (docs/sandbox.md, "The workspace root")."""
    run = host.ws / "run"
    run.mkdir(exist_ok=True)
    return run


async def probe(
    host: Host,
    variant: str,
    mode: str,
    *args: str,
    provider: SandboxProvider | None = None,
    prefix: str = "",
) -> str:
    """What ``socket_probe.py ARGS`` printed, run confined (``prefix`` goes before it)."""
    if provider is None:
        provider = make_provider("bwrap" if variant == "bwrap-launcher" else variant, host)
    script = f"{prefix}{PYTHON} {host.probe('socket_probe.py')} {shlex.join(args)}"
    if variant != "bwrap-launcher":
        ran = await run_confined(provider, host.policy(mode), script)
        assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
        return ran.stdout.strip()
    command = provider.confine(["bash", "-c", script], host.policy(mode))
    assert command.argv[3].endswith("_bwrap_exec.py")
    process = await asyncio.create_subprocess_exec(
        *command.argv,
        env=dict(command.env),
        cwd=str(host.ws),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    command.close()
    assert command.runner_failure(process.returncode, err.decode()) is None, err
    return out.decode().strip()


@dataclass(frozen=True)
class Attempt:
    name: str
    args: tuple[str, ...]
    expected: str | dict[str, str | None]
    """The command's outcome, or per backend (``None``: whatever the kernel says; only the
    host side is checked)."""

    def outcome(self, backend: str) -> str | None:
        return self.expected if isinstance(self.expected, str) else self.expected[backend]


OUT, WS = "@OUT@", "@WS@"
ATTEMPTS = (
    Attempt("pathname_stream", ("connect-stream", f"{OUT}/stream.sock"), "EACCES"),
    Attempt("pathname_dgram_connect", ("connect-dgram", f"{OUT}/dgram.sock"), "EACCES"),
    Attempt("pathname_dgram_sendto", ("sendto-dgram", f"{OUT}/dgram.sock"), "EACCES"),
    Attempt("socketpair_sendto_elsewhere", ("sendto-pair", f"{OUT}/dgram.sock"), "EACCES"),
    Attempt("pathname_dgram_sendmsg", ("sendmsg-dgram", f"{OUT}/dgram.sock"), "EACCES"),
    Attempt("pathname_dgram_sendmmsg", ("sendmmsg-dgram", f"{OUT}/dgram.sock"), "EACCES"),
    Attempt("abstract_stream", ("connect-abstract", "@ABSTRACT@"), "EACCES"),
    Attempt("abstract_dgram", ("sendto-abstract", "@ABSTRACT@-dgram"), "EACCES"),
    Attempt("symlink_in_workspace", ("connect-stream", f"{WS}/link.sock"), "EACCES"),
    Attempt("directory_symlink", ("connect-stream", f"{WS}/dirlink/stream.sock"), "EACCES"),
    Attempt("dotdot_from_workspace", ("connect-stream", f"{WS}/../outside/stream.sock"), "EACCES"),
    Attempt("relative_from_changed_cwd", ("relative", OUT, "stream.sock"), "EACCES"),
    Attempt("relative_dotdot", ("relative", WS, "../outside/stream.sock"), "EACCES"),
    # Magic links are never followed for the caller. (Under bubblewrap /proc/self is not
    # even the caller's: the supervisor is not in the command's PID namespace.)
    Attempt(
        "proc_self_fd_magic_link",
        ("magic-link", f"{OUT}/stream.sock"),
        {"landlock": "EACCES", "bwrap": "ENOENT"},
    ),
    # bubblewrap: the command's own network namespace, where nothing listens.
    Attempt("udp_loopback", ("udp", "127.0.0.1", "@UDP@"), {"landlock": "EACCES", "bwrap": "OK"}),
    Attempt(
        "dns_loopback_resolver",
        ("dns", "127.0.0.1", "@DNS@"),
        {"landlock": "EACCES", "bwrap": "TimeoutError"},
    ),
    Attempt(
        "tcp_fast_open",
        ("tcp-fast-open", "127.0.0.1", "@TCP@"),
        {"landlock": "EACCES", "bwrap": "ECONNREFUSED"},
    ),
    Attempt("vsock", ("family", "vsock"), "EACCES"),
    Attempt("packet", ("family", "packet"), "EACCES"),
    Attempt("raw", ("family", "raw"), {"landlock": "EACCES", "bwrap": "EPERM"}),
    Attempt("icmp", ("family", "icmp"), "EACCES"),
    Attempt("udp6", ("family", "udp6"), {"landlock": "EACCES", "bwrap": "OK"}),
    Attempt("sctp", ("family", "sctp"), {"landlock": "EACCES", "bwrap": None}),
    Attempt("kernel_crypto", ("family", "alg"), "EACCES"),
    Attempt("netlink_sock_diag", ("family", "netlink-diag"), "EACCES"),
    Attempt("socketpair_inet", ("socketpair-inet",), "EACCES"),
    # Landlock's TCP rules refuse bind and connect, not listen's implicit bind: no IP socket.
    Attempt("tcp_listen_without_bind", ("listen-unbound",), {"landlock": "EACCES", "bwrap": "OK"}),
    Attempt("io_uring", ("io-uring",), "EACCES"),
)


def cases() -> Iterator[object]:
    for variant in LAUNCHERS:
        for mode in RESTRICTED:
            for attempt in ATTEMPTS:
                yield pytest.param(
                    variant.values[0],
                    mode,
                    attempt,
                    marks=variant.marks,
                    id=f"{variant.id}-{mode}-{attempt.name}",
                )


@pytest.mark.parametrize(("variant", "mode", "attempt"), list(cases()))
async def test_no_host_service_is_reachable(
    host: Host, listeners: Listeners, variant: str, mode: str, attempt: Attempt
) -> None:
    resolver = Resolver(listeners.dns_queries)
    values = {
        OUT: str(host.outside),
        WS: str(host.ws),
        "@ABSTRACT@": listeners.abstract,
        "@UDP@": str(listeners.udp.getsockname()[1]),
        "@TCP@": str(listeners.tcp.getsockname()[1]),
        "@DNS@": str(resolver.port),
    }
    args = []
    for arg in attempt.args:
        for key, value in values.items():
            arg = arg.replace(key, value)
        args.append(arg)
    before = host.snapshot(include_ws=False)
    try:
        outcome = await probe(host, variant, mode, *args)
    finally:
        resolver.close()
    assert listeners.untouched() == []
    assert host.snapshot(include_ws=False) == before
    expected = attempt.outcome(backend_of(variant))
    if expected is not None:
        assert outcome == expected


# -- what keeps working ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_socketpairs_keep_working(host: Host, variant: str, mode: str) -> None:
    assert await probe(host, variant, mode, "socketpairs") == "OK"


@pytest.mark.parametrize("kind", ["stream-roundtrip", "dgram-roundtrip"])
@pytest.mark.parametrize("where", ["$TMPDIR", "workspace"])
@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_sockets_inside_the_writable_roots_keep_working(
    host: Host, variant: str, mode: str, where: str, kind: str
) -> None:
    """A test server of the command's own, in its temp dir or the workspace, and a client of
    its own. (Read-only Landlock has no temp dir; a read-only workspace takes no socket.)"""
    if where == "$TMPDIR" and mode == "read-only" and backend_of(variant) == "landlock":
        pytest.skip("no temp directory under read-only Landlock")
    outcome = await probe(
        host, variant, mode, kind, str(workspace_dir(host)) if where == "workspace" else where
    )
    if where == "workspace" and mode == "read-only":
        assert outcome == ("EROFS" if backend_of(variant) == "bwrap" else "EACCES")
    else:
        assert outcome == "OK"


@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_a_blocked_connect_holds_up_nothing_else(host: Host, variant: str, mode: str) -> None:
    """A connect that blocks (a listener of the command's own that never accepts, its
    backlog full) runs on a thread of the supervisor's: the command's other calls are served
    meanwhile, and it exits."""
    if mode == "read-only" and backend_of(variant) == "landlock":
        pytest.skip("no temp directory under read-only Landlock")
    script = (
        "import os, socket, threading\n"
        "path = os.path.join(os.environ['TMPDIR'], 'full.sock')\n"
        "server = socket.socket(socket.AF_UNIX); server.bind(path); server.listen(0)\n"
        "for _ in range(4):\n"
        "    c = socket.socket(socket.AF_UNIX); c.setblocking(False)\n"
        "    try: c.connect(path)\n"
        "    except BlockingIOError: break\n"
        "blocked = socket.socket(socket.AF_UNIX)\n"
        "threading.Thread(target=blocked.connect, args=(path,), daemon=True).start()\n"
        "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "socket.send_fds(a, [b'x'], [1])\n"
        "print(socket.recv_fds(b, 4, 1)[0].decode(), flush=True)\n"
        "os._exit(0)\n"
    )
    (host.top / "blocked.py").write_text(script)
    provider = make_provider("bwrap" if variant == "bwrap-launcher" else variant, host)
    ran = await run_confined(provider, host.policy(mode), f"{PYTHON} {host.top / 'blocked.py'}")
    assert (ran.returncode, ran.stdout) == (0, "x\n"), ran.stderr


# -- sockets of host services inside the workspace ------------------------------------------------
@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_a_host_socket_in_the_workspace_is_reachable_only_where_it_is_writable(
    host: Host, variant: str, mode: str
) -> None:
    """A host service listening in the workspace (a dev server's socket) is inside the
    writable roots under workspace-write, as a socket of the command's own would be; under
    read-only the workspace is not writable, and under ``.git`` (kept read-only) never."""
    service = unix_listener(socket.SOCK_STREAM, str(workspace_dir(host) / "service.sock"))
    monitor = unix_listener(socket.SOCK_STREAM, str(host.ws / ".git" / "fsmonitor.sock"))
    try:
        in_workspace = await probe(
            host, variant, mode, "connect-stream", str(workspace_dir(host) / "service.sock")
        )
        in_git = await probe(
            host, variant, mode, "connect-stream", str(host.ws / ".git" / "fsmonitor.sock")
        )
        with pytest.raises(BlockingIOError):
            monitor.accept()
        if mode == "workspace-write":
            assert (in_workspace, in_git) == ("OK", "EACCES")
            peer, _ = service.accept()
            peer.setblocking(True)
            assert peer.recv(16) == b"pwned"
            peer.close()
        else:
            assert (in_workspace, in_git) == ("EACCES", "EACCES")
            with pytest.raises(BlockingIOError):
                service.accept()
    finally:
        service.close()
        monitor.close()


# -- allow_unix_sockets -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", RESTRICTED)
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_allowed_sockets_are_reachable_and_only_they(
    host: Host, listeners: Listeners, variant: str, mode: str
) -> None:
    """``allow_unix_sockets`` names sockets by path; a path through a symbolic link names
    the socket it leads to. Every other socket outside the writable roots stays refused."""
    other = unix_listener(socket.SOCK_STREAM, str(host.outside / "other.sock"))
    (host.top / "alias").symlink_to(host.outside)
    provider = make_provider(
        "bwrap" if variant == "bwrap-launcher" else variant,
        host,
        allow_unix_sockets=[
            str(host.top / "alias" / "stream.sock"),
            str(host.outside / "dgram.sock"),
        ],
    )
    try:
        stream = await probe(
            host,
            variant,
            mode,
            "connect-stream",
            str(host.outside / "stream.sock"),
            provider=provider,
        )
        dgram = await probe(
            host,
            variant,
            mode,
            "sendmsg-dgram",
            str(host.outside / "dgram.sock"),
            provider=provider,
        )
        refused = await probe(
            host,
            variant,
            mode,
            "connect-stream",
            str(host.outside / "other.sock"),
            provider=provider,
        )
        assert (stream, dgram, refused) == ("OK", "OK", "EACCES")
        peer, _ = listeners.stream.accept()
        peer.setblocking(True)
        assert peer.recv(16) == b"pwned"
        peer.close()
        assert listeners.dgram.recv(16) == b"pwned"
        with pytest.raises(BlockingIOError):
            other.accept()
        assert listeners.untouched() == []
    finally:
        other.close()


def test_allow_unix_sockets_takes_absolute_paths_only() -> None:
    with pytest.raises(SandboxError) as caught:
        SandboxProvider(allow_unix_sockets=["/var/run/docker.sock", "agent.sock"])
    assert caught.value.code == "SANDBOX_CONFIG"
    assert str(caught.value) == (
        "allow_unix_sockets: agent.sock is not an absolute path (name each socket by its "
        "full path, e.g. /var/run/docker.sock)"
    )


# -- ways around the check ----------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["$TMPDIR", "workspace"])
@pytest.mark.parametrize("variant", LAUNCHERS)
async def test_a_host_socket_mounted_into_a_writable_root_stays_refused(
    host: Host, listeners: Listeners, variant: str, where: str
) -> None:
    """In a user and mount namespace of its own, a command could bind a host socket over a
    path inside its writable roots. bubblewrap's command may not make a user namespace (the
    filter bwrap adds with ``--seccomp``), Landlock refuses the mount."""
    target = f"{workspace_dir(host) if where == 'workspace' else where}/mounted.sock"
    outcome = await probe(
        host,
        variant,
        "workspace-write",
        "mount-and-connect",
        str(host.outside / "stream.sock"),
        target,
    )
    # bubblewrap: no user namespace; Landlock: no mount.
    assert outcome == ("EPERM" if backend_of(variant) == "landlock" else "EACCES")
    assert listeners.untouched() == []


PASS_THROUGH = f"""#!{PYTHON} -IS
import os, sys
sys.path.insert(0, {str(SANDBOX_DIR)!r})
import _syscalls as syscalls
syscalls.drop_privileges()
argv = sys.argv[sys.argv.index("--") + 1 :]
os.execvp(argv[0], argv)
"""
"""A "bwrap-compatible" runner that runs the command as it is, only without capabilities
(with them, the supervisor could not read the command at all, and refuses every call)."""


@pytest.mark.bwrap
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_a_runner_without_a_private_tmp_does_not_open_the_hosts(
    host: Host, mode: str
) -> None:
    """The supervisor takes bubblewrap's /tmp for a fresh tmpfs only if it is one: under a
    runner that leaves the host's /tmp in place, a host socket there stays refused."""
    runner = host.top / "pass-through"
    runner.write_text(PASS_THROUGH)
    runner.chmod(0o755)
    path = f"/tmp/tether-test-{uuid.uuid4().hex[:12]}.sock"
    listener = unix_listener(socket.SOCK_STREAM, path)
    allowed = unix_listener(socket.SOCK_STREAM, str(host.outside / "allowed.sock"))
    try:
        provider = SandboxProvider(
            runner_command=str(runner), disable=(), allow_unix_sockets=[allowed.getsockname()]
        )
        in_tmp = await probe(host, "bwrap", mode, "connect-stream", path, provider=provider)
        # The supervisor does serve this command: an allowed socket is reached.
        elsewhere = await probe(
            host, "bwrap", mode, "connect-stream", allowed.getsockname(), provider=provider
        )
        assert (in_tmp, elsewhere) == ("EACCES", "OK")
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
        allowed.close()
        os.unlink(path)


@pytest.mark.parametrize(
    ("rule", "expected"), [("ip", "udp ok, tcp ok"), ("none", "udp EACCES, tcp EACCES")]
)
def test_the_network_rules_of_socket_creation(rule: str, expected: str) -> None:
    """``none`` is Landlock's (no IP socket at all), ``ip`` bubblewrap's (its own network
    namespace); the same filter in a plain process, so only the rule decides."""
    code = (
        f"import sys; sys.path.insert(0, {str(SANDBOX_DIR)!r})\n"
        "import errno, socket, _seccomp_filter as seccomp_filter, _syscalls as syscalls\n"
        "syscalls.set_no_new_privs()\n"
        f"seccomp_filter.install((syscalls.machine(), None, {rule!r}, False))\n"
        "def make(kind):\n"
        "    try: socket.socket(socket.AF_INET, kind).close(); return 'ok'\n"
        "    except OSError as e: return errno.errorcode[e.errno]\n"
        "print(f'udp {make(socket.SOCK_DGRAM)}, tcp {make(socket.SOCK_STREAM)}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout == expected + "\n"
