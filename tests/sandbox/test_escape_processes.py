"""Escape attempts that need something on the harness side: a TCP listener, an inherited file
descriptor, a process whose working directory is outside, a preload library, and background
processes that try to outlive the call. Each checks the host afterwards."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from sandbox_support import (
    PYTHON,
    RESTRICTED,
    VARIANTS,
    Host,
    compile_preload,
    make_provider,
    run_confined,
)

from proc_support import processes_with

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("mode", RESTRICTED),
    pytest.mark.parametrize("variant", VARIANTS),
]


async def test_tcp_connection_to_a_local_listener_fails(
    host: Host, variant: str, mode: str
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        script = (
            f"{PYTHON} -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), 2);"
            " s.sendall(b'pwned')\""
        )
        ran = await run_confined(make_provider(variant, host), host.policy(mode), script)
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected, on the host's loopback
    assert ran.returncode != 0


async def test_listening_socket_is_not_reachable_from_the_host(
    host: Host, variant: str, mode: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = (
        f'{PYTHON} -c "import socket, time; s = socket.socket(); '
        f"s.bind(('127.0.0.1', {port})); s.listen(1); time.sleep(0.5)\""
    )
    provider = make_provider(variant, host)
    task = asyncio.ensure_future(run_confined(provider, host.policy(mode), script))
    await asyncio.sleep(0.3)
    with socket.socket() as client:
        client.settimeout(0.5)
        assert client.connect_ex(("127.0.0.1", port)) != 0  # nothing listens on the host
    ran = await task
    if ran.command.backend == "landlock":
        assert ran.returncode != 0  # bind itself is refused (ABI >= 4)


async def test_inherited_writable_descriptor_does_not_leak(
    host: Host, variant: str, mode: str
) -> None:
    target = host.outside / "fd-target.txt"
    fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    os.set_inheritable(fd, True)
    try:
        script = (
            f"echo pwned >&{fd}; echo pwned > /proc/self/fd/{fd}; "
            f"for n in $(seq 3 64); do echo pwned >&$n; done 2>/dev/null; ls /proc/self/fd"
        )
        ran = await run_confined(make_provider(variant, host), host.policy(mode), script)
    finally:
        os.close(fd)
    assert target.read_text() == ""
    if fd > 3:  # ls itself holds 0-3
        assert str(fd) not in ran.stdout.split()


async def test_proc_cwd_of_an_outside_process_is_not_a_way_out(
    host: Host, variant: str, mode: str
) -> None:
    helper = subprocess.Popen(["sleep", "30"], cwd=host.outside)
    try:
        script = f"echo pwned > /proc/{helper.pid}/cwd/pwned.txt"
        ran = await run_confined(make_provider(variant, host), host.policy(mode), script)
    finally:
        helper.kill()
        helper.wait()
    assert not (host.outside / "pwned.txt").exists()
    assert ran.returncode != 0


async def test_ld_preload_library_cannot_write_outside(
    host: Host, variant: str, mode: str, tmp_path: Path
) -> None:
    target = host.outside / "preload.txt"
    lib = compile_preload(tmp_path, target)
    if lib is None:
        pytest.skip("no C compiler to build the preload library")
    inside = host.ws / "preload.so"
    shutil.copy(lib, inside)
    before = (host.ws / "file.txt").read_text()
    ran = await run_confined(
        make_provider(variant, host), host.policy(mode), f"LD_PRELOAD={inside} /bin/true; echo ran"
    )
    assert "ran" in ran.stdout  # the library was loaded into a confined process...
    assert not target.exists()  # ...and its write went nowhere
    assert (host.ws / "file.txt").read_text() == before


@pytest.mark.parametrize(
    "launch",
    [
        pytest.param("setsid sh -c '{body}' </dev/null >/dev/null 2>&1 &", id="setsid"),
        pytest.param("nohup sh -c '{body}' </dev/null >/dev/null 2>&1 &", id="nohup"),
        pytest.param(
            '{py} -c "import os, subprocess; os.fork() == 0 and (os.setsid(), '
            "subprocess.Popen(['sh', '-c', '{body}'], start_new_session=True))\"",
            id="double-fork",
        ),
    ],
)
async def test_background_process_does_not_outlive_the_call(
    host: Host, variant: str, mode: str, launch: str
) -> None:
    token = uuid.uuid4().hex
    late_ws, late_out = host.ws / f"late-{token}", host.outside / f"late-{token}"
    body = f": {token}; sleep 0.2; echo late > {late_ws}; echo late > {late_out}"
    script = launch.format(body=body, py=PYTHON) + "\nexit 0"
    ran = await run_confined(make_provider(variant, host), host.policy(mode), script)
    assert ran.returncode == 0
    await asyncio.sleep(0.5)
    assert processes_with(token) == []
    assert not late_ws.exists()
    assert not late_out.exists()


async def test_the_users_terminals_cannot_be_read(host: Host, variant: str, mode: str) -> None:
    """A terminal of the user's (here a pty the harness holds, as a shell in another window
    would) is no device of the command's: it cannot open it and read what is typed there, a
    password at a ``sudo`` prompt or the key that answers tether's own question; not even
    after making a terminal of its own (under Landlock its supervisor opens the other end
    of the command's own by name, never another)."""
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        script = (
            f'{PYTHON} -c "import os\n'
            "try:\n"
            "    own = os.openpty()  # (not under the Landlock launcher)\n"
            "except OSError:\n"
            "    pass\n"
            "for flags in (os.O_RDONLY, os.O_RDWR):\n"
            "    try:\n"
            f"        fd = os.open('{name}', flags | os.O_NOCTTY | os.O_NONBLOCK)\n"
            "    except OSError as err:\n"
            "        print('refused', err.errno, flush=True); continue\n"
            "    try:\n"
            "        print('read', os.read(fd, 64), flush=True)\n"
            "    except BlockingIOError:\n"
            "        print('nothing typed', flush=True)\""
        )
        os.write(master, b"hunter2\n")  # typed, waiting in the terminal for its reader
        ran = await run_confined(make_provider(variant, host), host.policy(mode), script)
    finally:
        os.close(master)
        os.close(slave)
    assert ran.returncode == 0, ran.stderr
    assert "hunter2" not in ran.stdout
    if variant.startswith("landlock"):
        assert ran.stdout == f"refused {errno.EACCES}\n" * 2
    else:  # a devpts of its own: the name is missing there, or one of its own terminals
        assert set(ran.stdout.splitlines()) <= {f"refused {errno.ENOENT}", "nothing typed"}


@pytest.mark.parametrize(
    "use",
    [
        pytest.param(
            f"{PYTHON} -c \"import os; m, s = os.openpty(); os.write(m, b'typed\\n'); "
            'print(os.ttyname(s), os.read(s, 64))"',
            id="openpty",
        ),
        pytest.param(
            f"{PYTHON} -c \"import pty, sys; sys.exit(pty.spawn(['echo', 'in-a-pty']) >> 8)\""
            " </dev/null",
            id="pty.spawn",
        ),
        pytest.param("script -qec 'echo in-a-pty' /dev/null </dev/null", id="script"),
    ],
)
async def test_a_command_can_make_and_use_a_terminal_of_its_own(
    host: Host, variant: str, mode: str, use: str, request: pytest.FixtureRequest
) -> None:
    if use.startswith("script") and shutil.which("script") is None:
        pytest.skip("no script(1) here")
    if variant == "landlock-launcher":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="the launcher's supervisor is confined by the read layer too, so it "
                "cannot open the other end by name for the command (the fork server's can)",
            )
        )
    ran = await run_confined(make_provider(variant, host), host.policy(mode), use)
    assert ran.returncode == 0, ran.stderr
    if "openpty" in use:
        tty, typed = ran.stdout.split(" ", 1)
        assert tty.startswith("/dev/pts/") and typed.strip() == "b'typed\\n'"
    else:
        assert ran.stdout.replace("\r", "") == "in-a-pty\n"
