"""`memory-plugin-vector migrate-layout`: a Qdrant server from one collection per namespace
to the shared layout.

The shared layout refuses to start while per-namespace collections exist (so
nothing is silently ignored), and its one-line refusal names this command. It
copies every namespace record and every memory with its stored vector
(`adapters/qdrant/migrate.py`; nothing is re-embedded, and running it twice
changes nothing), prints one line per namespace and a summary, and drops the
old collections only with `--drop-source`. Then the shared store's keyword
vectors are brought up to date from content (plugin/embedding/keyword_index.py), so it
searches as the old layout did. Settings come from the environment, as for `serve`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from adapters.errors import BackendError
from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend
from plugin.embedding.keyword_index import index_store
from plugin.embedding.keywords import KeywordEncoder
from plugin.settings import Settings

Print = Callable[[str], None]


async def migrate(
    source: QdrantCollectionsBackend,
    target: QdrantServerBackend,
    *,
    drop_source: bool,
    out: Print,
) -> int:
    """Copy, report, close both; the exit status (1 with one line when the copy failed)."""
    from adapters.qdrant.migrate import copy_collections_to_shared

    started = time.monotonic()
    try:
        namespaces, memories = await copy_collections_to_shared(
            source,
            target,
            drop_source=drop_source,
            progress=lambda name, count: out(f"copied {name}: {count} memories"),
        )
        await index_store(target, KeywordEncoder())
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
    from plugin.embedding.encoders import SentenceTransformerEncoder

    # The model that `serve` will embed with fixes the new collection's dimension.
    dimension = SentenceTransformerEncoder.load(settings.embedding_model).dimension
    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    url, prefix = settings.qdrant_url, settings.collection_prefix
    timeout_s = max(settings.backend_timeout_s, 10.0)  # an offline batch job, not a request
    source = QdrantCollectionsBackend(
        dimension, url=url, api_key=key, prefix=prefix, timeout_s=timeout_s
    )
    target = QdrantServerBackend(
        dimension, url=url, api_key=key, prefix=prefix, timeout_s=timeout_s
    )
    return await migrate(source, target, drop_source=drop_source, out=out)
