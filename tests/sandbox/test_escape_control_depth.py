"""Control names at any depth, against confined commands, on every backend.

A command under workspace-write may not create an entry named like a control file (``.git``,
``.claude``, ``.codex``, ``tether.toml``, ...; any case) anywhere it can write, nor change
anything inside an existing one or inside a directory git takes for a git directory, nor make
one: git, Claude Code or Codex started in that directory would act on it unconfined. Each
call that makes a name is tried raw (``creation_probe.py``: ``open``, ``creat``, ``openat``,
``mkdir``, ``mkdirat``, ``mknod``, ``mknodat``, ``symlink``, ``symlinkat``, ``link``,
``linkat``, ``rename``, ``renameat``, ``renameat2``), at depth one and deeper, in other cases,
through a symbolic link, with a second thread swapping the path while the supervisor checks
it, and with a second command swapping a directory for a link. The host is compared with a
snapshot after every command; ordinary files, directories, links and renames at any depth
keep working.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shlex
import subprocess
from pathlib import Path

import pytest
from sandbox_support import (
    PREPARED,
    PYTHON,
    VARIANTS,
    Host,
    Ran,
    changed,
    make_provider,
    run_confined,
)

from tether.kernel._config import CONFIG_FILE
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SandboxProvider, git_dir_on_path
from tether.sandbox._control_names import CONFIG_NAME, DENIAL_NOTE

pytestmark = pytest.mark.timeout(180)

REFUSAL = {
    "bwrap": "EROFS",
    "bwrap-prepared": "EROFS",
    "landlock": "EACCES",
    "landlock-prepared": "EACCES",
    "landlock-launcher": "EACCES",
}
"""What a refused call says: each backend's own denial (its signature in the harness)."""

X86 = platform.machine() == "x86_64"


def probe(host: Host, *args: str) -> str:
    """The command line of ``creation_probe.py`` with ``args``."""
    return shlex.join([PYTHON, str(host.probe("creation_probe.py")), *args])


def lines(ran: Ran) -> list[str]:
    return ran.stdout.splitlines()


def snapshot(host: Host) -> dict[str, tuple[object, ...]]:
    return host.snapshot(include_ws=True)


async def run(host: Host, variant: str, script: str, mode: str = "workspace-write") -> Ran:
    provider = make_provider(variant, host)
    ran = await run_confined(provider, host.policy(mode), script)
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
    return ran


def nested_repository(host: Host) -> Path:
    """``ws/vendor/lib``: a vendored repository with its own ``.git`` (present before any
    command ran: the user's)."""
    lib = host.ws / "vendor" / "lib"
    (lib / ".git" / "hooks").mkdir(parents=True)
    (lib / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (lib / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (lib / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (lib / "lib.c").write_text("int lib;\n")
    return lib


# -- every call that makes a name -----------------------------------------------------------------
TARGETS = ("sub/.git", "sub/deep/er/.claude", "sub/.GIT", "sub/deep/Tether.Toml", "sub/.Codex")
"""Control names to create, at depth one and deeper, in other cases."""


SOURCES = "mkdir -p sub/src/made && : > sub/src/made.txt"
"""What the link and rename calls take (made again before each: a rename uses it up). In the
same top-level directory as the targets: under bubblewrap each is a mount of its own, and a
link or rename between two fails with ``EXDEV``, as documented."""


def call_cases() -> list[tuple[str, str]]:
    """(call, how its arguments are formed) for each call of this architecture."""
    cases = [
        ("openat", "at"),
        ("mkdirat", "at"),
        ("mknodat", "at"),
        ("symlinkat", "symlinkat"),
        ("linkat", "linkat"),
        ("renameat", "renameat"),
        ("renameat2", "pair"),
        ("tmpfile", "tmpfile"),
        ("bind", "path"),  # a Unix socket's name: made by bind, which is no file call
    ]
    if X86:
        cases += [
            ("open", "path"),
            ("creat", "path"),
            ("mkdir", "path"),
            ("mknod", "path"),
            ("symlink", "symlink"),
            ("link", "linkpair"),
            ("rename", "pair"),
        ]
    return cases


def arguments(form: str, target: str) -> list[str]:
    parent, name = os.path.split(target)
    return {
        "path": [target],
        "at": [parent, name],
        "symlink": ["file.txt", target],
        "symlinkat": ["file.txt", parent, name],
        "linkat": ["sub/src", "made.txt", parent, name],
        "renameat": ["sub/src", "made", parent, name],
        "pair": ["sub/src/made", target],
        "linkpair": ["sub/src/made.txt", target],
        "tmpfile": [parent, target],
    }[form]


def variant_call_cases() -> list[object]:
    return [
        pytest.param(v.values[0], call, form, marks=v.marks, id=f"{v.id}-{call}")
        for v in VARIANTS
        for call, form in call_cases()
    ]


@pytest.mark.parametrize(("variant", "call", "form"), variant_call_cases())
async def test_no_call_creates_a_control_name_at_any_depth(
    host: Host, variant: str, call: str, form: str
) -> None:
    (host.ws / "sub" / "deep" / "er").mkdir(parents=True)
    (host.ws / "sub" / "src").mkdir()
    before = snapshot(host)
    script = "; ".join(f"{SOURCES} && {probe(host, call, *arguments(form, t))}" for t in TARGETS)

    ran = await run(host, variant, script)

    assert lines(ran) == [REFUSAL[variant]] * len(TARGETS), ran.stderr
    made = [k for k in changed(before, snapshot(host)) if not k.startswith("ws/sub/src")]
    assert made == []


@pytest.mark.parametrize(("variant", "call", "form"), variant_call_cases())
async def test_every_call_still_makes_ordinary_names_at_any_depth(
    host: Host, variant: str, call: str, form: str
) -> None:
    (host.ws / "sub" / "deep" / "er").mkdir(parents=True)
    targets = ("sub/made-here", "sub/deep/er/.gitignore", "sub/deep/tether.toml.bak")
    script = "; ".join(f"{SOURCES} && {probe(host, call, *arguments(form, t))}" for t in targets)

    ran = await run(host, variant, script)

    assert lines(ran) == ["ok"] * len(targets), ran.stderr
    for target in targets:
        assert os.path.lexists(host.ws / target), target


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_build_at_depth_works(host: Host, variant: str) -> None:
    script = (
        "mkdir -p build/obj/a build/gen && for i in 1 2 3; do echo $i > build/obj/a/$i.o; done"
        " && cp build/obj/a/1.o build/gen/x && mv build/gen/x build/gen/y && ln -s y build/gen/z"
        " && ln build/gen/y build/gen/hard && mkfifo build/gen/fifo && echo more >> build/gen/y"
        " && touch build/obj/stamp && cat build/gen/z && echo err > /dev/stderr"
        " && echo null > /dev/null && date > /dev/fd/1 && echo ok"
    )
    ran = await run(host, variant, f"cd src && {script}")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == "1"
    assert ran.stdout.splitlines()[-1] == "ok"
    assert ran.stderr == "err\n"
    gen = host.ws / "src" / "build" / "gen"
    assert sorted(os.listdir(gen)) == ["fifo", "hard", "y", "z"]
    assert (gen / "y").read_text() == "1\nmore\n"
    assert (host.ws / "src" / "build" / "obj" / "a" / "3.o").read_text() == "3\n"


@pytest.mark.parametrize("variant", VARIANTS)
async def test_git_init_in_a_subdirectory_is_refused_with_a_note(host: Host, variant: str) -> None:
    before = snapshot(host)
    ran = await run(host, variant, "git init -q src/repo; git -C src init -q")
    assert ran.returncode != 0
    denial = "Read-only file system" if variant.startswith("bwrap") else "Permission denied"
    assert denial in ran.stderr, ran.stderr
    assert any(s in ran.stderr for s in ran.command.denial_signatures)
    assert ran.command.denial_note is not None and ran.command.denial_note.endswith(DENIAL_NOTE)
    assert not os.path.lexists(host.ws / "src" / ".git")
    assert not os.path.lexists(host.ws / "src" / "repo" / ".git")
    assert [k for k in changed(before, snapshot(host)) if ".git" in k] == []


# -- what already exists ------------------------------------------------------------------------------
NESTED_ATTACKS = (
    "echo '[core] fsmonitor = /tmp/pwn' > vendor/lib/.git/config",
    "echo '[core] fsmonitor = /tmp/pwn' >> vendor/lib/.git/config",
    "PROBE write vendor/lib/.git/config",
    "PROBE open vendor/lib/.git/hooks/pre-commit",
    "PROBE mkdir vendor/lib/.git/hooks/new",
    "cp /bin/sh vendor/lib/.git/hooks/pre-commit",
    "mv vendor/lib/.git/hooks/pre-commit.sample vendor/lib/.git/hooks/pre-commit",
    "PROBE link vendor/lib/.git/config src/alias",
    "PROBE rename src/planted vendor/lib/.git/config",
    "PROBE exchange src/planted vendor/lib/.git/config",
    "PROBE exchange src/dir vendor/lib/.git",
    "ln -s ../vendor/lib/.git/hooks src/hooks && echo pwn > src/hooks/post-checkout",
    "git -C vendor/lib config core.fsmonitor /tmp/pwn",
)


@pytest.mark.parametrize("variant", VARIANTS)
async def test_an_existing_nested_repository_is_read_only(host: Host, variant: str) -> None:
    lib = nested_repository(host)
    (host.ws / "src" / "planted").write_text("[core]\n\tfsmonitor = /tmp/pwn\n")
    (host.ws / "src" / "dir" / "hooks").mkdir(parents=True)
    before = snapshot(host)
    for attack in NESTED_ATTACKS:
        if not X86 and ("PROBE link" in attack or "PROBE mkdir" in attack):
            continue
        script = attack.replace("PROBE", probe(host))
        await run(host, variant, script)
        moved = [k for k in changed(before, snapshot(host)) if "/.git" in k]
        assert moved == [], f"{attack}: {moved}"
    assert (lib / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (host.ws / "src" / "alias").exists()
    # The worktree beside it is the project's code: editable as ever.
    ran = await run(host, variant, "echo 'int edited;' > vendor/lib/lib.c && mkdir vendor/lib/src")
    assert ran.returncode == 0, ran.stderr
    assert (lib / "lib.c").read_text() == "int edited;\n"


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_renamed_control_directory_cannot_take_its_name_back(
    host: Host, variant: str
) -> None:
    lib = nested_repository(host)
    ran = await run(
        host,
        variant,
        "mv vendor/lib/.git vendor/lib/gitdir && echo pwn > vendor/lib/gitdir/config; "
        f"{probe(host, 'rename', 'vendor/lib/gitdir', 'vendor/lib/.git')}; "
        "echo 'gitdir: gitdir' > vendor/lib/.git",
    )
    assert ran.stdout.splitlines()[-1] == REFUSAL[variant]
    assert not os.path.lexists(lib / ".git")
    assert (lib / "gitdir" / "config").read_text() == "pwn\n"


@pytest.mark.parametrize("variant", VARIANTS)
async def test_an_ordinary_directory_renamed_onto_a_control_name_is_refused(
    host: Host, variant: str
) -> None:
    (host.ws / "src" / "hooks").mkdir()
    (host.ws / "src" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    before = snapshot(host)
    ran = await run(
        host,
        variant,
        "mv src src2; mkdir -p sub && mv src/hooks sub/.git; mv src/hooks sub/.Husky; "
        "mv src sub/.claude",
    )
    assert ran.returncode != 0
    assert changed(before, snapshot(host)) == []


# -- links ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
async def test_links_lead_to_no_control_name(host: Host, variant: str) -> None:
    nested_repository(host)
    (host.ws / "sub").mkdir()
    before = snapshot(host)
    ran = await run(
        host,
        variant,
        # A link named like one; a new file through a link whose target is one; a directory
        # link into an existing .git; a dangling link's target made by O_CREAT.
        "ln -s ../file.txt sub/.mcp.json; ln -s .git sub/to-git && echo x > sub/to-git; "
        "ln -s ../vendor/lib/.git sub/repo && echo x > sub/repo/hooks/post-merge; "
        "ln -s deep/.codex sub/dangling && mkdir sub/deep && echo x > sub/dangling; "
        f"{probe(host, 'open', 'sub/to-git')}; {probe(host, 'open', 'sub/dangling')}",
    )
    assert lines(ran) == [REFUSAL[variant]] * 2
    made = sorted(changed(before, snapshot(host)))
    assert made == ["ws/sub", "ws/sub/dangling", "ws/sub/deep", "ws/sub/repo", "ws/sub/to-git"]


# -- racing the check ------------------------------------------------------------------------------
@pytest.mark.parametrize("call", ["mkdir", "open", "rename", "bind"])
@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_path_swapped_while_it_is_checked_never_makes_a_control_name(
    host: Host, variant: str, call: str
) -> None:
    """A second thread rewrites the path in memory all the time: the supervisor reads it
    once and acts on what it read, so ``sub/.git`` is never made, whatever it checked."""
    (host.ws / "sub").mkdir()
    ran = await run(host, variant, "cd sub && " + probe(host, "race", call, "okay", ".git", "300"))
    done, refused = (int(p.split("=")[1]) for p in ran.stdout.split())
    assert done + refused == 300 and refused > 0, ran.stdout + ran.stderr
    assert not os.path.lexists(host.ws / "sub" / ".git")
    assert sorted(os.listdir(host.ws / "sub")) in ([], ["src-dir"])


SWAPPER = """
import os, time
os.makedirs('sub/real', exist_ok=True)
os.symlink('../vendor/lib/.git/hooks', 'sub/link')
end = time.time() + {seconds}
while time.time() < end:
    os.rename('sub/real', 'sub/d')
    os.rename('sub/d', 'sub/real')
    os.rename('sub/link', 'sub/d')
    os.rename('sub/d', 'sub/link')
"""
WRITER = """
import os, time
end = time.time() + {seconds}
done = refused = 0
while time.time() < end:
    for name in ('pre-commit', 'post-checkout'):
        try:
            os.close(os.open('sub/d/' + name, os.O_WRONLY | os.O_CREAT, 0o755))
            done += 1
            os.unlink('sub/d/' + name)
        except OSError:
            refused += 1
print(done, refused)
"""


@pytest.mark.parametrize(
    # Two commands at once: a prepared pair takes one command of its plan, the other goes the
    # usual way, so the -prepared variants (which require a prepared pair) do not apply.
    "variant",
    [v for v in VARIANTS if not str(v.id).endswith(PREPARED)],
)
async def test_a_directory_swapped_for_a_link_by_another_command_never_leads_into_git(
    host: Host, variant: str
) -> None:
    """Two commands, two supervisors: one swaps ``sub/d`` between a directory and a link to
    an existing ``.git/hooks``, the other creates hooks through ``sub/d`` all along."""
    lib = nested_repository(host)
    (host.ws / "sub").mkdir()
    provider: SandboxProvider = make_provider(variant, host)
    policy = host.policy("workspace-write")

    async def confined(code: str) -> Ran:
        script = f"cd {shlex.quote(str(host.ws))} && {shlex.join([PYTHON, '-c', code])}"
        return await run_confined(provider, policy, script, timeout=60)

    swapped, wrote = await asyncio.gather(
        confined(SWAPPER.format(seconds=3)), confined(WRITER.format(seconds=3))
    )
    assert swapped.returncode == 0, swapped.stderr
    assert wrote.returncode == 0, wrote.stderr
    done, refused = (int(n) for n in wrote.stdout.split())
    assert done > 0 and refused > 0, wrote.stdout
    assert sorted(os.listdir(lib / ".git" / "hooks")) == ["pre-commit.sample"]


# -- git directories by their content ---------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
async def test_no_command_makes_or_changes_a_git_directory_by_content(
    host: Host, variant: str
) -> None:
    bare = host.ws / "src" / "fixture.git"
    for part in ("objects", "refs/heads", "hooks"):
        (bare / part).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (bare / "config").write_text("[core]\n\tbare = true\n")
    before = snapshot(host)
    ran = await run(
        host,
        variant,
        "echo '[core] pager = /tmp/pwn' >> src/fixture.git/config; "
        "echo x > src/fixture.git/hooks/reference-transaction; "
        "mkdir -p src/x/objects src/x/refs && echo 'ref: refs/heads/main' > src/x/HEAD; "
        "mkdir -p src/y/refs && echo 'ref: refs/heads/main' > src/y/HEAD && mkdir src/y/objects; "
        "mkdir -p src/z && echo 'ref: refs/heads/main' > src/z/HEAD && echo ../y > src/z/commondir; "
        "git init -q --bare src/bare",
    )
    fixture = [k for k in changed(before, snapshot(host)) if "fixture.git" in k]
    assert fixture == [], ran.stderr
    src = host.ws / "src"
    assert sorted(os.listdir(src / "x")) == ["objects", "refs"]
    assert sorted(os.listdir(src / "y")) == ["HEAD", "refs"]
    assert sorted(os.listdir(src / "z")) == ["HEAD"]
    assert git_dir_on_path(str(src / "bare" / "x"), str(host.ws)) is None


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_socket_named_refs_makes_no_git_directory(host: Host, variant: str) -> None:
    """git looks only for ``refs`` it can search (``access(X_OK)``): a Unix socket made by
    ``bind`` passes, and would make ``d`` a bare repository whose ``config`` (a pager) git
    obeys when started in it. ``bind`` makes names as every other call does."""
    before = snapshot(host)
    ran = await run(
        host,
        variant,
        "mkdir -p src/d/objects && echo 0123456789012345678901234567890123456789 > src/d/HEAD"
        " && printf '[core]\\n\\tpager = touch /var/tmp/pwn\\n' > src/d/config && "
        + probe(host, "bind", "src/d/refs"),
    )
    assert lines(ran) == [REFUSAL[variant]], ran.stderr
    d = host.ws / "src" / "d"
    assert sorted(os.listdir(d)) == ["HEAD", "config", "objects"]
    assert git_dir_on_path(str(d / "objects" / "x"), str(host.ws)) is None
    git = subprocess.run(
        ["git", "-C", str(d), "rev-parse", "--git-dir"], capture_output=True, text=True
    )
    assert git.stdout != ".\n"  # git finds the workspace's repository, or none
    assert [k for k in changed(before, snapshot(host)) if k.startswith("ws/src/d/")] == [
        "ws/src/d/HEAD", "ws/src/d/config", "ws/src/d/objects"
    ]  # fmt: skip


# -- the other modes, the other calls ---------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
async def test_read_only_tmp_takes_no_control_name(host: Host, variant: str) -> None:
    ran = await run(
        host,
        variant,
        "mkdir -p $TMPDIR/work && echo ok > $TMPDIR/work/f && cat $TMPDIR/work/f; "
        "mkdir $TMPDIR/work/.git && echo made",
        mode="read-only" if variant.startswith("bwrap") else "workspace-write",
    )
    assert ran.stdout == "ok\n", ran.stderr
    assert "Read-only file system" in ran.stderr or "Permission denied" in ran.stderr


@pytest.mark.parametrize("variant", VARIANTS)
async def test_openat2_says_it_is_not_there(host: Host, variant: str) -> None:
    if not X86 and platform.machine() != "aarch64":
        pytest.skip("no syscall table")
    ran = await run(host, variant, probe(host, "openat2", "src/new.txt"))
    assert lines(ran) == ["ENOSYS"]
    assert not (host.ws / "src" / "new.txt").exists()


@pytest.mark.bwrap
async def test_the_bubblewrap_launcher_refuses_too(host: Host) -> None:
    """Hook commands spawn ``ConfinedCommand.argv``: bwrap behind the launcher, whose
    supervisor applies the same rule."""
    provider = make_provider("bwrap", host)
    command = provider.confine(
        ["bash", "-c", "mkdir src/ok && mkdir src/.git; echo done"], host.policy("workspace-write")
    )
    try:
        process = await asyncio.create_subprocess_exec(
            *command.argv,
            env=dict(command.env),
            cwd=str(host.ws),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
    finally:
        command.close()
    assert out == b"done\n"
    assert b"Read-only file system" in err
    assert (host.ws / "src" / "ok").is_dir()
    assert not os.path.lexists(host.ws / "src" / ".git")


@pytest.mark.bwrap
async def test_a_rename_moves_or_replaces_nothing_bubblewrap_mounted(host: Host) -> None:
    """The supervisor makes a rename in the command's mounts, but the kernel checks for a
    mount point only in the caller's own mount namespace: with the workspace root open and
    the workspace a home, ``.ssh`` renamed away (then readable by the next command) or
    ``.netrc`` replaced must still fail, as they do for the command itself (``EBUSY``)."""
    provider = make_provider("bwrap", host, open_workspace_root=True)
    policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, str(host.home), "s-test")
    (host.home / "planted").write_text("machine evil password x\n")
    before = snapshot(host)
    ran = await run_confined(
        provider,
        policy,
        "mv .ssh ssh2; mv planted .netrc; "
        + "; ".join(
            probe(host, *args)
            for args in (
                ("rename", ".ssh", "ssh3"),
                ("renameat2", "planted", ".netrc"),
                ("exchange", "planted", ".netrc"),
            )
        ),
    )
    assert lines(ran) == ["EBUSY"] * 3, ran.stderr
    assert changed(before, snapshot(host)) == []


@pytest.mark.parametrize("variant", VARIANTS)
async def test_with_network_the_rule_holds_too(host: Host, variant: str) -> None:
    """``confine(..., network=True)`` (no socket rules): the supervisor still makes every
    name, and under bubblewrap no user namespace can mount a control path elsewhere."""
    provider = make_provider(variant, host)
    ran = await run_confined(
        provider,
        host.policy("workspace-write"),
        "mkdir src/ok && mkdir src/.git; unshare -Urm true && echo unshared",
        network=True,
    )
    assert (host.ws / "src" / "ok").is_dir()
    assert not os.path.lexists(host.ws / "src" / ".git")
    if variant.startswith("bwrap"):
        assert "unshared" not in ran.stdout
    assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr


def test_the_rule_names_tethers_own_configuration_file() -> None:
    assert CONFIG_NAME == CONFIG_FILE
