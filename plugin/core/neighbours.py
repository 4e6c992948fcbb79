"""A memory's neighbours in its namespace's write order lift it toward their score.

The evidence for a question often stands beside what its words match: the turn before names
the topic, the turn after answers it. See docs/backends.md, "Neighbours in the write order".
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.values import ScoredMemory

# How many memories a ranked search asks of the store: the pool the neighbours are found in.
POOL = 75
# The share of the gap to its best neighbour at each distance a memory rises by (1, 2, ...).
SHARES = (0.5, 0.2)


def lift(hits: Sequence[ScoredMemory], shares: Sequence[float] | None = None) -> list[ScoredMemory]:
    """`hits` (pinned first, each side best first), each scored memory raised to the most of
    score + shares[d-1] x (its best neighbour's score at distance d - its own) where that is
    positive, each side best first again (stable). With shares below 1 none passes the one
    lifting it, so the best stays first."""
    shares = SHARES if shares is None else shares
    pinned = [hit for hit in hits if hit.memory.pin]
    unpinned = [hit for hit in hits if not hit.memory.pin]
    return [*_lifted(pinned, shares), *_lifted(unpinned, shares)]


def _lifted(side: list[ScoredMemory], shares: Sequence[float]) -> list[ScoredMemory]:
    if len(side) < 2 or not any(shares):
        return side
    by_place = {
        (hit.memory.namespace, hit.memory.position): hit.score
        for hit in side
        if hit.memory.position is not None and hit.score is not None
    }
    lifted = []
    for hit in side:
        place, own = hit.memory.position, hit.score
        if place is None or own is None:
            lifted.append(hit)
            continue
        name, score = hit.memory.namespace, own
        for distance, share in enumerate(shares, 1):
            around = (
                by_place.get((name, place - distance)),
                by_place.get((name, place + distance)),
            )
            best = max((s for s in around if s is not None), default=own)
            score = max(score, own + share * (best - own))
        lifted.append(hit if score == own else ScoredMemory(hit.memory, score))
    lifted.sort(key=lambda hit: -1e300 if hit.score is None else hit.score, reverse=True)
    return lifted
