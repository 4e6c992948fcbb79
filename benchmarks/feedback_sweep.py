"""Keyword feedback's constants and its pairing with the rerank, on LoCoMo's development half.

    python -m benchmarks.feedback_sweep [--data ../shared/data/locomo/locomo-dev.json]

In-process, no server, as benchmarks/rerank_sweep.py: every memory of the file is
written into an embedded store with its dense, keyword and token vectors, then
every question of categories 1-4 is asked with `limit` 50 per memory mode, ranked
by hybrid, by keyword feedback at several (documents, terms, weight), by the
rerank alone and by feedback then the rerank: the same store and query vectors
for every row (issue 30, item 5; adapters/qdrant/feedback.py). Prints
R@1/5/10/20/50, and each ranking's time a search in-process (one namespace,
`limit` 50, the engine's time and the adapter's: a rough guide on a shared machine).
About 6 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from adapters.qdrant import feedback
from adapters.qdrant.edge.backend import QdrantEdgeBackend
from adapters.values import MemoryFilter, MemoryRecord, NamespaceRecord, SearchQuery
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA, LIMIT
from plugin.embedding.encoders import load_encoder
from plugin.embedding.keywords import KeywordEncoder
from plugin.embedding.token_vectors import tokens_of
from plugin.settings import Settings

BATCH = 32
# (label, feedback (documents, terms, weight) or None, rerank by token vectors)
CONFIGS: list[tuple[str, tuple[int, int, float] | None, bool]] = [
    ("hybrid", None, False),
    ("fb 5/20/0.3", (5, 20, 0.3), False),
    ("fb 2/20/0.3", (2, 20, 0.3), False),
    ("fb 3/20/0.3", (3, 20, 0.3), False),
    ("fb 3/20/0.2", (3, 20, 0.2), False),
    ("fb 3/20/0.4", (3, 20, 0.4), False),
    ("fb 3/30/0.3", (3, 30, 0.3), False),
    ("fb 4/20/0.3", (4, 20, 0.3), False),
    ("rerank alone", None, True),
    ("fb 5/20/0.3+rr", (5, 20, 0.3), True),
    ("fb 3/20/0.3+rr", (3, 20, 0.3), True),
    ("fb 3/20/0.2+rr", (3, 20, 0.2), True),
]


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
        tables = {label: {m: locomo.RecallTable() for m in locomo.MODES} for label, _, _ in CONFIGS}
        questions = [(c, q) for c in conversations for q in c.questions]
        texts = [q.text for _, q in questions]
        vectors = [
            v for s in range(0, len(texts), BATCH) for v in encoder.encode(texts[s : s + BATCH])
        ]
        everything = MemoryFilter(now=now)
        took: dict[str, float] = {}
        for label, widening, rerank in CONFIGS:
            started = time.perf_counter()
            if widening is not None:
                docs, terms, weight = widening
                feedback.FEEDBACK_DOCS, feedback.FEEDBACK_TERMS = docs, terms
                feedback.FEEDBACK_WEIGHT = weight
            for (conversation, question), vector in zip(questions, vectors, strict=True):
                query = SearchQuery(
                    list(vector),
                    keywords.query(question.text),
                    tokens_of(vector) if rerank else None,
                    feedback=widening is not None,
                )
                for mode in locomo.MODES:
                    turn_of = conversation.turn_of(mode)
                    found = await store.query_memories(
                        [conversation.namespace(mode)], query, everything, LIMIT
                    )
                    turns = [turn_of[hit.memory.id] for hit in found]
                    tables[label][mode].add(
                        question.category, locomo.recall_at(turns, question.evidence)
                    )
            took[label] = (time.perf_counter() - started) / (len(questions) * len(locomo.MODES))
            print(f"  {label}: {took[label] * 1000:.2f} ms a search", flush=True)
        for mode in locomo.MODES:
            print(f"\n{mode}, categories 1-4")
            print(f"  {'ranking':<16}" + "".join(f"{'R@' + str(k):>7}" for k in locomo.KS))
            for label, _, _ in CONFIGS:
                row = tables[label][mode].mean(locomo.HEADLINE)
                print(f"  {label:<16}" + "".join(f"{x:7.3f}" for x in row))
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"feedback sweep on {args.data.name}: {len(conversations)} conversations ({machine()})")
    with tempfile.TemporaryDirectory(prefix="bench-feedback-") as tmp:
        asyncio.run(sweep(conversations, Path(tmp)))


if __name__ == "__main__":
    main()
