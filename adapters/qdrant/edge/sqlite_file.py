"""The embedded store's SQLite files: opened and checked, a damaged one moved aside.

The namespace records and the memory counts each live in a file of their own. A
file that is not a database (garbled, cut) must not stop the start: its owner moves
it aside, with its WAL and shared memory, and starts a new one.

Both use SQLite's WAL journal. `synchronous=FULL` syncs that journal at every
commit, so a committed change survives a power cut (the `sync` durability);
`NORMAL` syncs it only at checkpoints, so a commit survives a killed process but a
power cut may take the last ones (`async`).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def connect(path: Path, schema: str, table: str, *, synced: bool) -> sqlite3.Connection:
    """`path` opened in WAL mode with `schema` applied, every commit synced to disk when
    `synced`; `sqlite3.DatabaseError` unless `table` can be read."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={'FULL' if synced else 'NORMAL'}")
        db.executescript(schema)
        db.execute(f"SELECT count(*) FROM {table}").fetchone()  # a name of ours, not a caller's
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def move_aside(path: Path) -> Path:
    """Rename a damaged database out of the way (its WAL and shared memory go with it);
    where it went."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    path.rename(aside)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return aside
