"""The provider: backend chain, probing once, fail-closed SANDBOX_UNAVAILABLE, profiles,
environment scrubbing, runner failures, danger-full-access, and the kernel plugin."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import stat
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_support import (
    PYTHON,
    SECRET_ENV,
    SSH_KEY,
    VARIANTS,
    Host,
    make_provider,
    run_confined,
)

from proc_support import processes_with
from runner_support import fake_runner, passing_runner
from tether.kernel import PluginConfigError
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import (
    SANDBOX_SERVICE,
    SandboxError,
    SandboxProvider,
    SandboxUnavailableError,
    spawn,
    stop,
)
from tether.sandbox._backends import BWRAP_LAUNCHER_PATH, LAUNCHER_PATH
from tether.sandbox._environment import confined_env, is_secret_name, unconfined_env
from tether.sandbox._landlock_exec import LAUNCHER_EXIT, readable_roots
from tether.sandbox._paths import CREDENTIAL_PATHS, path_rules
from tether.sandbox._provider import BackendReport, describe_backends
from tether.sandbox._temp_dirs import temp_dirs

pytestmark = pytest.mark.timeout(60)


# -- fail closed --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_no_usable_backend_refuses_and_runs_nothing(
    host: Host, mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # bubblewrap unusable (it cannot create namespaces), Landlock unavailable (disabled).
    broken = fake_runner(
        tmp_path, 'echo "bwrap: No permissions to create new namespace" >&2; exit 1'
    )
    monkeypatch.setenv("TETHER_SANDBOX_DISABLE", "landlock")
    provider = SandboxProvider(bwrap_path=str(broken))
    marker = host.outside / "ran.txt"
    with pytest.raises(SandboxUnavailableError) as caught:
        provider.confine(["bash", "-c", f"echo ran > {marker}"], host.policy(mode))
    err = caught.value
    assert err.code == "SANDBOX_UNAVAILABLE"
    assert err.mode == mode
    assert dict(err.reasons) == {
        "bwrap": "probe failed: bwrap: No permissions to create new namespace",
        "landlock": "disabled by TETHER_SANDBOX_DISABLE/config",
    }
    assert str(err) == (
        f"no sandbox backend can enforce {mode} mode (bwrap: probe failed: bwrap: No "
        "permissions to create new namespace; landlock: disabled by "
        "TETHER_SANDBOX_DISABLE/config); the command was not run"
    )
    assert err.to_dict() == {
        "code": "SANDBOX_UNAVAILABLE",
        "message": str(err),
        "mode": mode,
        "reasons": dict(err.reasons),
    }
    assert not marker.exists()
    assert not provider.confining


def test_disable_env_turns_off_both_backends(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_SANDBOX_DISABLE", "bwrap, landlock")
    provider = SandboxProvider()
    assert provider.backend_name() is None
    with pytest.raises(SandboxUnavailableError):
        provider.confine(["true"], host.policy("read-only"))
    assert [(r.name, r.status) for r in provider.reports()] == [
        ("bwrap", "disabled"),
        ("landlock", "disabled"),
    ]


def test_unknown_backend_names_are_refused() -> None:
    with pytest.raises(Exception, match="unknown sandbox backend"):
        SandboxProvider(backends=("bwrap", "firejail"))
    with pytest.raises(Exception, match="unknown sandbox backend"):
        SandboxProvider(disable="seatbelt")


async def test_danger_full_access_runs_plain_even_without_a_backend(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_SANDBOX_DISABLE", "bwrap,landlock")
    monkeypatch.setenv("SOME_SETTING", "kept")
    provider = SandboxProvider()
    target = host.outside / "danger.txt"
    ran = await run_confined(
        provider, host.policy("danger-full-access"), f"echo done > {target}; env"
    )
    assert ran.command.argv == ("bash", "-c", f"echo done > {target}; env")
    assert (ran.command.backend, ran.command.enforcement, ran.command.confined) == (
        "none",
        "none",
        False,
    )
    assert target.read_text() == "done\n"
    assert "SOME_SETTING=kept" in ran.stdout
    for secret in SECRET_ENV.values():
        assert secret not in ran.stdout


async def test_control_unconfined_background_process_does_outlive(host: Host) -> None:
    """The control for the escape suite's background tests: without confinement the same
    launch outlives the call and writes, so those tests would see an escape."""
    token = uuid.uuid4().hex
    late = host.outside / f"late-{token}"
    script = f"setsid sh -c ': {token}; sleep 0.2; echo late > {late}' </dev/null >/dev/null 2>&1 &"
    ran = await run_confined(SandboxProvider(), host.policy("danger-full-access"), script)
    assert ran.returncode == 0
    await asyncio.sleep(0.5)
    assert late.read_text() == "late\n"
    assert processes_with(token) == []


# -- the chain --------------------------------------------------------------------------------
@pytest.mark.bwrap
def test_chain_prefers_bwrap_and_reports_why_landlock_is_not_used() -> None:
    reports = describe_backends(SandboxProvider())
    assert [(r.name, r.status, r.enforcement) for r in reports] == [
        ("bwrap", "chosen", "full"),
        ("landlock", "available", "full"),
    ]
    assert reports[0].reason.startswith("bubblewrap 0.")
    assert reports[1].reason.endswith("; not used: bwrap comes first")


def test_unusable_bwrap_falls_back_to_landlock(tmp_path: Path) -> None:
    provider = SandboxProvider(bwrap_path=str(tmp_path / "no-such-bwrap"))
    assert provider.backend_name() == "landlock"
    reports = provider.reports()
    assert reports[0] == BackendReport(
        "bwrap", "rejected", f"{tmp_path / 'no-such-bwrap'} is not executable"
    )
    assert reports[1].status == "chosen"
    assert reports[1].reason.startswith("Landlock ABI ")


def test_bwrap_probe_that_does_not_refuse_a_write_is_rejected(tmp_path: Path) -> None:
    # A "runner" that just runs the command: the probe's write succeeds, so it is no sandbox.
    liar = fake_runner(tmp_path, 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"')
    provider = SandboxProvider(bwrap_path=str(liar), disable="landlock")
    assert provider.backend_name() is None
    assert provider.reasons() == {
        "bwrap": "a write inside the read-only probe was not refused",
        "landlock": "disabled by TETHER_SANDBOX_DISABLE/config",
    }


@pytest.mark.bwrap
def test_backends_are_probed_once_per_provider(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    counting = fake_runner(tmp_path, f'echo "$1" >> {log}; exec {shutil.which("bwrap")} "$@"')
    provider = SandboxProvider(bwrap_path=str(counting))
    for _ in range(3):
        provider.confine(["true"], host.policy("read-only"))
    provider.reports()
    describe_backends(provider)
    assert log.read_text().split() == ["--ro-bind", "--version"]  # one probe, one version


# -- profiles ---------------------------------------------------------------------------------
@pytest.mark.bwrap
def test_bwrap_profile_order_and_flags(host: Host) -> None:
    provider = make_provider("bwrap", host)
    command = provider.confine(["true"], host.policy("workspace-write"))
    # bwrap's own command line, behind the launcher of its supervisor (docs/sandbox.md).
    argv = list(command.bwrap_argv)
    assert command.argv[:4] == (sys.executable, "-I", "-S", BWRAP_LAUNCHER_PATH)
    assert command.argv[-len(argv) - 1 :] == ("--", *argv)
    ws = str(host.ws)
    i = argv.index
    assert argv[1:9] == ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs"]
    # The root read-only, each existing entry but the control ones bound writable over it.
    root = i(ws)
    assert argv[root - 1 : root + 2] == ["--ro-bind", ws, ws]
    assert i("--tmpfs") < root  # a workspace under /tmp survives the private /tmp
    binds = [argv[k + 1] for k, flag in enumerate(argv) if flag == "--bind-try"]
    # Not .git or .tether-data (control paths), nor link-out (a link).
    assert binds == [f"{ws}/file.txt", f"{ws}/src"]
    assert "--bind" not in argv
    ssh = str(host.home / ".ssh")
    assert argv[i(ssh) - 1 : i(ssh) + 3] == ["--tmpfs", ssh, "--remount-ro", ssh]
    netrc = str(host.home / ".netrc")
    assert argv[i(netrc) - 2 : i(netrc) + 1] == ["--ro-bind", "/dev/null", netrc]
    assert i(ssh) > i(binds[0])  # no bind re-exposes a hidden path
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[i("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in argv
    assert argv[-2:] == ["--", "true"]
    read_only = provider.confine(["true"], host.policy("read-only")).argv
    assert "--bind-try" not in read_only and "--ro-bind" in read_only
    networked = provider.confine(["true"], host.policy("read-only"), network=True).argv
    assert "--share-net" in networked


@pytest.mark.parametrize("variant", VARIANTS)
async def test_workspace_write_writes_reach_the_host(host: Host, variant: str) -> None:
    ran = await run_confined(
        make_provider(variant, host),
        host.policy("workspace-write"),
        "echo more >> file.txt && echo made > src/new.txt && mkdir -p src/sub && "
        "echo deep > src/sub/f && chmod 700 src/sub/f && mv src/new.txt src/moved.txt && "
        'echo t > "$TMPDIR/scratch" && cat "$TMPDIR/scratch"',
    )
    assert (ran.returncode, ran.stdout) == (0, "t\n"), ran.stderr
    assert (host.ws / "file.txt").read_text() == "workspace file\nmore\n"
    assert (host.ws / "src" / "moved.txt").read_text() == "made\n"
    assert stat.S_IMODE((host.ws / "src" / "sub" / "f").stat().st_mode) == 0o700
    if ran.command.temp_dir is not None:  # Landlock's private temp dir: removed after close()
        temp_dirs.drain()  # (in the background)
        assert not os.path.exists(ran.command.temp_dir)


@pytest.mark.bwrap
async def test_bwrap_workspace_under_tmp_stays_visible(tmp_path: Path) -> None:
    ws = Path(os.path.realpath(tmp_path)) / "ws"
    (ws / "src").mkdir(parents=True)
    provider = make_provider("bwrap")
    policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, str(ws))
    ran = await run_confined(provider, policy, "echo hi > src/inside.txt && ls /tmp")
    assert ran.returncode == 0
    assert (ws / "src" / "inside.txt").read_text() == "hi\n"


@pytest.mark.parametrize("variant", VARIANTS)
async def test_read_only_can_read_the_workspace_and_system(host: Host, variant: str) -> None:
    ran = await run_confined(
        make_provider(variant, host), host.policy("read-only"), "cat file.txt; ls / >/dev/null; pwd"
    )
    assert (ran.returncode, ran.stdout) == (0, f"workspace file\n{host.ws}\n")


@pytest.mark.parametrize("variant", VARIANTS)
async def test_network_true_allows_a_local_connection(host: Host, variant: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        ran = await run_confined(
            make_provider(variant, host),
            host.policy("read-only"),
            f"{PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"",
            network=True,
        )
    assert ran.returncode == 0, ran.stderr


def test_missing_workspace_is_unavailable_not_unconfined(tmp_path: Path) -> None:
    provider = SandboxProvider()
    policy = SandboxExecutionPolicy(SandboxMode.READ_ONLY, str(tmp_path / "gone"))
    with pytest.raises(SandboxUnavailableError, match="not a directory"):
        provider.confine(["true"], policy)


# -- exit status and the Landlock supervisor ------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
async def test_exit_status_is_relayed(host: Host, variant: str) -> None:
    ran = await run_confined(make_provider(variant, host), host.policy("read-only"), "exit 7")
    assert ran.returncode == 7


@pytest.mark.parametrize("variant", ["landlock", "landlock-launcher"])
async def test_landlock_relays_death_by_signal(host: Host, variant: str) -> None:
    ran = await run_confined(
        make_provider(variant, host), host.policy("read-only"), "kill -TERM $$"
    )
    assert ran.returncode == -15


@pytest.mark.parametrize("variant", VARIANTS)
async def test_stop_kills_everything_including_escaped_sessions(host: Host, variant: str) -> None:
    token = uuid.uuid4().hex
    provider = make_provider(variant, host)
    command = provider.confine(
        ["bash", "-c", f"setsid sh -c 'sleep 30; : {token}' & sh -c 'sleep 30; : {token}' & wait"],
        host.policy("workspace-write"),
    )
    process = await spawn(command, cwd=str(host.ws))

    def sleepers() -> list[int]:
        return [
            p
            for p in processes_with(token)
            if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sh\0")
        ]

    for _ in range(200):
        if len(sleepers()) == 2:
            break
        await asyncio.sleep(0.02)
    assert len(sleepers()) == 2
    await stop(process, command)
    command.close()
    assert processes_with(token) == []


@pytest.mark.parametrize("variant", VARIANTS)
async def test_credentials_inside_a_writable_workspace_stay_hidden(
    host: Host, variant: str
) -> None:
    """A workspace that contains the home directory (tether started from ``~``): bubblewrap
    mounts over the credential paths; Landlock grants the workspace minus them."""
    home = host.home
    (home / "project").mkdir()
    key_mode = (home / ".ssh" / "id_rsa").stat().st_mode
    policy = SandboxExecutionPolicy(SandboxMode("workspace-write"), str(home), "s-test")
    ran = await run_confined(
        make_provider(variant, host),
        policy,
        f"cat {home}/.ssh/id_rsa; cat {home}/.netrc; echo planted > {home}/.ssh/planted;"
        f" chmod 666 {home}/.ssh/id_rsa; rm -f {home}/.netrc;"
        f" echo ok > {home}/project/file && cat {home}/project/file",
    )
    assert ran.stdout.splitlines()[-1:] == ["ok"]
    assert SSH_KEY not in ran.stdout and "must-not-leak" not in ran.stdout
    assert (home / "project" / "file").read_text() == "ok\n"
    assert not (home / ".ssh" / "planted").exists()
    assert (home / ".ssh" / "id_rsa").stat().st_mode == key_mode
    assert (home / ".ssh" / "id_rsa").read_text() == SSH_KEY + "\n"
    assert (home / ".netrc").exists()


# -- runner failures ----------------------------------------------------------------------------
@pytest.mark.bwrap
async def test_missing_runner_is_unavailable(host: Host, tmp_path: Path) -> None:
    runner, _ = passing_runner(tmp_path, "exit 1")
    provider = SandboxProvider(runner_command=str(runner))
    command = provider.confine(["true"], host.policy("read-only"))  # probed: it works
    runner.unlink()  # then it is gone by the time the command starts
    with pytest.raises(SandboxUnavailableError, match="cannot execute the sandbox runner") as err:
        await spawn(command, cwd=str(host.ws))
    assert dict(err.value.reasons) == {
        "bwrap": f"cannot execute the sandbox runner {runner}: No such file or directory"
    }


@pytest.mark.bwrap
async def test_runner_failure_rule_outranks_a_denial_signature(host: Host, tmp_path: Path) -> None:
    runner, armed = passing_runner(
        tmp_path, 'echo "bwrap: Can\'t mount tmpfs on /tmp: Read-only file system" >&2; exit 1'
    )
    provider = SandboxProvider(runner_command=str(runner))
    assert provider.backend_name() == "bwrap"
    armed.touch()
    ran = await run_confined(provider, host.policy("read-only"), "true")
    stderr = "bwrap: Can't mount tmpfs on /tmp: Read-only file system\n"
    assert ran.stderr == stderr
    assert ran.command.denied(stderr)  # the signature is there...
    assert ran.command.runner_failure(ran.returncode, stderr) == (  # ...but the rule wins
        "bubblewrap could not set up the sandbox: bwrap: Can't mount tmpfs on /tmp: "
        "Read-only file system"
    )
    assert ran.command.runner_failure(1, "bash: x: Read-only file system\n") is None
    assert ran.command.runner_failure(0, stderr) is None


def test_runner_command_is_probed_like_bwrap(host: Host, tmp_path: Path) -> None:
    """The attack of issue 11: a pass-through "runner" is refused by the probe, never used."""
    liar = fake_runner(tmp_path, 'while [ "$1" != "--" ]; do shift; done; shift; exec "$@"')
    provider = SandboxProvider(runner_command=str(liar), disable="landlock")
    with pytest.raises(SandboxUnavailableError) as err:
        provider.confine(["bash", "-c", f"echo ran > {host.outside}/ran"], host.policy("read-only"))
    assert dict(err.value.reasons) == {
        "bwrap": "a write inside the read-only probe was not refused",
        "landlock": "disabled by TETHER_SANDBOX_DISABLE/config",
    }
    assert not (host.outside / "ran").exists()


@pytest.mark.bwrap
@pytest.mark.parametrize("option", ["runner_command", "bwrap_path"])
@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
def test_runner_inside_the_workspace_is_refused(host: Host, option: str, mode: str) -> None:
    runner, _ = passing_runner(host.ws, "exit 1")
    provider = SandboxProvider(**{option: str(runner)})  # type: ignore[arg-type]
    assert provider.backend_name() == "bwrap"  # it passes the probe...
    with pytest.raises(SandboxError) as err:  # ...and is still refused where commands write
        provider.confine(["true"], host.policy(mode))
    assert err.value.code == "SANDBOX_CONFIG"
    assert str(err.value) == (
        f"the sandbox runner {runner} lies inside the workspace {host.ws}, where a confined "
        "command could rewrite it and run unconfined next time; install it outside the "
        "workspace (for example in /usr/local/bin) and point runner_command or bwrap_path there"
    )


def planted_bwrap(directory: Path, marker: Path) -> Path:
    """A ``bwrap`` a confined command could have planted: running it at all is the escape."""
    directory.mkdir(parents=True, exist_ok=True)
    bwrap = directory / "bwrap"
    bwrap.write_text(f'#!/bin/sh\necho ran > {marker}\nexec {shutil.which("bwrap")} "$@"\n')
    bwrap.chmod(0o755)
    return bwrap


def test_a_configured_runner_inside_the_workspace_is_refused_before_it_runs(host: Host) -> None:
    marker = host.outside / "runner-ran"
    runner = planted_bwrap(host.ws / "src", marker)
    provider = SandboxProvider(runner_command=str(runner), home=str(host.home))
    with pytest.raises(SandboxError) as err:
        provider.check_workspace(str(host.ws))
    assert err.value.code == "SANDBOX_CONFIG"
    assert str(err.value).startswith(f"the sandbox runner {runner} lies inside the workspace")
    assert not marker.exists()


def test_a_bwrap_found_inside_the_workspace_is_never_run(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = host.outside / "runner-ran"
    planted = planted_bwrap(host.ws / "src", marker)
    monkeypatch.setenv("PATH", f"{planted.parent}:{os.environ['PATH']}")
    provider = SandboxProvider(home=str(host.home))
    provider.check_workspace(str(host.ws))
    assert provider.backend_name() == "landlock"
    bwrap = provider.reports()[0]
    assert (bwrap.status, bwrap.reason.split(",")[0]) == (
        "rejected",
        f"the sandbox runner {planted} lies inside the workspace {host.ws}",
    )
    assert not marker.exists()


@pytest.mark.bwrap
def test_relative_path_entries_never_find_bwrap(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = host.outside / "runner-ran"
    planted_bwrap(tmp_path / "bin", marker)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"bin:{os.environ['PATH']}")
    provider = SandboxProvider(backends=("bwrap",), disable=())
    assert provider.backend_name() == "bwrap"
    command = provider.confine(["true"], host.policy("read-only"))
    assert command.bwrap_argv[0] == shutil.which("bwrap", path=os.environ["PATH"].split(":", 1)[1])
    assert not marker.exists()


@pytest.mark.parametrize("variant", ["landlock", "landlock-launcher"])
async def test_tethers_own_code_in_the_workspace_runs_commands_and_stays_read_only(
    variant: str,
) -> None:
    """A workspace holding tether's own package (an editable install's source): the launcher
    there is the harness's code, which no command can change, so it confines; and a
    workspace-write command cannot change that code."""
    launcher_dir = os.path.dirname(LAUNCHER_PATH)
    workspace = os.path.dirname(os.path.dirname(launcher_dir))  # the checkout's src/
    probe = os.path.join(launcher_dir, f".probe-{uuid.uuid4().hex[:8]}")
    policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, workspace)
    code = Path(LAUNCHER_PATH).read_bytes()
    try:
        ran = await run_confined(
            make_provider(variant), policy, f"echo x > {probe}; echo '#' >> {LAUNCHER_PATH}"
        )
        assert ran.returncode != 0
        assert "Permission denied" in ran.stderr
        assert not os.path.exists(probe)
        assert Path(LAUNCHER_PATH).read_bytes() == code
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe)


async def test_landlock_launcher_failure_exits_125_with_its_line(host: Host) -> None:
    provider = make_provider("landlock-launcher", host)
    command = provider.confine(["true"], host.policy("workspace-write"))
    shutil.rmtree(host.ws)  # the launcher cannot grant a workspace that vanished
    process = await spawn(command)
    _, err = await process.communicate()
    command.close()
    stderr = err.decode()
    assert process.returncode == LAUNCHER_EXIT
    assert stderr.startswith(f"tether-landlock: [Errno 2] cannot open {host.ws}:")
    assert command.runner_failure(process.returncode, stderr) is not None


async def test_landlock_fast_path_failure_is_unavailable(host: Host) -> None:
    provider = make_provider("landlock", host)
    command = provider.confine(["true"], host.policy("workspace-write"))
    shutil.rmtree(host.ws)
    with pytest.raises(SandboxUnavailableError, match="cannot build the Landlock ruleset"):
        await spawn(command)
    command.close()


# -- environment and hidden paths ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("DEEPSEEK_API_KEY", True),
        ("OPENAI_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("PGPASSWORD", True),
        ("MY_CREDENTIALS_FILE", True),
        ("PATH", False),
        ("HOME", False),
        ("LC_ALL", False),
        ("SSH_AUTH_SOCK", False),
        ("KEYBOARD_LAYOUT", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_confined_env_is_an_allowlist_without_secrets() -> None:
    source = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LC_ALL": "C",
        "LD_PRELOAD": "/x.so",
        "PYTHONPATH": "/p",
        "OPENAI_API_KEY": "sk",
        "EDITOR": "vi",
    }
    assert confined_env(source) == {"PATH": "/bin", "HOME": "/home/u", "LC_ALL": "C"}
    assert confined_env(source, allow=["EDITOR", "OPENAI_*"], extra={"X_TOKEN": "t", "A": "b"}) == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LC_ALL": "C",
        "EDITOR": "vi",
        "A": "b",
    }
    assert confined_env({})["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert unconfined_env(source) == {k: v for k, v in source.items() if k != "OPENAI_API_KEY"}


def test_hidden_paths_are_the_credential_paths_existing_or_not(host: Host) -> None:
    assert ".ssh" in CREDENTIAL_PATHS
    rules = path_rules({}, home=str(host.home))
    at_home = tuple(p for p in rules.present if p.startswith(str(host.home)))
    assert at_home == (str(host.home / ".ssh"), str(host.home / ".netrc"))
    assert [str(host.home / rel) for rel in CREDENTIAL_PATHS] == list(
        rules.hidden[: len(CREDENTIAL_PATHS)]
    )


def test_readable_roots_cover_everything_but_the_hidden(host: Host) -> None:
    hidden = str(host.home / ".ssh")
    roots = readable_roots([hidden])
    assert hidden not in roots and "/" not in roots
    assert str(host.home / ".netrc") in roots and str(host.ws) in roots
    assert "/usr" in roots and "/proc" in roots
    for root in roots:
        assert not (hidden + "/").startswith(root.rstrip("/") + "/")
        assert not (root + "/").startswith("/dev/")  # devices: only DEVICES, one by one
    everything = readable_roots([])
    assert "/usr" in everything and "/" not in everything and "/dev" not in everything


# -- plugin -------------------------------------------------------------------------------------
def test_plugin_provides_the_service(tmp_path: Path) -> None:
    kernel = Kernel()
    handle = kernel.load(resolve_plugin("sandbox"), {"disable": ["bwrap", "landlock"]})
    provider = kernel.ctx.get(SANDBOX_SERVICE)
    assert isinstance(provider, SandboxProvider)
    assert provider.backend_name() is None
    handle.dispose()
    assert kernel.ctx.get(SANDBOX_SERVICE) is None
    with pytest.raises(PluginConfigError, match="unknown backend"):
        kernel.load(resolve_plugin("sandbox"), {"backends": ["nsjail"]})
