"""The Landlock fork server: real servers, real pairs, real confined commands.

Most tests use a dedicated :class:`ForkServer` (not the process-wide one) so they can kill it,
close it or start it wrong without disturbing other tests.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sandbox_support import Host, make_provider

from proc_support import gone, processes_with
from tether.sandbox import SandboxError, SandboxUnavailableError, spawn, stop, unconfined
from tether.sandbox import _landlock_client as client
from tether.sandbox import _landlock_exec as landlock_exec
from tether.sandbox import _listings as listings
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._landlock_client import ForkServer, fork_server
from tether.sandbox._landlock_exec import LAUNCHER_EXIT, LAUNCHER_PREFIX
from tether.sandbox._landlock_server import REQUEST

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def server() -> AsyncIterator[ForkServer]:
    own = ForkServer()
    try:
        yield own
    finally:
        own.close()


def confine(host: Host, script: str, mode: str = "workspace-write") -> ConfinedCommand:
    return make_provider("landlock", host).confine(["bash", "-c", script], host.policy(mode))


def parent_of(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def fake_python(directory: Path, body: str) -> str:
    """An executable that stands in for the interpreter the server is started with."""
    script = directory / "fake-python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


# -- the normal path ------------------------------------------------------------------------------
async def test_a_command_runs_below_its_supervisor_below_the_server(host: Host) -> None:
    command = confine(host, "echo $PPID; echo err >&2; exit 3")
    process = await spawn(command, cwd=str(host.ws))
    out, err = await process.communicate()
    command.close()
    assert isinstance(process, client.ForkedProcess)
    assert (process.returncode, out.decode().strip(), err) == (3, str(process.pid), b"err\n")
    # The supervisor is the server's child, not the harness's: nothing was forked from here.
    assert os.getpid() != fork_server().pid


async def test_supervisor_is_the_servers_child(host: Host) -> None:
    command = confine(host, "sleep 30")
    process = await spawn(command, cwd=str(host.ws))
    try:
        assert parent_of(process.pid) == fork_server().pid
    finally:
        process.send_signal(signal.SIGTERM)
        assert await process.wait() == 128 + signal.SIGTERM
        command.close()


async def test_many_concurrent_spawns_each_get_their_own_pair(host: Host) -> None:
    provider = make_provider("landlock", host)
    commands = [
        provider.confine(["bash", "-c", f"echo {i}"], host.policy("read-only")) for i in range(16)
    ]
    processes = await asyncio.gather(*(spawn(c, cwd=str(host.ws)) for c in commands))
    outputs = await asyncio.gather(*(p.communicate() for p in processes))
    for command in commands:
        command.close()
    assert [out.decode() for out, _ in outputs] == [f"{i}\n" for i in range(16)]
    assert [p.returncode for p in processes] == [0] * 16
    assert len({p.pid for p in processes}) == 16


async def test_requests_larger_than_a_socket_message(host: Host) -> None:
    big = "x" * 100_000  # the kernel's limit for one argument is 128 KiB
    command = make_provider("landlock", host).confine(
        ["bash", "-c", 'echo "${#1} ${#2} ${#3} ${#BIG}"', "bash", big, big, big],
        host.policy("read-only"),
        extra_env={"BIG": big},
    )
    process = await spawn(command, cwd=str(host.ws))
    out, _ = await process.communicate()
    command.close()
    assert (out, process.returncode) == (b"100000 100000 100000 100000\n", 0)


async def test_stderr_to_stdout_and_the_default_cwd(host: Host, server: ForkServer) -> None:
    command = confine(host, "echo out; echo err >&2; pwd")
    process = await server.spawn(command, stderr=subprocess.STDOUT)
    out, err = await process.communicate()
    command.close()
    assert err is None
    assert sorted(out.decode().split()) == sorted(["out", "err", os.getcwd()])


async def test_a_command_starts_with_the_signals_an_unconfined_one_has(host: Host) -> None:
    """Nothing ignored or blocked (the server is a Python process that ignores SIGPIPE, and
    was started by ``posix_spawn``, which leaves glibc's own signals ignored)."""
    argv = ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"]
    outputs = []
    for command in (make_provider("landlock", host).confine(argv, host.policy("read-only")),
                    unconfined(argv)):  # fmt: skip
        process = await spawn(command, cwd=str(host.ws))
        out, _ = await process.communicate()
        command.close()
        outputs.append(out.decode())
    assert outputs[0] == outputs[1] == f"SigBlk:\t{0:016x}\nSigIgn:\t{inherited_ignored():016x}\n"


def inherited_ignored() -> int:
    """The ``SigIgn`` mask a child of this process starts with: what this process was started
    with (``nohup`` ignores SIGHUP), without the signals Python ignores for itself, which a
    child gets back as default."""
    own = {signal.SIGPIPE, signal.SIGXFSZ}
    ignored = [
        s for s in signal.valid_signals() if s not in own and signal.getsignal(s) == signal.SIG_IGN
    ]
    return sum(1 << (int(s) - 1) for s in ignored)


async def test_a_null_byte_is_refused_before_anything_runs(host: Host, server: ForkServer) -> None:
    command = confine(host, "true\0false")
    with pytest.raises(SandboxError, match="null byte") as err:
        await server.spawn(command, cwd=str(host.ws))
    command.close()
    assert err.value.code == "SANDBOX_CONFIG"


async def test_stdin_pipe_is_refused(host: Host, server: ForkServer) -> None:
    command = confine(host, "cat")
    with pytest.raises(SandboxError, match="stdin=PIPE") as err:
        await server.spawn(command, stdin=subprocess.PIPE)
    command.close()
    assert err.value.code == "SANDBOX_CONFIG"


async def test_each_process_gets_its_own_server() -> None:
    ours = fork_server()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if fork_server() is not ours and fork_server().pid is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# -- failures fail closed -------------------------------------------------------------------------
async def test_a_server_that_cannot_start_fails_closed(host: Host) -> None:
    marker = host.ws / "src" / "ran"
    own = ForkServer(python=str(host.top / "no-such-python"))
    command = confine(host, f"touch {marker}")
    with pytest.raises(SandboxUnavailableError, match="cannot start the Landlock fork server"):
        await own.spawn(command, cwd=str(host.ws))
    command.close()
    assert not marker.exists()


async def test_a_server_answering_nonsense_fails_closed(host: Host) -> None:
    python = fake_python(
        host.top,
        'exec python3 -c "import socket, sys, time; '
        "s = socket.socket(fileno=int(sys.argv[-1])); s.send(b'garbage'); time.sleep(30)\" "
        '"$@"',
    )
    own = ForkServer(python=python)
    marker = host.ws / "src" / "ran"
    command = confine(host, f"touch {marker}")
    try:
        with pytest.raises(SandboxUnavailableError, match="answered nonsense") as err:
            await own.spawn(command, cwd=str(host.ws))
    finally:
        own.close()
        command.close()
    assert err.value.mode == "workspace-write"
    assert not marker.exists()


async def test_a_hung_server_fails_closed(
    host: Host, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(client, "PAIR_TIMEOUT", 0.5)
    own = ForkServer(python=fake_python(tmp_path, "exec sleep 30"))
    command = confine(host, "true")
    try:
        with pytest.raises(SandboxUnavailableError, match="did not answer"):
            await own.spawn(command, cwd=str(host.ws))
        assert own.pid is None  # killed and forgotten: the next spawn starts a fresh one
    finally:
        own.close()
        command.close()


async def test_a_dead_server_leaves_running_commands_alone_and_is_replaced(
    host: Host, server: ForkServer
) -> None:
    token = uuid.uuid4().hex
    command = confine(host, f"setsid sh -c 'sleep 30; : {token}' & sleep 30; : {token}")
    process = await server.spawn(command, cwd=str(host.ws))
    while len(processes_with(token)) < 2:
        await asyncio.sleep(0.02)
    first = server.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    again = confine(host, "echo again")
    second = await server.spawn(again, cwd=str(host.ws))
    out, _ = await second.communicate()
    again.close()
    assert (out, second.returncode) == (b"again\n", 0)
    assert server.pid not in (None, first)
    # The command belongs to its pair socket, not to the server: still running, still ours.
    assert len(processes_with(token)) == 2 and process.returncode is None
    await stop(process, command)
    assert process.returncode == 128 + signal.SIGTERM
    assert await gone(token) == []
    command.close()


async def test_a_supervisor_killed_outright_leaves_nothing(host: Host, server: ForkServer) -> None:
    token = uuid.uuid4().hex
    command = confine(host, f"setsid sh -c 'sleep 30; : {token}' & sleep 30; : {token}")
    process = await server.spawn(command, cwd=str(host.ws))
    while len(processes_with(token)) < 2:
        await asyncio.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)  # no sweep: the orphans go to the server
    assert await process.wait() == client.UNREPORTED
    assert await gone(token) == []
    command.close()


async def test_closing_the_server_leaves_running_commands_alone(
    host: Host, server: ForkServer
) -> None:
    token = uuid.uuid4().hex
    command = confine(host, f"sleep 1; echo {token}")
    process = await server.spawn(command, cwd=str(host.ws))
    server.close()
    out, _ = await process.communicate()
    command.close()
    assert (out.decode(), process.returncode) == (f"{token}\n", 0)


HARNESS = """
import asyncio, os, sys, time
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SandboxProvider, spawn

async def main(ws, token, fork):
    provider = SandboxProvider(backends=("landlock",), disable=())
    policy = SandboxExecutionPolicy(SandboxMode("workspace-write"), ws)
    script = f"setsid sh -c 'sleep 30; : {token}' & sleep 30; : {token}"
    await spawn(provider.confine(["bash", "-c", script], policy), cwd=ws)
    ready_r, ready_w = os.pipe()
    child = os.fork() if fork else -1  # a worker forked later, which outlives the harness
    if child == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the test waits for the pipe's end
        os.write(ready_w, b"x")  # the fork hooks have run by now
        time.sleep(30)
        os._exit(0)
    if child > 0:
        os.read(ready_r, 1)
    print(child, flush=True)
    await asyncio.sleep(60)

# The token comes by environment: in an argument it would mark this process as well.
asyncio.run(main(sys.argv[1], os.environ["MARK"], sys.argv[2] == "fork"))
"""


@pytest.mark.parametrize("fork", ["alone", "fork"])
async def test_a_dead_harness_leaves_nothing_running(host: Host, fork: str) -> None:
    token = uuid.uuid4().hex
    harness = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HARNESS,
        str(host.ws),
        fork,
        stdout=subprocess.PIPE,
        env={**os.environ, "MARK": token},
    )
    assert harness.stdout is not None
    child = int(await harness.stdout.readline())
    while len(processes_with(token)) < 2:
        await asyncio.sleep(0.02)
    harness.kill()
    await harness.wait()
    try:
        assert await gone(token) == []
        if child > 0:  # the forked worker lives on without keeping the command alive
            os.kill(child, 0)
    finally:
        if child > 0:
            os.kill(child, signal.SIGKILL)


async def test_a_server_out_of_descriptors_fails_one_spawn_and_goes_on(
    host: Host, server: ForkServer
) -> None:
    assert await server.ready()
    assert server.pid is not None
    limits = resource.prlimit(server.pid, resource.RLIMIT_NOFILE)
    # Descriptors it has stay usable; it cannot open any new one (0-2 are taken).
    resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (3, limits[1]))
    marker = host.ws / "src" / "ran"
    commands = [confine(host, f"touch {marker}") for _ in range(2)]
    try:
        first = await server.spawn(commands[0], cwd=str(host.ws))  # the spare pair
        assert await first.wait() == 0
        marker.unlink()
        with pytest.raises(SandboxUnavailableError, match="cannot fork a pair"):
            await server.spawn(commands[1], cwd=str(host.ws))
        assert not marker.exists()
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, limits)
        pid = server.pid
        again = await server.spawn(commands[1], cwd=str(host.ws))
        assert await again.wait() == 0 and marker.exists()
        assert server.pid == pid  # the same server, still serving
    finally:
        for command in commands:
            command.close()


async def test_a_cancelled_spawn_leaks_nothing(host: Host, server: ForkServer) -> None:
    warm = confine(host, "true")
    await (await server.spawn(warm, cwd=str(host.ws))).wait()
    warm.close()
    server.close()  # no spare pair: the next spawn waits for the server
    before = len(os.listdir("/proc/self/fd"))
    marker = host.ws / "src" / "ran"
    command = confine(host, f"touch {marker}")
    task = asyncio.ensure_future(server.spawn(command, cwd=str(host.ws)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    command.close()
    assert await server.ready()  # still usable
    server.close()
    await asyncio.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) <= before
    assert not marker.exists()


async def test_a_malformed_request_runs_nothing(host: Host, server: ForkServer) -> None:
    read_end, write_end = os.pipe()
    body = os.memfd_create("body")
    os.write(body, b"not json")
    loop = asyncio.get_running_loop()
    with open(os.devnull, "rb") as null:
        for message, fds in (
            (REQUEST, [null.fileno(), write_end, write_end, null.fileno(), null.fileno(), body]),
            (b"garbage", [null.fileno()]),
        ):
            pair = await server._take_pair()
            socket.send_fds(pair.sock, [message], fds)
            report = await loop.sock_recv(pair.sock, 64)
            pair.discard()
            assert report == f"X {LAUNCHER_EXIT}".encode()
    os.close(body)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as errors:
        first = errors.readline().decode()
    assert first.startswith(f"{LAUNCHER_PREFIX}Expecting value"), first


# -- the readable roots cache ---------------------------------------------------------------------
async def test_files_added_beside_hidden_paths_are_readable_next_time(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Trust listings at once, so only the directory stamps decide whether to list again.
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    provider = make_provider("landlock", host)
    policy = host.policy("read-only")

    async def run(script: str) -> tuple[int | None, str]:
        command = provider.confine(["bash", "-c", script], policy)
        process = await spawn(command, cwd=str(host.ws))
        out, err = await process.communicate()
        command.close()
        return process.returncode, (out + err).decode()

    assert (await run(f"cat {host.home}/.ssh/id_rsa"))[0] != 0
    (host.home / "notes.txt").write_text("plain notes\n")
    assert await run(f"cat {host.home}/notes.txt") == (0, "plain notes\n")
    code, output = await run(f"cat {host.home}/.ssh/id_rsa {host.home}/.netrc")
    assert code != 0 and "must-not-leak" not in output


def test_the_listed_roots_are_reused_until_a_listed_directory_changes(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    hidden = (str(host.home / ".ssh"),)
    spec = landlock_exec.LandlockSpec((), hidden)
    key = (landlock_exec.abi_version(), tuple(sorted(hidden)))

    def build() -> None:
        for fd in landlock_exec.build_rulesets(spec):
            os.close(fd)

    build()
    first = landlock_exec._readable_cache[key]
    build()
    assert landlock_exec._readable_cache[key] is first  # the read layer itself is reused
    (host.home / "new-dir").mkdir()
    build()
    second = landlock_exec._readable_cache[key]
    assert second is not first
    assert second.listing.roots == tuple(sorted((*first.listing.roots, str(host.home / "new-dir"))))
    assert str(host.home / "new-dir") in landlock_exec.readable_roots(hidden)
