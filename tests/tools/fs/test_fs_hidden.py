"""The file tools apply the hidden-path list and the control paths of ``tether.sandbox._paths``.

A hidden path is denied with a clear message in every mode (``danger-full-access`` included:
the file tools are the model's direct read path) and never shows its content; ``grep``,
``glob`` and ``ls`` over a tree leave hidden entries out without a word. ``write`` and
``edit`` refuse control and hidden paths in the restricted modes. What was actually opened is
checked, so a path swapped between the check and the open leads nowhere hidden.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from hidden_support import TOKENS_AND_HISTORIES as MORE_SECRETS
from tether.kernel import Context, Runtime
from tether.sandbox import SANDBOX_SERVICE, SandboxProvider, control_component
from tether.sandbox._paths import CREDENTIAL_PATHS, PathRules
from tether.session._store_files import store_files
from tether.session.persistence._factory import sqlite_url
from tether.tools._base import Tool, ToolResult
from tether.tools.fs import EditTool, GlobTool, GrepTool, LsTool, ReadTool, WriteTool
from tether.tools.fs._fence import CONTROL_NAME_REASON

from .conftest import RESTRICTED, Host, Swapper, marker, run_tool

READ, WRITE, EDIT = ReadTool(), WriteTool(), EditTool()
LS, GLOB, GREP = LsTool(), GlobTool(), GrepTool()
MODES = [*RESTRICTED, "danger-full-access"]
KEY = "-----BEGIN FAKE KEY----- must-not-leak"
HIDDEN = "it is hidden from every agent (it holds credentials or tether's own state)"


@pytest.fixture
def home(host: Host) -> Path:
    home = host.top / "home"
    for rel, text in {
        ".ssh/id_rsa": KEY,
        ".netrc": "machine example.com password must-not-leak",
        ".aws/credentials": "aws_secret_access_key = must-not-leak",
        ".config/gh/hosts.yml": "oauth_token: must-not-leak",
        ".config/editor.conf": "visible = yes",
        ".local/share/tether/tether.db": "every session must-not-leak",
        "notes.txt": "visible notes",
    }.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return home


def sandboxed(home: Path, **options: object) -> Context:
    """A context with the ``sandbox`` service, its credentials under ``home``."""
    ctx = Context(Runtime())
    ctx.provide(SANDBOX_SERVICE, SandboxProvider(home=str(home), **options))  # type: ignore[arg-type]
    return ctx


def denial(verb: str, path: str, mode: str) -> str:
    return f"Error: cannot {verb} {path}: {HIDDEN} {marker(mode)}"


def assert_hidden(result: ToolResult, verb: str, path: str, mode: str) -> None:
    assert result.content == denial(verb, path, mode)
    assert dict(result.details) == {"sandbox_denied": True, "mode": mode}
    assert "must-not-leak" not in result.content


# -- reads --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "rel", [".ssh/id_rsa", ".netrc", ".aws/credentials", ".local/share/tether/tether.db"]
)
async def test_reading_a_hidden_path_is_denied_in_every_mode(
    host: Host, home: Path, mode: str, rel: str
) -> None:
    path = str(home / rel)
    result = await run_tool(READ, host.policy(mode), ctx=sandboxed(home), path=path)
    assert_hidden(result, "read", path, mode)


@pytest.mark.parametrize("rel", CREDENTIAL_PATHS)
async def test_every_credential_path_reads_as_denied(host: Host, home: Path, rel: str) -> None:
    path = home / rel
    if path.is_dir():
        path = path / "secret"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{rel} must-not-leak\n")
    result = await run_tool(
        READ, host.policy("danger-full-access"), ctx=sandboxed(home), path=str(path)
    )
    assert_hidden(result, "read", str(path), "danger-full-access")


async def test_grep_over_home_skips_hidden_paths_silently(host: Host, home: Path) -> None:
    result = await run_tool(
        GREP,
        host.policy("read-only"),
        ctx=sandboxed(home),
        pattern="must-not-leak|visible",
        path=str(home),
    )
    assert result.content == (
        f"{home}/.config/editor.conf:1:visible = yes\n{home}/notes.txt:1:visible notes"
    )


async def test_grep_of_a_hidden_path_is_denied(host: Host, home: Path) -> None:
    for path in (home / ".ssh", home / ".netrc"):
        result = await run_tool(
            GREP, host.policy("read-only"), ctx=sandboxed(home), pattern=".", path=str(path)
        )
        assert_hidden(result, "search", str(path), "read-only")


async def test_ls_and_glob_leave_hidden_entries_out_and_deny_hidden_directories(
    host: Host, home: Path
) -> None:
    ctx = sandboxed(home)
    policy = host.policy("read-only")
    listing = await run_tool(LS, policy, ctx=ctx, path=str(home))
    assert listing.content == ".config/\n.local/\nnotes.txt"
    config = await run_tool(LS, policy, ctx=ctx, path=str(home / ".config"))
    assert config.content == "editor.conf"
    assert_hidden(
        await run_tool(LS, policy, ctx=ctx, path=str(home / ".ssh")),
        "list",
        str(home / ".ssh"),
        "read-only",
    )
    everything = await run_tool(GLOB, policy, ctx=ctx, pattern="**/*", path=str(home))
    assert everything.content == "\n".join(
        f"{home}/{rel}"
        for rel in (".config/", ".config/editor.conf", ".local/", ".local/share/", "notes.txt")
    )
    assert_hidden(
        await run_tool(GLOB, policy, ctx=ctx, pattern="*", path=str(home / ".ssh")),
        "list",
        str(home / ".ssh"),
        "read-only",
    )
    assert_hidden(
        await run_tool(GLOB, policy, ctx=ctx, pattern=f"{home}/.ssh/*"),
        "list",
        f"{home}/.ssh",
        "read-only",
    )


@pytest.mark.parametrize(
    "path",
    [
        "/proc/self/environ",
        "/proc/self/mem",
        "/proc/thread-self/environ",
        "/proc/{pid}/environ",
        "/proc/{pid}/task/{tid}/mem",
    ],
)
@pytest.mark.parametrize("mode", MODES)
async def test_the_harness_environment_and_memory_are_hidden(
    host: Host, mode: str, path: str
) -> None:
    # the harness's own pid and thread, filled in here so every test process names the same ids
    path = path.format(pid=os.getpid(), tid=threading.get_native_id())
    result = await run_tool(READ, host.policy(mode), path=path)
    assert_hidden(result, "read", path, mode)
    assert os.environ["PATH"] not in result.content


async def test_ls_of_proc_self_leaves_environ_and_mem_out(host: Host) -> None:
    result = await run_tool(LS, host.policy("read-only"), path="/proc/self")
    names = result.content.splitlines()
    assert "cmdline" in names and "environ" not in names and "mem" not in names


# -- links and races ----------------------------------------------------------------------------
async def test_links_into_hidden_paths_lead_nowhere(host: Host, home: Path) -> None:
    (host.ws / "key-link").symlink_to(home / ".ssh" / "id_rsa")
    (host.ws / "dir-link").symlink_to(home / ".ssh")
    os.link(home / ".netrc", host.ws / "netrc-hardlink")
    ctx = sandboxed(home)
    policy = host.policy("workspace-write")
    for name in ("key-link", "netrc-hardlink", "dir-link/id_rsa"):
        assert_hidden(
            await run_tool(READ, policy, ctx=ctx, path=name), "read", name, "workspace-write"
        )
    grep = await run_tool(GREP, policy, ctx=ctx, pattern="must-not-leak")
    assert grep.content == "no matches for must-not-leak"
    (host.ws / "sub").mkdir()
    (host.ws / "sub" / "ssh").symlink_to(home / ".ssh")
    found = await run_tool(GLOB, policy, ctx=ctx, pattern="**/*")
    # Links listed, never followed; the hard link to .netrc is .netrc, so it is left out.
    assert found.content == "dir-link\nkey-link\nsub/\nsub/ssh"
    edit = await run_tool(
        EDIT, host.policy("danger-full-access"), ctx=ctx, path="key-link",
        old_string="FAKE", new_string="x",
    )  # fmt: skip
    assert edit.content == (f"Error: cannot edit key-link: {HIDDEN} {marker('danger-full-access')}")
    assert (home / ".ssh" / "id_rsa").read_text() == KEY + "\n"


async def test_a_file_swapped_for_a_link_to_a_secret_never_reads_it(host: Host, home: Path) -> None:
    (host.ws / "f").write_text("benign\n")
    (host.ws / "l").symlink_to(home / ".ssh" / "id_rsa")
    swapper = Swapper(host.ws / "f", host.ws / "l", threading.Event())
    thread = threading.Thread(target=swapper.run)
    ctx = sandboxed(home)
    outcomes: set[str] = set()
    thread.start()
    try:
        for _ in range(40):
            results = await asyncio.gather(
                *(run_tool(READ, host.policy("read-only"), ctx=ctx, path="f") for _ in range(10))
            )
            for result in results:
                assert "must-not-leak" not in result.content
                outcomes.add(
                    "benign" if result.content == "benign\n" else result.content.split(":")[0]
                )
    finally:
        swapper.stop.set()
        thread.join()
    assert outcomes <= {"benign", "Error"}
    assert swapper.swaps > 0


async def test_a_directory_swapped_for_a_link_mid_walk_is_not_entered(
    host: Host, home: Path
) -> None:
    (host.ws / "d").mkdir()
    (host.ws / "d" / "benign.txt").write_text("benign must-match\n")
    (host.ws / "swap").symlink_to(home / ".ssh")
    swapper = Swapper(host.ws / "d", host.ws / "swap", threading.Event())
    thread = threading.Thread(target=swapper.run)
    ctx = sandboxed(home)
    thread.start()
    try:
        for _ in range(100):
            grep = await run_tool(GREP, host.policy("read-only"), ctx=ctx, pattern="must")
            found = await run_tool(GLOB, host.policy("read-only"), ctx=ctx, pattern="**/*")
            assert "must-not-leak" not in grep.content
            assert set(grep.content.splitlines()) <= {
                "d/benign.txt:1:benign must-match",
                "swap/benign.txt:1:benign must-match",
                "no matches for must",
            }
            assert set(found.content.splitlines()) <= {
                "d", "d/", "d/benign.txt", "swap", "swap/", "swap/benign.txt"
            }  # fmt: skip
    finally:
        swapper.stop.set()
        thread.join()
    assert swapper.swaps > 0


# -- the session store --------------------------------------------------------------------------
async def test_the_store_is_hidden_from_every_file_tool(host: Host, home: Path) -> None:
    db = host.ws / "state" / "tether.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("INSERT INTO t VALUES ('every session must-not-leak')")
    conn.commit()
    files = [str(p) for p in store_files(sqlite_url(db))]
    (db.parent / "notes.txt").write_text("visible\n")
    ctx = sandboxed(home, store_paths=files)
    policy = host.policy("workspace-write")
    try:
        for rel in ("state/tether.db", "state/tether.db-wal"):
            assert_hidden(
                await run_tool(READ, policy, ctx=ctx, path=rel), "read", rel, "workspace-write"
            )
        for rel in (
            "state/tether.db-journal",
            "state/tether.db.answers/a-1.json",
            "state/tether.db",
        ):
            result = await run_tool(
                WRITE, policy, ctx=ctx, path=rel, content='{"outcome": "allowed-once"}'
            )
            assert (
                result.content == f"Error: cannot write {rel}: {HIDDEN} {marker('workspace-write')}"
            )
        listing = await run_tool(LS, policy, ctx=ctx, path="state")
        assert listing.content == "notes.txt"
        grep = await run_tool(GREP, policy, ctx=ctx, pattern="must-not-leak|visible")
        assert grep.content == "state/notes.txt:1:visible"
        assert not os.path.lexists(f"{db}-journal")
        assert not os.path.lexists(f"{db}.answers")
    finally:
        conn.close()


# -- control paths ------------------------------------------------------------------------------
CONTROL = ["tether.toml", ".claude/settings.json", ".mcp.json", "TETHER.TOML", ".Claude/x"]


@pytest.mark.parametrize("tool", [WRITE, EDIT], ids=["write", "edit"])
@pytest.mark.parametrize("rel", CONTROL)
async def test_control_paths_are_readable_never_writable(
    host: Host, home: Path, tool: Tool, rel: str
) -> None:
    path = host.ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("trusted = true\n")
    ctx = sandboxed(home)
    if tool is WRITE:
        result = await run_tool(
            WRITE, host.policy("workspace-write"), ctx=ctx, path=rel, content="x"
        )
    else:
        result = await run_tool(
            EDIT, host.policy("workspace-write"), ctx=ctx, path=rel,
            old_string="true", new_string="false",
        )  # fmt: skip
    component = rel.split("/")[0]
    assert result.content == (
        f"Error: cannot write {rel}: {component} {CONTROL_NAME_REASON} {marker('workspace-write')}"
    )
    assert path.read_text() == "trusted = true\n"
    read = await run_tool(READ, host.policy("workspace-write"), ctx=ctx, path=rel)
    assert read.content == "trusted = true\n"


@pytest.mark.parametrize("rel", ["tether.toml", ".mcp.json", ".claude/settings.json"])
async def test_missing_control_files_cannot_be_created(host: Host, home: Path, rel: str) -> None:
    result = await run_tool(
        WRITE, host.policy("workspace-write"), ctx=sandboxed(home), path=rel, content="x"
    )
    assert result.is_error and result.details == {"sandbox_denied": True, "mode": "workspace-write"}
    assert sorted(os.listdir(host.ws)) == []


async def test_control_names_below_the_root_are_refused_and_other_files_stay_writable(
    host: Host, home: Path
) -> None:
    ctx = sandboxed(home)
    for rel, component in (("sub/tether.toml", "tether.toml"), ("a/b/.Codex/hooks.json", ".Codex")):
        result = await run_tool(
            WRITE, host.policy("workspace-write"), ctx=ctx, path=rel, content="x"
        )
        assert result.content == (
            f"Error: cannot write {rel}: {component} {CONTROL_NAME_REASON} "
            f"{marker('workspace-write')}"
        )
    for rel in ("new.txt", "claude/settings.json", "sub/tether.toml.bak", "sub/x.git/y"):
        result = await run_tool(
            WRITE, host.policy("workspace-write"), ctx=ctx, path=rel, content="x"
        )
        assert not result.is_error, result.content
    assert not (host.ws / "sub" / "tether.toml").exists()
    assert not (host.ws / "a").exists()
    danger = await run_tool(
        WRITE, host.policy("danger-full-access"), ctx=ctx, path="tether.toml", content="x"
    )
    assert danger.content == "Wrote 1 byte to tether.toml"


async def test_protected_paths_are_control_paths(host: Host, home: Path) -> None:
    (host.ws / "deploy").mkdir()
    ctx = sandboxed(home, protected_paths=[str(host.ws / "deploy")])
    result = await run_tool(
        WRITE, host.policy("workspace-write"), ctx=ctx, path="deploy/prod.yml", content="x"
    )
    assert result.content.startswith("Error: cannot write deploy/prod.yml: it is a control file")


async def test_hidden_paths_in_a_writable_home_are_not_written(host: Host, home: Path) -> None:
    policy = host.policy("workspace-write")
    at_home = type(policy)(policy.mode, str(home), policy.session_id)
    ctx = sandboxed(home)
    for rel in (".ssh/authorized_keys", ".npmrc", ".config/gh/config.yml"):
        result = await run_tool(WRITE, at_home, ctx=ctx, path=rel, content="planted")
        assert result.content == f"Error: cannot write {rel}: {HIDDEN} {marker('workspace-write')}"
    assert not (home / ".ssh" / "authorized_keys").exists()
    assert not (home / ".npmrc").exists()


# -- where the rules come from ------------------------------------------------------------------
async def test_without_a_sandbox_service_the_defaults_come_from_the_environment(
    host: Host, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(home))
    path = str(home / ".ssh" / "id_rsa")
    result = await run_tool(READ, host.policy("danger-full-access"), path=path)
    assert_hidden(result, "read", path, "danger-full-access")
    unpoliced = await run_tool(READ, None, path=path)
    assert unpoliced.content == f"Error: cannot read {path}: {HIDDEN}"


class BrokenRules:
    """A sandbox service whose rules cannot be worked out."""

    def path_rules(self) -> PathRules:
        raise OSError("the rules are unavailable")


async def test_rules_that_cannot_be_worked_out_refuse_the_call(host: Host, home: Path) -> None:
    ctx = Context(Runtime())
    ctx.provide(SANDBOX_SERVICE, BrokenRules())
    result = await run_tool(READ, host.policy("read-only"), ctx=ctx, path=str(home / "notes.txt"))
    assert result.content == (
        "Error: cannot tell which paths are hidden (the rules are unavailable); the file tools "
        "refuse to run"
    )


# -- the harness's import path (control names) ---------------------------------------------------
IMPORT_NAMES = [
    "src/sitecustomize.py",
    "src/usercustomize.py",
    "src/sitecustomize/__init__.py",
    "src/sitecustomize.cpython-311-x86_64-linux-gnu.so",
    "src/__pycache__/sitecustomize.cpython-311.pyc",
    "src/evil.pth",
    "src/EVIL.PTH",
    "src/evil-1.0.dist-info/entry_points.txt",
    "src/evil.egg-info/entry_points.txt",
    "src/evil.egg-link",
    "lib/py/sitecustomize.py",
    "lib/py",
]


@pytest.fixture
def import_path(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ws/src`` and ``ws/lib/py`` (missing) on the harness's start-up import path."""
    from tether.sandbox import _paths as paths

    (host.ws / "src").mkdir()
    (host.ws / "lib").mkdir()
    started = getattr(paths, "STARTUP_IMPORT_PATH", ())  # (absent before the fix)
    entries = (*started, str(host.ws / "src"), str(host.ws / "lib" / "py"))
    monkeypatch.setattr(paths, "STARTUP_IMPORT_PATH", entries, raising=False)


@pytest.mark.parametrize("rel", IMPORT_NAMES)
@pytest.mark.usefixtures("import_path")
async def test_what_python_runs_at_start_cannot_be_written(
    host: Host, home: Path, rel: str
) -> None:
    result = await run_tool(
        WRITE, host.policy("workspace-write"), ctx=sandboxed(home), path=rel, content="pwn()"
    )
    assert result.content.startswith(f"Error: cannot write {rel}: it is a control file")
    assert result.details == {"sandbox_denied": True, "mode": "workspace-write"}
    assert not os.path.lexists(host.ws / rel)


@pytest.mark.usefixtures("import_path")
async def test_the_code_on_the_import_path_stays_writable(host: Host, home: Path) -> None:
    ctx = sandboxed(home)
    policy = host.policy("workspace-write")
    for rel in ("src/app.py", "src/pkg/__init__.py", "src/pkg/data.pth", "lib/other.py"):
        result = await run_tool(WRITE, policy, ctx=ctx, path=rel, content="x = 1\n")
        assert not result.is_error, result.content
    edited = await run_tool(
        EDIT, policy, ctx=ctx, path="src/app.py", old_string="x = 1", new_string="x = 2"
    )
    assert not edited.is_error, edited.content


# -- git's configuration (control paths it points at) ---------------------------------------------
GIT_CONFIG = """[core]
\trepositoryformatversion = 0
\thooksPath = .husky
[core] fsmonitor = "tools/fs monitor.sh" ; a comment
[include]
\tpath = ../shared.gitconfig
[includeIf "gitdir:~/work/"]
\tpath = ../config/git/extra.inc
[filter "strip"]
\tclean = ./tools/strip --quiet
"""


@pytest.mark.parametrize(
    "rel",
    [
        ".husky/pre-commit",
        "tools/fs monitor.sh",
        "shared.gitconfig",
        "config/git/extra.inc",
        "tools/hooks/pre-push",
        "tools/strip",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".lefthook.yml",
        "lefthook-local.yml",
    ],
)
async def test_what_git_runs_from_the_worktree_cannot_be_written(
    host: Host, home: Path, rel: str
) -> None:
    (host.ws / ".git").mkdir()
    (host.ws / ".git" / "config").write_text(GIT_CONFIG)
    (host.ws / "shared.gitconfig").write_text("[core]\n\thooksPath = tools/hooks\n")
    result = await run_tool(
        WRITE, host.policy("workspace-write"), ctx=sandboxed(home), path=rel, content="pwn"
    )
    named = control_component(rel.split("/"))
    reason = "it is a control file" if named is None else f"{named} {CONTROL_NAME_REASON}"
    assert result.content.startswith(f"Error: cannot write {rel}: {reason}")
    if rel == "shared.gitconfig":
        assert (host.ws / rel).read_text() == "[core]\n\thooksPath = tools/hooks\n"
    else:
        assert not os.path.lexists(host.ws / rel)
    other = await run_tool(
        WRITE, host.policy("workspace-write"), ctx=sandboxed(home), path="tools/x.sh", content="x"
    )
    assert not other.is_error, other.content


# -- more credentials, the real home, the kernel's log ---------------------------------------------


@pytest.mark.parametrize("rel", MORE_SECRETS)
async def test_tokens_and_histories_read_as_denied(host: Host, home: Path, rel: str) -> None:
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("token must-not-leak\n")
    ctx = sandboxed(home)
    result = await run_tool(READ, host.policy("danger-full-access"), ctx=ctx, path=str(path))
    assert_hidden(result, "read", str(path), "danger-full-access")
    found = await run_tool(
        GREP, host.policy("read-only"), ctx=ctx, pattern="must-not-leak", path=str(home)
    )
    assert found.content == "no matches for must-not-leak"


async def test_the_real_home_is_hidden_when_home_points_elsewhere(
    host: Host, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sudo -E`` or CI: ``$HOME`` is not the effective user's home, whose credentials are
    hidden all the same (the password database says where it is)."""
    from tether.sandbox import _paths as paths

    elsewhere = host.top / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(elsewhere))
    monkeypatch.setattr(paths, "real_home", lambda: str(home), raising=False)
    ctx = Context(Runtime())
    ctx.provide(SANDBOX_SERVICE, SandboxProvider(environ={"HOME": str(elsewhere)}))
    path = str(home / ".ssh" / "id_rsa")
    result = await run_tool(READ, host.policy("read-only"), ctx=ctx, path=path)
    assert_hidden(result, "read", path, "read-only")


@pytest.mark.parametrize("mode", MODES)
async def test_the_kernel_log_is_hidden(host: Host, home: Path, mode: str) -> None:
    """``/proc/kmsg`` read as root consumes the kernel's messages (and, opened without
    blocking, reads as nothing available): hidden, like the harness's environ and mem."""
    ctx = sandboxed(home)
    result = await run_tool(READ, host.policy(mode), ctx=ctx, path="/proc/kmsg")
    assert_hidden(result, "read", "/proc/kmsg", mode)
    grep = await run_tool(GREP, host.policy(mode), ctx=ctx, pattern="x", path="/proc/kmsg")
    assert_hidden(grep, "search", "/proc/kmsg", mode)
