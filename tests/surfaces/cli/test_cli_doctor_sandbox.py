"""``tether doctor``'s sandbox section: what each usable backend enforces, aspect by aspect."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_support import tether
from tether.sandbox._landlock_exec import abi_version


def doctor(tmp_path: Path, disable: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_SANDBOX_DISABLE"}
    done = tether(
        "doctor",
        "--store",
        f"sqlite:///{tmp_path / 'd.db'}",
        env={**env, "TETHER_SANDBOX_DISABLE": disable},
    )
    return done.stdout.splitlines()


CONTROL_NAMES_LINE = (
    "  control names: supervisor: makes every new name and every open for writing itself; none "
    "named like a control file at any depth, nothing changed inside one or inside a git "
    "directory"
)


def section(lines: list[str], backend: str) -> list[str]:
    """The indented lines below ``sandbox BACKEND: ...``."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"sandbox {backend}: "))
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


@pytest.mark.bwrap
def test_doctor_shows_what_bubblewrap_enforces(tmp_path: Path) -> None:
    lines = doctor(tmp_path, "landlock")
    assert section(lines, "bwrap") == [
        "  files: mount namespace: read-only but for a private /tmp and, under "
        "workspace-write, the workspace; hidden paths mounted over",
        "  TCP: network namespace: the command's own loopback only",
        "  UDP and other families: network namespace for IP; seccomp: Unix, netlink (route) "
        "and IP sockets only (AF_VSOCK, AF_PACKET and the rest refused)",
        "  pathname Unix sockets: supervisor: only inside the writable roots (the private "
        "/tmp; the workspace under workspace-write), and allow_unix_sockets",
        "  abstract Unix sockets: supervisor: refused (the network namespace's only)",
        "  signals: PID namespace: the command's own processes only",
        "  metadata: read-only mounts",
        CONTROL_NAMES_LINE,
    ]
    assert section(lines, "landlock") == []  # disabled: it enforces nothing here


def test_doctor_shows_what_landlock_enforces(tmp_path: Path) -> None:
    if abi_version() < 6:
        pytest.skip("the lines below are those of Landlock ABI 6 and later")
    lines = doctor(tmp_path, "bwrap")
    assert section(lines, "landlock") == [
        f"  files: Landlock ABI {abi_version()}: writes only under workspace-write, inside the "
        "workspace and a private $TMPDIR; hidden paths unreadable",
        "  TCP: seccomp: no IP socket at all (and Landlock: bind and connect refused)",
        "  UDP and other families: seccomp: Unix and netlink (route) sockets only (UDP, raw, "
        "AF_VSOCK, AF_PACKET and the rest refused)",
        "  pathname Unix sockets: supervisor: only inside the writable roots (under "
        "workspace-write: the workspace and a private $TMPDIR), and allow_unix_sockets",
        "  abstract Unix sockets: supervisor: refused (and Landlock's scope)",
        "  signals: Landlock scope: the command's own processes only",
        "  metadata: seccomp: chmod and utimes inside the writable roots only; chown, xattr "
        "changes and chattr refused",
        CONTROL_NAMES_LINE,
    ]
