"""`MemoryService.commit`: the model and the existence check of an explicit id overlap.

The text is queued for the model before the check runs; when the check fails, the
queued text must leave the model's queue (no wasted batch slot, no failure that
nobody reads), and the caller sees the check's failure.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.base import MemoryRecord, NamespaceRecord
from adapters.errors import BackendUnavailable
from adapters.qdrant.edge import QdrantEdgeBackend
from plugin.embedder import BatchingEmbedder
from plugin.keywords import KeywordEncoder
from plugin.service import MemoryService
from plugin.wire import MemoryWrite
from tests.test_embedder import GatedEncoder

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MEMORY_ID = "11111111-2222-4333-8444-555555555555"


async def test_a_failed_existence_check_takes_the_text_out_of_the_model_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = QdrantEdgeBackend(3, tmp_path)
    encoder = GatedEncoder()
    encoder.gate.set()
    embedder = BatchingEmbedder(encoder)
    await backend.start()
    await embedder.start()
    try:
        await backend.save_namespace(NamespaceRecord("workspace:w", "workspace", NOW, None, None))
        service = MemoryService(backend, embedder, KeywordEncoder(), clock=lambda: NOW)

        async def lookup_down(namespace: str, memory_id: str) -> MemoryRecord | None:
            raise BackendUnavailable("store down for this test")

        monkeypatch.setattr(backend, "get_memory", lookup_down)
        body = MemoryWrite.model_validate(
            {"content": "never embedded", "kind": "fact", "source": "agent", "id": MEMORY_ID}
        )
        with pytest.raises(BackendUnavailable, match="store down"):
            await service.commit("workspace:w", body)
        monkeypatch.undo()
        # The next commit runs alone: the abandoned text did not ride along.
        body = body.model_copy(update={"content": "embedded"})
        stored = await service.commit("workspace:w", body)
    finally:
        await embedder.close()
        await backend.close()
    assert stored.id == MEMORY_ID
    assert encoder.batches == [["embedded"]]


async def test_a_failed_embedding_behind_a_failed_check_is_not_left_unread() -> None:
    """Both fail: the caller sees the check's error; asyncio reports nothing at exit."""
    from plugin.service import _abandon

    loop = asyncio.get_running_loop()
    failed: asyncio.Future[list[float]] = loop.create_future()
    failed.set_exception(RuntimeError("model exploded"))
    pending: asyncio.Future[list[float]] = loop.create_future()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        _abandon(failed)
        _abandon(pending)
        del failed
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert pending.cancelled()
    assert reported == []
