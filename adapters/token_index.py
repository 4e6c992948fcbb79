"""The token-vector index, a part a backend may offer (issue 30).

Not methods of `VectorBackend`: only the Qdrant stores keep token vectors, so a
backend offers this part (`VectorBackend.token_index()`) or None. Its one use is
the upgrade of a store written before token vectors existed
(plugin/embedding/token_index.py): give each memory lacking them its own, from its
stored content, in the background, while searches rank it by the fused score alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.values import TokenVectors


class TokenIndex(Protocol):
    """Filling in token vectors, in place."""

    async def prepare_tokens(self) -> None:
        """Make every memory able to hold token vectors (a store written before them
        gains the multivector); idempotent."""
        ...

    async def untokenized_memories(
        self, cursor: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        """A page of memories with no token vectors, as (key, content), and the next
        cursor: walks the whole store once from None until the cursor returned is None."""
        ...

    async def index_tokens(self, items: Sequence[tuple[str, TokenVectors]]) -> int:
        """Give each keyed memory its token vectors, unless it has some by now (a memory
        rewritten since it was listed carries its new content's); how many."""
        ...
