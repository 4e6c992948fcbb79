"""The embedded store's SQLite files: opened and checked, a damaged one moved aside.

The namespace records and the memory counts each live in a file of their own. A
file that is not a database (garbled, cut) must not stop the start: its owner moves
it aside, with its WAL and shared memory, and starts a new one.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def connect(path: Path, schema: str, table: str) -> sqlite3.Connection:
    """`path` opened in WAL mode with `schema` applied; `sqlite3.DatabaseError` unless
    `table` can be read."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
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
