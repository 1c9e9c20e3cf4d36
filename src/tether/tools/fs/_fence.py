"""The in-process file fence: where a file tool may write, decided by the call's sandbox mode.

The fs tools are not run under the OS sandbox (they live in this process), so they enforce the
mode themselves: ``read-only`` refuses every write, ``workspace-write`` allows writes only
under the workspace root, never to a hidden or control path (:mod:`tether.sandbox._paths`;
a control name at any depth, anything inside a git directory or what would make one, as
commands are refused them), ``danger-full-access`` does not fence writes. Reads are not fenced by
the mode, but no mode reads a hidden path (see :mod:`tether.tools.fs._common`).

Checking a path and then opening it by name would let anything that swaps a directory for a
symbolic link in between redirect the write (TOCTOU). So in ``workspace-write`` the check only
*plans* the write (realpath containment, control names); the write itself walks the planned
components one at a time from a descriptor of the workspace root with ``O_NOFOLLOW``, and
creates the file relative to the final directory descriptor. A component that is a symbolic
link by the time the walk reaches it is refused, whatever it points at.

The file itself is always replaced, never written through: new content goes into a temporary
file in the same directory that is renamed over the name (both relative to the directory
descriptor). That makes writes atomic for readers, means a symbolic link or hard link at the
final name is replaced rather than followed (a hard link shared with a file outside the
workspace keeps its old content), and keeps the rename inside the directory we walked to.

Residual risk, accepted: a process that can itself write outside the workspace could move a
directory we already hold a descriptor for out of the workspace before the rename. Such a
process is already outside the fence; OS confinement of commands is the defence there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Protocol

from tether.errors import TetherError
from tether.policy import SandboxMode
from tether.sandbox import (
    PathRules,
    control_component,
    git_dir_made_by,
    git_dir_on_path,
    made_git_dir,
)
from tether.tools._base import ToolResult

# The vocabulary lives in tether.policy (one home); these names keep the fence readable.
READ_ONLY: Final = SandboxMode.READ_ONLY
WORKSPACE_WRITE: Final = SandboxMode.WORKSPACE_WRITE
DANGER_FULL_ACCESS: Final = SandboxMode.DANGER_FULL_ACCESS

NO_POLICY_REASON: Final = "no sandbox policy is composed; file writes are refused"

PROTECTED_COMPONENT: Final = ".git"
"""Left out of tree walks (``grep``, ``glob``): a repository's internals are no search hit."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class FencePolicy(Protocol):
    """What the fence needs of ``SandboxExecutionPolicy`` (mode and canonical workspace root)."""

    @property
    def mode(self) -> str: ...

    @property
    def workspace_root(self) -> str: ...


class FileToolError(TetherError):
    """A file operation failed for an ordinary reason; the message is the tool result's reason."""

    code = "FILE_TOOL_ERROR"


class SandboxDenied(FileToolError):
    """The fence refused a write; rendered with the denial marker."""

    code = "SANDBOX_DENIED"

    def __init__(self, reason: str, mode: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.mode = str(mode)


def denial_marker(mode: str) -> str:
    """The marker shared with bash denials (``tools/_command_run.py``)."""
    return f"[sandbox: file access denied under {mode} mode]"


def sandbox_denial(reason: str, mode: str) -> ToolResult:
    """``Error: <reason> [sandbox: file access denied under <mode> mode]``."""
    mode = str(mode)
    return ToolResult.error(f"{reason} {denial_marker(mode)}", sandbox_denied=True, mode=mode)


HIDDEN_REASON: Final = "it is hidden from every agent (it holds credentials or tether's own state)"
CONTROL_NAME_REASON: Final = (
    "is a control name at any depth (git, Claude Code, Codex, tether or a git hook manager "
    "started in that directory acts on it outside the sandbox); only the user may change it"
)
GIT_DIR_REASON: Final = (
    "(HEAD beside objects and refs, or beside commondir), which git started there acts on "
    "outside the sandbox; only the user may change it"
)


def hidden_error(display: str, mode: str | None, verb: str) -> FileToolError:
    """A hidden path was asked for: denied (with the marker when the call has a mode)."""
    reason = f"cannot {verb} {display}: {HIDDEN_REASON}"
    return SandboxDenied(reason, mode) if mode is not None else FileToolError(reason)


def opened_location(fd: int, display: str) -> str:
    """Where the descriptor ``fd`` really is (links and ``..`` resolved by the kernel)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError as err:
        raise FileToolError(
            f"cannot tell where {display} leads (/proc is not available: {err.strerror}); "
            "the file tools refuse it"
        ) from err


def refuse_hidden(
    fd: int, rules: PathRules, display: str, mode: str | None, verb: str
) -> os.stat_result:
    """Check what ``fd`` actually opened, not the name it was opened by, so that a link or a
    directory swapped in after a check cannot lead to a hidden path; returns its ``stat``."""
    st = os.fstat(fd)
    if rules.hides(opened_location(fd, display), st):
        raise hidden_error(display, mode, verb)
    return st


def error_result(err: FileToolError) -> ToolResult:
    if isinstance(err, SandboxDenied):
        return sandbox_denial(err.reason, err.mode)
    return ToolResult.error(str(err))


_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def shown_name(name: str) -> str:
    """``name`` as results show it: a byte the OS gave that is not UTF-8 (which Python holds
    as a lone surrogate, ``\\udcff``, that no log can store) becomes the visible ``\\xff``.
    :func:`resolve_path` takes that form back."""
    if name.isascii():
        return name
    return _SURROGATE.sub(_escape, name)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def base_dir(policy: FencePolicy | None) -> str:
    """What relative paths are relative to: the workspace, else (no policy) the process cwd."""
    return policy.workspace_root if policy is not None else os.getcwd()


def resolve_path(policy: FencePolicy | None, path: str) -> str:
    """An absolute path for ``path``: relative paths join the workspace, absolute ones stay.

    A path written as results show names that are not UTF-8 (``\\xff``, see
    :func:`shown_name`) names that file when no file has the literal name: the literal name
    always wins, so the escape never redirects a path that exists as written. Nothing is
    normalised here: reads hand the result to the OS, which resolves ``..`` and links
    physically; what the path leads to is checked as for any other path.
    """
    joined = os.path.join(base_dir(policy), path)
    if "\\x" not in path:
        return joined
    raw = _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), joined)
    if raw != joined and not os.path.lexists(joined) and os.path.lexists(raw):
        return raw
    return joined


def display_path(policy: FencePolicy | None, abs_path: str) -> str:
    """How listings name a path: relative to the workspace when under it, else absolute
    (with :func:`shown_name`'s escapes)."""
    base = base_dir(policy)
    rel = os.path.relpath(abs_path, base)
    if rel == os.curdir:
        return "."
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return shown_name(os.path.normpath(abs_path))
    return shown_name(rel)


def os_reason(err: OSError, display: str) -> str:
    """A short reason for an ``OSError`` on ``display``."""
    if isinstance(err, FileNotFoundError):
        return f"file not found: {display}"
    if isinstance(err, PermissionError):
        return f"permission denied: {display}"
    if isinstance(err, IsADirectoryError):
        return f"{display} is a directory"
    if isinstance(err, NotADirectoryError):
        return f"not a directory: a parent of {display} is a file"
    return f"cannot access {display}: {err.strerror or err}"


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Where a write will land, decided before anything is opened.

    ``confined``: the plan must be carried out by the descriptor walk (``workspace-write``).
    ``root`` and ``parts`` are then the workspace root and the components below it; otherwise
    ``parts`` is the absolute target split at its last component.
    """

    mode: SandboxMode
    display: str
    confined: bool
    root: str
    parts: tuple[str, ...]
    rules: PathRules

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def target(self) -> str:
        """The absolute path the write lands on (as planned)."""
        return os.path.join(self.root, *self.parts)


def _stable_realpath(target: str, display: str, mode: SandboxMode) -> str:
    """``realpath``, which raises when a link it saw vanishes under it (e.g. ``EINVAL``).

    A few retries absorb a one-off change; a path that keeps changing is refused, since the
    fence cannot tell where the write would land.
    """
    for _ in range(3):
        try:
            return os.path.realpath(target)
        except OSError as err:
            problem = err.strerror or str(err)
    raise SandboxDenied(
        f"cannot write {display}: the path kept changing while it was checked ({problem})", mode
    )


def plan_write(
    policy: FencePolicy | None, path: str, *, rules: PathRules, mode: str | None = None
) -> WritePlan:
    """Check that ``path`` may be written under ``policy`` and ``rules`` and plan the write.

    ``mode`` overrides ``policy.mode`` for this one call: the hook a later sandbox escalation
    (a mode granted for one call) will use. Raises :class:`SandboxDenied` or
    :class:`FileToolError`.
    """
    if policy is None:
        raise FileToolError(NO_POLICY_REASON)
    requested = str(mode if mode is not None else policy.mode)
    try:
        effective = SandboxMode(requested)
    except ValueError:
        raise FileToolError(
            f'unknown sandbox mode "{requested}"; file writes are refused'
        ) from None
    if effective == READ_ONLY:
        raise SandboxDenied(f"cannot write {path}: the sandbox is read-only", effective)
    if not path:
        raise FileToolError("path must not be empty")
    target = resolve_path(policy, path)
    if effective == DANGER_FULL_ACCESS:
        # Plain behaviour: links are followed, like any program writing to the path would.
        real = os.path.realpath(target)
        head, tail = os.path.split(real)
        if not tail:
            raise FileToolError(f"{path} is a directory")
        return WritePlan(effective, path, False, head, (tail,), rules)

    # The policy's root is canonical by contract; canonicalising again costs little and keeps
    # a hand-built policy with a linked root from refusing every write as "outside".
    root = os.path.realpath(policy.workspace_root)
    # realpath resolves links and ``..`` as the filesystem stands now; the walk re-checks
    # every component without following links, so a change after this point is refused.
    real = _stable_realpath(target, path, effective)
    rel = os.path.relpath(real, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        shown = "" if real == target else f" (it resolves to {shown_name(real)})"
        raise SandboxDenied(
            f"cannot write {path}: it is outside the workspace {root}{shown}", effective
        )
    if rel == os.curdir:
        raise FileToolError(f"{path} is a directory")
    parts = tuple(rel.split(os.sep))
    # Compared case-insensitively: on such a filesystem ".GIT" is the same directory.
    component = control_component(parts)
    if component is not None:
        raise SandboxDenied(f"cannot write {path}: {component} {CONTROL_NAME_REASON}", effective)
    if rules.hides(real):
        raise SandboxDenied(f"cannot write {path}: {HIDDEN_REASON}", effective)
    git_dir = git_dir_on_path(real, root)
    if git_dir is not None:
        raise SandboxDenied(
            f"cannot write {path}: {_shown_dir(git_dir, root)} is a git directory {GIT_DIR_REASON}",
            effective,
        )
    would_be = git_dir_made_by(real, root)
    if would_be is not None:
        raise _git_dir_denial(path, _shown_dir(would_be, root), effective)
    if rules.controls(real, root):
        raise SandboxDenied(
            f"cannot write {path}: it is a control file (tether, git or another tool acts "
            "on it outside the sandbox); only the user may change it",
            effective,
        )
    return WritePlan(effective, path, True, root, parts, rules)


def _shown_dir(directory: str, root: str) -> str:
    return shown_name(os.path.relpath(directory, root))


def _git_dir_denial(display: str, directory: str, mode: SandboxMode) -> SandboxDenied:
    return SandboxDenied(
        f"cannot write {display}: it would make {directory} a git directory {GIT_DIR_REASON}",
        mode,
    )


def _undo_git_dir(plan: WritePlan, parent_fd: int, name: str, shown: str) -> None:
    """After making ``name`` in ``parent_fd``: take it out again when a command made the rest
    of a git directory there meanwhile (each maker checks after making its own entry)."""

    if not made_git_dir(name, parent_fd):
        return
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            os.rmdir(name, dir_fd=parent_fd)
        else:
            os.unlink(name, dir_fd=parent_fd)
    raise _git_dir_denial(plan.display, shown, plan.mode)


def _symlink_denial(plan: WritePlan, component: str) -> SandboxDenied:
    return SandboxDenied(
        f"cannot write {plan.display}: {component} is a symbolic link "
        "(the path changed while it was being written)",
        plan.mode,
    )


def _changed_denial(plan: WritePlan, component: str) -> SandboxDenied:
    return SandboxDenied(
        f"cannot write {plan.display}: {component} changed while it was being written", plan.mode
    )


def _open_dir(plan: WritePlan, parent_fd: int, name: str, shown: str) -> int:
    """Open directory ``name`` under ``parent_fd`` without following a link.

    Linux reports a link opened with ``O_DIRECTORY | O_NOFOLLOW`` as ``ENOTDIR`` (``ELOOP``
    without ``O_DIRECTORY``), so ``ENOTDIR`` is told apart by a second look: a link, or a
    directory again (it was swapped back in between), means the path is changing under us.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _symlink_denial(plan, shown) from err
        if err.errno != errno.ENOTDIR:
            raise
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise _changed_denial(plan, shown) from err
        if stat.S_ISLNK(st.st_mode):
            raise _symlink_denial(plan, shown) from err
        if stat.S_ISDIR(st.st_mode):
            raise _changed_denial(plan, shown) from err
        raise FileToolError(f"cannot write {plan.display}: {shown} is not a directory") from err


@contextlib.contextmanager
def open_parent(plan: WritePlan, *, create: bool) -> Iterator[int]:
    """A descriptor of the directory that will hold ``plan.name``, closed on exit.

    Confined plans walk from the workspace root with ``O_NOFOLLOW``, creating missing
    directories (``create``) relative to the descriptor just opened; a missing directory
    otherwise is ``file not found``.
    """
    if not plan.confined:
        if create:
            os.makedirs(plan.root, exist_ok=True)
        try:
            fd = os.open(plan.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError) as err:
            raise FileToolError(os_reason(err, plan.display)) from err
        try:
            yield fd
        finally:
            os.close(fd)
        return

    try:
        fd = os.open(plan.root, _DIR_FLAGS)
    except OSError as err:
        raise FileToolError(
            f"cannot write {plan.display}: the workspace {plan.root} cannot be opened "
            f"({err.strerror})"
        ) from err
    try:
        for depth, part in enumerate(plan.parts[:-1]):
            shown = os.path.join(*plan.parts[: depth + 1])
            try:
                next_fd = _open_dir(plan, fd, part, shown)
            except FileNotFoundError as err:
                if not create:
                    raise FileToolError(f"file not found: {plan.display}") from err
                made = True
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    made = False
                if made:
                    _undo_git_dir(plan, fd, part, os.path.dirname(shown) or ".")
                try:
                    next_fd = _open_dir(plan, fd, part, shown)
                except FileNotFoundError as again:
                    raise FileToolError(
                        f"cannot write {plan.display}: {shown} changed while it was being written"
                    ) from again
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def existing_entry(plan: WritePlan, parent_fd: int) -> os.stat_result | None:
    """The current entry at ``plan.name`` (not followed), refusing what must not be replaced."""
    try:
        st = os.stat(plan.name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise FileToolError(f"{plan.display} is a directory")
    if plan.confined and stat.S_ISLNK(st.st_mode):
        raise _symlink_denial(plan, os.path.join(*plan.parts))
    return st


def open_existing(plan: WritePlan, parent_fd: int) -> int:
    """Open the existing file ``plan.name`` for reading (never through a link when confined,
    never a hidden file in any mode: what was opened is checked, not its name)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if plan.confined:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(plan.name, flags, dir_fd=parent_fd)
    except OSError as err:
        if err.errno == errno.ELOOP and plan.confined:
            raise _symlink_denial(plan, os.path.join(*plan.parts)) from err
        if isinstance(err, FileNotFoundError | IsADirectoryError | PermissionError):
            raise FileToolError(os_reason(err, plan.display)) from err
        raise
    try:
        st = refuse_hidden(fd, plan.rules, plan.display, plan.mode, "edit")
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{plan.display} is a directory")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{plan.display} is not a regular file")
    return fd


def replace_file(plan: WritePlan, parent_fd: int, data: bytes) -> bool:
    """Atomically replace (or create) ``plan.name`` with ``data``. Returns ``True`` if created.

    An existing regular file's permission bits are kept. The rename replaces whatever link
    is at the name instead of writing through it.
    """
    existing = existing_entry(plan, parent_fd)
    keep_mode = (
        stat.S_IMODE(existing.st_mode)
        if existing is not None and stat.S_ISREG(existing.st_mode)
        else None
    )
    temp = f".tether-{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=parent_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if keep_mode is not None:
                os.fchmod(fd, keep_mode)
        finally:
            os.close(fd)
        os.rename(temp, plan.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent_fd)
        raise
    if existing is None and plan.confined:
        _undo_git_dir(plan, parent_fd, plan.name, os.path.dirname(os.path.join(*plan.parts)) or ".")
    return existing is None


__all__ = [
    "CONTROL_NAME_REASON",
    "DANGER_FULL_ACCESS",
    "GIT_DIR_REASON",
    "HIDDEN_REASON",
    "NO_POLICY_REASON",
    "PROTECTED_COMPONENT",
    "READ_ONLY",
    "WORKSPACE_WRITE",
    "FencePolicy",
    "FileToolError",
    "SandboxDenied",
    "WritePlan",
    "base_dir",
    "denial_marker",
    "display_path",
    "error_result",
    "existing_entry",
    "hidden_error",
    "open_existing",
    "open_parent",
    "opened_location",
    "os_reason",
    "plan_write",
    "refuse_hidden",
    "replace_file",
    "resolve_path",
    "sandbox_denial",
    "shown_name",
]
