"""Sparse-dense search on Pinecone, measured through the Pinecone fake on LoCoMo.

    python -m benchmarks.pinecone_hybrid [--data ../shared/data/locomo/locomo-dev.json]

Pinecone keeps no corpus statistics, so its sparse-dense query scores
`dense dot + sparse dot` without IDF (adapters/pinecone/keywords.py). This writes
every LoCoMo conversation (dialog turns and observations, as benchmarks/retrieval.py
does) through `PineconeBackend` into the HTTP-level fake of a `dotproduct` index
(harness/pinecone_fake.py, which scores as Pinecone documents), embeds with the real
model in this process, and prints recall@k, categories 1-4, for the dense and the
hybrid query side by side. Nothing here is a Pinecone latency: the fake answers
in-process. About 2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from plugin.core.service import utc_now
from plugin.embedding.encoders import load_encoder
from plugin.settings import Settings


def embed(encoder: Any, texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), 64):
        vectors += encoder.encode(texts[start : start + 64])
    return vectors


async def measure(conversations: list[locomo.Conversation]) -> None:
    encoder, words = load_encoder(Settings()), KeywordEncoder()
    now = utc_now()
    with FakePinecone(dimension=encoder.dimension, metric="dotproduct").mocked() as fake:
        store = pinecone_backend(fake)
        await store.start()
        for conversation in conversations:
            for mode in locomo.MODES:
                name = conversation.namespace(mode)
                await store.save_namespace(NamespaceRecord(name, "workspace", now))
                rows = conversation.memories[mode]
                texts = [content for _, _, content in rows]
                memories = [
                    MemoryRecord(memory_id, name, text, "fact", "agent", now)
                    for (memory_id, _, _), text in zip(rows, texts, strict=True)
                ]
                stored = list(zip(memories, embed(encoder, texts), strict=True))
                await store.transfer.upsert_memories(
                    stored, [words.document(text) for text in texts]
                )
        fake.reconcile_all()
        questions = [q for c in conversations for q in c.questions]
        asked = dict(zip(questions, embed(encoder, [q.text for q in questions]), strict=True))
        tables: dict[str, dict[str, locomo.RecallTable]] = {}
        for label in ("dense", "hybrid"):
            tables[label] = {mode: locomo.RecallTable() for mode in locomo.MODES}
            for conversation in conversations:
                for mode in locomo.MODES:
                    turn_of = conversation.turn_of(mode)
                    for question in conversation.questions:
                        terms = None if label == "dense" else words.query(question.text)
                        query = SearchQuery(asked[question], terms)
                        hits = await store.query_memories(
                            [conversation.namespace(mode)], query, MemoryFilter(now=now), 50
                        )
                        found = [turn_of[hit.memory.id] for hit in hits]
                        recall = locomo.recall_at(found, question.evidence)
                        tables[label][mode].add(question.category, recall)
        await store.close()
    header = "".join(f"{'R@' + str(k):>7}" for k in locomo.KS)
    for mode in locomo.MODES:
        print(f"\n{mode}: categories 1-4")
        print(f"  {'query':<20}{header}")
        for label, by_mode in tables.items():
            row = by_mode[mode].mean(locomo.HEADLINE)
            print(f"  {label:<20}" + "".join(f"{x:7.3f}" for x in row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    conversations = locomo.load(args.data)
    print(f"Pinecone sparse-dense on {args.data.name} through the fake ({machine()})")
    asyncio.run(measure(conversations))


if __name__ == "__main__":
    main()
