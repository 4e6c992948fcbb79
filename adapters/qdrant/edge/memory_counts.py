"""How many memories each namespace incarnation holds, in a file of its own.

The counts are how a loss in the engine's files is noticed (integrity.py). In `counts.sqlite3`,
apart from the records (`namespaces.sqlite3`), they survive the loss of the records and the other
way round, and each names its namespace, so even a namespace lost with its record is compared
with what was written. A count must never be on disk ahead of the memories it counts (after a
power cut that reads as a loss): under `sync` durability a count going up from the event loop is
held back (`defer`) and written by the group commit (log_sync.py) once the engine's log is synced,
while a count going down and counts set are synced at commit; drops are synced whatever the
durability (a dropped count that came back would bring back its deleted namespace). Changes are
written as differences, so held and immediate ones add up in any order. A file that is not a
database is moved aside and counting restarts from the engine. `RecordStore` serialises calls.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path

from adapters.disk import connect
from adapters.disk import move_aside

log = logging.getLogger(__name__)

_SCHEMA = """CREATE TABLE IF NOT EXISTS counts (
    epoch TEXT PRIMARY KEY, memories INTEGER NOT NULL, name TEXT NOT NULL)"""


class CountStore:
    """`counts` (epoch -> memories) in memory, every change written through."""

    def __init__(self, path: Path, *, synced: bool) -> None:
        self._path = path
        self._synced = synced
        self._db: sqlite3.Connection | None = None
        self.counts: dict[str, int] = {}
        self.names: dict[str, str] = {}  # epoch -> namespace name
        self._held: Counter[str] = Counter()  # changes counted, not yet written (`defer`)

    def open(self, earlier: Mapping[str, tuple[int, str]]) -> None:
        """Load the counts; a new file starts from `earlier` (the records' old table:
        epoch -> (memories, name))."""
        new = not self._path.exists() or self._path.stat().st_size == 0
        try:
            db = connect(self._path, _SCHEMA, "counts", synced=False)  # synced per commit
        except sqlite3.DatabaseError as error:
            aside = move_aside(self._path)
            log.error("memory counts unreadable (%s): moved aside to %s", error, aside.name)
            # lost, not new: nothing is copied back
            db, new = connect(self._path, _SCHEMA, "counts", synced=False), False
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

    def _commit(self, statement: str, rows: Sequence[Sequence[object]], *, synced: bool) -> None:
        """`statement` for each of `rows` in one transaction, synced at commit if `synced`."""
        db = self._conn()
        if synced:
            db.execute("PRAGMA synchronous=FULL")
        try:
            with db:
                db.execute("BEGIN")
                db.executemany(statement, rows)
        finally:
            if synced:
                db.execute("PRAGMA synchronous=NORMAL")

    def set(self, counts: Mapping[str, int], names: Mapping[str, str]) -> None:
        """Set these counts (epoch -> memories); `names` names each epoch's namespace."""
        rows = [(e, n, names.get(e, self.names.get(e, ""))) for e, n in counts.items()]
        self._commit("INSERT OR REPLACE INTO counts VALUES (?, ?, ?)", rows, synced=self._synced)
        for epoch in counts:
            self._held.pop(epoch, None)  # counted in the value just set
        self.counts.update(counts)
        self.names.update((epoch, name) for epoch, _, name in rows)

    def add(self, changes: Mapping[str, int], *, defer: bool) -> None:
        """Add to the counts of incarnations that have one (others are ignored); written
        now (synced under `sync`), or held for the group commit when `defer`."""
        changes = {epoch: n for epoch, n in changes.items() if n and epoch in self.counts}
        if not changes:
            return
        for epoch, n in changes.items():
            self.counts[epoch] += n
        if defer:
            self._held.update(changes)
        else:
            self.write(changes, synced=self._synced)

    def take_held(self) -> dict[str, int]:
        """The changes held back since the last call, to be written (`write`)."""
        held, self._held = dict(self._held), Counter()
        return {epoch: n for epoch, n in held.items() if n}

    def hold(self, changes: Mapping[str, int]) -> None:
        """Hold changes taken by `take_held` again, for incarnations still counted."""
        self._held.update({epoch: n for epoch, n in changes.items() if epoch in self.counts})

    def write(self, changes: Mapping[str, int], *, synced: bool) -> None:
        """Add `changes` to the counts on disk, in one transaction."""
        if changes:
            rows = [(n, epoch) for epoch, n in changes.items()]
            statement = "UPDATE counts SET memories = memories + ? WHERE epoch = ?"
            self._commit(statement, rows, synced=synced)

    def drop(self, epoch: str) -> None:
        self._commit("DELETE FROM counts WHERE epoch = ?", [(epoch,)], synced=True)
        self.counts.pop(epoch, None)
        self.names.pop(epoch, None)
        self._held.pop(epoch, None)
