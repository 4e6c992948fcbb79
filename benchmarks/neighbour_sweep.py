"""The neighbours' shares (plugin/core/neighbours.py), chosen on LoCoMo's development half.

    python -m benchmarks.neighbour_sweep [--data ../shared/data/locomo/locomo-dev.json]

In-process, no server: every memory written into an embedded store in its conversation's
order (its place, as the plugin gives it), then every question of categories 1-4 asked for
the pool (`neighbours.POOL`) by the default's ranking (the rerank, query tokens weighed) and
by hybrid (the dimmer's), each pool then lifted by its neighbours at each set of shares (one
place away, two) and cut to `limit` 50. The same pools again with every namespace's places
shuffled (writers interleaving: the order means nothing). Prints R@1/5/10/20/50.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks import sweep
from benchmarks.retrieval import LIMIT
from plugin.core import neighbours

# Shares by distance (one place away, two): none, one place only, and around the default's.
SHARES = ((0.0,), (0.5,), (0.5, 0.1), (0.5, 0.2), (0.5, 0.3), (0.4, 0.2), (0.6, 0.2))
SEED = 7


def label(shares: tuple[float, ...]) -> str:
    return "+".join(f"{share:g}" for share in shares)


def shuffled(hits: list[ScoredMemory], places: dict[str, list[int]]) -> list[ScoredMemory]:
    """`hits` with each memory's place taken from its namespace's shuffled order."""
    return [
        ScoredMemory(
            replace(hit.memory, position=places[hit.memory.namespace][hit.memory.position or 0]),
            hit.score,
        )
        for hit in hits
    ]


async def run(conversations: list[locomo.Conversation], data: Path) -> None:
    rng = random.Random(SEED)
    places: dict[str, list[int]] = {}
    for conversation in conversations:
        for mode in locomo.MODES:
            count = len(conversation.memories[mode])
            places[conversation.namespace(mode)] = rng.sample(range(count), count)
    async with sweep.seeded(conversations, data) as seeded:
        labels = [
            f"{ranking} {order} {label(shares)}"
            for ranking in ("default", "hybrid")
            for order in ("written", "shuffled")
            for shares in SHARES
        ]
        found = sweep.tables(labels)
        for conversation, question, embedded in seeded.questions:
            keywords = seeded.keywords.query(question.text)
            queries = {
                "default": SearchQuery(
                    embedded.vector, keywords, embedded.tokens, feedback=True, weigh_tokens=True
                ),
                "hybrid": SearchQuery(embedded.vector, keywords),
            }
            for mode in locomo.MODES:
                turn_of = conversation.turn_of(mode)
                for ranking, query in queries.items():
                    pool = await seeded.store.query_memories(
                        [conversation.namespace(mode)], query, seeded.everything, neighbours.POOL
                    )
                    orders = {"written": pool, "shuffled": shuffled(pool, places)}
                    for order, hits in orders.items():
                        for shares in SHARES:
                            ranked = neighbours.lift(hits, shares)[:LIMIT]
                            turns = [turn_of[hit.memory.id] for hit in ranked]
                            recall = locomo.recall_at(turns, question.evidence)
                            found[f"{ranking} {order} {label(shares)}"][mode].add(
                                question.category, recall
                            )
        sweep.print_tables(found)


if __name__ == "__main__":
    sweep.main(__doc__, "neighbour", run)
