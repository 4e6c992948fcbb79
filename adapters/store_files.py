"""The embedded store's files: where each lies under the data directory, and its tables.

Read by the engine worker, which keeps the store (adapters/engine/), and by the server at
start-up, which moves a store between worker counts (adapters/pool/placement.py) before any
worker opens it; nothing here loads the engine.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import TextIO

from adapters.errors import BackendMisconfigured

# An engine worker's part of the store: its shards, its records and counts, its lock.
STORE_DIR = "store"
SHARDS_DIR = "shards"
SHARD_COUNT = 16
RECORDS_FILE = "namespaces.sqlite3"
COUNTS_FILE = "counts.sqlite3"
LOCK_FILE = "engine.lock"
# Development builds' layouts, under the data directory: a shard per namespace; all in one.
OTHER_LAYOUTS = ("namespaces", "store/memories")

RECORDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY, epoch TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS purges (epoch TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counts (
    epoch TEXT PRIMARY KEY, memories INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lost_shards (shard INTEGER PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rebuilt (name TEXT PRIMARY KEY, epoch TEXT NOT NULL) WITHOUT ROWID;
"""

COUNTS_SCHEMA = """CREATE TABLE IF NOT EXISTS counts (
    epoch TEXT PRIMARY KEY, memories INTEGER NOT NULL, name TEXT NOT NULL)"""


def refuse_other_layouts(data_dir: Path) -> None:
    """Stop start-up on a data directory a development build wrote in another layout."""
    found = [layout for layout in OTHER_LAYOUTS if (data_dir / layout).is_dir()]
    if found:
        raise BackendMisconfigured(
            f"{data_dir} holds a store of a development build ({', '.join(found)}/), which"
            " this version does not read: export it with that build and import it here, or"
            " move it away to start empty"
        )


def shard_index(name: str, count: int) -> int:
    """A namespace's shard: stable across processes and versions (never `hash()`)."""
    return zlib.crc32(name.encode("utf-8")) % count


def worker_of(name: str, workers: int) -> int:
    """The index of the engine worker, of `workers`, whose part holds namespace `name`:
    its shard's index modulo `workers` (adapters/pool/placement.py)."""
    return shard_index(name, SHARD_COUNT) % workers


def local_index(shard: int, workers: int) -> int:
    """The index of store shard `shard` in its worker's part, of `workers`."""
    return shard // workers


def lock_file(data_dir: Path) -> TextIO:
    """The file whose lock a worker holds while its part of the store is open."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return (data_dir / LOCK_FILE).open("a")
