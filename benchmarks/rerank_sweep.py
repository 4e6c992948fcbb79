"""The rerank's weight and depth, chosen on LoCoMo's development half (issue 30).

    python -m benchmarks.rerank_sweep [--data ../shared/data/locomo/locomo-dev.json]

In-process, no server: every memory of the file is written into an embedded store
with its dense, keyword and token vectors (the plugin's own encoders), then every
question of categories 1-4 is asked with `limit` 50 per memory mode, ranked by the
shipped hybrid plan and by the rerank (adapters/qdrant/ranking.py) at each weight
and depth: the same store and query vectors for every row. Prints R@1/5/10/20/50.
About 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from adapters.qdrant import ranking
from adapters.qdrant.edge.backend import QdrantEdgeBackend
from adapters.values import MemoryFilter, MemoryRecord, NamespaceRecord, SearchQuery
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA, LIMIT
from plugin.embedding.encoders import load_encoder
from plugin.embedding.keywords import KeywordEncoder
from plugin.embedding.token_vectors import tokens_of
from plugin.settings import Settings

WEIGHTS = (0.0, 1.0, 1.5, 2.0, 3.0)
DEPTHS = (50, 100)
BATCH = 32


async def sweep(conversations: list[locomo.Conversation], data: Path) -> None:
    encoder, keywords = load_encoder(Settings.from_env({})), KeywordEncoder()
    encoder.keep_tokens = True  # as the rerank mode's server sets it
    store = QdrantEdgeBackend(encoder.dimension, data)
    await store.start()
    now = datetime.now(UTC)
    try:
        for conversation in conversations:
            for mode in locomo.MODES:
                name = conversation.namespace(mode)
                await store.save_namespace(NamespaceRecord(name, "workspace", now))
                rows = conversation.memories[mode]
                for start in range(0, len(rows), BATCH):
                    chunk = rows[start : start + BATCH]
                    vectors = encoder.encode([content for _, _, content in chunk])
                    for (memory_id, _, content), vector in zip(chunk, vectors, strict=True):
                        memory = MemoryRecord(memory_id, name, content, "fact", "agent", now)
                        document = keywords.document(content)
                        await store.upsert_memory(memory, vector, document, tokens_of(vector))
        configs = [("hybrid", 0.0, 0)] + [
            (f"w {w:g}, top {d}", w, d) for d in DEPTHS for w in WEIGHTS if w
        ]
        tables = {label: {m: locomo.RecallTable() for m in locomo.MODES} for label, _, _ in configs}
        questions = [(c, q) for c in conversations for q in c.questions]
        texts = [q.text for _, q in questions]
        vectors = [
            v for s in range(0, len(texts), BATCH) for v in encoder.encode(texts[s : s + BATCH])
        ]
        everything = MemoryFilter(now=now)
        for label, weight, depth in configs:
            ranking.RERANK_WEIGHT, ranking.RERANK_DEPTH = weight, depth
            for (conversation, question), vector in zip(questions, vectors, strict=True):
                tokens = tokens_of(vector) if weight else None
                query = SearchQuery(list(vector), keywords.query(question.text), tokens)
                for mode in locomo.MODES:
                    turn_of = conversation.turn_of(mode)
                    found = await store.query_memories(
                        [conversation.namespace(mode)], query, everything, LIMIT
                    )
                    turns = [turn_of[hit.memory.id] for hit in found]
                    tables[label][mode].add(
                        question.category, locomo.recall_at(turns, question.evidence)
                    )
        for mode in locomo.MODES:
            print(f"\n{mode}, categories 1-4")
            print(f"  {'ranking':<16}" + "".join(f"{'R@' + str(k):>7}" for k in locomo.KS))
            for label, _, _ in configs:
                row = tables[label][mode].mean(locomo.HEADLINE)
                print(f"  {label:<16}" + "".join(f"{x:7.3f}" for x in row))
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"rerank sweep on {args.data.name}: {len(conversations)} conversations ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-rerank-") as tmp:
        asyncio.run(sweep(conversations, Path(tmp)))


if __name__ == "__main__":
    main()
