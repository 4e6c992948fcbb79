"""Rows per second of export, import and import-postgres, beside the model's own rate.

Adapter level, no HTTP, on the embedded store: N memories (default 10,000) in
500 namespaces, real all-MiniLM-L6-v2 embeddings. Measured, in order:
- the model alone: embedding the N texts in batches of 128 (this builds the source);
- export of the whole store to a .jsonl.gz file, and to plain .jsonl;
- import of that file into a fresh store, same fingerprint (vectors reused);
- import with re-embedding (as for a file made by another model);
- import-postgres of the same corpus from a real PostgreSQL server started here
  (harness/postgres_server.py), parity check included, then its idempotent re-run.
About 2-3 minutes on 2 cores. `python -m benchmarks.transfer [--memories 10000]`
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable
from collections.abc import Callable
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from typing import Any

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from benchmarks.common import machine
from benchmarks.sentences import sentences
from plugin.commands import export_import
from plugin.commands import import_postgres
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.settings import Settings
from plugin.transfer import jsonl
from plugin.transfer.bulk import StoreWriter
from plugin.transfer.bulk import import_lines
from plugin.transfer.bulk import stream_export

NAMESPACES = 500
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def corpus(count: int) -> tuple[list[NamespaceRecord], list[MemoryRecord]]:
    names = [f"workspace:bench-{i}" for i in range(NAMESPACES)]
    records = [NamespaceRecord(name=name, kind="workspace", created_at=T0) for name in names]
    memories = [
        MemoryRecord(
            id=f"00000000-0000-4000-8000-{i:012x}",
            namespace=names[i % NAMESPACES],
            content=text,
            kind="fact",
            source="agent",
            created_at=T0 + timedelta(seconds=i),
            pin=i % 11 == 0,
        )
        for i, text in enumerate(sentences(count))
    ]
    return records, memories


def report(what: str, rows: int, seconds: float, command: str) -> None:
    print(f"{what:<44} {rows:>7} rows {seconds:7.1f} s {rows / seconds:9,.0f} rows/s   {command}")


async def timed(step: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = await step()
    return result, time.perf_counter() - started


async def build_source(root: Path, encoder: SentenceTransformerEncoder, count: int) -> None:
    records, memories = corpus(count)
    embed = export_import.embedder(encoder)
    vectors, seconds = await timed(lambda: embed([m.content for m in memories]))
    report("model alone (batches of 128, no store)", count, seconds, "encoder.encode")
    store = QdrantEdgeBackend(
        encoder.dimension, root / "source", token_dimension=encoder.token_dimension
    )
    await store.start()
    for record in records:
        await store.save_namespace(record)
    for start in range(0, count, 1000):
        chunk = list(
            zip(memories[start : start + 1000], vectors[start : start + 1000], strict=True)
        )
        await store.transfer.upsert_memories(chunk)
    await store.close()


async def export_to(root: Path, encoder: SentenceTransformerEncoder, name: str, count: int) -> Path:
    path = root / name
    store = QdrantEdgeBackend(
        encoder.dimension, root / "source", token_dimension=encoder.token_dimension
    )
    await store.start()
    out = jsonl.open_out(str(path))

    async def write(data: bytes) -> None:
        out.write(data)

    header = jsonl.Header(encoder.fingerprint, encoder.dimension, datetime.now(UTC), store.name)
    _, seconds = await timed(lambda: stream_export(store, header, write, lambda: datetime.now(UTC)))
    out.close()
    await store.close()
    size = path.stat().st_size / 1e6
    report(f"export to {name} ({size:.0f} MB)", count, seconds, f"export --out {name}")
    return path


async def import_from(
    path: Path, target: Path, encoder: SentenceTransformerEncoder, reuse: bool, count: int
) -> None:
    store = QdrantEdgeBackend(encoder.dimension, target, token_dimension=encoder.token_dimension)
    await store.start()
    stream = jsonl.open_in(str(path))
    lines = jsonl.parse_lines(iter(stream))
    next(lines)
    writer = StoreWriter(
        store,
        datetime.now(UTC),
        None if reuse else export_import.embedder(encoder),
        KeywordEncoder(),
    )

    async def run() -> None:
        await import_lines(lines, writer, reuse_vectors=reuse)

    _, seconds = await timed(run)
    await store.close()
    stream.close()
    assert writer.report.written == count, writer.report
    what = "import, same fingerprint (no embedding)" if reuse else "import, re-embedding content"
    report(what, count, seconds, f"import --in {path.name}")


def measure_import_postgres(root: Path, encoder: SentenceTransformerEncoder, count: int) -> None:
    import psycopg

    from harness.postgres_server import fresh_database
    from harness.postgres_server import running_server

    records, memories = corpus(count)
    export_import.load_encoder = lambda _: encoder  # type: ignore[assignment] # loaded already
    with running_server() as admin:
        dsn = fresh_database(admin, "bench")
        with psycopg.connect(dsn) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_namespaces (name, kind, created_at) VALUES (%s, %s, %s)",
                [(r.name, r.kind, r.created_at) for r in records],
            )
            with cursor.copy(
                "COPY memory_records (id, namespace, content, kind, source, pin, created_at)"
                " FROM STDIN"
            ) as copy:
                for m in memories:
                    copy.write_row((m.id, m.namespace, m.content, m.kind, m.source, m.pin,
                                    m.created_at))  # fmt: skip
        settings = Settings(data_dir=root / "from-postgres")
        for label in ("import-postgres (embeds all, verify 200)", "import-postgres re-run (no-op)"):
            lines: list[str] = []
            started = time.perf_counter()
            status = asyncio.run(
                import_postgres.run(settings, dsn, sample=200, batch=256, seed=1, echo=lines.append)
            )
            seconds = time.perf_counter() - started
            assert status == 0, lines
            report(label, count, seconds, "import-postgres DSN")
            print(f"    {lines[0]}\n    {lines[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=10_000)
    count = parser.parse_args().memories
    print(f"transfer benchmark: {count} memories in {NAMESPACES} namespaces; {machine()}")
    encoder = SentenceTransformerEncoder.load()
    with tempfile.TemporaryDirectory(prefix="transfer-bench-") as tmp:
        root = Path(tmp)
        asyncio.run(build_source(root, encoder, count))
        gz = asyncio.run(export_to(root, encoder, "backup.jsonl.gz", count))
        asyncio.run(export_to(root, encoder, "backup.jsonl", count))
        asyncio.run(import_from(gz, root / "same", encoder, True, count))
        asyncio.run(import_from(gz, root / "reembedded", encoder, False, count))
        measure_import_postgres(root, encoder, count)


if __name__ == "__main__":
    main()
