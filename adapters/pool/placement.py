"""Where the embedded store's shards lie for a count of engine workers, and the move between counts.

`move` takes a store to another count in place at start-up, and a start finishes any move cut
short (`placement.json`). See docs/backends.md, "The engine worker process".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from adapters.disk import connect
from adapters.disk import fsync_path
from adapters.disk import replace_file
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.store_files import COUNTS_FILE
from adapters.store_files import COUNTS_SCHEMA
from adapters.store_files import RECORDS_FILE
from adapters.store_files import RECORDS_SCHEMA
from adapters.store_files import SHARD_COUNT
from adapters.store_files import SHARDS_DIR
from adapters.store_files import STORE_DIR
from adapters.store_files import local_index
from adapters.store_files import lock_file
from adapters.store_files import worker_of

WORKERS_DIR = "workers"
JOURNAL = "placement.json"
STAGING = "placement.new"
OLD = "placement.old"
RECORDS_DONE = "records.done"


def part_dir(data_dir: Path, workers: int, worker: int) -> Path:
    """The directory of worker `worker`'s part (its lock and its `store/`), of `workers`."""
    return data_dir if workers == 1 else data_dir / WORKERS_DIR / f"{worker}-of-{workers}"


_PART_NAME = re.compile(r"(\d+)-of-(\d+)")  # a part's directory name, as part_dir writes it


def written_with(data_dir: Path) -> int | None:
    """The engine worker count of the store under `data_dir`; None when there is none."""
    counts = set()
    if (data_dir / STORE_DIR).is_dir():
        counts.add(1)
    workers = data_dir / WORKERS_DIR
    if workers.is_dir():
        for entry in workers.iterdir():
            if found := _PART_NAME.fullmatch(entry.name):
                counts.add(int(found.group(2)))
    if len(counts) > 1:
        raise BackendMisconfigured(
            f"{data_dir} holds stores of several engine worker counts ({sorted(counts)}):"
            " move the ones not in use away (docs/repair.md#engine-workers)"
        )
    return counts.pop() if counts else None


def unfinished(data_dir: Path) -> tuple[int, int] | None:
    """The counts (from, to) of a move a start did not finish; None when there is none."""
    journal = data_dir / JOURNAL
    if not journal.is_file():
        return None
    found = json.loads(journal.read_text())
    return int(found["from"]), int(found["to"])


def finish(data_dir: Path) -> None:
    """Finish the move a cut left under `data_dir`, if any; else remove what a move left
    behind after its journal went (a cut before its last step)."""
    if (journaled := unfinished(data_dir)) is not None:
        move(data_dir, *journaled)
    else:
        _tidy(data_dir)


def _tidy(data_dir: Path) -> None:
    """The old tree and the staging tree of a move whose journal is gone: nothing of use."""
    shutil.rmtree(data_dir / OLD, ignore_errors=True)
    shutil.rmtree(data_dir / STAGING, ignore_errors=True)


def move(data_dir: Path, written: int, asked: int) -> None:
    """Move the store under `data_dir` from `written` engine workers' parts to `asked`'s, or
    finish the move a cut left (its journal's counts, whatever these say). Holds every
    part's lock meanwhile: a plugin serving the store stops it (`BackendUnavailable`)."""
    if (journaled := unfinished(data_dir)) is not None:
        written, asked = journaled
    elif written == asked:
        return
    else:
        _tidy(data_dir)
    with _held(data_dir, written):
        if journaled is None:
            replace_file(data_dir / JOURNAL, json.dumps({"from": written, "to": asked}), fsync_path)
        staging = data_dir / STAGING
        if not (staging / RECORDS_DONE).is_file():
            shutil.rmtree(staging, ignore_errors=True)
            try:
                _split_records(data_dir, written, asked)
            except BackendMisconfigured:  # nothing moved yet: the store stays as it was
                shutil.rmtree(staging, ignore_errors=True)
                (data_dir / JOURNAL).unlink()
                raise
        _move_shards(data_dir, written, asked)
        _swap(data_dir, written, asked)
        (data_dir / JOURNAL).unlink()
        fsync_path(data_dir)
    _tidy(data_dir)


def _split_records(data_dir: Path, written: int, asked: int) -> None:
    """Each new part's records and counts, in the staging tree: the rows of its namespaces
    from every old part, the store's facts (`meta`) as they are, lost shards by their new
    index. The old files are only read, so this is done again after a cut."""
    staging = data_dir / STAGING
    olds = [part_dir(data_dir, written, k) / STORE_DIR for k in range(written)]
    for old in olds:
        if not (old / RECORDS_FILE).is_file():
            raise BackendMisconfigured(
                f"{old / RECORDS_FILE} is missing: start with MEMORY_PLUGIN_ENGINE_WORKERS"
                f"={written} once (the records are rebuilt), then change the count"
                " (docs/repair.md#engine-workers)"
            )
    for worker in range(asked):
        new = part_dir(staging, asked, worker) / STORE_DIR
        new.mkdir(parents=True)
        records = connect(new / RECORDS_FILE, RECORDS_SCHEMA, "namespaces", synced=True)
        counts = connect(new / COUNTS_FILE, COUNTS_SCHEMA, "counts", synced=True)
        for db in (records, counts):
            db.create_function("part", 1, lambda name: worker_of(name, asked), deterministic=True)
        try:
            for k, old in enumerate(olds):
                _copy_records(records, old / RECORDS_FILE, worker, (k, written, asked))
                if (old / COUNTS_FILE).is_file():
                    _copy_counts(counts, old / COUNTS_FILE, worker)
        except sqlite3.DatabaseError as error:
            raise BackendMisconfigured(
                f"the namespace records under {data_dir} cannot be read ({error}): start with"
                f" MEMORY_PLUGIN_ENGINE_WORKERS={written} once (they are repaired), then"
                " change the count (docs/repair.md#engine-workers)"
            ) from error
        finally:
            records.close()
            counts.close()
        for name in (RECORDS_FILE, COUNTS_FILE):
            fsync_path(new / name)
        _fsync_up(new, staging)
    replace_file(staging / RECORDS_DONE, "", fsync_path)


def _copy_records(
    db: sqlite3.Connection, old: Path, worker: int, place: tuple[int, int, int]
) -> None:
    """The rows of `old` (a part's records) for new part `worker`, in one transaction."""
    k, written, asked = place
    db.execute("ATTACH DATABASE ? AS old", (str(old),))
    try:
        db.execute("BEGIN")
        for table in ("namespaces", "purges", "rebuilt"):  # keyed by the namespace's name
            rows = f"INSERT INTO {table} SELECT * FROM old.{table} WHERE part(name) = ?"
            db.execute(rows, (worker,))
        db.execute("INSERT OR IGNORE INTO meta SELECT * FROM old.meta")
        db.execute(
            "INSERT INTO counts SELECT c.* FROM old.counts c JOIN old.namespaces n USING (epoch)"
            " WHERE part(n.name) = ?",
            (worker,),
        )
        for (local,) in db.execute("SELECT shard FROM old.lost_shards").fetchall():
            shard = local * written + k
            if shard % asked == worker:
                db.execute("INSERT INTO lost_shards VALUES (?)", (local_index(shard, asked),))
        db.execute("COMMIT")
    finally:
        db.execute("DETACH DATABASE old")


def _copy_counts(db: sqlite3.Connection, old: Path, worker: int) -> None:
    db.execute("ATTACH DATABASE ? AS old", (str(old),))
    try:
        db.execute("INSERT INTO counts SELECT * FROM old.counts WHERE part(name) = ?", (worker,))
    finally:
        db.execute("DETACH DATABASE old")


def _move_shards(data_dir: Path, written: int, asked: int) -> None:
    """Each shard's directory renamed from its old part to its new one, in the staging tree;
    one already moved (before a cut) is left where it is."""
    staging = data_dir / STAGING
    for shard in range(SHARD_COUNT):
        old_part = part_dir(data_dir, written, shard % written) / STORE_DIR / SHARDS_DIR
        new_part = part_dir(staging, asked, shard % asked) / STORE_DIR / SHARDS_DIR
        source = old_part / f"{local_index(shard, written):02d}"
        target = new_part / f"{local_index(shard, asked):02d}"
        if not source.exists():
            continue  # moved already, or never created (the part creates it when it opens)
        new_part.mkdir(parents=True, exist_ok=True)
        source.rename(target)
        fsync_path(old_part)
        fsync_path(new_part)
        _fsync_up(new_part, staging)


def _swap(data_dir: Path, written: int, asked: int) -> None:
    """The old tree aside, then the staging tree in its place (each a rename; after a cut,
    the one not done yet)."""
    old, new = (STORE_DIR if workers == 1 else WORKERS_DIR for workers in (written, asked))
    staged = data_dir / STAGING / new
    if not staged.exists():
        return  # swapped before a cut
    aside = data_dir / OLD
    if not (aside / old).exists() and (data_dir / old).exists():
        aside.mkdir(exist_ok=True)
        (data_dir / old).rename(aside / old)
        fsync_path(aside)
    staged.rename(data_dir / new)
    fsync_path(data_dir / STAGING)
    fsync_path(data_dir)


@contextlib.contextmanager
def _held(data_dir: Path, written: int) -> Iterator[None]:
    """Every old part's lock, and the data directory's, for the block."""
    places = {data_dir} | {part_dir(data_dir, written, k) for k in range(written)}
    locks: list[TextIO] = []
    try:
        for place in sorted(places):
            if not place.is_dir():
                continue
            lock = lock_file(place)
            locks.append(lock)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BackendUnavailable(
                    "another process holds the embedded store (one plugin per data directory)"
                ) from None
        yield
    finally:
        for held in locks:
            held.close()


def _fsync_up(directory: Path, top: Path) -> None:
    """Each directory from `directory` up to `top`, synced (their entries on disk)."""
    for current in (directory, *directory.parents):
        fsync_path(current)
        if current == top:
            return
