"""The hidden-path list and the control paths against confined commands.

Every variant (bubblewrap, Landlock through the fork server, Landlock's launcher) in both
restricted modes: the workspace's control files (existing and missing at start), the session
store's files (inside and outside the workspace, a real SQLite database in WAL mode), every
credential path of the list and the ones variables move, and ``open_workspace_root``. After
each attempt the host is compared with a snapshot taken before, and the output is searched
for the secrets it must not show.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sandbox_support import (
    PYTHON,
    RESTRICTED,
    VARIANTS,
    Host,
    changed,
    make_provider,
    run_confined,
    variant_mode_cases,
)

from hidden_support import TOKENS_AND_HISTORIES
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SandboxError, SandboxProvider
from tether.sandbox._control_names import DENIAL_NOTE
from tether.sandbox._environment import FALLBACK_PATH
from tether.sandbox._paths import CREDENTIAL_PATHS
from tether.session._store_files import store_files
from tether.session.persistence._factory import sqlite_url

pytestmark = pytest.mark.timeout(120)


def tree(host: Host, *, include_ws: bool = True) -> dict[str, tuple[object, ...]]:
    return host.snapshot(include_ws=include_ws)


# -- control files ------------------------------------------------------------------------------
CONTROL = {
    "tether.toml": ("tether.toml", '[[plugins]]\nname = "approver_command"\n'),
    ".claude/settings.json": (".claude", '{"hooks": {}}\n'),
    ".mcp.json": (".mcp.json", '{"mcpServers": {}}\n'),
}

ATTACKS = (
    "mkdir -p $(dirname @P@); echo pwned > @P@",
    "echo pwned >> @P@",
    "rm -rf @TOP@",
    "mv @TOP@ @WS@/src/moved",
    "mv @WS@/src/planted @TOP@",
    "ln -s @WS@/src/planted @TOP@",
    "cp @WS@/src/planted @P@",
    f"{PYTHON} -c \"import os; os.rename('@WS@/src/planted', '@TOP@')\"",
)


def control_cases() -> Iterator[object]:
    for variant in VARIANTS:
        for mode in RESTRICTED:
            for path in CONTROL:
                for existing in (True, False):
                    state = "existing" if existing else "missing"
                    yield pytest.param(
                        variant.values[0],
                        mode,
                        path,
                        existing,
                        marks=variant.marks,
                        id=f"{variant.id}-{mode}-{path}-{state}",
                    )


@pytest.mark.parametrize(("variant", "mode", "path", "existing"), list(control_cases()))
async def test_control_files_cannot_be_written_created_removed_or_renamed(
    host: Host, variant: str, mode: str, path: str, existing: bool
) -> None:
    top, content = CONTROL[path]
    target = host.ws / path
    if existing:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    (host.ws / "src" / "planted").write_text('[[plugins]]\nname = "planted"\n')
    before = tree(host)
    provider = make_provider(variant, host)
    for attack in ATTACKS:
        script = (
            attack.replace("@P@", str(target))
            .replace("@TOP@", str(host.ws / top))
            .replace("@WS@", str(host.ws))
        )
        ran = await run_confined(provider, host.policy(mode), script)
        assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
        after = tree(host)
        moved = [k for k in changed(before, after) if k != "ws/src" and not k.startswith("ws/src/")]
        assert moved == [], f"{script}: {moved}"
        assert (host.ws / "src" / "planted").exists()
    if existing:
        assert target.read_text() == content
    else:
        assert not os.path.lexists(host.ws / top)


# -- the session store --------------------------------------------------------------------------
LOG_SECRET = "session-log-must-not-leak"
ANSWER_SECRET = "answer-box-must-not-leak"


class Store:
    """A real SQLite store in WAL mode, held open (so its -wal and -shm exist, as while a
    harness runs), with an answer and a lease beside it."""

    def __init__(self, db: Path) -> None:
        db.parent.mkdir(parents=True, exist_ok=True)
        self.db = db
        self.url = sqlite_url(db)
        self.conn = sqlite3.connect(db)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("CREATE TABLE events (body TEXT)")
        self.conn.execute("INSERT INTO events VALUES (?)", (LOG_SECRET,))
        self.conn.commit()
        self.files = [str(p) for p in store_files(self.url)]
        box, leases = Path(self.files[4]), Path(self.files[5])
        box.mkdir()
        (box / "a-1.json").write_text(f'{{"outcome": "allowed-once", "by": "{ANSWER_SECRET}"}}')
        leases.mkdir()
        (leases / "s-1.lease").write_text('{"pid": 1}')

    def close(self) -> None:
        self.conn.close()


STORE_PLACES = {
    "inside-root": lambda host: host.ws / "tether.db",
    "inside-subdir": lambda host: host.ws / "src" / "state" / "tether.db",
    "outside": lambda host: host.top / "store" / "tether.db",
}

STORE_ATTACKS = (
    "cat @DB@ @DB@-wal @DB@-shm; sqlite3 @DB@ 'select * from events'",
    "cat @DB@.answers/*; ls -la @DB@.answers @DB@.leases",
    "echo pwned >> @DB@; echo pwned >> @DB@-wal; echo pwned > @DB@-shm",
    "echo forged > @DB@-journal",
    'echo \'{"outcome": "allowed-once"}\' > @DB@.answers/a-2.json',
    "echo pwned > @DB@.leases/s-1.lease; rm -f @DB@.leases/s-1.lease",
    "rm -rf @DB@.answers @DB@-wal; mv @DB@ @DB@.moved",
    f'{PYTHON} -c "import sqlite3; '
    "sqlite3.connect('@DB@').execute('insert into events values (1)').connection.commit()\"",
)


def store_cases() -> Iterator[object]:
    for variant in VARIANTS:
        for mode in RESTRICTED:
            for place in STORE_PLACES:
                yield pytest.param(
                    variant.values[0],
                    mode,
                    place,
                    marks=variant.marks,
                    id=f"{variant.id}-{mode}-{place}",
                )


@pytest.mark.parametrize(("variant", "mode", "place"), list(store_cases()))
async def test_store_files_are_out_of_reach(
    host: Host, variant: str, mode: str, place: str
) -> None:
    store = Store(STORE_PLACES[place](host))
    try:
        provider = make_provider(variant, host, store_paths=store.files)
        before = tree(host)
        for attack in STORE_ATTACKS:
            script = attack.replace("@DB@", str(store.db))
            ran = await run_confined(provider, host.policy(mode), script)
            assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
            output = ran.stdout + ran.stderr
            assert LOG_SECRET not in output and ANSWER_SECRET not in output, script
            assert "allowed-once" not in output, script
            # (Reads of a hidden directory may "succeed" on the empty mount in its place.)
            assert changed(before, tree(host)) == [], script
        assert not os.path.lexists(f"{store.db}-journal")
        assert not os.path.lexists(f"{store.db}.answers/a-2.json")
    finally:
        store.close()


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_jsonl_store_directory_is_hidden_whole(host: Host, variant: str) -> None:
    root = host.ws / "src" / "sessions"
    (root / "s-1").mkdir(parents=True)
    (root / "s-1" / "session.jsonl").write_text(f'{{"type": "turn/end", "x": "{LOG_SECRET}"}}\n')
    files = [str(p) for p in store_files("jsonl://" + quote(str(root)))]
    provider = make_provider(variant, host, store_paths=files)
    before = tree(host)
    script = (
        f"cat {root}/s-1/session.jsonl; ls {root}; mkdir -p {root}/.answers; "
        f"echo '{{}}' > {root}/.answers/a.json; echo x >> {root}/s-1/session.jsonl"
    )
    ran = await run_confined(provider, host.policy("workspace-write"), script)
    assert LOG_SECRET not in ran.stdout + ran.stderr
    assert ran.returncode != 0
    assert changed(before, tree(host)) == []


# -- credentials --------------------------------------------------------------------------------
DIRECTORIES = {
    ".ssh", ".aws", ".azure", ".oci", ".config/gcloud", ".config/gh", ".config/hub",
    ".config/op", ".gnupg", ".docker", ".kube", ".password-store", ".local/share/keyrings",
    ".config/github-copilot",
}  # fmt: skip
"""Entries of :data:`CREDENTIAL_PATHS` that are directories in real life."""


def plant(path: Path, secret: str, directory: bool) -> None:
    if directory:
        path.mkdir(parents=True, exist_ok=True)
        (path / "secret").write_text(secret + "\n")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secret + "\n")


def credential_layout(host: Host) -> tuple[dict[str, str], dict[str, str]]:
    """Every credential path planted with its own secret (under the fake home, and where the
    variables point), tether's data and configuration directories too, and the environment
    that names the moved ones."""
    secrets: dict[str, str] = {}
    for rel in CREDENTIAL_PATHS:
        path = host.home / rel
        secret = f"secret-{rel.replace('/', '_')}-must-not-leak"
        plant(path, secret, rel in DIRECTORIES)
        secrets[str(path)] = secret
    for rel in (".local/share/tether/tether.db", ".config/tether/trust.json"):
        secret = f"secret-{rel.replace('/', '_')}-must-not-leak"  # tether's own state
        plant(host.home / rel, secret, False)
        secrets[str(host.home / rel)] = secret
    moved = host.top / "moved"
    env = {
        "PATH": FALLBACK_PATH,
        "HOME": str(host.home),
        "XDG_RUNTIME_DIR": str(moved / "run"),
        "KUBECONFIG": f"{moved / 'kube-a'}:{moved / 'kube-b'}",
        "DOCKER_CONFIG": str(moved / "docker"),
        "CARGO_HOME": str(moved / "cargo"),
        "HF_HOME": str(moved / "hf"),
        "GOOGLE_APPLICATION_CREDENTIALS": str(moved / "gcp.json"),
        "XDG_CONFIG_HOME": str(moved / "config"),
    }
    for path, directory in (
        (moved / "run" / "containers" / "auth.json", False),
        (moved / "kube-a", False),
        (moved / "kube-b", False),
        (moved / "docker", True),
        (moved / "cargo" / "credentials.toml", False),
        (moved / "hf" / "token", False),
        (moved / "gcp.json", False),
        (moved / "config" / "gh", True),
    ):
        secret = f"secret-{path.name}-moved-must-not-leak"
        plant(path, secret, directory)
        secrets[str(path)] = secret
    return secrets, env


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_no_credential_path_is_readable(host: Host, variant: str, mode: str) -> None:
    secrets, env = credential_layout(host)
    provider = make_provider(variant, host, environ=env, home=None)
    paths = " ".join(f"'{p}'" for p in secrets)
    script = (
        f'for p in {paths}; do cat "$p" "$p"/* 2>&1; grep -rs . "$p"; done; '
        f"grep -rs must-not-leak {host.home} {host.top / 'moved'}; true"
    )
    ran = await run_confined(provider, host.policy(mode), script)
    output = ran.stdout + ran.stderr
    leaked = [p for p, secret in secrets.items() if secret in output]
    assert leaked == []
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_tokens_and_histories_are_not_readable(host: Host, variant: str, mode: str) -> None:
    secrets = {}
    for rel in TOKENS_AND_HISTORIES:
        secret = f"secret-{rel.replace('/', '_')}-must-not-leak"
        plant(host.home / rel, secret, False)
        secrets[rel] = secret
    provider = make_provider(variant, host)
    script = f"cd {host.home} && cat {' '.join(TOKENS_AND_HISTORIES)} 2>&1; grep -rs . {host.home}"
    ran = await run_confined(provider, host.policy(mode), script)
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
    assert [rel for rel, secret in secrets.items() if secret in ran.stdout + ran.stderr] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only uid 0 can read them in the first place")
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", RESTRICTED)
async def test_the_systems_password_hashes_are_not_readable_as_root(
    host: Host, variant: str, mode: str
) -> None:
    present = [p for p in ("/etc/shadow", "/etc/gshadow") if os.path.exists(p)]
    if not present:
        pytest.skip("no /etc/shadow here")
    lines = {line for p in present for line in Path(p).read_text().splitlines() if line}
    provider = make_provider(variant, host)
    script = "cat /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/ssh/ssh_host_*_key"
    ran = await run_confined(provider, host.policy(mode), f"{script} 2>&1; true")
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
    assert [line for line in ran.stdout.splitlines() if line in lines] == []


@pytest.mark.parametrize("variant", VARIANTS)
async def test_the_real_home_is_hidden_when_home_points_elsewhere(
    host: Host, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sudo -E`` or CI: the harness's ``$HOME`` (and the command's) is not the effective
    user's home, whose credentials are hidden all the same."""
    from tether.sandbox import _paths as paths

    elsewhere = host.top / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(elsewhere))
    monkeypatch.setattr(paths, "real_home", lambda: str(host.home), raising=False)
    provider = make_provider(
        variant, host, home=None, environ={"PATH": FALLBACK_PATH, "HOME": str(elsewhere)}
    )
    ran = await run_confined(
        provider, host.policy("read-only"), f"cat {host.home}/.ssh/id_rsa {host.home}/.netrc"
    )
    assert "must-not-leak" not in ran.stdout + ran.stderr
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr


@pytest.mark.parametrize("variant", VARIANTS)
async def test_missing_credential_paths_cannot_be_created_in_a_writable_home(
    host: Host, variant: str
) -> None:
    """The workspace is the home directory: a credential path that does not exist yet (a
    planted ``.npmrc``, ``._config/gh/config.yml`` with an alias, a cargo token) cannot be
    created either, nor can the directories on the way to one."""
    (host.home / "project").mkdir()
    provider = make_provider(variant, host)
    policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, str(host.home), "s-test")
    home = host.home
    attempts = [
        f"echo registry=http://evil > {home}/.npmrc",
        f"mkdir -p {home}/.config/gh && echo 'aliases: {{x: \"!sh\"}}' > {home}/.config/gh/config.yml",
        f"mkdir -p {home}/.cargo && echo token > {home}/.cargo/credentials.toml",
        f"echo token > {home}/.vault-token",
        f"mkdir -p {home}/.local/share/tether && echo x > {home}/.local/share/tether/tether.db",
        f"mkdir -p {home}/.config/tether && echo x > {home}/.config/tether/trust.json",
    ]
    before = tree(host)
    for script in attempts:
        ran = await run_confined(provider, policy, script)
        assert ran.returncode != 0, script
    assert changed(before, tree(host)) == []
    ran = await run_confined(
        provider, policy, f"echo ok > {home}/project/f && cat {home}/project/f"
    )
    assert ran.stdout == "ok\n"


# -- open_workspace_root ------------------------------------------------------------------------
@pytest.mark.bwrap
async def test_open_workspace_root_gives_up_exactly_new_top_level_entries(host: Host) -> None:
    """What the opt-out costs, pinned: new top-level files and directories can be made, and
    removed; control names cannot, missing or not (the supervisor refuses them at any depth);
    existing ones stay as they are."""
    (host.ws / "tether.toml").write_text("# trusted\n")
    provider = make_provider("bwrap", host, open_workspace_root=True)
    policy = host.policy("workspace-write")
    ran = await run_confined(
        provider,
        policy,
        "echo new > new.txt && mkdir newdir && "
        "{ echo x > .mcp.json; mkdir .claude; echo pwned > tether.toml; rm -rf .git; "
        "mv tether.toml t2; echo x > .git/HEAD; true; }",
    )
    assert ran.returncode == 0, ran.stderr
    assert (host.ws / "new.txt").read_text() == "new\n"
    assert (host.ws / "newdir").is_dir()
    assert not os.path.lexists(host.ws / ".mcp.json")
    assert not os.path.lexists(host.ws / ".claude")
    assert (host.ws / "tether.toml").read_text() == "# trusted\n"
    assert (host.ws / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert "Device or resource busy" in ran.stderr
    assert ran.command.denial_note == DENIAL_NOTE


@pytest.mark.parametrize("variant", ["landlock", "landlock-launcher"])
async def test_open_workspace_root_does_not_open_landlock(host: Host, variant: str) -> None:
    """Landlock cannot grant a directory and keep entries in it read-only, so the option has
    no effect there: the root stays closed."""
    provider = make_provider(variant, host, open_workspace_root=True)
    ran = await run_confined(provider, host.policy("workspace-write"), "echo x > .mcp.json")
    assert ran.returncode != 0
    assert not (host.ws / ".mcp.json").exists()
    assert ran.command.denial_note is not None


# -- refusals -----------------------------------------------------------------------------------
def test_a_workspace_inside_the_store_is_refused(host: Host) -> None:
    store = host.top / "store"
    (store / "ws").mkdir(parents=True)
    files = [str(p) for p in store_files("jsonl://" + quote(str(store)))]
    provider = SandboxProvider(home=str(host.home), store_paths=files)
    with pytest.raises(SandboxError) as err:
        provider.check_workspace(str(store / "ws"))
    assert err.value.code == "STORE_UNPROTECTED"
    assert str(err.value) == (
        f"the workspace {store / 'ws'} lies inside the session store's {store}, which every "
        "command and file tool must not see; use a workspace outside the store, or keep the "
        "store elsewhere (--store sqlite:////ABS/PATH.db)"
    )
    with pytest.raises(SandboxError, match="lies inside the session store"):
        provider.confine(["true"], SandboxExecutionPolicy(SandboxMode.READ_ONLY, str(store / "ws")))


def test_a_workspace_inside_a_hidden_path_is_refused(host: Host) -> None:
    inside = host.home / ".ssh" / "project"
    inside.mkdir()
    provider = SandboxProvider(home=str(host.home))
    with pytest.raises(SandboxError) as err:
        provider.check_workspace(str(inside))
    assert err.value.code == "WORKSPACE_HIDDEN"
    assert str(err.value) == (
        f"the workspace {inside} lies inside {host.home / '.ssh'}, which tether hides from "
        "every command and file tool (credentials, tether's own data); choose a workspace "
        "outside it"
    )


@pytest.mark.bwrap
def test_a_store_in_an_open_workspace_root_is_refused_under_bwrap(host: Host) -> None:
    files = [str(p) for p in store_files(sqlite_url(host.ws / "tether.db"))]
    closed = make_provider("bwrap", host, store_paths=files)
    closed.check_workspace(str(host.ws))  # protected: nothing can be created in the root
    opened = make_provider("bwrap", host, store_paths=files, open_workspace_root=True)
    with pytest.raises(SandboxError) as err:
        opened.check_workspace(str(host.ws))
    assert err.value.code == "STORE_UNPROTECTED"
    assert str(err.value) == (
        f"session store files lie directly in the workspace root {host.ws} and "
        "open_workspace_root is on, so a confined command could create the missing ones "
        "(tether.db, tether.db-wal, tether.db-shm, tether.db-journal, tether.db.answers, "
        "tether.db.leases); keep the store outside the workspace "
        "(--store sqlite:////ABS/PATH.db) or turn open_workspace_root off"
    )
    in_subdir = [str(p) for p in store_files(sqlite_url(host.ws / "src" / "t.db"))]
    make_provider("bwrap", host, store_paths=in_subdir, open_workspace_root=True).check_workspace(
        str(host.ws)
    )


# -- a real repository --------------------------------------------------------------------------
GIT_ATTACKS = (
    "git config core.fsmonitor 'touch @OUT@/pwned'",
    "git config --local alias.st '!touch @OUT@/pwned'",
    "printf '#!/bin/sh\\ntouch @OUT@/pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "mv .git src/moved-git && mkdir .git",
    "git init --quiet --separate-git-dir src/evil-git .",
)


@pytest.mark.parametrize(("variant", "mode"), list(variant_mode_cases()))
async def test_a_real_repository_cannot_be_changed(host: Host, variant: str, mode: str) -> None:
    """``git`` itself, in a real repository: its config, hooks and the ``.git`` directory
    stay as they are, so nothing runs unconfined at the user's next ``git`` command."""
    shutil.rmtree(host.ws / ".git")
    subprocess.run(["git", "init", "--quiet", str(host.ws)], check=True)
    before = tree(host)
    provider = make_provider(variant, host)
    for attack in GIT_ATTACKS:
        script = attack.replace("@OUT@", str(host.outside))
        ran = await run_confined(provider, host.policy(mode), script)
        assert ran.returncode != 0, f"{script}: {ran.stdout}{ran.stderr}"
        moved = [k for k in changed(before, tree(host)) if not k.startswith("ws/src")]
        assert moved == [], script
    assert not (host.outside / "pwned").exists()
    config = subprocess.run(
        ["git", "-C", str(host.ws), "config", "--get", "core.fsmonitor"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert config.stdout == b""


# -- git running what the worktree holds ---------------------------------------------------------
def hooked_repository(host: Host, *, husky: bool) -> None:
    """A real repository whose configuration points into the worktree, as hook managers
    set it up: ``core.hooksPath`` (husky's ``.husky``, or ``tools/hooks`` from an included
    file), an ``[include]`` and an ``[includeIf]`` of files in the worktree, and a
    ``core.fsmonitor`` program there. ``husky``: ``.husky`` exists (else it is missing)."""
    shutil.rmtree(host.ws / ".git")
    subprocess.run(["git", "init", "--quiet", str(host.ws)], check=True)
    git = ["git", "-C", str(host.ws), "config"]
    subprocess.run([*git, "core.hooksPath", ".husky"], check=True)
    subprocess.run([*git, "include.path", "../shared.gitconfig"], check=True)
    subprocess.run([*git, "includeIf.gitdir:/.path", "../conf/extra.inc"], check=True)
    subprocess.run([*git, "core.fsmonitor", "tools/fsmonitor.sh"], check=True)
    (host.ws / "shared.gitconfig").write_text("[core]\n\thooksPath = tools/hooks\n")
    (host.ws / "conf").mkdir()
    (host.ws / "conf" / "extra.inc").write_text("[user]\n\tname = someone\n")
    (host.ws / "tools" / "hooks").mkdir(parents=True)
    (host.ws / "tools" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (host.ws / "tools" / "fsmonitor.sh").write_text("#!/bin/sh\n")
    (host.ws / "tools" / "other.sh").write_text("#!/bin/sh\n")
    if husky:
        (host.ws / ".husky").mkdir()
        (host.ws / ".husky" / "pre-commit").write_text("#!/bin/sh\nnpm test\n")


HOOK_ATTACKS = (
    "printf '#!/bin/sh\\ntouch @OUT@/pwned\\n' > .husky/pre-commit",
    "mkdir -p .husky && echo 'touch @OUT@/pwned' > .husky/post-checkout",
    "echo 'touch @OUT@/pwned' >> tools/hooks/pre-commit",
    "echo 'touch @OUT@/pwned' > tools/hooks/pre-push",
    "rm -rf tools/hooks",
    "mv tools/hooks tools/hooks.off && mkdir tools/hooks",
    "echo 'touch @OUT@/pwned' >> tools/fsmonitor.sh",
    "printf '[core]\\n\\tfsmonitor = /tmp/x\\n' >> shared.gitconfig",
    "printf '[alias]\\n\\tst = !touch @OUT@/pwned\\n' >> conf/extra.inc",
    "echo 'repos: []' > .pre-commit-config.yaml",
    "echo 'pre-commit: {}' > lefthook.yml",
)


def hook_cases() -> Iterator[object]:
    for variant in VARIANTS:
        for mode in RESTRICTED:
            for husky in (True, False):
                state = "husky" if husky else "no-husky"
                yield pytest.param(
                    variant.values[0],
                    mode,
                    husky,
                    marks=variant.marks,
                    id=f"{variant.id}-{mode}-{state}",
                )


@pytest.mark.parametrize(("variant", "mode", "husky"), list(hook_cases()))
async def test_what_the_git_configuration_runs_from_the_worktree_cannot_be_changed(
    host: Host, variant: str, mode: str, husky: bool
) -> None:
    """What git runs at the user's next ``git commit``/``git status`` from the worktree (a
    relocated hooks directory, included configuration, the fsmonitor program, a hook
    manager's configuration) is read-only, existing or not."""
    hooked_repository(host, husky=husky)
    provider = make_provider(variant, host)
    before = tree(host)
    for attack in HOOK_ATTACKS:
        script = attack.replace("@OUT@", str(host.outside))
        ran = await run_confined(provider, host.policy(mode), script)
        assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
        assert changed(before, tree(host)) == [], script
    # The rest of the worktree's code stays writable.
    ran = await run_confined(provider, host.policy(mode), "echo ok >> tools/other.sh")
    assert (ran.returncode == 0) == (mode == "workspace-write"), ran.stderr


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_changed_git_configuration_takes_effect_at_the_next_command(
    host: Host, variant: str
) -> None:
    """The rules are reused while nothing they were derived from changed: a new
    ``core.hooksPath`` (the file changed in place, its timestamp old) counts at once."""
    hooked_repository(host, husky=True)
    (host.ws / "other" / "hooks").mkdir(parents=True)
    (host.ws / "other" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    config = host.ws / ".git" / "config"
    os.utime(config, ns=(10**18, 10**18))  # long before the rules are made
    provider = make_provider(variant, host)
    policy = host.policy("workspace-write")
    first = await run_confined(provider, policy, "echo ok >> other/hooks/pre-commit")
    assert first.returncode == 0, first.stderr
    with open(config, "r+", encoding="utf-8") as f:  # in place: same inode
        text = f.read().replace("hooksPath = .husky", "hooksPath = other/hooks")
        f.seek(0)
        f.write(text)
        f.truncate()
    os.utime(config, ns=(10**18 + 1, 10**18 + 1))
    before = tree(host)
    ran = await run_confined(provider, policy, "echo pwned >> other/hooks/pre-commit")
    assert ran.returncode != 0
    assert changed(before, tree(host)) == []
