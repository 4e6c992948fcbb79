"""`memory-plugin-vector import-postgres DSN`: move the built-in postgres plugin's data here.

It reads that plugin's tables (the platform's backfill does not), writes through `import`'s
`StoreWriter`, then checks parity; docs/runbook.md, "From the built-in postgres plugin".
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC
from datetime import datetime
from typing import Any

import psycopg

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from plugin.commands import Print
from plugin.commands import export_import
from plugin.commands.export_import import ProgressBar
from plugin.commands.export_import import embedder
from plugin.commands.export_import import opened_backend
from plugin.commands.export_import import rate
from plugin.core.fingerprint import check_store
from plugin.core.service import utc_now
from plugin.settings import Settings
from plugin.transfer.bulk import StoreWriter
from plugin.transfer.parity import verify
from plugin.upgrades import vector_fill

ROWS_PER_FETCH = 2000
NAMESPACES = (
    "SELECT name, kind, expires_at, metadata, created_at FROM memory_namespaces ORDER BY name"
)
# Memories of live namespaces only (those of expired ones are skipped with them),
# grouped by namespace: the writer reads what the store holds one namespace at a time.
MEMORIES = """
SELECT r.id::text, r.namespace, r.content, r.kind, r.source, r.expires_at, r.propagation,
       r.pin, r.created_at
FROM memory_records r JOIN memory_namespaces n ON n.name = r.namespace
WHERE (r.expires_at IS NULL OR r.expires_at > %(now)s)
  AND (n.expires_at IS NULL OR n.expires_at > %(now)s)
ORDER BY r.namespace, r.id
"""
COUNTS = """
WITH n AS (
  SELECT name, kind, (expires_at IS NULL OR expires_at > %(now)s) AS live FROM memory_namespaces
)
SELECT n.kind,
       count(DISTINCT n.name) FILTER (WHERE n.live),
       count(DISTINCT n.name) FILTER (WHERE NOT n.live),
       count(r.id) FILTER (WHERE n.live AND (r.expires_at IS NULL OR r.expires_at > %(now)s)),
       count(r.id) FILTER (WHERE NOT n.live OR r.expires_at <= %(now)s)
FROM n LEFT JOIN memory_records r ON r.namespace = n.name
GROUP BY n.kind ORDER BY n.kind
"""


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def namespace_of(row: tuple[Any, ...]) -> NamespaceRecord:
    name, kind, expires_at, metadata, created_at = row
    return NamespaceRecord(
        name=name,
        kind=kind,
        created_at=created_at.astimezone(UTC),
        expires_at=_utc(expires_at),
        metadata=metadata,
    )


def memory_of(row: tuple[Any, ...]) -> MemoryRecord:
    memory_id, namespace, content, kind, source, expires_at, propagation, pin, created_at = row
    return MemoryRecord(
        id=memory_id.lower(),
        namespace=namespace,
        content=content,
        kind=kind,
        source=source,
        created_at=created_at.astimezone(UTC),
        pin=bool(pin),
        expires_at=_utc(expires_at),
        propagation=propagation,
    )


async def snapshot(dsn: str) -> psycopg.AsyncConnection[Any]:
    """A read-only REPEATABLE READ connection: every query sees the same snapshot."""
    conn = await psycopg.AsyncConnection.connect(dsn)
    await conn.set_read_only(True)
    await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
    return conn


async def dry_run(dsn: str, echo: Print) -> int:
    """Counts per namespace kind, what would be imported and what skipped; writes nothing."""
    async with await snapshot(dsn) as conn:
        rows = await (await conn.execute(COUNTS, {"now": utc_now()})).fetchall()
    echo(f"{'kind':<10} {'namespaces':>10} {'memories':>10}  skipped: expired namespaces/memories")
    totals = [0, 0, 0, 0]
    for kind, live_ns, dead_ns, live_mem, dead_mem in rows:
        echo(f"{kind:<10} {live_ns:>10} {live_mem:>10}  {dead_ns}/{dead_mem}")
        counts = (live_ns, dead_ns, live_mem, dead_mem)
        totals = [total + count for total, count in zip(totals, counts, strict=True)]
    echo(f"{'total':<10} {totals[0]:>10} {totals[2]:>10}  {totals[1]}/{totals[3]}")
    echo("import-postgres: dry run, nothing written")
    return 0


async def copy(
    conn: psycopg.AsyncConnection[Any], writer: StoreWriter, now: datetime
) -> tuple[int, int]:
    """Every live namespace, then every live memory (streamed); (namespaces, rows) read."""
    rows = await (await conn.execute(NAMESPACES)).fetchall()
    for row in rows:
        await writer.namespace(namespace_of(row))
    read = 0
    async with conn.cursor(name="memory_records_export") as cursor:
        cursor.itersize = ROWS_PER_FETCH
        await cursor.execute(MEMORIES, {"now": now})
        async for row in cursor:
            await writer.memory(memory_of(row), [])
            read += 1
    await writer.place()
    return len(rows), read


async def run(
    settings: Settings, dsn: str, *, sample: int, batch: int, seed: int | None, echo: Print
) -> int:
    started = time.perf_counter()
    encoder = await asyncio.to_thread(export_import.load_encoder, settings)
    now = utc_now()
    bar = ProgressBar("import-postgres")
    keywords = KeywordEncoder()
    async with opened_backend(settings, encoder.dimension) as backend:
        await check_store(backend, encoder.fingerprint)
        try:
            async with await snapshot(dsn) as conn:
                writer = StoreWriter(
                    backend, now, embedder(encoder), keywords, batch=batch, progress=bar.update
                )
                namespaces, rows = await copy(conn, writer, now)
            # and what the store held without one
            await vector_fill.fill_store(backend, vector_fill.keywords(keywords))
        finally:
            bar.close()
        seconds = time.perf_counter() - started
        report = writer.report
        echo(
            f"import-postgres: {namespaces} namespaces read ({report.namespaces_written} written,"
            f" {report.namespaces_unchanged} unchanged, {report.namespaces_skipped_expired}"
            f" expired), {rows} live memories read: {report.written} written"
            f" ({report.embedded} embedded), {report.unchanged} unchanged,"
            f" {report.skipped_invalid} invalid, {report.reused} stored vectors reused;"
            f" {seconds:.1f} s ({rate(rows, seconds)})"
        )
        for problem in report.problems:
            echo(f"import-postgres: invalid: {problem}")
        mismatches = await verify_against(dsn, backend, sample=sample, seed=seed, echo=echo)
    return 1 if mismatches or report.skipped_invalid else 0


async def verify_against(
    dsn: str, backend: VectorBackend, *, sample: int, seed: int | None, echo: Print
) -> int:
    """The parity report (a fresh snapshot, judged at a fresh `now`); how many mismatched."""
    async with await snapshot(dsn) as conn:
        report = await verify(conn, backend, utc_now(), sample=sample, seed=seed)
    for line in report.lines():
        echo(line)
    return len(report.mismatches)
