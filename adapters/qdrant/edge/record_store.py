"""Namespace records of the embedded store: SQLite on disk, mirrored in memory.

An unchanged PUT is a dictionary lookup; a change is one SQLite transaction (disk.py). Tables:
`namespaces(name, epoch, record)`, `epoch` naming the incarnation its memories carry;
`purges(epoch, name)`: a delete moves the row here in one transaction, and it goes only once
the memories are gone, so a crash leaves a purge to finish; `counts` (`counts.sqlite3`,
memory_counts.py): memories per incarnation, up after the engine writes and down before it
deletes, so only "fewer than counted" means loss (integrity.py); `lost_shards` (store.py);
`rebuilt`: records rebuilt without counts, `degraded` until `verify-store --accept`. An
unparsable row goes to `damaged` (503 for it); a file that is not a database is moved aside
and the records are rebuilt from the memories' `ns` and `epoch`. All methods block: call them
from worker threads. Repairs: docs/repair.md.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from adapters.disk import connect
from adapters.disk import move_aside
from adapters.qdrant.edge.memory_counts import CountStore
from adapters.qdrant.layout import namespace_from_json
from adapters.qdrant.layout import namespace_to_json
from adapters.qdrant.layout import new_epoch
from adapters.values import NamespaceRecord

log = logging.getLogger(__name__)

COUNTS_FILE = "counts.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY, epoch TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS purges (epoch TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counts (
    epoch TEXT PRIMARY KEY, memories INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lost_shards (shard INTEGER PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rebuilt (name TEXT PRIMARY KEY, epoch TEXT NOT NULL) WITHOUT ROWID;
"""


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
        # Namespaces whose stored record cannot be read: name -> epoch.
        self.damaged: dict[str, str] = {}
        self.count_store = CountStore(path.with_name(COUNTS_FILE), synced=synced)
        # Where an unreadable records file was moved at open, or None.
        self.moved_aside: Path | None = None
        # The file was missing, empty or moved aside at open: every record was lost.
        self.started_empty = False
        self.lost_shards: set[int] = set()
        self.rebuilt: dict[str, str] = {}  # name -> epoch

    def open(self) -> None:
        """Load every record; a file that is not a database is moved aside, not fatal."""
        self.started_empty = not self._path.exists() or self._path.stat().st_size == 0
        try:
            db = connect(self._path, _SCHEMA, "namespaces", synced=self._synced)
        except sqlite3.DatabaseError as error:
            self.moved_aside = move_aside(self._path)
            log.error(
                "namespace records unreadable (%s): moved aside to %s; rebuilding them from"
                " the memory store",
                error,
                self.moved_aside.name,
            )
            db = connect(self._path, _SCHEMA, "namespaces", synced=self._synced)
            self.started_empty = True
        self._load(db)
        self._db = db

    def _load(self, db: sqlite3.Connection) -> None:
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
        earlier = "SELECT c.epoch, c.memories, n.name FROM counts c JOIN namespaces n USING (epoch)"
        self.count_store.open({epoch: (n, name) for epoch, n, name in db.execute(earlier)})
        self.lost_shards = {int(i) for (i,) in db.execute("SELECT shard FROM lost_shards")}
        self.rebuilt = dict(db.execute("SELECT name, epoch FROM rebuilt"))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self.count_store.close()

    @property
    def counts(self) -> dict[str, int]:
        """Memories counted per live incarnation: epoch -> count (memory_counts.py)."""
        return self.count_store.counts

    @property
    def counted_names(self) -> dict[str, str]:
        """The namespace of each counted incarnation: epoch -> name (memory_counts.py)."""
        return self.count_store.names

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
            self._write(record, epoch, None if found is not None else 0)
            return epoch

    def restore(self, record: NamespaceRecord, epoch: str, memories: int) -> None:
        """Bring back a record lost from this file, for an incarnation found in the engine."""
        with self._lock:
            if epoch in self.counts:  # the counts survived: still compared with the engine
                self._write(record, epoch, None)
            else:
                self._write(record, epoch, memories, rebuilt=True)

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

    def count(self, changes: Mapping[str, int]) -> None:
        """Add to the memory counts of live incarnations (others are ignored), for
        memories the engine has just written. Under the `sync` durability the change
        reaches the disk with the next group commit (log_sync.py), after the engine's
        log: a count is never on disk ahead of what it counts."""
        with self._lock:
            self.count_store.add(changes, defer=self._synced)

    def count_now(self, changes: Mapping[str, int]) -> None:
        """`count`, written at once and synced under `sync`: for a count going down
        before the engine deletes."""
        with self._lock:
            self.count_store.add(changes, defer=False)

    def take_held_counts(self) -> dict[str, int]:
        """Count changes held for the group commit since the last call (log_sync.py)."""
        with self._lock:
            return self.count_store.take_held()

    def hold_counts(self, changes: Mapping[str, int]) -> None:
        """Hold taken count changes again (their sync failed)."""
        with self._lock:
            self.count_store.hold(changes)

    def write_counts(self, changes: Mapping[str, int]) -> None:
        """Write count changes taken by `take_held_counts` (after the engine's log is synced)."""
        with self._lock:
            if changes and self._db is not None:  # closed: closed under the group commit
                self.count_store.write(changes, synced=False)  # behind the engine at worst

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
            self.live.pop(name, None)
            self.rebuilt.pop(name, None)
            self.count_store.drop(epoch)
            self.damaged.pop(name, None)
            self.purges[epoch] = name
            return epoch

    def purged(self, epoch: str) -> None:
        """The memories of `epoch` are gone from disk: forget the purge."""
        with self._lock:
            self._conn().execute("DELETE FROM purges WHERE epoch = ?", (epoch,))
            self.purges.pop(epoch, None)

    def set_lost_shards(self, shards: set[int]) -> None:
        """Remember which shards' namespace records are unknown (store.py, `LostRecords`)."""
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

    def sizes(self) -> tuple[int, int]:
        """Live namespaces, and the memories their counts say they hold."""
        with self._lock:
            counts = self.count_store.counts
            return len(self.live), sum(counts.get(n.epoch, 0) for n in self.live.values())

    def meta(self) -> dict[str, str]:
        """Store-wide facts (the embedding fingerprint): `meta(key, value)` rows."""
        with self._lock:
            return dict(self._conn().execute("SELECT key, value FROM meta"))

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn().execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
