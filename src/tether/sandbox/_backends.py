"""The confining backends: bubblewrap, then Landlock.

Each backend has a ``probe`` (run once per provider, by the provider) and a ``confine`` that
turns one argv and one mode into a :class:`ConfinedCommand`. Profiles follow platform.md §1.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, Protocol

from tether.policy import SandboxMode
from tether.sandbox import _listings as listings
from tether.sandbox._bwrap_exec import PROGRAM_FD, SHARE_NET
from tether.sandbox._command import BackendName, ConfinedCommand, Enforcement, RunnerFailureRule
from tether.sandbox._control_names import DENIAL_NOTE
from tether.sandbox._environment import FALLBACK_PATH
from tether.sandbox._errors import SandboxError
from tether.sandbox._hidden_masks import hidden_masks
from tether.sandbox._landlock_exec import (
    FULL_ENFORCEMENT_ABI,
    NETWORK_ABI,
    SCOPE_ABI,
    LandlockError,
    LandlockSpec,
    abi_version,
    carved,
    is_pattern,
    writable_cover,
)
from tether.sandbox._paths import below, canonical, harness_paths
from tether.sandbox._socket_calls import SocketRules
from tether.sandbox._supervisor import LAUNCHER_EXIT, LAUNCHER_PREFIX
from tether.sandbox._syscalls import machine
from tether.sandbox._temp_dirs import temp_dirs

CLOSED_ROOT_NOTE: Final = (
    "[sandbox: commands cannot create, remove or rename entries directly in the workspace "
    "root; its existing files and everything inside its existing directories stay writable. "
    "The write and edit tools can create files there (writing a file into a new directory "
    "creates the directory for the next command)]"
)
"""Appended to a denied command's result while the workspace root is not writable itself
(see :func:`tether.sandbox._landlock_exec.writable_cover`)."""


def closed_root_note(profile: Profile) -> str:
    """:data:`CLOSED_ROOT_NOTE`, naming also the directories of the harness's import path
    inside the workspace, which are closed the same way (their names Python acts on are
    control paths: :data:`~tether.sandbox._paths.IMPORT_NAMES`). Kept while the directories
    it names stand as they were."""
    key = (profile.workspace, profile.control)
    cached = _notes.get(key)
    if cached is not None and cached[1].unchanged():
        return cached[0]
    built = listings.started()
    note, looked_at = _closed_root_note(*key)
    _notes[key] = (note, listings.snapshot(looked_at, built))
    while len(_notes) > _NOTES_CACHE:
        _notes.pop(next(iter(_notes)), None)
    return note


_NOTES_CACHE: Final = 8
_notes: dict[tuple[str, tuple[str, ...]], tuple[str, listings.Snapshot]] = {}


def _closed_root_note(ws: str, control: tuple[str, ...]) -> tuple[str, list[str]]:
    """The note, and the paths looked at for it."""
    closed = dict.fromkeys(
        os.path.relpath(os.path.dirname(p), ws)
        for p in control
        if is_pattern(p) and below(os.path.dirname(p), ws) and os.path.dirname(p) != ws
    )
    candidates = [d for d in closed if os.path.basename(d) != "__pycache__"]
    looked_at = [os.path.join(ws, d) for d in candidates]
    shown = [d for d, path in zip(candidates, looked_at, strict=True) if os.path.isdir(path)]
    if not shown:
        return CLOSED_ROOT_NOTE, looked_at
    return CLOSED_ROOT_NOTE.replace(
        "directly in the workspace root; its existing files and everything inside its "
        "existing directories stay writable.",
        f"directly in the workspace root, nor in {', '.join(shown)} (on the harness's Python "
        "import path); their existing files and everything inside their other existing "
        "directories stay writable.",
    ), looked_at


def denial_note(profile: Profile, *, closed: bool) -> str | None:
    """What a denied command's result says after the marker under workspace-write: that no
    control name can be made at any depth (:data:`~._control_names.DENIAL_NOTE`), after
    :func:`closed_root_note` while the root is ``closed``."""
    if profile.mode is not SandboxMode.WORKSPACE_WRITE:
        return None
    return "\n".join([*([closed_root_note(profile)] if closed else []), DENIAL_NOTE])


PROBE_TIMEOUT: Final = 10.0
"""Seconds a functional probe may take before the backend counts as unusable."""
HERE: Final = os.path.dirname(os.path.abspath(__file__))
LAUNCHER_PATH: Final = os.path.join(HERE, "_landlock_exec.py")
BWRAP_LAUNCHER_PATH: Final = os.path.join(HERE, "_bwrap_exec.py")
LAUNCHER_RULE: Final = RunnerFailureRule(
    LAUNCHER_EXIT, LAUNCHER_PREFIX, "the sandbox launcher could not confine the command"
)


@dataclass(frozen=True, slots=True)
class Probe:
    """The outcome of probing one backend."""

    ok: bool
    reason: str
    """Why it is unusable (``ok`` false), or what was found (``ok`` true)."""
    enforcement: Enforcement = "full"


@dataclass(frozen=True, slots=True)
class Profile:
    """What a confined command may touch, independent of the backend."""

    mode: SandboxMode
    workspace: str
    env: Mapping[str, str]
    hidden: tuple[str, ...] = ()
    """Canonical paths, existing or not, the command may neither read nor change."""
    control: tuple[str, ...] = ()
    """Canonical paths, existing or not, the command may read but never change, even inside
    a writable workspace (``tether.toml``, ``.git``, ...)."""
    network: bool = False
    open_root: bool = False
    """bubblewrap only: bind the workspace root writable as a whole (``open_workspace_root``);
    control and hidden paths missing at start can then be created directly in it."""
    unix_sockets: tuple[str, ...] = ()
    """Socket paths a command without network may connect to wherever they are (real paths:
    the ``sandbox`` plugin's ``allow_unix_sockets``)."""

    @property
    def closed_root(self) -> bool:
        """Under workspace-write, the workspace root itself is not writable (its entries are
        granted one by one), so nothing can be created, removed or renamed directly in it."""
        return self.mode is SandboxMode.WORKSPACE_WRITE and not self.open_root

    def socket_rules(self, roots: tuple[str, ...] = ()) -> SocketRules | None:
        """What the supervisor of a command without network permits (``None`` with network):
        sockets inside ``roots``, never under a control or hidden path, and the allowed
        ones."""
        if self.network:
            return None
        excluded = tuple(dict.fromkeys((*self.control, *self.hidden)))
        return SocketRules(roots, excluded=excluded, allowed=self.unix_sockets)


def check_runner(files: Sequence[str], workspace: str) -> None:
    """Refuse a runner that a confined command could rewrite: one of ``files`` (the runner's
    program and what it loads) resolves inside the workspace, outside the harness's own code
    (:func:`~tether.sandbox._paths.harness_paths`, which commands can never change)."""
    kept = _kept(sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    for path in files:
        real = listings.real_path(os.path.abspath(path))
        if below(real, workspace) and not any(below(real, p) for p in kept):
            raise SandboxError(
                f"the sandbox runner {real} lies inside the workspace {workspace}, where a "
                "confined command could rewrite it and run unconfined next time; install it "
                "outside the workspace (for example in /usr/local/bin) and point "
                "runner_command or bwrap_path there",
                code="SANDBOX_CONFIG",
            )


@functools.lru_cache(maxsize=4)
def _kept(*_prefixes: str) -> tuple[str, ...]:
    """The harness's code (:func:`~tether.sandbox._paths.harness_paths`), resolved once per
    set of ``sys`` prefixes it is found from (the arguments are the cache's key only):
    checked at every confine."""
    return canonical(harness_paths())


Aspect = Literal[
    "files",
    "TCP",
    "UDP and other families",
    "pathname Unix sockets",
    "abstract Unix sockets",
    "signals",
    "metadata",
    "control names",
]
"""What a backend confines, as ``tether doctor`` lists it (docs/sandbox.md has the table)."""
Coverage = tuple[tuple[Aspect, str], ...]
"""How a backend enforces each :data:`Aspect` in the restricted modes, without network."""

_SOCKETS = "supervisor: only inside the writable roots ({}), and allow_unix_sockets"
_CONTROL_NAMES = (
    "supervisor: makes every new name and every open for writing itself; none named like a "
    "control file at any depth, nothing changed inside one or inside a git directory"
)


class Backend(Protocol):
    name: BackendName

    def probe(self) -> Probe: ...

    def coverage(self) -> Coverage:
        """What this backend enforces, as probed (call after a successful :meth:`probe`)."""
        ...

    def confine(self, argv: Sequence[str], profile: Profile) -> ConfinedCommand: ...

    def runner_files(self) -> tuple[str, ...]:
        """The files whose change would change what confines a command."""
        ...


# -- bubblewrap ---------------------------------------------------------------------------------
class BwrapBackend:
    """bubblewrap. ``--cap-drop ALL`` always: as root without it a confined command could
    ``mount -o remount,bind,rw /`` and write to the host (platform.md §1)."""

    name: BackendName = "bwrap"
    denial_signatures: Final = ("Read-only file system",)
    busy_signature: Final = "Device or resource busy"
    """Removing or renaming an entry bound over the workspace fails with ``EBUSY``: a denial
    under workspace-write."""
    runner_failure_rules: Final = (
        RunnerFailureRule(1, "bwrap: ", "bubblewrap could not set up the sandbox"),
        LAUNCHER_RULE,
    )

    def __init__(self, path: str | None = None, *, python: str | None = None) -> None:
        """``path``: the bwrap binary or a bwrap-compatible runner (default: ``bwrap`` on
        ``PATH``). Whatever it is, it is probed before any command uses it. ``python``: the
        interpreter of the launcher (:mod:`._bwrap_exec`)."""
        self.path = path
        self._found: str | None = None
        self.python = python or sys.executable

    def _binary(self) -> str | None:
        """The runner: ``path``, else ``bwrap`` on ``PATH`` as first found (the one probed).
        Relative ``PATH`` entries are skipped: they name the working directory, often the
        workspace, where a confined command could plant a ``bwrap``."""
        if self.path is not None:
            return self.path
        if self._found is None:
            entries = os.environ.get("PATH", FALLBACK_PATH).split(os.pathsep)
            search = os.pathsep.join(e for e in entries if os.path.isabs(e))
            self._found = shutil.which("bwrap", path=search)
        return self._found

    def runner_files(self) -> tuple[str, ...]:
        binary = self._binary()
        return () if binary is None else (binary,)

    def probe(self) -> Probe:
        binary = self._binary()
        if binary is None:
            return Probe(False, "bwrap is not installed (not found on PATH)")
        if not os.access(binary, os.X_OK):
            return Probe(False, f"{binary} is not executable")
        with tempfile.TemporaryDirectory(prefix="tether-probe-") as top:
            ws = os.path.join(os.path.realpath(top), "ws")
            os.mkdir(ws)
            target = os.path.join(ws, "probe")
            # ``true`` (not the special builtin ``:``): a failed redirection must not exit sh.
            script = 'exec 2>/dev/null; if true > "$1"; then exit 3; fi; exit 0'
            if machine() is None:
                return Probe(False, f"no seccomp filter for architecture {os.uname().machine}")
            # Through the launcher, as commands without network run: the socket filter and
            # its supervisor must let bwrap set up its namespaces.
            profile = Profile(SandboxMode.READ_ONLY, ws, {"PATH": FALLBACK_PATH})
            argv = self._supervised(
                self.build(binary, ["/bin/sh", "-c", script, "sh", target], profile),
                profile.socket_rules(),
            )
            try:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT,
                    env={"PATH": FALLBACK_PATH},
                    check=False,
                )
            except (OSError, subprocess.SubprocessError) as err:
                return Probe(False, f"cannot run {binary}: {err}")
            stderr = done.stderr.decode("utf-8", "replace").strip()
            if os.path.lexists(target) or done.returncode == 3:
                return Probe(False, "a write inside the read-only probe was not refused")
            if done.returncode != 0:
                first = stderr.splitlines()[0] if stderr else f"exit status {done.returncode}"
                return Probe(False, f"probe failed: {first}")
        return Probe(True, f"{_bwrap_version(binary)} at {binary}")

    def coverage(self) -> Coverage:
        return (
            ("files", "mount namespace: read-only but for a private /tmp and, under "
             "workspace-write, the workspace; hidden paths mounted over"),
            ("TCP", "network namespace: the command's own loopback only"),
            ("UDP and other families", "network namespace for IP; seccomp: Unix, netlink "
             "(route) and IP sockets only (AF_VSOCK, AF_PACKET and the rest refused)"),
            ("pathname Unix sockets", _SOCKETS.format(
                "the private /tmp; the workspace under workspace-write")),
            ("abstract Unix sockets", "supervisor: refused (the network namespace's only)"),
            ("signals", "PID namespace: the command's own processes only"),
            ("metadata", "read-only mounts"),
            ("control names", _CONTROL_NAMES),
        )  # fmt: skip

    def build(self, binary: str, argv: Sequence[str], profile: Profile) -> list[str]:
        out = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # The workspace is bound *after* the private /tmp, or a workspace under /tmp would
        # disappear under the tmpfs.
        out += ["--tmpfs", "/tmp", *_workspace_binds(profile), *hidden_masks(profile.hidden)]
        out += ["--unshare-all"]
        if profile.network:
            out += ["--share-net"]
        # No user namespace inside (_bwrap_exec.py puts the filter at that descriptor): one
        # would let the command mount, and so bind a host socket over a path its supervisor
        # lets it connect to, or a control path over a name its supervisor lets it change.
        out += ["--seccomp", str(PROGRAM_FD)]
        out += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for key, value in profile.env.items():
            out += ["--setenv", key, value]
        return [*out, "--", *argv]

    def _supervised(
        self, bwrap: list[str], rules: SocketRules | None, roots: Sequence[str] = ()
    ) -> list[str]:
        """``bwrap`` behind the launcher that supervises its calls: the socket calls by
        ``rules``, or with network (``rules`` ``None``) only the calls that make names, whose
        control names count from ``roots`` (see docs/sandbox.md, "Control names at any
        depth")."""
        launcher = [self.python, "-I", "-S", BWRAP_LAUNCHER_PATH]
        if rules is None:
            return [*launcher, "--roots", json.dumps(list(roots)), "--", *bwrap]
        return [*launcher, "--sockets", json.dumps(rules.to_json()), "--", *bwrap]

    def socket_rules(self, profile: Profile) -> SocketRules | None:
        """What the workspace grants writable (workspace-write: the entries
        :func:`_workspace_binds` binds writable) and the private ``/tmp``, in the command's
        view (the same paths: bwrap binds them in place)."""
        rules = profile.socket_rules(_writable_in_workspace(profile))
        if rules is None:
            return None
        return SocketRules(
            rules.roots,
            private=(("/tmp", os.stat("/tmp").st_dev),),
            excluded=rules.excluded,
            allowed=rules.allowed,
            ip=True,  # IP sockets live in the command's own network namespace
        )

    def confine(self, argv: Sequence[str], profile: Profile) -> ConfinedCommand:
        binary = self._binary() or "bwrap"
        env = {**profile.env, "TMPDIR": "/tmp"}
        profile = replace(profile, env=env)
        signatures: tuple[str, ...] = self.denial_signatures
        if profile.mode is SandboxMode.WORKSPACE_WRITE:
            signatures = (*signatures, self.busy_signature)
        bwrap = self.build(binary, argv, profile)
        rules = self.socket_rules(profile)
        pair: tuple[str, ...] = ()
        if rules is not None:
            # Right after --unshare-all, which it narrows (nothing before it is a value that
            # could read as that flag: the options there take absolute paths).
            at = bwrap.index("--unshare-all") + 1
            pair = (*bwrap[:at], SHARE_NET, *bwrap[at:])
        # Where a mount's path would change: its directory, but for the workspace root
        # itself, whose own change time moves when it is renamed (away and back, say) and
        # whose directory (any directory of projects) changes too often to be watched.
        ws = profile.workspace
        watch = tuple(
            dict.fromkeys(p if p == ws else os.path.dirname(p) for p in mount_points(bwrap))
        )
        roots = (*_writable_in_workspace(profile), "/tmp")
        return ConfinedCommand(
            argv=tuple(self._supervised(bwrap, rules, roots)),
            env=env,
            mode=profile.mode,
            backend="bwrap",
            enforcement="full",
            denial_signatures=signatures,
            runner_failure_rules=self.runner_failure_rules,
            command=tuple(argv),
            runner=self.python,
            network=profile.network,
            denial_note=denial_note(profile, closed=profile.closed_root),
            sockets=rules,
            bwrap_argv=tuple(bwrap) if rules is not None else (),
            bwrap_pair_argv=pair,
            bwrap_watch=watch if rules is not None else (),
            fast_path=rules is not None,
        )


_MOUNT_OPTIONS: Final = {
    "--bind": 2, "--bind-try": 2, "--ro-bind": 2, "--ro-bind-try": 2,
    "--dev": 1, "--proc": 1, "--tmpfs": 1, "--remount-ro": 1,
}  # fmt: skip
"""The options of :meth:`BwrapBackend.build` that mount, and how many paths each takes."""
_OTHER_OPTIONS: Final = {
    "--setenv": 2, "--seccomp": 1, "--unshare-all": 0, "--share-net": 0,
    "--die-with-parent": 0, "--new-session": 0, "--cap-drop": 1, "--clearenv": 0,
}  # fmt: skip
"""Its other options, and how many values each takes."""


def mount_points(bwrap: Sequence[str]) -> tuple[str, ...]:
    """Every path a bwrap command line of :meth:`BwrapBackend.build` mounts on or binds from,
    in order (the runner first, the command after ``--`` not read). ``ValueError`` for an
    option ``build`` does not use: a mount it does not know of would go unwatched."""
    points: list[str] = []
    at = 1
    while at < len(bwrap) and bwrap[at] != "--":
        option = bwrap[at]
        if option in _MOUNT_OPTIONS:
            points += bwrap[at + 1 : at + 1 + _MOUNT_OPTIONS[option]]
            at += 1 + _MOUNT_OPTIONS[option]
        elif option in _OTHER_OPTIONS:
            at += 1 + _OTHER_OPTIONS[option]
        else:
            raise ValueError(f"unknown bwrap option {option}")
    return tuple(points)


def _writable_in_workspace(profile: Profile) -> tuple[str, ...]:
    """The parts of the workspace a command may change: none under read-only; the whole root
    with ``open_root``; else the entries :func:`writable_cover` grants (the same for both
    backends, so a socket is reachable on one exactly where it is on the other)."""
    if profile.mode is not SandboxMode.WORKSPACE_WRITE:
        return ()
    if profile.open_root:
        return (profile.workspace,)
    granted, _ = writable_cover(profile.workspace, {*profile.hidden, *profile.control})
    return tuple(granted)


def _workspace_binds(profile: Profile) -> list[str]:
    """The workspace's mounts: read-only under read-only; under workspace-write, the root
    and every directory on the way to a control or hidden path read-only, with their other
    entries bound writable one by one (:func:`writable_cover`). ``open_root`` binds the root
    writable instead, with its existing control entries bound read-only over it."""
    ws = profile.workspace
    if profile.mode is not SandboxMode.WORKSPACE_WRITE:
        return ["--ro-bind", ws, ws]
    carve = {*profile.hidden, *profile.control}
    granted, walked = writable_cover(ws, carve)
    if not walked:
        return ["--bind" if granted else "--ro-bind", ws, ws]
    if not profile.open_root:
        out = ["--ro-bind", ws, ws]
        for path in granted:
            out += ["--bind-try", path, path]
        return out
    out = ["--bind", ws, ws]
    for directory in walked[1:]:
        out += ["--ro-bind-try", directory, directory]
    for path in granted:
        if os.path.dirname(path) != ws:
            out += ["--bind-try", path, path]
    for path in _existing_at_root(ws, profile.control):
        out += ["--ro-bind-try", path, path]
    return out


def _existing_at_root(ws: str, control: Sequence[str]) -> list[str]:
    """The existing entries of ``ws`` that are control paths (those a pattern names among
    them: only with the workspace itself on the import path)."""
    found = [p for p in control if os.path.dirname(p) == ws and not is_pattern(p)]
    found = [p for p in found if os.path.lexists(p)]
    patterns = [p.casefold() for p in control if os.path.dirname(p) == ws and is_pattern(p)]
    if patterns:
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(ws)):
                path = os.path.join(ws, name)
                if any(carved(path.casefold(), p) for p in patterns):
                    found.append(path)
    return list(dict.fromkeys(found))


def _bwrap_version(binary: str) -> str:
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "bubblewrap"
    return done.stdout.decode("utf-8", "replace").strip() or "bubblewrap"


# -- Landlock -----------------------------------------------------------------------------------
_LANDLOCK_PROBE = (
    'exec 2>/dev/null; true > "$1/ok" || exit 4; if true > "$2"; then exit 3; fi; '
    'chmod 600 "$1/ok" || exit 5; if chmod 777 "$3"; then exit 6; fi; exit 0'
)


@functools.lru_cache(maxsize=8)
def _launcher_rules(
    hidden: tuple[str, ...], readonly: tuple[str, ...], rules: SocketRules | None
) -> tuple[str, ...]:
    """The launcher's options for the hidden and read-only paths and the socket rules: the
    same for every command of a harness, some two hundred arguments."""
    out: list[str] = []
    for path in hidden:
        out += ["--hide", path]
    for path in readonly:
        out += ["--ro", path]
    if rules is None:
        out.append("--net")
    else:
        out += ["--sockets", json.dumps(rules.to_json())]
    return tuple(out)


def _probe_landlock(python: str) -> str | None:
    """Confine a real command (through the launcher: the same supervisor and metadata filter
    as the fork server's pairs): a write and a chmod in the workspace must work, a write and
    a chmod outside must fail. ``None`` when it behaved, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="tether-probe-") as top:
        top = os.path.realpath(top)
        ws, refused, outside = (os.path.join(top, n) for n in ("ws", "refused", "outside"))
        os.mkdir(ws)
        with open(outside, "w", encoding="ascii"):
            os.chmod(outside, 0o644)
        launcher = [python, "-I", "-S", LAUNCHER_PATH, "--rw", ws, "--setenv", "PATH"]
        script = ["/bin/sh", "-c", _LANDLOCK_PROBE, "sh", ws, refused, outside]
        try:
            done = subprocess.run(
                [*launcher, FALLBACK_PATH, "--", *script],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                start_new_session=True,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as err:
            return f"it cannot be applied: {err}"
        if os.path.lexists(refused) or os.stat(outside).st_mode & 0o777 != 0o644:
            return "a write outside the probe workspace was not refused"
        if done.returncode == LAUNCHER_EXIT:
            first = done.stderr.decode(errors="replace").strip().splitlines()[:1]
            return f"it cannot be applied: {first[0] if first else 'the launcher failed'}"
        if done.returncode != 0 or not os.path.exists(os.path.join(ws, "ok")):
            return f"the probe command failed (exit status {done.returncode})"
    return None


class LandlockBackend:
    """Landlock, applied in the child. ``fast_path``: :func:`tether.sandbox.spawn` hands the
    command to the fork server (:mod:`._landlock_server`, about 1 ms); ``argv`` always holds
    the equivalent launcher command (``python -I -S _landlock_exec.py``, a Python start-up per
    call), for callers that can only spawn an argv."""

    name: BackendName = "landlock"
    denial_signatures: Final = ("Permission denied",)
    runner_failure_rules: Final = (LAUNCHER_RULE,)

    def __init__(self, *, fast_path: bool = True, python: str | None = None) -> None:
        self.fast_path = fast_path
        self.python = python or sys.executable
        self.abi = 0

    def runner_files(self) -> tuple[str, ...]:
        """The interpreter, and the directory of the launcher and the fork server (each
        loads the modules beside it)."""
        return (self.python, os.path.dirname(LAUNCHER_PATH))

    def probe(self) -> Probe:
        try:
            abi = abi_version()
        except LandlockError as err:
            return Probe(False, str(err.strerror or err))
        failure = _probe_landlock(self.python)
        if failure is not None:
            return Probe(False, f"Landlock ABI {abi}, but {failure}")
        self.abi = abi
        covers = ["filesystem"]
        if abi >= NETWORK_ABI:
            covers.append("TCP")
        if abi >= SCOPE_ABI:
            covers.append("signal/socket scopes")
        covers.append("seccomp metadata and socket filter")
        enforcement: Enforcement = "full" if abi >= FULL_ENFORCEMENT_ABI else "partial"
        return Probe(True, f"Landlock ABI {abi} ({', '.join(covers)})", enforcement)

    def coverage(self) -> Coverage:
        abi = self.abi
        return (
            ("files", f"Landlock ABI {abi}: writes only under workspace-write, inside the "
             "workspace and a private $TMPDIR; hidden paths unreadable"
             + ("" if abi >= FULL_ENFORCEMENT_ABI else "; truncate not refused")),
            ("TCP", "seccomp: no IP socket at all" + (
                " (and Landlock: bind and connect refused)" if abi >= NETWORK_ABI else "")),
            ("UDP and other families", "seccomp: Unix and netlink (route) sockets only (UDP, "
             "raw, AF_VSOCK, AF_PACKET and the rest refused)"),
            ("pathname Unix sockets", _SOCKETS.format(
                "under workspace-write: the workspace and a private $TMPDIR")),
            ("abstract Unix sockets", "supervisor: refused" + (
                " (and Landlock's scope)" if abi >= SCOPE_ABI else "")),
            ("signals", "Landlock scope: the command's own processes only" if abi >= SCOPE_ABI
             else "not confined below Landlock ABI 6 (processes of the same uid)"),
            ("metadata", "seccomp: chmod and utimes inside the writable roots only; chown, "
             "xattr changes and chattr refused"),
            ("control names", _CONTROL_NAMES),
        )  # fmt: skip

    def confine(self, argv: Sequence[str], profile: Profile) -> ConfinedCommand:
        env = dict(profile.env)
        writable: tuple[str, ...] = ()
        temp_dir = None
        if profile.mode is SandboxMode.WORKSPACE_WRITE:
            # A private temp directory instead of the host's /tmp (removed after the call),
            # made ahead of time.
            temp_dir = temp_dirs.take()
            writable = (profile.workspace, temp_dir)
            env["TMPDIR"] = temp_dir
        else:
            env.pop("TMPDIR", None)
        spec = LandlockSpec(writable, profile.hidden, profile.network, profile.control)
        rules = profile.socket_rules()  # the roots are the writable roots, filled in later
        launcher = [self.python, "-I", "-S", LAUNCHER_PATH]
        for path in spec.writable:
            launcher += ["--rw", path]
        launcher += _launcher_rules(spec.hidden, spec.readonly, rules)
        for key, value in env.items():
            launcher += ["--setenv", key, value]
        enforcement: Enforcement = "full" if self.abi >= FULL_ENFORCEMENT_ABI else "partial"
        try:
            return ConfinedCommand(
                argv=(*launcher, "--", *argv),
                env=env,
                mode=profile.mode,
                backend="landlock",
                enforcement=enforcement,
                denial_signatures=self.denial_signatures,
                runner_failure_rules=self.runner_failure_rules,
                command=tuple(argv),
                runner=self.python,
                network=profile.network,
                landlock=spec,
                sockets=rules,
                fast_path=self.fast_path,
                temp_dir=temp_dir,
                denial_note=denial_note(profile, closed=bool(writable)),
            )
        except BaseException:
            if temp_dir is not None:
                temp_dirs.release(temp_dir)
            raise


__all__ = [
    "BWRAP_LAUNCHER_PATH",
    "CLOSED_ROOT_NOTE",
    "LAUNCHER_PATH",
    "PROBE_TIMEOUT",
    "Aspect",
    "Backend",
    "BwrapBackend",
    "Coverage",
    "LandlockBackend",
    "Probe",
    "Profile",
    "check_runner",
    "closed_root_note",
    "denial_note",
    "mount_points",
]
