"""The data volume and its files, below any engine: room for writes, sizes, copies, syncs.

`DiskGuard` refuses writes before the volume fills (docs/repair.md, "Full volume"); beside it,
SQLite files opened and set aside, and mapped pages released.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path

from adapters.errors import StorageFull

log = logging.getLogger(__name__)
MIB = 1024 * 1024
DEFAULT_HEADROOM_BYTES = 128 * MIB


def _file_stats(root: Path) -> Iterator[os.stat_result]:
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                info = os.stat(os.path.join(directory, name))
            except FileNotFoundError:  # removed by the engine meanwhile
                continue
            yield info


def sparse_bytes(root: Path) -> int:
    """Bytes of `root`'s files not yet backed by disk blocks (pages a write may still claim)."""
    return sum(max(0, info.st_size - info.st_blocks * 512) for info in _file_stats(root))


def allocated_bytes(root: Path) -> int:
    """Bytes `root`'s files occupy on disk (what a rewrite of them needs again)."""
    return sum(info.st_blocks * 512 for info in _file_stats(root))


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the volume holding `path`."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class DiskGuard:
    """Says whether a write may go ahead on the volume of `root` (thread-safe)."""

    def __init__(self, root: Path, headroom_bytes: int = DEFAULT_HEADROOM_BYTES) -> None:
        self._root = root
        self.headroom_bytes = headroom_bytes  # kept free: writes below it are refused
        self._lock = threading.Lock()
        self.problem: str | None = None  # the last verdict, for health
        self.refused = 0  # writes `admit` refused (the metrics)

    def check_open(self, path: Path) -> None:
        """Raise `StorageFull` unless the volume has room to map the files under `path`."""
        self.check(extra_bytes=sparse_bytes(path) if path.exists() else 0)

    def check(self, extra_bytes: int = 0) -> None:
        """Raise `StorageFull` unless the volume can take a write (and `extra_bytes` more)."""
        with self._lock:
            need = self.headroom_bytes + extra_bytes
            free = free_bytes(self._root)
            if free >= need:
                self.problem = None
                return
            self.problem = (
                f"the data volume is full: {free // MIB} MiB free, writes need {need // MIB} MiB;"
                " free space or grow the volume (writes resume by themselves)"
            )
        raise StorageFull(self.problem)

    def admit(self) -> None:
        """`check` before a write: a refusal is counted in `refused`."""
        try:
            self.check()
        except StorageFull:
            with self._lock:
                self.refused += 1
            raise

    def refresh(self) -> None:
        """Re-evaluate now (for health), without raising."""
        with contextlib.suppress(StorageFull):
            self.check()


def sparse_copy(source: str, target: str) -> None:
    """Copy a file's data and leave its holes holes (`shutil.copytree`'s `copy_function`)."""
    with open(source, "rb") as reader, open(target, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        position = 0
        while position < size:
            try:
                data = os.lseek(reader.fileno(), position, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            hole = os.lseek(reader.fileno(), data, os.SEEK_HOLE)
            reader.seek(data)
            writer.seek(data)
            writer.write(reader.read(hole - data))
            position = hole
        writer.truncate(size)


def sync_trees(roots: Sequence[Path]) -> None:
    """Every file and directory under `roots` (on one volume) on disk: the volume written
    back in one go (syncfs), then each one synced, which finds them clean and is what a
    filesystem without syncfs needs (FUSE among them)."""
    fd = os.open(roots[0], os.O_RDONLY | os.O_CLOEXEC)
    try:
        syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
        if syncfs is not None and syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), f"syncfs({roots[0]})")
    finally:
        os.close(fd)
    for root in roots:
        for directory, _, files in os.walk(root, topdown=False):
            for name in files:
                fsync_path(Path(directory, name))
            fsync_path(Path(directory))


def replace_file(path: Path, text: str, sync: Callable[[Path], None] | None = None) -> None:
    """`path` holding `text`, whole or not at all, on disk (`sync`: `fsync_path`'s stand-in)."""
    sync = sync or fsync_path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(text)
    sync(partial)
    os.replace(partial, path)
    sync(path.parent)


def fsync_path(path: Path, fsync: Callable[[int], None] = os.fsync) -> None:
    """`fsync` a file or a directory by its path."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fsync(fd)
    finally:
        os.close(fd)


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


def connect_or_move_aside(
    path: Path, schema: str, table: str, *, synced: bool, what: str
) -> tuple[sqlite3.Connection, Path | None]:
    """`connect`; a file that is not a database (`what`) is renamed out of the way (its WAL
    and shared memory go with it) and a new one made. Also where the old one went, or None."""
    try:
        return connect(path, schema, table, synced=synced), None
    except sqlite3.DatabaseError as error:
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        path.rename(aside)
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        log.error("%s unreadable (%s): moved aside to %s", what, error, aside.name)
        return connect(path, schema, table, synced=synced), aside


MADV_DONTNEED = 4
_MAPS = Path("/proc/self/maps")


def release(directory: Path, part: str) -> int:
    """Let go of this process's pages of shared file mappings under `directory` whose path
    holds `part` (files no other thread unmaps meanwhile); the bytes of those mappings."""
    try:
        lines = _MAPS.read_text().splitlines()
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # no /proc (not Linux), or no madvise
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    prefix = f"{directory.resolve()}/"
    released = 0
    for line in lines:
        fields = line.split(maxsplit=5)  # address, perms, offset, device, inode, path
        if len(fields) < 6 or fields[1][3:4] != "s":  # shared mappings only
            continue
        path = fields[5]
        if not path.startswith(prefix) or part not in path:
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        if madvise(start, end - start, MADV_DONTNEED) == 0:
            released += end - start
    return released
