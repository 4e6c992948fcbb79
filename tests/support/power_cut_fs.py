"""A FUSE filesystem that loses, on a power cut, every write that was not synced.

In the manner of Jepsen's LazyFS: file contents written through the mount are
held in this process's memory, block by block, and reach the backing
directory only when the file is `fsync`ed (which the kernel also sends for an
`msync` of a memory-mapped file, after writing its dirty pages back). Killing
this process is the power cut: what was held is gone, and the backing
directory holds exactly what was synced. Names (create, rename, unlink,
mkdir) and sizes set by `truncate` reach the backing directory at once, as
a journaling filesystem's metadata would at its next commit.

A disk that stops answering (a network volume that hangs) is the stall: while
the file STALL_FLAG exists, every `fsync` (of a file or a directory) waits for
it to go, and the other operations are served as usual.

Run as `python -m tests.support.power_cut_fs BACKING MOUNTPOINT [STALL_FLAG]` (in
the foreground); `tests.support.power_cut.PowerCutMount` starts it, waits for the
mount, stalls, and cuts.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mfusepy import FUSE
from mfusepy import Operations

BLOCK = 4096
STALL_POLL_S = 0.01


class HeldFile:
    """Writes not yet synced to one file: whole blocks, and the size they make."""

    def __init__(self, size: int) -> None:
        self.blocks: dict[int, bytearray] = {}
        self.size = size


class PowerCutFs(Operations):
    """The operations; mfusepy calls them from its threads, one at a time (a lock)."""

    use_ns = True

    def __init__(self, backing: Path, stall_flag: Path | None = None) -> None:
        self._root = backing
        self._stall_flag = stall_flag
        self._lock = threading.Lock()
        self._held: dict[str, HeldFile] = {}  # by path under the mount

    def _wait_while_stalled(self) -> None:
        """Block while the stall flag exists; outside the lock, so the rest goes on."""
        while self._stall_flag is not None and self._stall_flag.exists():
            time.sleep(STALL_POLL_S)

    def _real(self, path: str) -> str:
        return str(self._root) + path

    # -- metadata: straight to the backing directory -----------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        with self._lock:
            st = os.lstat(self._real(path))
            attrs = {key: getattr(st, key) for key in _STAT_KEYS}
            held = self._held.get(path)
            if held is not None:
                attrs["st_size"] = held.size
            return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise _error(errno.EACCES)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def unlink(self, path: str) -> int:
        with self._lock:
            os.unlink(self._real(path))
            self._held.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self._lock:
            os.rename(self._real(old), self._real(new))
            self._held.pop(new, None)
            moved = [p for p in self._held if p == old or p.startswith(old + "/")]
            for path in moved:
                self._held[new + path[len(old) :]] = self._held.pop(path)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._real(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in _STATVFS_KEYS}

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        with self._lock:
            os.truncate(self._real(path), length)
            held = self._held.get(path)
            if held is not None:
                held.size = length
                last = length // BLOCK
                for index in [i for i in held.blocks if i > last]:
                    del held.blocks[index]
                if last in held.blocks:
                    block = held.blocks[last]
                    block[length % BLOCK :] = bytes(BLOCK - length % BLOCK)
        return 0

    # -- contents: held until synced --------------------------------------------------

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        return os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)

    def open(self, path: str, flags: int) -> int:
        if flags & os.O_TRUNC:
            self.truncate(path, 0)
        return os.open(self._real(path), os.O_RDWR | os.O_CLOEXEC)

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._lock:
            held = self._held.get(path)
            if held is None:
                return os.pread(fh, size, offset)
            end = min(offset + size, held.size)
            if end <= offset:
                return b""
            data = bytearray(os.pread(fh, end - offset, offset).ljust(end - offset, b"\0"))
            for index in range(offset // BLOCK, (end - 1) // BLOCK + 1):
                block = held.blocks.get(index)
                if block is None:
                    continue
                start = max(offset, index * BLOCK)
                stop = min(end, (index + 1) * BLOCK)
                within = start - index * BLOCK
                data[start - offset : stop - offset] = block[within : within + stop - start]
            return bytes(data)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._lock:
            held = self._held.get(path)
            if held is None:
                held = self._held[path] = HeldFile(os.fstat(fh).st_size)
            position = offset
            while position < offset + len(data):
                index = position // BLOCK
                block = held.blocks.get(index)
                if block is None:
                    base = os.pread(fh, BLOCK, index * BLOCK)
                    block = held.blocks[index] = bytearray(base.ljust(BLOCK, b"\0"))
                start = position - index * BLOCK
                take = min(BLOCK - start, offset + len(data) - position)
                block[start : start + take] = data[position - offset : position - offset + take]
                position += take
            held.size = max(held.size, offset + len(data))
            return len(data)

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._wait_while_stalled()
        with self._lock:
            held = self._held.pop(path, None)
            if held is not None:
                for index, block in sorted(held.blocks.items()):
                    os.pwrite(fh, bytes(block), index * BLOCK)
                os.ftruncate(fh, held.size)
            os.fsync(fh)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close() is not a sync

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self._wait_while_stalled()
        return 0  # names reach the backing directory at once

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
        if mode:
            raise _error(errno.EOPNOTSUPP)
        with self._lock:
            held = self._held.get(path)
            if held is not None:
                held.size = max(held.size, offset + size)
            os.posix_fallocate(fh, offset, size)
        return 0


_STAT_KEYS = (
    "st_mode",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_size",
    "st_atime_ns",
    "st_mtime_ns",
    "st_ctime_ns",
)
_STATVFS_KEYS = (
    "f_bsize",
    "f_frsize",
    "f_blocks",
    "f_bfree",
    "f_bavail",
    "f_files",
    "f_ffree",
    "f_favail",
    "f_flag",
    "f_namemax",
)


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def main(backing: str, mountpoint: str, stall_flag: str | None = None) -> None:
    flag = None if stall_flag is None else Path(stall_flag).resolve()
    FUSE(PowerCutFs(Path(backing).resolve(), flag), mountpoint, foreground=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
