"""The six faults of the fault matrix, and the store they are applied to.

A store of 32 namespaces of 5 memories is imported with the checkout's own
`import` (so an older checkout is measured the same way); one more namespace
gets 15 memories over HTTP just before the server is stopped, by SIGKILL when
the pair garbles the WAL (its writes are then only in the WAL). Each engine
fault hits its own shard, so that a pair shows both faults, not one twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from scenarios.blast_radius import corpus_file
from scenarios.blast_radius import garble
from scenarios.blast_radius import import_into

NAMESPACES, MEMORIES, WAL_MEMORIES = 32, 5, 15
SHARDS = 16
FAULTS = ("shard", "records cut", "records garbled", "WAL garbled", "tracker cut", "full")
LABELS = {
    "shard": "a shard that does not open",
    "records cut": "namespaces.sqlite3 truncated",
    "records garbled": "its header garbled",
    "WAL garbled": "WAL garbled after kill -9",
    "tracker cut": "id tracker cut in half",
    "full": "5 MiB free (tmpfs)",
}


def shard_of(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) % SHARDS


def _name_in_new_shard(prefix: str, taken: set[int]) -> str:
    n = 0
    while shard_of(f"{prefix}{n}") in taken:
        n += 1
    return f"{prefix}{n}"


@dataclass
class Store:
    """The store a pair damages: what was written, and where each fault lands."""

    data: Path
    expected: dict[str, set[str]] = field(default_factory=dict)
    broken: str = "workspace:w0000"  # the namespace whose shard "shard" breaks
    tracked: str = ""  # whose shard's id tracker is cut
    wal: str = ""  # written over HTTP just before the stop
    garbled_shard: int | None = None  # where a garbled payload page landed

    def __post_init__(self) -> None:
        taken = {shard_of(self.broken)}
        self.tracked = next(
            name
            for name in (f"workspace:w{n:04d}" for n in range(NAMESPACES))
            if shard_of(name) not in taken
        )
        taken.add(shard_of(self.tracked))
        self.wal = _name_in_new_shard("workspace:wal-", taken)

    def hit_shards(self, faults: tuple[str, ...]) -> set[int]:
        """Shards an engine fault of the pair touches (their namespaces may fail)."""
        hit = {"shard": self.broken, "tracker cut": self.tracked, "WAL garbled": self.wal}
        found = {shard_of(hit[f]) for f in faults if f in hit}
        return found | ({self.garbled_shard} if self.garbled_shard is not None else set())

    def readable(self, faults: tuple[str, ...]) -> set[str]:
        """Namespaces in shards no engine fault touched: these must be served whole."""
        hit = self.hit_shards(faults)
        return {name for name in self.expected if shard_of(name) not in hit}


def import_store(repo: Path, store: Store) -> None:
    export = store.data.parent / f"{store.data.name}-corpus.jsonl.gz"
    store.expected = corpus_file(export, NAMESPACES, MEMORIES)
    import_into(repo, store.data, export)
    export.unlink()


def _shard_dir(store: Store, name: str) -> Path:
    return store.data / "store" / "shards" / f"{shard_of(name):02d}"


def _records(store: Store) -> Path:
    return store.data / "store" / "namespaces.sqlite3"


def break_shard(store: Store) -> None:
    for segment in (_shard_dir(store, store.broken) / "segments").iterdir():
        (segment / "segment.json").write_text("{damaged")


def cut_records(store: Store) -> None:
    path = _records(store)
    path.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def garble_records(store: Store) -> None:
    path = _records(store)
    path.write_bytes(os.urandom(100) + path.read_bytes()[100:])


def garble_wal(store: Store) -> None:
    wal = sorted((_shard_dir(store, store.wal) / "wal").glob("open-*"))[0]
    garble(wal, offset=2048, size=2048)


def cut_tracker(store: Store) -> None:
    trackers = (_shard_dir(store, store.tracked) / "segments").glob("*/mutable_id_tracker.mappings")
    tracker = max(trackers, key=lambda path: path.stat().st_size)
    os.truncate(tracker, tracker.stat().st_size // 2)


def fill_volume(store: Store, free_mib: int = 5) -> Path:
    """Fill the volume of `store` (a tmpfs) to `free_mib` MiB free; the filler's path."""
    filler = store.data.parent / "filler"
    stats = os.statvfs(store.data)
    size = stats.f_bavail * stats.f_frsize - free_mib * 1024 * 1024
    with open(filler, "wb") as out:
        out.truncate(0)
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={filler}", "bs=1M", f"count={max(0, size) // (1024 * 1024)}"],
        check=True,
        capture_output=True,
    )
    return filler


# The faults applied to a stopped store (the WAL's is the stop itself, then this).
DAMAGE: dict[str, Callable[[Store], Any]] = {
    "shard": break_shard,
    "records cut": cut_records,
    "records garbled": garble_records,
    "WAL garbled": garble_wal,
    "tracker cut": cut_tracker,
}


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)
