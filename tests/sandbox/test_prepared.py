"""Pairs prepared before their command (tether/sandbox/_prepared.py): what they may serve.

A prepared pair is confined for the commands the harness expects next (a bubblewrap pair has
run bwrap, a Landlock pair has entered its domain) and waits. It must serve a command exactly
as a pair confined for it then would, and must not serve one once anything it was prepared
from has changed: a bind mount and a Landlock rule hold the file they found, so an entry
replaced since would be the old one inside. Each test prepares a pair, changes the host, and
checks the next command sees the host as it is now (and that the prepared pair was let go).
The escape suite runs every attempt through prepared pairs too (the ``-prepared`` variants of
sandbox_support.py).
"""

from __future__ import annotations

import os
import re
import select
import signal
import tempfile

import pytest
from sandbox_support import SSH_KEY, Host, Ran, make_provider, run_confined, wait_prepared

from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import ConfinedCommand, SandboxProvider, spawn
from tether.sandbox import _listings as listings
from tether.sandbox._backends import BwrapBackend, Profile, mount_points
from tether.sandbox._landlock_client import PREPARED_PLANS, fork_server
from tether.sandbox._temp_dirs import PREFIX, TempDirs

pytestmark = pytest.mark.timeout(60)

BACKENDS = (pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"), "landlock")


@pytest.fixture
def quiet(host: Host, monkeypatch: pytest.MonkeyPatch) -> Host:
    """What a pair is prepared from is trusted at once (the host was made a moment ago)."""
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    return host


async def through_a_prepared_pair(
    provider: SandboxProvider, policy: SandboxExecutionPolicy, script: str, last: ConfinedCommand
) -> Ran:
    """Run ``script`` (which must change nothing) through a pair prepared after ``last`` ran.
    Again if the pair was let go instead: another process changed a directory it was prepared
    from meanwhile (the tests' XDG directories lie under /tmp)."""
    for _ in range(20):
        await wait_prepared(last, policy.workspace_root)
        before = counts()
        ran = await run_confined(provider, policy, script)
        if counts() == (before[0] + 1, before[1]):
            return ran
        assert counts() == (before[0], before[1] + 1), "no prepared pair took the command"
        last = ran.command
    pytest.fail("every prepared pair was let go")


async def prepare(provider: SandboxProvider, policy: SandboxExecutionPolicy) -> None:
    """Run a command under ``policy``, and wait until a pair is prepared for the next."""
    first = await run_confined(provider, policy, "true")
    assert first.returncode == 0, first.stderr
    await wait_prepared(first.command, policy.workspace_root)


def counts() -> tuple[int, int]:
    server = fork_server()
    return server.prepared_taken, server.prepared_stale


# -- what a prepared pair serves ---------------------------------------------------------------
PROBE = (
    'echo "pid $$ ppid $PPID umask $(umask)"; pwd; env | sort; ls /proc/self/fd; '
    "grep -E '^(Cap|NoNewPrivs|Seccomp|Sig(Ign|Blk))' /proc/self/status; ulimit -a; "
    'if [ -n "$TMPDIR" ]; then ls -a "$TMPDIR"; fi'
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_a_prepared_pair_gives_its_command_what_the_usual_way_gives(
    quiet: Host, backend: str, mode: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy(mode)
    usual = await run_confined(provider, policy, PROBE)  # the first: the usual way
    prepared = await through_a_prepared_pair(provider, policy, PROBE, usual.command)
    assert (usual.returncode, usual.stderr) == (0, "")
    assert (prepared.returncode, prepared.stderr) == (0, "")

    def comparable(ran: str) -> str:
        lines = ran.splitlines()
        if backend == "landlock":  # host pids differ; bwrap's command is pid 2 either way
            lines = lines[1:]
        # Each private temp directory has a name of its own (a prepared Landlock pair's is
        # its own, not the one confine made: tether/sandbox/_prepared.py, TEMP).
        return re.sub(f"{tempfile.gettempdir()}/{PREFIX}[^/\\s:]+", "TMPDIR", "\n".join(lines))

    assert comparable(prepared.stdout) == comparable(usual.stdout)
    if mode == "workspace-write" and backend == "landlock":
        assert f"TMPDIR={tempfile.gettempdir()}/{PREFIX}" in prepared.stdout
    if backend == "bwrap":
        assert prepared.stdout.startswith("pid 2 ppid 1 umask 0022\n")


@pytest.mark.parametrize(
    ("backend", "message", "status"),
    [
        pytest.param(
            "bwrap",
            "bwrap: execvp no-such-program: No such file or directory",
            1,
            marks=pytest.mark.bwrap,
            id="bwrap",
        ),
        ("landlock", "no-such-program: No such file or directory", 127),
    ],
)
async def test_a_command_that_cannot_be_executed_fails_as_the_usual_way_fails(
    quiet: Host, backend: str, message: str, status: int
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")

    async def attempt() -> tuple[int | None, str, tuple[int, int]]:
        before = counts()
        command = provider.confine(["no-such-program"], policy)
        try:
            process = await spawn(command, cwd=str(quiet.ws))
            _, err = await process.communicate()
        finally:
            command.close()
        await wait_prepared(command, str(quiet.ws))
        served = (counts()[0] - before[0], counts()[1] - before[1])
        return process.returncode, err.decode().strip(), served

    assert await attempt() == (status, message, (0, 0))  # the usual way
    for _ in range(20):
        failed = await attempt()
        if failed[2] != (0, 1):  # (let go: another process changed /tmp meanwhile)
            break
    assert failed == (status, message, (1, 0))  # a prepared pair
    command = provider.confine(["no-such-program"], policy)
    command.close()
    assert (command.runner_failure(status, message) is not None) == (backend == "bwrap")


# -- what it must not serve --------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_entry_replaced_after_a_pair_was_prepared_is_the_new_one(
    quiet: Host, backend: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")
    await prepare(provider, policy)
    moved = quiet.outside / "moved-src"
    (quiet.ws / "src").rename(moved)  # the prepared pair granted this one, by its inode
    (quiet.ws / "src").mkdir()
    before = counts()
    ran = await run_confined(provider, policy, "echo new > src/new.txt")
    assert ran.returncode == 0, ran.stderr
    assert counts() == (before[0], before[1] + 1)  # let go: it was prepared from the old one
    assert (quiet.ws / "src" / "new.txt").read_text() == "new\n"
    assert list(moved.iterdir()) == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_new_top_level_entry_is_writable_after_a_pair_was_prepared(
    quiet: Host, backend: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")
    await prepare(provider, policy)
    (quiet.ws / "added").mkdir()
    ran = await run_confined(provider, policy, "echo two > added/new")
    assert ran.returncode == 0, ran.stderr
    assert (quiet.ws / "added" / "new").read_text() == "two\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_hidden_file_replaced_after_a_pair_was_prepared_stays_hidden(
    quiet: Host, backend: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")
    netrc = quiet.home / ".netrc"  # hidden, and existing: bwrap masks it by a mount
    await prepare(provider, policy)
    replacement = quiet.home / ".netrc.new"
    replacement.write_text(SSH_KEY + " replaced\n")
    replacement.rename(netrc)  # a new inode at the path the mask was mounted on
    before = counts()
    ran = await run_confined(provider, policy, f"cat {netrc}")
    assert ran.returncode != 0
    assert "must-not-leak" not in ran.stdout + ran.stderr
    assert counts() == (before[0], before[1] + 1)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_workspace_replaced_after_a_pair_was_prepared_is_the_new_one(
    quiet: Host, backend: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")
    await prepare(provider, policy)
    old = quiet.top / "ws-old"
    quiet.ws.rename(old)
    (quiet.ws / "src").mkdir(parents=True)
    (quiet.ws / ".git").mkdir()
    ran = await run_confined(provider, policy, "echo new > src/new.txt && pwd")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == f"{quiet.ws}\n"
    assert (quiet.ws / "src" / "new.txt").read_text() == "new\n"
    assert not (old / "src" / "new.txt").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_prepared_pair_that_died_is_replaced_by_the_usual_way(
    quiet: Host, backend: str
) -> None:
    provider = make_provider(backend, quiet)
    policy = quiet.policy("workspace-write")
    await prepare(provider, policy)
    server = fork_server()
    (prepared,) = [p for t, p in server._prepared.items() if t.kind == kind_of_backend(backend)]
    os.kill(prepared.pair.pid, signal.SIGKILL)  # its supervisor: the pair goes with it
    assert select.select([prepared.pair.pidfd], [], [], 10)[0]  # (it has exited)
    before = counts()
    ran = await run_confined(provider, policy, "echo ran > src/out.txt")
    assert ran.returncode == 0, ran.stderr
    assert (quiet.ws / "src" / "out.txt").read_text() == "ran\n"
    assert counts() == before


def kind_of_backend(backend: str) -> bytes:
    return b"B" if backend == "bwrap" else b"L"


@pytest.mark.bwrap
async def test_two_policies_in_turn_each_get_a_prepared_pair(quiet: Host) -> None:
    provider = make_provider("bwrap", quiet)
    policies = [quiet.policy("workspace-write"), quiet.policy("read-only")]
    assert len(policies) <= PREPARED_PLANS
    for policy in policies:
        await prepare(provider, policy)
    before = counts()
    for policy in [*policies, *policies]:
        ran = await run_confined(provider, policy, "true")
        assert ran.returncode == 0, ran.stderr
        await wait_prepared(ran.command, policy.workspace_root)
    assert counts() == (before[0] + 4, before[1])


# -- the pieces ---------------------------------------------------------------------------------
def test_every_mount_of_a_bwrap_profile_is_watched(host: Host) -> None:
    ws = str(host.ws)
    (host.home / ".aws").mkdir()  # a hidden directory: a tmpfs over it
    backend = BwrapBackend()
    for mode in ("read-only", "workspace-write"):
        for open_root in (False, True):
            policy = host.policy(mode)
            provider = make_provider("bwrap", host, open_workspace_root=open_root)
            command = provider.confine(["true"], policy)
            points = mount_points(command.bwrap_pair_argv)
            assert {"/", "/dev", "/proc", "/tmp", ws, f"{host.home}/.aws"} <= set(points)
            expected = {p if p == ws else os.path.dirname(p) for p in points}
            assert set(command.bwrap_watch) == expected
    profile = Profile(SandboxMode.READ_ONLY, ws, {"PATH": "/usr/bin"})
    argv = backend.build("bwrap", ["true"], profile)
    with pytest.raises(ValueError, match="unknown bwrap option --bind-data"):
        mount_points([*argv[:1], "--bind-data", "3", "/x", *argv[1:]])


def test_temp_dirs_are_made_ahead_and_removed_behind() -> None:
    pool = TempDirs(prefix="tether-test-sbx-", spare=2)
    try:
        first = pool.take()  # none ready yet: made now
        pool.release(first)
        pool.drain()  # removed, and two made ahead
        assert not os.path.exists(first)
        ready = list(pool._ready)
        assert len(ready) == 2 and all(os.path.isdir(p) for p in ready)
        taken = [pool.take(), pool.take()]
        assert taken == ready and all(not os.listdir(p) for p in taken)
    finally:
        pool.close()
    assert all(os.path.isdir(p) for p in taken)  # handed out: the takers' to release
    for path in taken:
        os.rmdir(path)


def test_directories_made_ahead_and_never_taken_are_removed_at_close() -> None:
    pool = TempDirs(prefix="tether-test-sbx-", spare=1)
    pool.release(pool.take())
    pool.drain()
    (spare,) = pool._ready
    pool.close()
    assert not os.path.exists(spare)


def test_a_forked_harness_does_not_remove_its_parents_temp_dirs() -> None:
    pool = TempDirs(prefix="tether-test-sbx-", spare=1)
    try:
        pool.release(pool.take())
        pool.drain()
        (spare,) = pool._ready
        pid = os.fork()
        if pid == 0:
            pool.forget()
            mine = pool.take()
            pool.release(mine)
            pool.close()
            ok = mine != spare and not os.path.exists(mine)
            os._exit(0 if ok and os.path.isdir(spare) else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert os.path.isdir(spare)
    finally:
        pool.close()
