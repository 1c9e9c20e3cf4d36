"""The answer box: where a surface waiting for an approval's answer says so, and the index an
answering process finds it by.

The box sits beside the store (``PATH.db.answers/``, ``DIR/.answers/``). Each waiting approval
has one wait marker there, ``<id>.wait``, naming the waiting process and its approval socket
(:mod:`tether.session._answer_channel`); the markers are the index of what can be answered
now, so ``tether approvals answer`` finds its approval by a file name (or a unique prefix of
one, among the markers only) and reads no session log. Answers travel only through the socket,
whose peer the kernel identifies; the box is a directory a confined command might be able to
write, so nothing in it is ever taken as an answer (the waiting side,
:mod:`tether.session._answer_wait`, reports such files). When an answer is taken, the waiter
records it in ``answered/<id>`` so a later answerer is told it came too late, and by whom;
that record is kept out of the box's top level so the index stays as small as what waits.

Only the standard library and the protocol module are imported here: this is the answering
command's whole path to the waiting run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
from pathlib import Path
from typing import Final, NamedTuple

from tether.errors import TetherError
from tether.session._answer_channel import (
    ANSWERS,
    AnswerMessage,
    Delivered,
    already_answered,
    answer_outcome,
    send_answer,
)
from tether.session.persistence._factory import store_location

FILE_READ_LIMIT: Final = 4096
MARKER: Final = ".wait"
ANSWERED_DIR: Final = "answered"
"""The subdirectory of answered records, ``answered/<id>``."""


class ApprovalNotPendingError(TetherError):
    code = "APPROVAL_NOT_PENDING"


class ApprovalStaleError(TetherError):
    """Pending in the log, but no live process waits for an answer from the store."""

    code = "APPROVAL_STALE"


class ApprovalOnOtherHostError(TetherError):
    """The waiting process runs on another machine: its socket is not reachable from here."""

    code = "APPROVAL_ON_OTHER_HOST"


class InvalidAnswerError(TetherError):
    code = "INVALID_ANSWER"


class AnswerBoxError(TetherError):
    """The answer box cannot hold this wait's marker."""

    code = "ANSWER_BOX_UNUSABLE"


class BoxedAnswer(NamedTuple):
    """An answer as the waiter recorded it (``answered/<id>``), and as it returns it."""

    outcome: str
    by: str
    at: int


class WaitMarker(NamedTuple):
    pid: int
    host: str
    socket: str
    """The abstract socket's name (without the leading NUL)."""


FileIdentity = tuple[int, int, int]
"""Device, inode and change time: a file removed and created again may get the same inode
number, never the same change time (which no process can set)."""


def file_identity(st: os.stat_result) -> FileIdentity:
    return st.st_dev, st.st_ino, st.st_ctime_ns


def is_approval_id(name: str) -> bool:
    """Whether ``name`` can name an approval in the box (a file name, not hidden)."""
    return bool(name) and "/" not in name and "\0" not in name and not name.startswith(".")


class AnswerBox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_store(cls, url: str) -> AnswerBox:
        scheme, path = store_location(url)
        return cls(
            path / ".answers" if scheme == "jsonl" else path.with_name(path.name + ".answers")
        )

    def path(self, approval_id: str, suffix: str = MARKER) -> Path:
        if not is_approval_id(approval_id):
            raise ApprovalNotPendingError(f"{approval_id!r} is not an approval id")
        return self.directory / f"{approval_id}{suffix}"

    def _answered_dir(self, *, create: bool = False) -> int | None:
        """A descriptor of the box's ``answered`` directory (``None`` when it is missing or
        not a directory of its own: a link planted there is never followed, so no record is
        written or read elsewhere). The caller closes it."""
        path = self.directory / ANSWERED_DIR
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    path.mkdir(mode=0o700)
            return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None

    def prepare(self) -> None:
        """Create the box directory (0700) if it is missing. The harness does this before any
        command runs, so the sandbox hides a directory that already exists."""
        try:
            with contextlib.suppress(FileExistsError):
                self.directory.mkdir(mode=0o700, parents=True)
            if self.directory.is_symlink() or not self.directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
        except OSError as err:
            raise AnswerBoxError(
                f"cannot use the answer box {self.directory} ({err.strerror or err}): move "
                "or remove what is there, or use another store"
            ) from err

    # -- the waiting side's records ----------------------------------------------------------
    def write_marker(self, approval_id: str, marker: WaitMarker) -> FileIdentity:
        """Create ``<id>.wait`` afresh (never through a planted file or link); its identity."""
        path = self.path(approval_id)
        data = json.dumps({"pid": marker.pid, "host": marker.host, "socket": marker.socket})
        self.prepare()
        for _ in range(3):
            try:
                path.unlink(missing_ok=True)  # planted before the wait began: already reported
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                continue
            except OSError as err:
                raise _unusable(path, err.strerror or str(err)) from err
            with os.fdopen(fd, "w") as handle:
                handle.write(data)
                handle.flush()  # the identity includes the change time of the written file
                st = os.fstat(handle.fileno())
            return file_identity(st)
        raise _unusable(path, "something keeps replacing it")

    def remove_marker(self, approval_id: str, ours: FileIdentity) -> None:
        path = self.path(approval_id)
        try:
            st = path.lstat()
            if file_identity(st) == ours:
                path.unlink()
        except OSError:
            pass  # gone already; a replaced marker was reported and is left as evidence

    def leave_answered(self, approval_id: str, answer: BoxedAnswer) -> None:
        """Record the answer taken, for answerers that come later (best effort: the record
        only tells them why they came too late)."""
        self.path(approval_id)  # the same check of the id
        directory = self._answered_dir(create=True)
        if directory is None:
            return
        try:
            fd = os.open(
                approval_id,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=directory,
            )
        except OSError:
            return
        finally:
            os.close(directory)
        with os.fdopen(fd, "w") as handle:
            json.dump({"outcome": answer.outcome, "by": answer.by, "at": answer.at}, handle)

    # -- the index ---------------------------------------------------------------------------
    def waiting_ids(self) -> list[str]:
        """The ids that have a wait marker: what can be answered now (the box's top level
        holds only markers, and whatever was planted there)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return [
            name[: -len(MARKER)]
            for name in names
            if name.endswith(MARKER) and is_approval_id(name[: -len(MARKER)])
        ]

    def answered_ids(self) -> list[str]:
        directory = self._answered_dir()
        if directory is None:
            return []
        try:
            return [n for n in os.listdir(directory) if is_approval_id(n)]
        except OSError:
            return []
        finally:
            os.close(directory)

    def marker(self, approval_id: str) -> WaitMarker | None:
        raw = read_small_json(self.path(approval_id))
        if not isinstance(raw, dict):
            return None
        pid, host, name = raw.get("pid"), raw.get("host"), raw.get("socket")
        if not (isinstance(pid, int) and isinstance(host, str) and isinstance(name, str)):
            return None
        return WaitMarker(pid, host, name)

    def is_waited(self, approval_id: str) -> bool:
        """Whether a live process waits for this answer (a process on another host is
        assumed alive: its liveness cannot be checked from here)."""
        marker = self.marker(approval_id)
        if marker is None:
            return False
        if marker.host != host_name():
            return True
        try:
            os.kill(marker.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def answered(self, approval_id: str) -> BoxedAnswer | None:
        """The answer recorded for ``approval_id``, when one was taken here."""
        self.path(approval_id)  # the same check of the id
        directory = self._answered_dir()
        if directory is None:
            return None
        try:
            raw = read_small_json(approval_id, dir_fd=directory)
        finally:
            os.close(directory)
        if not isinstance(raw, dict):
            return None
        outcome, by, at = answer_outcome(raw.get("outcome")), raw.get("by"), raw.get("at")
        if outcome is None or not isinstance(by, str):
            return None
        return BoxedAnswer(outcome, by, at if isinstance(at, int) else 0)

    def was_answered(self, approval_id: str) -> bool:
        self.path(approval_id)  # the same check of the id
        directory = self._answered_dir()
        if directory is None:
            return False
        try:
            os.stat(approval_id, dir_fd=directory, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(directory)
        return True

    # -- the answering side ------------------------------------------------------------------
    def deliver(self, approval_id: str, outcome: str, surface: str) -> Delivered:
        """Hand an answer to the process waiting for it: what it recorded."""
        if answer_outcome(outcome) is None:
            raise InvalidAnswerError(f"an answer is one of {', '.join(ANSWERS)}")
        marker = self.marker(approval_id)
        if marker is None:
            raise self.too_late(approval_id) or ApprovalStaleError(stale_text(approval_id))
        if marker.host != host_name():
            raise ApprovalOnOtherHostError(
                f"approval {approval_id} waits in process {marker.pid} on host {marker.host}: "
                "answer it there (`tether approvals answer` reaches only this machine's runs)"
            )
        try:
            return send_answer(
                marker.socket, marker.pid, AnswerMessage(approval_id, outcome, surface)
            )
        except TetherError as err:
            # The socket went away because another surface answered first: say so.
            late = self.too_late(approval_id)
            if late is not None and err.code == "APPROVAL_NOT_DELIVERED":
                raise late from err
            raise

    def too_late(self, approval_id: str) -> TetherError | None:
        """:class:`ApprovalAlreadyAnsweredError` saying what the first answer was, when one
        was taken here."""
        if not self.was_answered(approval_id):
            return None
        first = self.answered(approval_id)
        return already_answered(
            approval_id, first.outcome if first else None, first.by if first else None
        )


def host_name() -> str:
    return socket.gethostname()


def read_small_json(path: Path | str, *, dir_fd: int | None = None) -> object:
    """A small regular file's JSON, or ``None``: never follows a link, never blocks on a FIFO,
    never reads more than :data:`FILE_READ_LIMIT` bytes. ``dir_fd``: ``path`` is relative to
    that directory."""
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, FILE_READ_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > FILE_READ_LIMIT:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def stale_text(approval_id: str) -> str:
    return (
        f"approval {approval_id} is pending in the log, but no running process waits for an "
        "answer from the store (it was answered elsewhere, or its process is gone; a repair "
        "or resume closes it as unavailable)"
    )


def _unusable(marker: Path, problem: str) -> AnswerBoxError:
    return AnswerBoxError(
        f"cannot create the wait marker {marker} ({problem}): nobody could answer, so the ask "
        "is unavailable; keep the store where the agent's commands cannot write"
    )


__all__ = [
    "ANSWERED_DIR",
    "AnswerBox",
    "AnswerBoxError",
    "ApprovalNotPendingError",
    "ApprovalOnOtherHostError",
    "ApprovalStaleError",
    "BoxedAnswer",
    "FileIdentity",
    "InvalidAnswerError",
    "WaitMarker",
    "file_identity",
    "host_name",
    "is_approval_id",
    "read_small_json",
    "stale_text",
]
