"""Migrating a data directory from the per-namespace layout (plugin 0.1) at start.

The old layout kept `namespaces/<collection name>/namespace.json` and one
qdrant-edge shard per namespace in `namespaces/<collection name>/shard/`. An
operator who upgrades must not find an empty store, and re-embedding would
need minutes per thousand memories, so the start-up copies what is there:

- each complete namespace (a record file present; a directory without one was
  an interrupted creation, and `.trash-*` an interrupted delete) gets its
  record, keeping an epoch it may already have from an earlier, interrupted
  run, and its points are copied with their stored vectors, under the shared
  layout's point ids, in pages;
- then `namespaces/` is renamed to `namespaces.migrated/`, which the operator
  may delete once satisfied (logged).

Re-running after a crash copies again onto the same point ids: idempotent.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from adapters.qdrant.edge.engine import dense_vector
from adapters.qdrant.edge.record_store import RecordStore
from adapters.qdrant.layout import (
    FIELD_EPOCH,
    FIELD_MEMORY_ID,
    FIELD_NAMESPACE,
    namespace_from_json,
    point_id,
)

log = logging.getLogger(__name__)

LEGACY_DIR = "namespaces"
MIGRATED_DIR = "namespaces.migrated"
RECORD_FILE = "namespace.json"
PAGE = 512


def _copy_points(source: Any, target: Any, name: str, epoch: str) -> int:
    copied, offset = 0, None
    while True:
        request = qe.ScrollRequest(offset=offset, limit=PAGE, with_payload=True, with_vector=True)
        page, offset = source.scroll(request)
        points = [
            qe.Point(
                point_id(name, str(point.id)),
                dense_vector(point),
                {
                    **point.payload,
                    FIELD_NAMESPACE: name,
                    FIELD_EPOCH: epoch,
                    FIELD_MEMORY_ID: str(point.id),
                },
            )
            for point in page
        ]
        if points:
            target.update(qe.UpdateOperation.upsert_points(points))
            copied += len(points)
        if offset is None:
            return copied


def migrate_legacy_layout(
    legacy: Path, shard_of: Callable[[str], Any], records: RecordStore
) -> tuple[int, int]:
    """Copy every namespace under `legacy` into its shard (`shard_of(name)`) and `records`;
    (namespaces, memories). Their memory counts are taken afterwards (integrity.py)."""
    started = time.monotonic()
    namespaces = memories = 0
    for directory in sorted(legacy.iterdir()):
        record_file = directory / RECORD_FILE
        if directory.name.startswith(".trash-") or not record_file.is_file():
            continue  # an interrupted delete or creation: nothing acknowledged lives there
        record = namespace_from_json(record_file.read_text(encoding="utf-8"))
        epoch = records.save(record)  # keeps the epoch of an interrupted earlier run
        if (directory / "shard").is_dir():
            source = qe.EdgeShard.load(str(directory / "shard"))
            try:
                memories += _copy_points(source, shard_of(record.name), record.name, epoch)
            finally:
                source.close()
        namespaces += 1
    for name in records.live:
        shard_of(name).flush()
    moved = legacy.with_name(MIGRATED_DIR)
    if moved.exists():
        moved = legacy.with_name(f"{MIGRATED_DIR}-{int(time.time())}")
    os.replace(legacy, moved)
    log.warning(
        "migrated %d namespaces and %d memories from the per-namespace layout in %.1f s;"
        " the old files are in %s: delete it once satisfied",
        namespaces,
        memories,
        time.monotonic() - started,
        moved.name,
    )
    return namespaces, memories
