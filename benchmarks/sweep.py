"""What the in-process ranking sweeps share (rerank_sweep.py, feedback_sweep.py).

One embedded store holding every memory of a LoCoMo file with its dense, keyword
and token vectors (the plugin's own encoders), the questions' vectors computed
once, a row of recall per ranking asked of that same store, and the table they
print. Not a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import LIMIT
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import Encoder
from plugin.embedding.encoders import load_encoder
from plugin.settings import Settings

BATCH = 32
# Per ranking's label, per memory mode: its recall over the questions.
Tables = dict[str, dict[str, locomo.RecallTable]]


@dataclass
class SweepStore:
    """The seeded store, the keyword encoder, and every question with its embedding."""

    store: QdrantEdgeBackend
    keywords: KeywordEncoder
    questions: list[tuple[locomo.Conversation, locomo.Question, Embedding]]
    everything: MemoryFilter

    async def record(
        self,
        row: dict[str, locomo.RecallTable],
        conversation: locomo.Conversation,
        question: locomo.Question,
        query: SearchQuery,
    ) -> None:
        """Ask `query` in each memory mode's namespace; add its recall to `row`."""
        for mode in locomo.MODES:
            turn_of = conversation.turn_of(mode)
            found = await self.store.query_memories(
                [conversation.namespace(mode)], query, self.everything, LIMIT
            )
            turns = [turn_of[hit.memory.id] for hit in found]
            row[mode].add(question.category, locomo.recall_at(turns, question.evidence))

    def rerank_query(self, text: str, embedded: Embedding) -> SearchQuery:
        """The question as the `rerank` mode asks it: keyword feedback, then MaxSim."""
        return SearchQuery(
            embedded.vector, self.keywords.query(text), embedded.tokens, feedback=True
        )


@asynccontextmanager
async def seeded(
    conversations: list[locomo.Conversation], data: Path, encoder: Encoder | None = None
) -> AsyncIterator[SweepStore]:
    """Every memory written with all its vectors (by `encoder`, or the default one);
    closed on leaving."""
    encoder, keywords = encoder or load_encoder(Settings.from_env({})), KeywordEncoder()
    store = QdrantEdgeBackend(encoder.dimension, data, token_dimension=encoder.token_dimension)
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
                    embedded = encoder.embed([content for _, _, content in chunk], tokens=True)
                    for place, ((memory_id, _, content), found) in enumerate(
                        zip(chunk, embedded, strict=True), start
                    ):
                        memory = MemoryRecord(
                            memory_id, name, content, "fact", "agent", now, position=place
                        )
                        document = keywords.document(content)
                        await store.upsert_memory(
                            memory, MemoryVectors(found.vector, document, found.tokens)
                        )
        asked = [(c, q) for c in conversations for q in c.questions]
        texts = [q.text for _, q in asked]
        embedded = [
            e
            for s in range(0, len(texts), BATCH)
            for e in encoder.embed(texts[s : s + BATCH], tokens=True)
        ]
        questions = [(c, q, e) for (c, q), e in zip(asked, embedded, strict=True)]
        yield SweepStore(store, keywords, questions, MemoryFilter(now=now))
    finally:
        await store.close()


def tables(labels: list[str]) -> Tables:
    return {label: {mode: locomo.RecallTable() for mode in locomo.MODES} for label in labels}


def print_tables(found: Tables) -> None:
    """R@1/5/10/20/50 of categories 1-4, a row per ranking, per memory mode."""
    for mode in locomo.MODES:
        print(f"\n{mode}, categories 1-4")
        print(f"  {'ranking':<16}" + "".join(f"{'R@' + str(k):>7}" for k in locomo.KS))
        for label, row in found.items():
            means = row[mode].mean(locomo.HEADLINE)
            print(f"  {label:<16}" + "".join(f"{x:7.3f}" for x in means))


def main(
    doc: str | None, name: str, sweep: Callable[[list[locomo.Conversation], Path], Awaitable[None]]
) -> None:
    """A sweep's command line: `--data`, then `sweep` over a temporary store directory."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    print(f"{name} sweep on {args.data.name}: {len(conversations)} conversations ({machine()})")
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        asyncio.run(sweep(conversations, Path(tmp)))
