"""What a confine reuses from the previous one, and what must not be reused.

The workspace's cover, the masks over hidden paths, the hidden and control paths and the read
layer are kept while the directories they came from stand (tether/sandbox/_listings.py). A
directory that changes between two commands must be seen by the second: a hidden path created
after the first command is hidden from the second, a new top-level workspace entry is
writable by the next command. Each test trusts a listing at once (``FRESH_NS`` 0), so that only
the directories' stamps decide whether the second command derives its confinement again:
without them it would reuse the first's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from sandbox_support import SSH_KEY, VARIANTS, Host, make_provider, run_confined

from tether.sandbox import SandboxError
from tether.sandbox import _landlock_exec as landlock_exec
from tether.sandbox import _listings as listings
from tether.sandbox._bwrap_exec import SHARE_NET


@pytest.fixture
def quiet(host: Host, monkeypatch: pytest.MonkeyPatch) -> Host:
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    return host


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_new_top_level_entry_is_writable_by_the_next_command(
    quiet: Host, variant: str
) -> None:
    provider = make_provider(variant, quiet)
    policy = quiet.policy("workspace-write")
    first = await run_confined(provider, policy, "echo one > file.txt")
    assert first.returncode == 0, first.stderr
    (quiet.ws / "added").mkdir()
    (quiet.ws / "added.txt").write_text("")
    second = await run_confined(provider, policy, "echo two > added/new && echo three > added.txt")
    assert second.returncode == 0, second.stderr
    assert (quiet.ws / "added" / "new").read_text() == "two\n"
    assert (quiet.ws / "added.txt").read_text() == "three\n"


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_hidden_path_created_after_a_command_is_hidden_from_the_next(
    quiet: Host, variant: str
) -> None:
    provider = make_provider(variant, quiet)
    policy = quiet.policy("workspace-write")
    aws = quiet.home / ".aws"  # a credential path, missing at first
    first = await run_confined(provider, policy, f"ls {aws}")
    assert first.returncode != 0 and "No such file" in first.stderr
    aws.mkdir()
    (aws / "credentials").write_text(SSH_KEY + "\n")
    (quiet.home / ".pgpass").write_text(SSH_KEY + "\n")  # a hidden file, missing at first
    second = await run_confined(provider, policy, f"cat {aws}/credentials {quiet.home}/.pgpass")
    assert second.returncode != 0
    assert "must-not-leak" not in second.stdout + second.stderr


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_control_name_linked_after_a_command_protects_its_target_from_the_next(
    quiet: Host, variant: str
) -> None:
    provider = make_provider(variant, quiet)
    policy = quiet.policy("workspace-write")
    target = quiet.ws / "src" / "agent-settings"
    target.mkdir()
    first = await run_confined(provider, policy, "echo one > src/agent-settings/a.json")
    assert first.returncode == 0, first.stderr
    (quiet.ws / ".claude").symlink_to(target)  # .claude is a control name at the root
    second = await run_confined(provider, policy, "echo two > src/agent-settings/b.json")
    assert second.returncode != 0
    assert not (target / "b.json").exists()


def test_the_cover_is_reused_until_a_walked_directory_changes(quiet: Host) -> None:
    ws = str(quiet.ws)
    carve = {f"{ws}/.git", f"{ws}/tether.toml"}
    key = (ws, frozenset(carve))
    first = landlock_exec.writable_cover(ws, carve)
    entry = landlock_exec._cover_cache[key]
    assert landlock_exec.writable_cover(ws, carve) == first
    assert landlock_exec._cover_cache[key] is entry  # reused, not walked again
    (quiet.ws / "tether.toml").write_text("")  # carved: changes the root, never granted
    (quiet.ws / "new").mkdir()
    granted, walked = landlock_exec.writable_cover(ws, carve)
    assert landlock_exec._cover_cache[key] is not entry
    assert granted == sorted([*first[0], f"{ws}/new"])
    assert f"{ws}/tether.toml" not in granted and walked == [ws]


def test_a_snapshot_sees_a_missing_path_appear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    missing = tmp_path / "later"
    shot = listings.snapshot([str(missing), str(tmp_path)], listings.started())
    assert shot.unchanged()
    missing.mkdir()
    assert not shot.unchanged()


def test_setting_a_directory_time_back_does_not_hide_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A command that may write a directory may also touch its mtime back to what it was.
    monkeypatch.setattr(listings, "FRESH_NS", 0)
    before = os.stat(tmp_path)
    shot = listings.snapshot([str(tmp_path)], listings.started())
    (tmp_path / ".claude").symlink_to("/")
    os.utime(tmp_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(tmp_path).st_mtime_ns == before.st_mtime_ns
    assert not shot.unchanged()


def test_a_recent_change_is_not_trusted(tmp_path: Path) -> None:
    # Changed within FRESH_NS before the listing: a second change in the same tick of a coarse
    # clock would leave the stamp as it was.
    shot = listings.snapshot([str(tmp_path)], listings.started())
    assert not shot.unchanged()


@pytest.mark.bwrap
async def test_a_bubblewrap_pair_runs_bwrap_in_a_network_namespace_of_its_own(host: Host) -> None:
    provider = make_provider("bwrap", host)
    policy = host.policy("workspace-write")
    command = provider.confine(["true"], policy)
    at = command.bwrap_pair_argv.index("--unshare-all") + 1
    assert command.bwrap_pair_argv[at] == SHARE_NET
    assert command.bwrap_pair_argv[:at] + command.bwrap_pair_argv[at + 1 :] == command.bwrap_argv
    assert SHARE_NET not in command.argv  # the launcher's bwrap makes its own namespace
    script = (
        "readlink /proc/self/ns/net; "
        'python3 -c "import socket; print(*(n for _, n in socket.if_nameindex())); '
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "socket.create_connection(s.getsockname()); print('loopback')\""
    )
    ran = await run_confined(provider, policy, script)
    assert ran.returncode == 0, ran.stderr
    namespace, *interfaces, loopback = ran.stdout.split()
    assert namespace != os.readlink("/proc/self/ns/net")
    assert interfaces == ["lo"] and loopback == "loopback"
    networked = provider.confine(["true"], policy, network=True)
    assert not networked.fast_path and networked.bwrap_pair_argv == ()


# -- real paths (runners, the workspace) ---------------------------------------------------------
def test_a_resolution_follows_links_and_names_every_entry_it_looked_up(tmp_path: Path) -> None:
    (tmp_path / "real" / "bin").mkdir(parents=True)
    (tmp_path / "real" / "bin" / "tool").write_text("")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "dir").symlink_to(tmp_path / "real")
    (tmp_path / "links" / "tool").symlink_to("dir/bin/../bin/tool")
    for path in (f"{tmp_path}/links/tool", f"{tmp_path}/links/dir/missing/x", f"{tmp_path}/.."):
        assert listings.resolved(path)[0] == os.path.realpath(path)
    _, looked = listings.resolved(f"{tmp_path}/links/tool")
    assert {
        (f"{tmp_path}/links/tool", "dir/bin/../bin/tool"),
        (f"{tmp_path}/links/dir", str(tmp_path / "real")),
        (f"{tmp_path}/real/bin", ""),
        (f"{tmp_path}/real/bin/tool", ""),
    } <= set(looked)
    _, looked = listings.resolved(f"{tmp_path}/links/dir/missing/x")
    assert looked[-1] == (f"{tmp_path}/real/missing", None)


def test_a_real_path_is_resolved_again_only_when_an_entry_on_its_way_changed(
    tmp_path: Path,
) -> None:
    """A busy directory on the way (new files beside the workspace, every second) does not
    make the workspace's real path be looked for again; a link put in its place does."""
    projects = tmp_path / "projects"
    (projects / "ws").mkdir(parents=True)
    path = str(projects / "ws")
    assert listings.real_path(path) == path
    before = listings.resolutions
    for n in range(20):  # another process's work beside the workspace
        (projects / f"scratch-{n}").write_text("")
        assert listings.real_path(path) == path
    (projects / "scratch-0").unlink()
    assert listings.real_path(path) == path
    assert listings.resolutions == before
    (projects / "ws").rename(projects / "elsewhere")
    (projects / "ws").symlink_to(projects / "elsewhere")
    assert listings.real_path(path) == str(projects / "elsewhere")
    assert listings.resolutions == before + 1


def test_a_runner_link_pointed_into_the_workspace_is_refused_at_the_next_command(
    quiet: Host,
) -> None:
    real = shutil.which("bwrap")
    assert real is not None
    runner = quiet.outside / "bwrap"
    runner.symlink_to(real)
    provider = make_provider("bwrap", quiet, bwrap_path=str(runner))
    policy = quiet.policy("read-only")
    provider.confine(["true"], policy)  # checked, and the check kept
    planted = quiet.ws / "src" / "bwrap"
    shutil.copy(real, planted)
    runner.unlink()
    runner.symlink_to(planted)  # its directory changed: the check is made again
    with pytest.raises(SandboxError, match="lies inside the workspace") as raised:
        provider.confine(["true"], policy)
    assert raised.value.code == "SANDBOX_CONFIG"


def test_within_one_moment_a_path_is_stamped_once(quiet: Host) -> None:
    directory = str(quiet.ws / "src")
    with listings.one_moment():
        first = listings.stamp(directory)
        (quiet.ws / "src" / "new").write_text("")
        assert listings.stamp(directory) == first  # the moment's view
    assert listings.stamp(directory) != first


@pytest.mark.parametrize("variant", VARIANTS)
def test_busy_directories_around_the_workspace_rebuild_nothing(quiet: Host, variant: str) -> None:
    """Another process's work beside the workspace and beside the hidden paths (a busy
    ``/tmp`` or directory of projects) changes nothing a command's confinement was derived
    from: no derivation is made again. A new top-level entry of the workspace is relevant."""
    provider = make_provider(variant, quiet)
    policy = quiet.policy("workspace-write")
    provider.confine(["true"], policy).close()
    before = listings.taken
    for n in range(5):
        (quiet.top / f"scratch-{n}").write_text("")  # beside the workspace and $HOME
        (quiet.outside / f"scratch-{n}").mkdir()
        provider.confine(["true"], policy).close()
    assert listings.taken == before
    (quiet.ws / "added").mkdir()
    provider.confine(["true"], policy).close()
    assert listings.taken > before
