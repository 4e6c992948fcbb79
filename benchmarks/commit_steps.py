"""Where a sequential commit with an explicit id spends its time, step by step.

In-process, no HTTP: the embedded store (qdrant-edge, 10,000 memories preloaded in
the namespace with real vectors), the configured encoder and its batcher, each step
of `MemoryService.commit` timed alone (median of 300): body parse and validation,
namespace lookup, the get_memory existence check (the id is new, as in a backfill),
the encode itself, the batcher on top of it (a thread hop for torch; for the ONNX
backends a lone text runs on the event loop, as in the server), the upsert, the
201 body. Then the whole `MemoryService.commit`, and over real HTTP against a server
process the full request (in latency.py, "commit with id"): what is left is aiohttp,
the middleware and the client.

Run: python -m benchmarks.commit_steps [--backend onnx]   (about 1 minute)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable
from collections.abc import Callable
from datetime import UTC
from datetime import datetime
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from benchmarks.common import machine
from benchmarks.sentences import sentences
from plugin.core.service import MemoryService
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.encoders import load_encoder
from plugin.http.wire import MemoryWrite
from plugin.settings import Settings

NAMESPACE = "workspace:steps"
PRELOAD = 10_000
RUNS = 300


async def median_ms(step: Callable[[int], Awaitable[object]]) -> float:
    await step(0)
    took = []
    for i in range(RUNS):
        begun = time.perf_counter()
        await step(i)
        took.append(time.perf_counter() - begun)
    return statistics.median(took) * 1000


async def measure(backend_name: str, tmp: Path) -> None:
    settings = Settings.model_validate(
        {"MEMORY_PLUGIN_EMBEDDING_BACKEND": backend_name, "MEMORY_PLUGIN_DATA_DIR": str(tmp)}
    )
    encoder = load_encoder(settings)
    store = QdrantEdgeBackend(encoder.dimension, tmp, token_dimension=encoder.token_dimension)
    await store.start()
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        now = datetime.now(UTC)
        await store.save_namespace(NamespaceRecord(NAMESPACE, "workspace", now))
        texts = sentences(PRELOAD + RUNS + 1)
        for start in range(0, PRELOAD, 256):
            chunk = texts[start : start + 256]
            vectors = encoder.encode(chunk)
            memories = [
                (MemoryRecord(str(uuid.uuid4()), NAMESPACE, t, "fact", "agent", now), v)
                for t, v in zip(chunk, vectors, strict=True)
            ]
            await store.transfer.upsert_memories(memories)
        fresh = texts[PRELOAD:]
        bodies = [
            json.dumps({"content": t, "kind": "fact", "source": "agent", "id": str(uuid.uuid4())})
            for t in fresh
        ]
        parsed = [MemoryWrite.model_validate_json(b) for b in bodies]
        vector = encoder.encode([fresh[0]])[0]
        service = MemoryService(store, embedder, KeywordEncoder())

        async def parse(i: int) -> object:
            return MemoryWrite.model_validate_json(bodies[i])

        async def lookup(i: int) -> object:
            return await store.get_namespace(NAMESPACE)

        async def exists(i: int) -> object:
            return await store.get_memory(NAMESPACE, str(uuid.uuid4()))

        async def encode(i: int) -> object:
            return encoder.encode([fresh[i]])

        async def batched(i: int) -> object:
            return await embedder.embed(fresh[i])

        async def upsert(i: int) -> object:
            memory = MemoryRecord(str(uuid.uuid4()), NAMESPACE, fresh[i], "fact", "agent", now)
            return await store.upsert_memory(memory, MemoryVectors(vector))

        async def reply(i: int) -> object:
            return json.dumps({"id": parsed[i].id, "namespace": NAMESPACE})

        async def commit(i: int) -> object:
            body = parsed[i].model_copy(update={"id": str(uuid.uuid4())})
            return await service.commit(NAMESPACE, body)

        steps = [
            ("parse + validate body", parse),
            ("namespace lookup", lookup),
            ("get_memory (existence check)", exists),
            ("encode one text (model alone)", encode),
            ("batcher: queue + encode", batched),
            ("upsert_memory", upsert),
            ("201 body", reply),
            ("MemoryService.commit, whole", commit),
        ]
        print(f"commit steps, {backend_name}, {PRELOAD:,} memories in the namespace ({machine()})")
        for name, step in steps:
            print(f"  {name:<36} {await median_ms(step):>7.3f} ms median")
    finally:
        await embedder.close()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="onnx", choices=["torch", "onnx", "onnx-int8"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-steps-") as tmp:
        asyncio.run(measure(args.backend, Path(tmp)))


if __name__ == "__main__":
    main()
