"""How many memories each namespace incarnation holds, in a file of its own.

Why a file apart from the namespace records (`namespaces.sqlite3`): the counts
are how a loss in the engine's files is noticed (integrity.py). Kept in the
records' file, they went with it: a truncated records file plus a cut id
tracker or a WAL garbled after `kill -9` left every namespace rebuilt with the
memories found, a partial list looking whole. In `counts.sqlite3` they survive
the loss of the records (and the other way round), so a rebuilt namespace is
still compared with what was written; each count names its namespace, so one
whose memories all went with its record is still known (integrity.py).

Same durability as the records (SQLite, WAL journal, `synchronous=NORMAL`); a
store from before this file takes its counts from the records' `counts` table
once. A file that is not a database is moved aside and counting starts again
from what the engine holds (as for a store from before counts). The caller
(`RecordStore`) serialises every call.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from adapters.qdrant.edge.sqlite_file import connect, move_aside

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS counts (
    epoch TEXT PRIMARY KEY, memories INTEGER NOT NULL, name TEXT NOT NULL)"""


class CountStore:
    """`counts` (epoch -> memories) in memory, every change written through."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self.counts: dict[str, int] = {}
        self.names: dict[str, str] = {}  # epoch -> namespace name

    def open(self, earlier: Mapping[str, tuple[int, str]]) -> None:
        """Load the counts; a new file starts from `earlier` (the records' old table:
        epoch -> (memories, name))."""
        new = not self._path.exists() or self._path.stat().st_size == 0
        try:
            db = connect(self._path, _SCHEMA, "counts")
        except sqlite3.DatabaseError as error:
            aside = move_aside(self._path)
            log.error("memory counts unreadable (%s): moved aside to %s", error, aside.name)
            # lost, not new: nothing is copied back
            db, new = connect(self._path, _SCHEMA, "counts"), False
        self._db = db
        for epoch, memories, name in db.execute("SELECT epoch, memories, name FROM counts"):
            self.counts[epoch], self.names[epoch] = memories, name
        if new and earlier and not self.counts:
            counts = {epoch: n for epoch, (n, _) in earlier.items()}
            self.set(counts, {epoch: name for epoch, (_, name) in earlier.items()})

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("count store is closed")
        return self._db

    def set(self, counts: Mapping[str, int], names: Mapping[str, str]) -> None:
        """Set these counts (epoch -> memories); `names` names each epoch's namespace."""
        rows = [(e, n, names.get(e, self.names.get(e, ""))) for e, n in counts.items()]
        self._conn().executemany("INSERT OR REPLACE INTO counts VALUES (?, ?, ?)", rows)
        self.counts.update(counts)
        self.names.update((epoch, name) for epoch, _, name in rows)

    def add(self, changes: Mapping[str, int]) -> None:
        """Add to the counts of incarnations that have one (others are ignored)."""
        changes = {epoch: n for epoch, n in changes.items() if n and epoch in self.counts}
        if not changes:
            return
        self._conn().executemany(
            "UPDATE counts SET memories = memories + ? WHERE epoch = ?",
            [(n, epoch) for epoch, n in changes.items()],
        )
        for epoch, n in changes.items():
            self.counts[epoch] += n

    def drop(self, epoch: str) -> None:
        self._conn().execute("DELETE FROM counts WHERE epoch = ?", (epoch,))
        self.counts.pop(epoch, None)
        self.names.pop(epoch, None)
