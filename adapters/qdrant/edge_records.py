"""Namespace records of the embedded store: SQLite on disk, mirrored in memory.

Why SQLite: the platform PUTs a namespace before every write, so an unchanged
PUT must cost nothing (it is a dictionary lookup here: no I/O at all), while a
change must be atomic and survive `kill -9`. SQLite (standard library, WAL
journal, `synchronous=NORMAL`) gives one-transaction changes that survive a
killed process (a power cut may lose the last transactions, as qdrant-edge's
own WAL may), one file for thousands of namespaces (the per-namespace JSON
files of the old layout cost a directory each), and loads 10k records in
milliseconds at start.

Tables:
- `namespaces(name, epoch, record)`: one row per live namespace; `epoch` names
  its current incarnation, and every memory it writes carries it.
- `purges(epoch, name)`: incarnations deleted for callers whose memories may
  still be on disk. Deleting a namespace moves its row here in one
  transaction, so it vanishes at once; the memories go afterwards, and a purge
  row is only removed once they are gone. A `kill -9` anywhere in between
  leaves a row that the next purge finishes.

A row whose record cannot be parsed is not fatal: `open` skips it, keeps its
name and epoch in `damaged` (the adapter answers 503 for that namespace and
health counts it), and `bury` can still drop it with its memories.

All methods block; the adapter calls them from its worker threads.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from adapters.base import NamespaceRecord
from adapters.qdrant.layout import namespace_from_json, namespace_to_json, new_epoch

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY, epoch TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS purges (epoch TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class LiveNamespace:
    record: NamespaceRecord
    epoch: str


class RecordStore:
    """Live namespaces and pending purges; reads come from memory, writes go through SQLite."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.live: dict[str, LiveNamespace] = {}
        self.purges: dict[str, str] = {}
        # Namespaces whose stored record cannot be read: name -> epoch.
        self.damaged: dict[str, str] = {}

    def open(self) -> None:
        db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        self.live, self.damaged = {}, {}
        for name, epoch, text in db.execute("SELECT name, epoch, record FROM namespaces"):
            try:
                self.live[name] = LiveNamespace(namespace_from_json(text), epoch)
            except (ValueError, KeyError, TypeError) as error:
                self.damaged[name] = epoch
                log.error(
                    "namespace record unreadable, namespace skipped: %s (%s: %s)",
                    name,
                    type(error).__name__,
                    error,
                )
        self.purges = dict(db.execute("SELECT epoch, name FROM purges"))
        self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("record store is closed")
        return self._db

    def save(self, record: NamespaceRecord) -> str:
        """Create or replace `record`; its epoch, decided under the lock.

        A namespace that exists keeps its epoch, so two concurrent first PUTs of
        a new name agree on one incarnation and no write lands in a lost one.
        """
        with self._lock:
            found = self.live.get(record.name)
            epoch = found.epoch if found is not None else new_epoch()
            self._conn().execute(
                "INSERT OR REPLACE INTO namespaces (name, epoch, record) VALUES (?, ?, ?)",
                (record.name, epoch, namespace_to_json(record)),
            )
            self.live[record.name] = LiveNamespace(record, epoch)
            return epoch

    def bury(self, name: str) -> str | None:
        """Delete `name` for callers in one transaction; its epoch, to purge, or None."""
        with self._lock:
            found = self.live.get(name)
            epoch = found.epoch if found is not None else self.damaged.get(name)
            if epoch is None:
                return None
            db = self._conn()
            with db:  # one transaction: BEGIN ... COMMIT
                db.execute("BEGIN")
                db.execute("DELETE FROM namespaces WHERE name = ?", (name,))
                db.execute("INSERT OR REPLACE INTO purges VALUES (?, ?)", (epoch, name))
            self.live.pop(name, None)
            self.damaged.pop(name, None)
            self.purges[epoch] = name
            return epoch

    def purged(self, epoch: str) -> None:
        """The memories of `epoch` are gone from disk: forget the purge."""
        with self._lock:
            self._conn().execute("DELETE FROM purges WHERE epoch = ?", (epoch,))
            self.purges.pop(epoch, None)

    def meta(self) -> dict[str, str]:
        """Store-wide facts (the embedding fingerprint): `meta(key, value)` rows."""
        with self._lock:
            return dict(self._conn().execute("SELECT key, value FROM meta"))

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
