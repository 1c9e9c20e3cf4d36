"""Shared pieces of the sandbox tests: a host layout, providers per backend, and a runner.

Every test works on real files: ``top`` holds the workspace ``ws`` and things that must never
change (``outside``, a fake ``home`` with credentials). :meth:`Host.snapshot` records kind,
content, mode, owner, mtime and extended attributes, so a test can prove the host did not
change, not just that a command failed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import ConfinedCommand, SandboxProvider, spawn
from tether.sandbox import _listings as listings
from tether.sandbox._landlock_client import fork_server, kind_of
from tether.sandbox._prepared import plan_of
from tether.sandbox._supervisor import Rules
from tether.sandbox._temp_dirs import temp_dirs

RESTRICTED = ("read-only", "workspace-write")

# Backend variants: the two backends, each through a fork-server pair confined once the
# command is known and through one prepared for it before (what most commands of a session
# get: tether/sandbox/_prepared.py), and Landlock through its launcher argv instead of the
# fork server (what a caller that can only spawn an argv gets).
VARIANTS = (
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("bwrap-prepared", marks=pytest.mark.bwrap, id="bwrap-prepared"),
    pytest.param("landlock", id="landlock"),
    pytest.param("landlock-prepared", id="landlock-prepared"),
    pytest.param("landlock-launcher", id="landlock-launcher"),
)
PREPARED = "-prepared"
"""The suffix of the variants whose commands :func:`run_confined` hands to a prepared pair."""

SECRET_ENV = {
    "DEEPSEEK_API_KEY": "sk-deepseek-must-not-leak",
    "OPENAI_API_KEY": "sk-openai-must-not-leak",
    "TETHER_TEST_TOKEN": "token-must-not-leak",
    "MY_SECRET_THING": "secret-must-not-leak",
}

SSH_KEY = "-----BEGIN FAKE KEY----- must-not-leak"


@dataclass
class Host:
    top: Path
    ws: Path
    outside: Path
    home: Path

    def probe(self, name: str) -> Path:
        """Where the probe script ``name`` (one of :data:`PROBES`) lies for confined commands."""
        return self.top / "probes" / name

    def policy(self, mode: str) -> SandboxExecutionPolicy:
        return SandboxExecutionPolicy(SandboxMode(mode), str(self.ws), "s-test")

    def snapshot(self, *, include_ws: bool) -> dict[str, tuple[Any, ...]]:
        shot: dict[str, tuple[Any, ...]] = {}
        for dirpath, dirnames, filenames in os.walk(self.top):
            here = Path(dirpath)
            if here == self.top and not include_ws and "ws" in dirnames:
                dirnames.remove("ws")
            for name in sorted(dirnames + filenames):
                path = here / name
                st = path.lstat()
                rel = str(path.relative_to(self.top))
                meta = (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_nlink)
                if path.is_symlink():
                    shot[rel] = ("link", os.readlink(path), *meta)
                elif path.is_dir():
                    shot[rel] = ("dir", None, *meta)
                else:
                    xattrs = tuple(sorted(os.listxattr(path, follow_symlinks=False)))
                    content = path.read_bytes() if path.is_file() else None
                    shot[rel] = ("file", content, xattrs, *meta)
        return shot


HOST_BASE = "/var/tmp"
"""Where host layouts live: not under /tmp, which bubblewrap replaces with a private tmpfs (a
target there would be invisible to the command, and the test would prove less)."""


PROBES = ("socket_probe.py", "uring_setxattr.py", "creation_probe.py")
"""The scripts of this directory that tests run inside the sandbox (:meth:`Host.probe`)."""


def variant_mode_cases() -> Iterator[object]:
    """``(variant, mode)`` parameters: every sandbox variant under every restricted mode."""
    for variant in VARIANTS:
        for mode in RESTRICTED:
            yield pytest.param(
                variant.values[0], mode, marks=variant.marks, id=f"{variant.id}-{mode}"
            )


def changed(before: dict[str, tuple[object, ...]], after: dict[str, tuple[object, ...]]) -> list:
    """The paths whose :meth:`Host.snapshot` entry differs between ``before`` and ``after``."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def make_host(root: Path) -> Host:
    top = Path(os.path.realpath(root))
    ws, outside, home = top / "ws", top / "outside", top / "home"
    for d in (ws, outside, home / ".ssh", outside / "dir", ws / ".git" / "hooks", ws / "src"):
        d.mkdir(parents=True)
    (outside / "secret.txt").write_text("outside secret\n")
    (outside / "dir" / "keep.txt").write_text("keep\n")
    (outside / "fd-target.txt").write_text("")
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY + "\n")
    (home / ".netrc").write_text("machine example.com password must-not-leak\n")
    (ws / "file.txt").write_text("workspace file\n")
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".tether-data").mkdir()
    (ws / ".tether-data" / "store.db").write_text("audit trail\n")
    (ws / "link-out").symlink_to(outside / "secret.txt")
    # The probe scripts a confined command runs are copied here: beside the tests they may lie
    # under /tmp (a checkout there), which bubblewrap replaces with a private one, and a
    # missing script would make an escape attempt fail for the wrong reason.
    (top / "probes").mkdir()
    for name in PROBES:
        shutil.copy(Path(__file__).with_name(name), top / "probes" / name)
    return Host(top, ws, outside, home)


_prepared_providers: weakref.WeakSet[SandboxProvider] = weakref.WeakSet()


def make_provider(variant: str, host: Host | None = None, **options: Any) -> SandboxProvider:
    backend = "landlock" if variant.startswith("landlock") else variant.removesuffix(PREPARED)
    extra: dict[str, Any] = {}
    if host is not None:
        extra = {"home": str(host.home), "protected_paths": [str(host.ws / ".tether-data")]}
    provider = SandboxProvider(
        backends=(backend,),
        disable=(),
        landlock_fast_path=variant != "landlock-launcher",
        **{**extra, **options},
    )
    if provider.backend_name() != backend:
        pytest.fail(f"backend {backend} is not usable here: {provider.reasons()}")
    if variant.endswith(PREPARED):
        _prepared_providers.add(provider)
    return provider


@dataclass
class Ran:
    returncode: int | None
    stdout: str
    stderr: str
    command: ConfinedCommand


async def run_confined(
    provider: SandboxProvider,
    policy: SandboxExecutionPolicy,
    script: str,
    *,
    network: bool = False,
    timeout: float = 30.0,
) -> Ran:
    """Run ``bash -c script`` confined. For a ``-prepared`` variant's provider, through a pair
    prepared for it: a command like it runs first, then the fork server prepares its next
    pair, and the test fails unless that pair took the command (or was let go because a
    directory it was prepared from changed meanwhile: another process's work in /tmp, say,
    where the XDG directories of the tests lie; then the command ran the usual way)."""
    prepared = provider in _prepared_providers
    fresh = listings.FRESH_NS
    try:
        if prepared:
            await _prepare_for(provider, policy, network)
        server = fork_server()
        served = server.prepared_taken + server.prepared_stale
        command = provider.confine(["bash", "-c", script], policy, network=network)
        try:
            process = await spawn(command, cwd=policy.workspace_root)
            out, err = await asyncio.wait_for(process.communicate(), timeout)
        finally:
            command.close()
    finally:
        listings.FRESH_NS = fresh
    if prepared and command.fast_path:
        taken = server.prepared_taken + server.prepared_stale
        assert taken == served + 1, "no prepared pair took the command"
    return Ran(
        process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), command
    )


async def _prepare_for(
    provider: SandboxProvider, policy: SandboxExecutionPolicy, network: bool
) -> None:
    """Run a command under ``policy`` and wait until a pair is prepared for the next. What it
    was prepared from is trusted at once (``FRESH_NS`` 0: the host was made a moment ago,
    and a test does not change it while its command runs)."""
    command = provider.confine(["true"], policy, network=network)
    try:
        process = await spawn(command, cwd=policy.workspace_root)
        await process.communicate()
    finally:
        command.close()
    if command.fast_path:
        listings.FRESH_NS = 0
        await wait_prepared(command, policy.workspace_root)


async def wait_prepared(command: ConfinedCommand, cwd: str) -> None:
    """Wait until a pair prepared for commands like ``command`` (which ran in ``cwd``)
    stands. Its private temp directory is removed first, and the next one made, not while the
    next command is handed over: the tests' HOME and XDG directories lie under /tmp, and a
    change there changes a directory Landlock's read layer was listed from. Other processes
    change /tmp too: ``ready`` prepares again until one stands (each round a few ms)."""
    server = fork_server()
    rules = Rules((), command.sockets).encode() if command.landlock is None else b""
    plan = plan_of(command, cwd, rules)
    assert plan is not None
    for _ in range(100):
        temp_dirs.drain()
        assert await server.ready(kind_of(command))
        if plan.profile in server._prepared:
            return
    pytest.fail("no pair prepared for the command stood for long enough")


def compile_preload(directory: Path, target: Path) -> Path | None:
    """A shared library whose constructor writes ``target`` (``None`` without a compiler)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    source = directory / "preload.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void pwn(void) {\n"
        f'  FILE *f = fopen("{target}", "w"); if (f) {{ fputs("pwned", f); fclose(f); }}\n'
        "}\n"
    )
    lib = directory / "preload.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    return lib


# The real interpreter, not the venv's symlink: a checkout under /tmp (as CI may use) vanishes
# under bwrap's private /tmp, and a missing interpreter (exit 127) must never pass for a denial.
PYTHON = os.path.realpath(sys.executable)
