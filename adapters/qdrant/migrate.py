"""Copy the `collections` layout into the shared layout (`memory-plugin-vector migrate-layout`).

The shared layout refuses to start while collections of the per-namespace
layout exist, so an installation upgrading runs this once, with the plugin
stopped (or still on the `collections` layout: it only reads the source).

Vectors are copied as Qdrant stores them, never recomputed: no model is needed
and every search scores exactly as before. Re-running it changes nothing: a
memory's point id is derived from (namespace, memory id) and an existing
namespace record keeps its epoch, so the same points are written again with the
same content. The source collections are dropped only when asked, after every
namespace was copied.
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.qdrant.server.namespace_collections import QdrantCollectionsBackend
from adapters.qdrant.server.tenants import QdrantServerBackend

# Called once per namespace copied: (namespace name, memories copied for it).
Progress = Callable[[str, int], None]


async def copy_collections_to_shared(
    source: QdrantCollectionsBackend,
    target: QdrantServerBackend,
    *,
    drop_source: bool = False,
    progress: Progress | None = None,
    batch_size: int = 256,
) -> tuple[int, int]:
    """Copy every namespace and memory of `source` into `target`: (namespaces, memories).

    Opens both backends (they may share one `QdrantConnection`); closing them is the
    caller's. Raises `adapters.errors` types; a failed run can simply be run again.
    """
    await source.start()
    await target.prepare(allow_namespace_collections=True)
    copied: dict[str, int] = {}
    current: str | None = None

    def report() -> None:
        if current is not None and progress is not None:
            progress(current, copied[current])

    async for record, page in source.dump(batch_size):
        if record.name != current:
            report()
            await target.save_namespace(record)
            current = record.name
            copied[current] = 0
        if page:
            await target.upsert_memories(page, only_changed=True)
            copied[record.name] += len(page)
    report()
    if drop_source:
        for name in copied:
            await source.delete_namespace(name)
    return len(copied), sum(copied.values())
