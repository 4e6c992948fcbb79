"""The embedded store's namespace records in SQLite, mirrored in memory, with their counts.

`RecordStore` (`namespaces.sqlite3`): records, pending purges and what repairs need. Methods
block: call them from worker threads. Repairs: docs/repair.md.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from adapters.disk import connect_or_move_aside
from adapters.engine.count_store import CountStore
from adapters.qdrant.layout import namespace_from_json
from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.layout import new_epoch
from adapters.store_files import COUNTS_FILE
from adapters.store_files import RECORDS_SCHEMA
from adapters.values import NamespaceRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LiveNamespace:
    record: NamespaceRecord
    epoch: str


class RecordStore:
    """Live namespaces and pending purges; reads come from memory, writes go through SQLite."""

    def __init__(self, path: Path, *, synced: bool = True) -> None:
        self._path = path
        self._synced = synced
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.live: dict[str, LiveNamespace] = {}
        self.purges: dict[str, str] = {}
        self.damaged: dict[str, str] = {}  # records that cannot be read: name -> epoch
        self.count_store = CountStore(path.with_name(COUNTS_FILE), synced=synced)
        self.started_empty = False  # missing, empty or moved aside at open: all records lost
        self.lost_shards: set[int] = set()
        self.rebuilt: dict[str, str] = {}  # name -> epoch

    def open(self) -> None:
        """Load every record; a file that is not a database is moved aside, not fatal."""
        self.started_empty = not self._path.exists() or self._path.stat().st_size == 0
        db, aside = connect_or_move_aside(
            self._path, RECORDS_SCHEMA, "namespaces", synced=self._synced, what="namespace records"
        )
        self.started_empty |= aside is not None
        for name, epoch, text in db.execute("SELECT name, epoch, record FROM namespaces"):
            try:
                self.live[name] = LiveNamespace(namespace_from_json(text), epoch)
            except (ValueError, KeyError, TypeError) as error:
                self.damaged[name] = epoch
                log.error("namespace record unreadable, namespace skipped: %s (%r)", name, error)
        self.purges = dict(db.execute("SELECT epoch, name FROM purges"))
        earlier = "SELECT c.epoch, c.memories, n.name FROM counts c JOIN namespaces n USING (epoch)"
        self.count_store.open({epoch: (n, name) for epoch, n, name in db.execute(earlier)})
        self.lost_shards = {int(i) for (i,) in db.execute("SELECT shard FROM lost_shards")}
        self.rebuilt = dict(db.execute("SELECT name, epoch FROM rebuilt"))
        self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self.count_store.close()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("record store is closed")
        return self._db

    def save(self, record: NamespaceRecord) -> str:
        """Create or replace `record`; its epoch. One that exists keeps its epoch, so two
        concurrent first PUTs of a new name agree on one incarnation."""
        with self._lock:
            found = self.live.get(record.name)
            epoch = found.epoch if found is not None else new_epoch()
            self._write(record, epoch, None if found is not None else 0)
            return epoch

    def restore(self, record: NamespaceRecord, epoch: str, memories: int) -> None:
        """Bring back a record lost from this file, for an incarnation found in the engine."""
        with self._lock:
            counted = epoch in self.count_store.counts  # survived: compared with the engine
            self._write(record, epoch, None if counted else memories, rebuilt=not counted)

    def _write(
        self, record: NamespaceRecord, epoch: str, memories: int | None, *, rebuilt: bool = False
    ) -> None:
        db = self._conn()
        with db:
            db.execute("BEGIN")
            db.execute(
                "INSERT OR REPLACE INTO namespaces (name, epoch, record) VALUES (?, ?, ?)",
                (record.name, epoch, namespace_to_json(record)),
            )
            if rebuilt:
                db.execute("INSERT OR REPLACE INTO rebuilt VALUES (?, ?)", (record.name, epoch))
        if rebuilt:
            self.rebuilt[record.name] = epoch
        self.live[record.name] = LiveNamespace(record, epoch)
        if memories is not None:  # after the record: a crash between is re-counted at start
            self.count_store.set({epoch: memories}, {epoch: record.name})

    def set_counts(self, counts: Mapping[str, int]) -> None:
        """Set the counts of these incarnations to what the engine holds (a new baseline)."""
        with self._lock:
            names = {live.epoch: name for name, live in self.live.items()}
            self.count_store.set(counts, names)

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
                db.execute("DELETE FROM counts WHERE epoch = ?", (epoch,))  # from before
                db.execute("DELETE FROM rebuilt WHERE name = ?", (name,))
                db.execute("INSERT OR REPLACE INTO purges VALUES (?, ?)", (epoch, name))
            for held in (self.live, self.rebuilt, self.damaged):
                held.pop(name, None)
            self.count_store.drop(epoch)
            self.purges[epoch] = name
            return epoch

    def purged(self, epoch: str) -> None:
        """The memories of `epoch` are gone from disk: forget the purge."""
        with self._lock:
            self._conn().execute("DELETE FROM purges WHERE epoch = ?", (epoch,))
            self.purges.pop(epoch, None)

    def set_lost_shards(self, shards: set[int]) -> None:
        """Remember which shards' namespace records are unknown (edge_namespaces.py)."""
        if shards == self.lost_shards:
            return
        with self._lock:
            db = self._conn()
            with db:
                db.execute("BEGIN")
                db.execute("DELETE FROM lost_shards")
                db.executemany("INSERT INTO lost_shards VALUES (?)", [(i,) for i in shards])
            self.lost_shards = set(shards)

    def accept_rebuilt(self) -> list[str]:
        """An operator vouches for the rebuilt records (verify-store --accept)."""
        with self._lock:
            self._conn().execute("DELETE FROM rebuilt")
            accepted, self.rebuilt = sorted(self.rebuilt), {}
            return accepted

    def meta(self) -> dict[str, str]:
        """Store-wide facts (the embedding fingerprint): `meta(key, value)` rows."""
        with self._lock:
            return dict(self._conn().execute("SELECT key, value FROM meta"))

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
