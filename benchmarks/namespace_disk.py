"""Disk per memory in one namespace of many memories, `rerank` against `hybrid`.

    python -m benchmarks.namespace_disk [--memories 100000] [--data PATH]

In-process, no server: LoCoMo's dialog turns embedded once by the plugin's own encoder
(sentence, keyword and token vectors), then `--memories` memories written into one
namespace of a fresh embedded store per mode, memory i carrying turn i's text and vectors
(turns reused in order: what is measured is bytes a memory, not recall), 8 writes in
flight. `hybrid` stores no token vectors; `rerank` stores them as its server does. Each
store is closed (every shard flushed) and measured with `du`. Prints KiB a memory per mode
and their ratio (target: rerank at most 3x hybrid).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC
from datetime import datetime
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.token_cost import disk_bytes
from plugin.embedding.encoders import load_encoder
from plugin.settings import Settings

NAMESPACE = "workspace:big"
BATCH = 32
IN_FLIGHT = 8
TARGET = 3.0


def embedded_turns(data: Path) -> list[tuple[str, MemoryVectors]]:
    """Every dialog turn of the file with the vectors a `rerank` server stores for it."""
    encoder, keywords = load_encoder(Settings.from_env({})), KeywordEncoder()
    texts = [
        content
        for conversation in locomo.load(data, "speaker")
        for _, _, content in conversation.memories["dialog"]
    ]
    found = []
    for start in range(0, len(texts), BATCH):
        chunk = texts[start : start + BATCH]
        for text, embedding in zip(chunk, encoder.embed(chunk, tokens=True), strict=True):
            vectors = MemoryVectors(embedding.vector, keywords.document(text), embedding.tokens)
            found.append((text, vectors))
    return found


async def write_namespace(
    store_dir: Path, turns: list[tuple[str, MemoryVectors]], memories: int, *, tokens: bool
) -> float:
    """`memories` memories in one namespace of a fresh store, closed after; seconds taken."""
    dense, token_rows = turns[0][1].dense, turns[0][1].tokens
    sizes = {"token_dimension": len(token_rows[0])} if token_rows else {}
    store = QdrantEdgeBackend(len(dense), store_dir, **sizes)
    await store.start()
    now = datetime.now(UTC)
    try:
        await store.save_namespace(NamespaceRecord(NAMESPACE, "workspace", now))
        if not tokens:
            turns = [(text, MemoryVectors(v.dense, v.keywords)) for text, v in turns]
        started = time.perf_counter()
        pending = iter(range(memories))

        async def writer() -> None:
            for i in pending:  # shared by the writers
                text, vectors = turns[i % len(turns)]
                memory = MemoryRecord(str(uuid.uuid4()), NAMESPACE, text, "fact", "agent", now)
                await store.upsert_memory(memory, vectors)

        await asyncio.gather(*(writer() for _ in range(IN_FLIGHT)))
        return time.perf_counter() - started
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--memories", type=int, default=100_000)
    args = parser.parse_args()
    print(f"one namespace of {args.memories:,} memories ({machine()})")
    turns = embedded_turns(args.data)
    rows = sum(len(vectors.tokens or []) for _, vectors in turns) / len(turns)
    print(f"  {len(turns):,} dialog turns embedded, {rows:.1f} token vectors a turn")
    per_memory = {}
    for mode in ("hybrid", "rerank"):
        with tempfile.TemporaryDirectory(prefix="bench-disk-") as tmp:
            took = asyncio.run(
                write_namespace(Path(tmp), turns, args.memories, tokens=mode == "rerank")
            )
            per_memory[mode] = disk_bytes(Path(tmp)) / args.memories / 1024
        print(f"  {mode}: {per_memory[mode]:.2f} KiB a memory (written in {took:.0f} s)")
    ratio = per_memory["rerank"] / per_memory["hybrid"]
    verdict = "met" if ratio <= TARGET else "NOT met"
    print(f"  rerank / hybrid: {ratio:.2f}x (target at most {TARGET:g}x: {verdict})")


if __name__ == "__main__":
    main()
