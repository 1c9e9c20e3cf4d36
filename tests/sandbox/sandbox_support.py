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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import ConfinedCommand, SandboxProvider, spawn

RESTRICTED = ("read-only", "workspace-write")

# Backend variants: the two backends, and Landlock through its launcher argv instead of the
# fork server (what a caller that can only spawn an argv gets).
VARIANTS = (
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("landlock", id="landlock"),
    pytest.param("landlock-launcher", id="landlock-launcher"),
)

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


def make_provider(variant: str, host: Host | None = None, **options: Any) -> SandboxProvider:
    backend = "landlock" if variant.startswith("landlock") else variant
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
    command = provider.confine(["bash", "-c", script], policy, network=network)
    try:
        process = await spawn(command, cwd=policy.workspace_root)
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        command.close()
    return Ran(
        process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), command
    )


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
