"""Each shard's IDF of the wordpieces searches ask, kept until the shard is next written.

A shard's answers cannot change between two writes, so the weights stay exactly the engine's.
See docs/backends.md, "Weighing query tokens by rarity".
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import qdrant_edge as qe

from adapters.engine.engine import idf_requests


@dataclass
class _Known:
    shard: Any  # the shard object itself: a reopened shard may reuse a closed one's id()
    generation: int
    idf: dict[int, float | None] = field(default_factory=dict)  # None: no memory holds it


class WordpieceIdf:
    """`of(shard, ids)`: the IDF of each of `ids` some memory of `shard` holds."""

    def __init__(self, generation: Callable[[Any], int]) -> None:
        self._generation = generation
        self._known: dict[int, _Known] = {}

    def of(self, shard: Any, ids: Sequence[int]) -> dict[int, float]:
        generation = self._generation(shard)
        known = self._known.get(id(shard))
        if known is None or known.shard is not shard or known.generation != generation:
            known = self._known[id(shard)] = _Known(shard, generation)
        asked = [piece for piece in ids if piece not in known.idf]
        if asked:
            found = shard.query_batch(qe.QueryBatchRequest(idf_requests(asked)))
            for piece, points in zip(asked, found, strict=True):
                known.idf[piece] = points[0].score if points else None
        return {piece: idf for piece in ids if (idf := known.idf[piece]) is not None}
