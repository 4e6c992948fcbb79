"""A search over a large namespace, on its shard just written and after a reopen.

    python -m benchmarks.reopen [--memories 6300] [--rounds 3] [--data PATH]

In-process, no server: LoCoMo's dialog turns (repeated as needed) written into one
namespace of an embedded store through the backend's write path, concurrent
writes batched as the server batches them, then LoCoMo's first 200 questions asked
as hybrid searches (limit 10) on the shard as written, then again once the shard
has been reopened as the upkeep does at a quiet moment
(adapters/engine/upkeep.py). Both rankings are compared, as (content, score)
lists: a reopen must not change an answer (the turns repeat past LoCoMo's 2,900, and
equal memories score alike in either order). Prints the time a search by round,
the reopen's own time, and the ratio. About 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC
from datetime import datetime
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.engine.upkeep import EdgeUpkeep
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from plugin.embedding.encoders import load_encoder
from plugin.settings import Settings

NAME = "workspace:big"
BATCH = 64  # concurrent writes, batched into engine calls by the store
QUESTIONS = 200


async def timed_searches(
    store: QdrantEdgeBackend, queries: list[SearchQuery], rounds: int
) -> tuple[list[float], list[list[tuple[str, float]]]]:
    """Milliseconds a search, per round; what each search answered (last round)."""
    everything = MemoryFilter(now=datetime.now(UTC))
    per_round, answers = [], []
    for _ in range(rounds):
        answers = []
        started = time.perf_counter()
        for query in queries:
            found = await store.query_memories([NAME], query, everything, 10)
            answers.append([(m.memory.content, round(m.score or 0.0, 5)) for m in found])
        per_round.append((time.perf_counter() - started) / len(queries) * 1000)
    return per_round, answers


async def run(memories: int, rounds: int, data: Path) -> None:
    conversations = locomo.load(data, "speaker")
    turns = [text for c in conversations for _, _, text in c.memories["dialog"]]
    questions = [q.text for c in conversations for q in c.questions][:QUESTIONS]
    encoder, keywords = load_encoder(Settings.from_env({})), KeywordEncoder()
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="bench-reopen-") as tmp:
        store = QdrantEdgeBackend(
            encoder.dimension, Path(tmp), token_dimension=encoder.token_dimension
        )
        await store.start()
        try:
            await store.save_namespace(NamespaceRecord(NAME, "workspace", now))
            started = time.perf_counter()
            for first in range(0, memories, BATCH):
                texts = [turns[n % len(turns)] for n in range(first, min(memories, first + BATCH))]
                writes = [
                    store.upsert_memory(
                        MemoryRecord(str(uuid.uuid4()), NAME, text, "fact", "agent", now),
                        MemoryVectors(vector, keywords.document(text)),
                    )
                    for text, vector in zip(texts, encoder.encode(texts), strict=True)
                ]
                await asyncio.gather(*writes)
            print(f"wrote {memories:,} memories in {time.perf_counter() - started:.0f} s")
            queries = [
                SearchQuery(vector, keywords.query(text))
                for text, vector in zip(questions, encoder.encode(questions), strict=True)
            ]
            written, before = await timed_searches(store, queries, rounds)
            index = store._shards.index_of(NAME)
            started = time.perf_counter()
            assert EdgeUpkeep(store.store).reopen(index), "the shard was not reopened"
            reopen_s = time.perf_counter() - started
            reopened, after = await timed_searches(store, queries, rounds)
        finally:
            await store.close()
    print(f"hybrid search, {QUESTIONS} questions, limit 10, ms a search by round:")
    print(f"  shard as written:  {', '.join(f'{ms:.2f}' for ms in written)}")
    print(f"  after its reopen:  {', '.join(f'{ms:.2f}' for ms in reopened)}")
    print(f"  the reopen itself: {reopen_s:.3f} s")
    ratio = statistics.median(written) / statistics.median(reopened)
    print(f"  as written / reopened (medians): {ratio:.2f}x")
    same = sum(a == b for a, b in zip(before, after, strict=True))
    print(f"  answers unchanged by the reopen: {same} of {len(before)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=6300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    print(f"reopen ({machine()})")
    asyncio.run(run(args.memories, args.rounds, args.data))


if __name__ == "__main__":
    main()
