"""The embedded store's memory counts in SQLite, mirrored in memory: `CountStore`.

`counts.sqlite3`, apart from the namespace records (record_store.py) so that either survives the
other's loss; integrity.py checks them. Methods block: call them from worker threads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path

from adapters.disk import connect_or_move_aside
from adapters.store_files import COUNTS_SCHEMA


class CountStore:
    """`counts` (epoch -> memories) in memory, every change written through (thread-safe)."""

    def __init__(self, path: Path, *, synced: bool) -> None:
        self._path = path
        self._synced = synced
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = None
        self.counts: dict[str, int] = {}
        self.names: dict[str, str] = {}  # epoch -> namespace name
        self._held: Counter[str] = Counter()  # counted, not yet written (for the group commit)

    def open(self, earlier: Mapping[str, tuple[int, str]]) -> None:
        """Load the counts; a new file starts from `earlier`: epoch -> (memories, name)."""
        new = not self._path.exists() or self._path.stat().st_size == 0
        db, aside = connect_or_move_aside(  # synced per commit
            self._path, COUNTS_SCHEMA, "counts", synced=False, what="memory counts"
        )
        self._db, new = db, new and aside is None
        for epoch, memories, name in db.execute("SELECT epoch, memories, name FROM counts"):
            self.counts[epoch], self.names[epoch] = memories, name
        if new and earlier and not self.counts:
            counts = {epoch: n for epoch, (n, _) in earlier.items()}
            self.set(counts, {epoch: name for epoch, (_, name) in earlier.items()})

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
            if db is not None:
                db.close()

    def _commit(self, statement: str, rows: Sequence[Sequence[object]], *, synced: bool) -> None:
        """`statement` for each of `rows` in one transaction, synced at commit if `synced`."""
        db = self._db
        if db is None:
            raise RuntimeError("count store is closed")
        db.execute(f"PRAGMA synchronous={'FULL' if synced else 'NORMAL'}")
        with db:
            db.execute("BEGIN")
            db.executemany(statement, rows)

    def set(self, counts: Mapping[str, int], names: Mapping[str, str]) -> None:
        """Set these counts (epoch -> memories); `names` names each epoch's namespace."""
        with self._lock:
            rows = [(e, n, names.get(e, self.names.get(e, ""))) for e, n in counts.items()]
            statement = "INSERT OR REPLACE INTO counts VALUES (?, ?, ?)"
            self._commit(statement, rows, synced=self._synced)
            for epoch in counts:
                self._held.pop(epoch, None)  # counted in the value just set
            self.counts.update(counts)
            self.names.update((epoch, name) for epoch, _, name in rows)

    def add(self, changes: Mapping[str, int], *, now: bool = False) -> None:
        """Add to the counts of incarnations that have one. Under `sync`, held for the group
        commit after the engine's log (a count up, for memories just written), unless `now`:
        written and synced at once (a count down, before the engine deletes)."""
        with self._lock:
            changes = {epoch: n for epoch, n in changes.items() if n and epoch in self.counts}
            if not changes:
                return
            for epoch, n in changes.items():
                self.counts[epoch] += n
            if self._synced and not now:
                self._held.update(changes)
            else:
                self.write(changes, synced=self._synced)

    def take_held(self) -> dict[str, int]:
        """The changes held back since the last call, to be written (`write`)."""
        with self._lock:
            held, self._held = dict(self._held), Counter()
            return {epoch: n for epoch, n in held.items() if n}

    def hold(self, changes: Mapping[str, int]) -> None:
        """Hold changes taken by `take_held` again (their sync failed), if still counted."""
        with self._lock:
            self._held.update({e: n for e, n in changes.items() if e in self.counts})

    def write(self, changes: Mapping[str, int], *, synced: bool = False) -> None:
        """Add `changes` to the counts on disk in one transaction (none once closed)."""
        with self._lock:
            if changes and self._db is not None:
                statement = "UPDATE counts SET memories = memories + ? WHERE epoch = ?"
                self._commit(statement, [(n, e) for e, n in changes.items()], synced=synced)

    def drop(self, epoch: str) -> None:
        with self._lock:
            self._commit("DELETE FROM counts WHERE epoch = ?", [(epoch,)], synced=True)
            for found in (self.counts, self.names, self._held):
                found.pop(epoch, None)
