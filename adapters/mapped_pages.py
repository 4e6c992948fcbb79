"""This process's pages of memory-mapped files let go of, where the kernel allows it.

The embedded engine maps its payload indexes' files and reads them whole when a shard loads,
to build the indexes in memory; the pages then stay mapped, though the engine reads the files
again only where it writes to them. A process's mapped pages are what the kernel tears down
when it dies, before its sockets close, so they delay the first 503 after an engine worker is
killed, and they count in its RSS. `release` drops them from this process (`MADV_DONTNEED`: for
a shared file mapping the contents stay in the page cache and the file, and a later access maps
them again), for shared mappings only, and only of files no other thread unmaps meanwhile (a
shard's own, before it is handed out). Elsewhere than Linux, or on a refusal, nothing changes.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

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
