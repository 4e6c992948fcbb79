"""Searches: one backend read over every live namespace asked for, ranked as configured.

A mixin of `MemoryService` (plugin/core/service.py), apart so that each reads as one
concern; it uses the service's backend, keyword encoder, embedder and clock.
- With a query, the search computes what `search_mode` ranks by: the query's
  embedding, its keyword vector, or both (docs/backends.md, "Hybrid search"); a
  keyword search costs no model call. Without one, newest first.
- One damaged namespace does not fail a search over several: when the one read
  reports damage, each namespace is read on its own and the unreadable ones are
  left out (logged, counted, and named by health); only if all are unreadable
  does the search fail (503).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from adapters.errors import StorageDamaged
from adapters.merge import merge_listed, merge_scored
from adapters.values import MemoryFilter, MemoryRecord, ScoredMemory, SearchMode, SearchQuery
from plugin.core.fields import SearchFields
from plugin.embedding.embedding_tokens import tokens_of
from plugin.scheduling.work import Priority, Work, search_tenant

if TYPE_CHECKING:
    from adapters.base import VectorBackend
    from plugin.embedding.bm25 import KeywordEncoder

log = logging.getLogger(__name__)
# The modes whose keyword query is widened by the first results (docs/backends.md,
# "Keyword feedback").
_FEEDBACK = frozenset({SearchMode.FEEDBACK, SearchMode.RERANK})


@dataclass(frozen=True, slots=True)
class Hit:
    memory: MemoryRecord
    score: float | None


class MemorySearch:
    """`search` for `MemoryService`."""

    if TYPE_CHECKING:  # provided by MemoryService
        backend: VectorBackend
        keywords: KeywordEncoder
        search_mode: SearchMode
        clock: Callable[[], datetime]
        _unreadable: set[str]

        def _deadline(self) -> AbstractAsyncContextManager[None]: ...
        def _embed(self, text: str, work: Work) -> Awaitable[list[float]]: ...

    async def search(self, request: SearchFields) -> list[Hit]:
        """One backend read over every live namespace asked for; pinned first, `limit` in all."""
        limit = request.effective_limit
        kinds = frozenset(request.kinds) if request.kinds else None
        async with self._deadline():
            names = list(dict.fromkeys(request.namespaces))
            records = await self.backend.get_namespaces(names)
            now = self.clock()
            live = [name for name in names if name in records and not records[name].is_expired(now)]
            if not live:
                return []
            memory_filter = MemoryFilter(now=now, kinds=kinds)
            text = request.query_text
            work = Work(search_tenant(names), Priority.SEARCH)
            query = None if text is None else await self._search_query(text, work)
            try:
                hits = await self._read(live, query, memory_filter, limit)
            except StorageDamaged:
                hits = await self._read_around_damage(live, query, memory_filter, limit)
            return [hit for hit in hits if not hit.memory.is_expired(now)][:limit]

    async def _search_query(self, text: str, work: Work) -> SearchQuery:
        """What `search_mode` ranks by; a keyword search costs no model call, a rerank no
        second one (the token vectors come with the sentence vector), keyword feedback
        none at all (the store lends the words)."""
        mode = self.search_mode
        keywords = None if mode is SearchMode.DENSE else self.keywords.query(text)
        dense = None if mode is SearchMode.KEYWORD else await self._embed(text, work)
        tokens = tokens_of(dense) if mode is SearchMode.RERANK and dense is not None else None
        # a backend without keyword feedback reranks the hybrid candidates (a Qdrant server)
        feedback = mode in _FEEDBACK and SearchMode.FEEDBACK in self.backend.search_modes
        return SearchQuery(dense, keywords, tokens, feedback=feedback)

    async def _read(
        self, namespaces: Sequence[str], query: SearchQuery | None, wanted: MemoryFilter, limit: int
    ) -> list[Hit]:
        if query is None:
            listed = await self.backend.list_memories(namespaces, wanted, limit)
            return [Hit(memory, None) for memory in listed]
        found = await self.backend.query_memories(namespaces, query, wanted, limit)
        return [Hit(scored.memory, scored.score) for scored in found]

    async def _read_around_damage(
        self, namespaces: Sequence[str], query: SearchQuery | None, wanted: MemoryFilter, limit: int
    ) -> list[Hit]:
        """Read each namespace alone; leave out (and remember) those that fail; 503 if all do."""
        parts: list[list[Hit]] = []
        for name in namespaces:
            try:
                parts.append(await self._read([name], query, wanted, limit))
            except StorageDamaged as error:
                if name not in self._unreadable:
                    log.error("namespace unreadable, left out of searches: %s (%s)", name, error)
                self._unreadable.add(name)
                continue
            self._unreadable.discard(name)
        if not parts:
            named = ", ".join(namespaces[:5]) + (", ..." if len(namespaces) > 5 else "")
            raise StorageDamaged(
                f"stored data unreadable (damaged files; see the plugin log): {named}",
                tuple(namespaces),
            )
        if query is None:
            listed = merge_listed(([hit.memory for hit in part] for part in parts), limit)
            return [Hit(memory, None) for memory in listed]
        scored = merge_scored(
            ([ScoredMemory(h.memory, h.score or 0.0) for h in part] for part in parts), limit
        )
        return [Hit(hit.memory, hit.score) for hit in scored]
