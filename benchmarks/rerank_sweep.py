"""The rerank's weight and depth, chosen on LoCoMo's development half.

    python -m benchmarks.rerank_sweep [--data ../shared/data/locomo/locomo-dev.json]

In-process, no server: every memory of the file is written into an embedded store
with its dense, keyword and token vectors (the plugin's own encoders), then every
question of categories 1-4 is asked with `limit` 50 per memory mode, ranked by the
shipped hybrid plan, by keyword feedback alone, and by the rerank as the `rerank`
mode asks it (keyword feedback, then MaxSim: adapters/qdrant/ranking.py and
edge/search_passes.py) at each weight and depth: the same store and query vectors for
every row. Prints R@1/5/10/20/50. About 6 minutes on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

from adapters.qdrant import ranking
from adapters.values import SearchQuery
from benchmarks import locomo
from benchmarks import sweep

WEIGHTS = (1.5, 2.0, 3.0, 4.0, 5.0, 6.0)
DEPTHS = (50, 75, 100)


async def run(conversations: list[locomo.Conversation], data: Path) -> None:
    async with sweep.seeded(conversations, data) as seeded:
        configs = [("hybrid", 0.0, 0, False), ("feedback", 0.0, 0, True)] + [
            (f"w {w:g}, top {d}", w, d, True) for d in DEPTHS for w in WEIGHTS
        ]
        found = sweep.tables([label for label, _, _, _ in configs])
        for label, weight, depth, widened in configs:
            ranking.RERANK_WEIGHT, ranking.RERANK_DEPTH = weight, depth
            for conversation, question, embedded in seeded.questions:
                tokens = embedded.tokens if weight else None
                keywords = seeded.keywords.query(question.text)
                query = SearchQuery(embedded.vector, keywords, tokens, feedback=widened)
                await seeded.record(found[label], conversation, question, query)
        sweep.print_tables(found)


if __name__ == "__main__":
    sweep.main(__doc__, "rerank", run)
