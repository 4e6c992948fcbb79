"""Mapped pages handed back to the kernel (adapters/disk.py, `release`), and a shard's payload
index pages let go of once it is open, as the engine worker does."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from adapters import disk
from adapters.engine.shards import open_shard
from tests.support.records import DIM

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")


def resident_kib(directory: Path, part: str) -> int:
    """This process's resident KiB of file mappings under `directory` whose path holds `part`."""
    total, counted = 0, False
    prefix = f"{directory.resolve()}/"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if "-" in fields[0] and len(fields[0]) > 8 and ":" not in fields[0]:  # a mapping's line
            counted = len(fields) == 6 and fields[5].startswith(prefix) and part in fields[5]
        elif counted and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def mapped(path: Path, flags: int, fill: bytes) -> mmap.mmap:
    """`path` written with `fill`, mapped, and read whole (as the engine loads an index)."""
    path.write_bytes(fill * (1 << 20))
    with path.open("r+b") as file:
        area = mmap.mmap(file.fileno(), 0, flags=flags)
    assert area[:] == fill * len(area)
    return area


def test_shared_file_pages_are_released_and_keep_their_contents(tmp_path: Path) -> None:
    shared = mapped(tmp_path / "one.dat", mmap.MAP_SHARED, b"s")
    private = mapped(tmp_path / "two.dat", mmap.MAP_PRIVATE, b"f")
    private[:] = b"p" * len(private)  # a private copy: releasing it would lose this
    assert resident_kib(tmp_path, "/one.dat") >= 1024

    released = disk.release(tmp_path, ".dat")

    assert released == len(shared)  # the shared mapping only
    assert resident_kib(tmp_path, "/one.dat") < 64
    assert resident_kib(tmp_path, "/two.dat") >= 1024
    assert shared[:] == b"s" * len(shared)  # read back from the file
    assert private[:] == b"p" * len(private)


def test_nothing_outside_the_directory_or_without_the_part_is_released(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    kept = [mapped(inside / "one.dat", mmap.MAP_SHARED, b"k")]
    kept.append(mapped(outside / "two.dat", mmap.MAP_SHARED, b"k"))
    assert disk.release(inside, "two.dat") == 0
    assert resident_kib(tmp_path, ".dat") >= 2048


def test_an_open_shard_holds_no_payload_index_pages(tmp_path: Path) -> None:
    """The engine reads every payload index file whole as a shard loads; once
    `open_shard` returns, none of those pages is resident in this process."""
    shard_dir = tmp_path / "00"
    open_shard(shard_dir, DIM).close()  # created, with its payload indexes
    shard = open_shard(shard_dir, DIM)  # loaded: the engine reads the index files
    try:
        assert any((shard_dir / "segments").rglob("payload_index/*/page_0.dat"))
        assert resident_kib(shard_dir, "/payload_index/") < 256
    finally:
        shard.close()
