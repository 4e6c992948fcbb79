"""`memory-plugin-vector migrate-layout`: per-namespace Qdrant collections to the shared layout.

It copies every live namespace and memory, with its stored vector, through `import`'s
`StoreWriter`; see docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from adapters.errors import BackendError
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.registry import build
from plugin.commands import Print
from plugin.core.service import utc_now
from plugin.settings import Settings
from plugin.transfer.bulk import WRITE_BATCH
from plugin.transfer.bulk import StoreWriter
from plugin.upgrades import vector_fill

# Called once per namespace copied: (namespace name, memories copied for it).
Progress = Callable[[str, int], None]


async def copy_collections_to_shared(
    source: QdrantCollectionsBackend,
    target: QdrantServerBackend,
    *,
    drop_source: bool = False,
    progress: Progress | None = None,
    batch_size: int = WRITE_BATCH,
) -> tuple[int, int]:
    """Copy every live namespace and memory of `source` into `target`: (namespaces, memories).
    Opens both backends, closing them is the caller's; a failed run can simply be run again."""
    await source.start()
    await target.prepare(allow_namespace_collections=True)  # the old layout is still there
    now = utc_now()
    writer = StoreWriter(target, now, None, None, batch=batch_size)
    records = sorted(await source.list_namespaces(), key=lambda record: record.name)
    live = [record for record in records if not record.is_expired(now)]
    memories = 0
    for record in live:
        await writer.namespace(record)
        copied = 0
        async for page in source.transfer.iter_memories(record.name, now, page_size=batch_size):
            for memory, vector in page:
                await writer.memory(memory, vector)
            copied += len(page)
        await writer.flush()
        memories += copied
        if progress is not None:
            progress(record.name, copied)
    if writer.report.problems:
        kept = "; the old collections are kept" if drop_source else ""
        raise BackendError(f"not copied: {'; '.join(writer.report.problems)}{kept}")
    if drop_source:
        for record in records:
            await source.delete_namespace(record.name)
    return len(live), memories


async def migrate(
    source: QdrantCollectionsBackend,
    target: QdrantServerBackend,
    *,
    drop_source: bool,
    out: Print,
) -> int:
    """Copy, report, close both; the exit status (1 with one line when the copy failed)."""
    started = time.monotonic()
    try:
        namespaces, memories = await copy_collections_to_shared(
            source,
            target,
            drop_source=drop_source,
            progress=lambda name, count: out(f"copied {name}: {count} memories"),
        )
        await vector_fill.fill_store(target, vector_fill.keywords(KeywordEncoder()))
    except BackendError as error:
        out(f"migrate-layout failed (run it again: it resumes without duplicates): {error}")
        return 1
    finally:
        await source.close()
        await target.close()
    dropped = "; old collections dropped" if drop_source else ""
    out(
        f"migrated {namespaces} namespaces and {memories} memories into the shared layout"
        f" in {time.monotonic() - started:.1f} s{dropped}"
    )
    return 0


async def migrate_from_settings(settings: Settings, *, drop_source: bool, out: Print) -> int:
    if settings.backend != "qdrant" or settings.qdrant_url is None:
        out("migrate-layout moves a Qdrant server's data: set QDRANT_URL (and QDRANT_API_KEY)")
        return 2
    from plugin.backends import qdrant_options
    from plugin.embedding.encoders import configured_dimension
    from plugin.embedding.encoders import configured_token_dimension

    dimension = configured_dimension(settings)  # the model `serve` will embed with
    timeout_s = max(settings.backend_timeout_s, 10.0)  # an offline batch job, not a request
    # a store being drained gains no token vectors
    drained = qdrant_options(settings, dimension, timeout_s=timeout_s, tokens=False)
    tokens = configured_token_dimension(settings)
    shared = qdrant_options(settings, dimension, timeout_s=timeout_s, token_dimension=tokens)
    source, target = build("qdrant-collections", drained), build("qdrant", shared)
    assert isinstance(source, QdrantCollectionsBackend)  # what the registry names them
    assert isinstance(target, QdrantServerBackend)
    return await migrate(source, target, drop_source=drop_source, out=out)
