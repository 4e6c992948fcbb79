"""qdrant-edge's shard: how it is configured, opened, and spoken to (filters, errors).

Kept apart from the adapter (edge.py) so that the adapter reads as namespace
and memory semantics only.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from adapters.base import MemoryRecord
from adapters.errors import BackendError, BackendUnavailable, StorageDamaged, StorageFull
from adapters.qdrant.layout import MEMORY_INDEXES, TENANT_INDEXES, IndexKind, memory_from_shared

log = logging.getLogger(__name__)

_INDEX_SCHEMAS: dict[IndexKind, Any] = {
    IndexKind.TENANT: qe.KeywordIndexParams(is_tenant=True),
    IndexKind.KEYWORD: qe.PayloadSchemaType.Keyword,
    IndexKind.ORDERED_INTEGER: qe.PayloadSchemaType.Integer,
    IndexKind.RANGE_INTEGER: qe.PayloadSchemaType.Integer,
    IndexKind.MATCH_INTEGER: qe.PayloadSchemaType.Integer,
}


class EdgeDialect:
    """qdrant-edge's spelling of filters (adapters/qdrant/filters.py)."""

    def match_value(self, key: str, value: str | int) -> Any:
        return qe.FieldCondition(key, match=qe.MatchValue(value))

    def match_any(self, key: str, values: Sequence[str]) -> Any:
        return qe.FieldCondition(key, match=qe.MatchAny(list(values)))

    def at_most(self, key: str, value: int) -> Any:
        return qe.FieldCondition(key, range=qe.RangeFloat(lte=float(value)))

    def filter(self, must: list[Any], must_not: list[Any]) -> Any:
        return qe.Filter(must=must or None, must_not=must_not or None)


EDGE = EdgeDialect()


def edge_config(dimension: int) -> Any:
    """Cosine, one search thread per query, HNSW indexing off (see the module docstring)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine),
        max_search_threads=1,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
    )


def open_shard(path: Path, dimension: int) -> Any:
    """Load the shard at `path` (or create it) with every payload index in place."""
    segments = path / "segments"
    if segments.is_dir() and any(segments.iterdir()):
        shard = qe.EdgeShard.load(str(path))
    else:
        shard = qe.EdgeShard.create(str(path), edge_config(dimension))
    present = set(shard.info().payload_schema)
    for field_name, kind in {**TENANT_INDEXES, **MEMORY_INDEXES}.items():
        if field_name not in present:  # also heals a create cut short by a crash
            shard.update(qe.UpdateOperation.create_field_index(field_name, _INDEX_SCHEMAS[kind]))
    return shard


def translate(error: BaseException) -> BackendError:
    """What a worker-thread failure means for callers; the message names no file.

    The engine's own messages carry paths, so they stay on the exception chain
    (logged by the HTTP layer) and never reach the wire.
    """
    if isinstance(error, BackendError):
        return error
    text = str(error)
    full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    if full or "No space left" in text or "database or disk is full" in text:
        return StorageFull("the data volume is full; free space or grow the volume")
    if isinstance(error, sqlite3.Error):
        return StorageDamaged("the embedded store's namespace records could not be read or written")
    if isinstance(error, OSError):  # permissions, I/O errors: the store cannot serve now
        return BackendUnavailable(f"embedded store: {error.strerror or type(error).__name__}")
    return StorageDamaged("the embedded store could not read or write its files")


def fatal(error: BaseException) -> bool:
    """Exceptions a worker must never swallow (a Rust panic is a BaseException, not these)."""
    return isinstance(error, asyncio.CancelledError | KeyboardInterrupt | SystemExit)


def parsed_memory(point: Any) -> MemoryRecord | None:
    """The memory in `point`'s payload; None (and a log line) when the payload is damaged."""
    try:
        return memory_from_shared(point.payload)
    except (KeyError, TypeError, ValueError) as error:
        log.error("memory payload unreadable, point %s skipped: %r", point.id, error)
        return None
