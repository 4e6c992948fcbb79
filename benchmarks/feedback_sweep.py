"""Keyword feedback's constants and its pairing with the rerank, on LoCoMo's development half.

    python -m benchmarks.feedback_sweep [--data ../shared/data/locomo/locomo-dev.json]

In-process, no server, as benchmarks/rerank_sweep.py: every memory of the file is
written into an embedded store with its dense, keyword and token vectors, then
every question of categories 1-4 is asked with `limit` 50 per memory mode, ranked
by hybrid, by keyword feedback at several (documents, terms, weight), by the
rerank alone and by feedback then the rerank: the same store and query vectors
for every row (adapters/qdrant/feedback.py). Prints
R@1/5/10/20/50, and each ranking's time a search in-process (one namespace,
`limit` 50, the engine's time and the adapter's: a rough guide on a shared machine).
About 6 minutes on 2 cores.
"""

from __future__ import annotations

import time
from pathlib import Path

from adapters.qdrant import feedback
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks import sweep

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


async def run(conversations: list[locomo.Conversation], data: Path) -> None:
    async with sweep.seeded(conversations, data) as seeded:
        found = sweep.tables([label for label, _, _ in CONFIGS])
        for label, widening, rerank in CONFIGS:
            started = time.perf_counter()
            if widening is not None:
                docs, terms, weight = widening
                feedback.FEEDBACK_DOCS, feedback.FEEDBACK_TERMS = docs, terms
                feedback.FEEDBACK_WEIGHT = weight
            for conversation, question, embedded in seeded.questions:
                query = SearchQuery(
                    embedded.vector,
                    seeded.keywords.query(question.text),
                    embedded.tokens if rerank else None,
                    feedback=widening is not None,
                )
                await seeded.record(found[label], conversation, question, query)
            took = (time.perf_counter() - started) / (len(seeded.questions) * len(locomo.MODES))
            print(f"  {label}: {took * 1000:.2f} ms a search", flush=True)
        sweep.print_tables(found)


if __name__ == "__main__":
    sweep.main(__doc__, "feedback", run)
