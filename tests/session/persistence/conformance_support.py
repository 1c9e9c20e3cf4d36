"""The bundled backends as conformance subjects, with their damage hooks (no pytest here: the
kit's own tests also run them in a process where pytest cannot be imported)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from tether.session.persistence import (
    JsonlPersistence,
    MemoryPersistence,
    Persistence,
    SqlitePersistence,
)
from tether.testing import OPTIONAL, BackendUnderTest, Capability


def _files_digest(root: Path, skip_suffixes: tuple[str, ...] = ()) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(skip_suffixes)
    }


class SqliteBackend(BackendUnderTest):
    capabilities = OPTIONAL

    def open(self, root: Path) -> Persistence:
        return SqlitePersistence(root / "store.db")

    def _db(self, persistence: Persistence) -> sqlite3.Connection:
        assert isinstance(persistence, SqlitePersistence)
        return sqlite3.connect(persistence.path, isolation_level=None)

    def corrupt_tail(self, persistence: Persistence, session_id: str) -> None:
        # A transaction cannot tear, but a damaged final row follows the same rule as a torn
        # JSONL line: it is dropped.
        with self._db(persistence) as db:
            (last,) = db.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO events (session_id, seq, type, time, data, ignorable, surface_op) "
                "VALUES (?, ?, 'turn/end', 0, '{\"turn\": 1, \"rea', 0, NULL)",
                (session_id, last + 1),
            )

    def corrupt_record(self, persistence: Persistence, session_id: str, seq: int) -> None:
        with self._db(persistence) as db:
            db.execute(
                "UPDATE events SET data = '{\"broken' WHERE session_id = ? AND seq = ?",
                (session_id, seq),
            )

    def set_format_version(self, persistence: Persistence, session_id: str, version: int) -> None:
        with self._db(persistence) as db:
            db.execute("UPDATE sessions SET version = ? WHERE id = ?", (version, session_id))

    def storage_snapshot(self, persistence: Persistence) -> object:
        assert isinstance(persistence, SqlitePersistence)
        # The -shm file is SQLite's shared-memory index (read marks change on every read);
        # the database and its write-ahead log hold every stored byte.
        return _files_digest(Path(persistence.path).parent, skip_suffixes=("-shm",))


class JsonlBackend(BackendUnderTest):
    capabilities = OPTIONAL

    def open(self, root: Path) -> Persistence:
        return JsonlPersistence(root / "sessions")

    def _log(self, persistence: Persistence, session_id: str) -> Path:
        assert isinstance(persistence, JsonlPersistence)
        return persistence.log_path(session_id)

    def corrupt_tail(self, persistence: Persistence, session_id: str) -> None:
        with open(self._log(persistence, session_id), "ab") as file:
            file.write(b'{"type":"turn/end","seq":99,"time":1,"da')

    def corrupt_record(self, persistence: Persistence, session_id: str, seq: int) -> None:
        path = self._log(persistence, session_id)
        lines = path.read_bytes().split(b"\n")
        lines[seq + 1] = b'{"type":"tool/call","seq":' + str(seq).encode() + b',"dat'
        path.write_bytes(b"\n".join(lines))

    def set_format_version(self, persistence: Persistence, session_id: str, version: int) -> None:
        path = self._log(persistence, session_id)
        first, rest = path.read_bytes().split(b"\n", 1)
        first = first.replace(b'"version":0,', b'"version":' + str(version).encode() + b",")
        path.write_bytes(first + b"\n" + rest)

    def storage_snapshot(self, persistence: Persistence) -> object:
        assert isinstance(persistence, JsonlPersistence)
        return _files_digest(persistence.root)


class MemoryBackend(BackendUnderTest):
    # Its claims, honestly: every id without headers, and nothing else. Its storage lives and
    # dies with one handle (no reopen), and it holds only the immutable events appended, so
    # no record can be torn, damaged or of another format (nothing to corrupt, nothing to
    # snapshot).
    capabilities = frozenset({Capability.LIST_IDS})

    def open(self, root: Path) -> Persistence:
        return MemoryPersistence()


BUNDLED: tuple[BackendUnderTest, ...] = (SqliteBackend(), JsonlBackend(), MemoryBackend())
