"""Searches: one backend read over every live namespace asked for, ranked as configured; a
damaged namespace is left out of a search over several (docs/behaviour.md, "Faults")."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import KW_ONLY
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from typing import Protocol

from adapters.base import VectorBackend
from adapters.callers import Caller
from adapters.errors import StorageDamaged
from adapters.keyword_encoder import KeywordEncoder
from adapters.merge import merge_listed
from adapters.merge import merge_scored
from adapters.values import MemoryFilter
from adapters.values import ScoredMemory
from adapters.values import SearchMode
from adapters.values import SearchQuery
from plugin.core import neighbours
from plugin.core.fields import SearchFields
from plugin.core.search_mode import Ranking
from plugin.core.service_errors import within
from plugin.embedding.embedding_tokens import Embedding
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work
from plugin.scheduling.work import search_tenant

log = logging.getLogger(__name__)
# The modes whose keyword query is widened by the first results (keyword feedback).
_FEEDBACK = frozenset({SearchMode.FEEDBACK, SearchMode.RERANK})
NEWEST = "newest"  # the ranking's name of a search without a query: newest first


class Embedder(Protocol):
    dimension: int

    # Queued for the model when this returns; `work` is its place in the fair queues;
    # `tokens`, whether the text's token vectors are wanted (None: as the embedder keeps them).
    def embed(
        self, text: str, work: Work = ..., *, tokens: bool | None = None
    ) -> Awaitable[Embedding]: ...


@dataclass(frozen=True, slots=True)
class Found:
    """A search's answer, and what ranked it (None: newest first, no query)."""

    hits: list[ScoredMemory]
    ranking: SearchMode | None

    @property
    def ranking_name(self) -> str:
        """For the access log and the metrics: the mode, or `newest`."""
        return NEWEST if self.ranking is None else self.ranking.value


@dataclass(eq=False)
class MemorySearch:
    """`search`, and the namespaces it found unreadable (for health)."""

    backend: VectorBackend
    keywords: KeywordEncoder
    ranking: Ranking
    _: KW_ONLY
    clock: Callable[[], datetime]
    deadline_s: float
    embedder: Embedder
    unreadable: set[str] = field(default_factory=set)

    async def search(self, request: SearchFields, caller: Caller) -> Found:
        """One backend read over every live namespace asked for; pinned first, `limit` in all."""
        limit = request.effective_limit
        kinds = frozenset(request.kinds) if request.kinds else None
        async with within(self.deadline_s, caller.waiting):
            names = list(dict.fromkeys(request.namespaces))
            records = await self.backend.get_namespaces(names)
            now = self.clock()
            live = [name for name in names if name in records and not records[name].is_expired(now)]
            text = request.query_text
            mode = None if text is None else self.ranking.mode()
            if not live:
                return Found([], mode)
            memory_filter = MemoryFilter(now=now, kinds=kinds)
            work = Work(search_tenant(names), Priority.SEARCH, caller.waiting)
            query = None if text is None or mode is None else await self._query(text, mode, work)
            # A ranked search reads the pool its memories' neighbours are found in.
            pool = limit if query is None else max(limit, neighbours.POOL)
            hits = await self._read(live, query, memory_filter, pool)
            hits = [hit for hit in hits if not hit.memory.is_expired(now)]
            if query is not None:
                hits = neighbours.lift(hits)
            return Found(hits[:limit], mode)

    async def _query(self, text: str, mode: SearchMode, work: Work) -> SearchQuery:
        """What `mode` ranks by: a keyword search costs no model call, a rerank no second one."""
        keyed = mode is not SearchMode.DENSE
        made_there = keyed and self.backend.makes_keywords  # the store makes its own
        keywords = self.keywords.query(text) if keyed and not made_there else None
        dense, tokens = None, None
        if mode is not SearchMode.KEYWORD:
            reranks = mode is SearchMode.RERANK  # no other ranking reads the token vectors
            embedded = await self.embedder.embed(text, work, tokens=reranks)
            dense = embedded.vector
            tokens = embedded.tokens if reranks else None
        # a backend without keyword feedback reranks the hybrid candidates (a Qdrant server)
        feedback = mode in _FEEDBACK and SearchMode.FEEDBACK in self.backend.search_modes
        weigh = tokens is not None and self.ranking.weighs_tokens()
        return SearchQuery(
            dense,
            keywords,
            tokens,
            feedback=feedback,
            weigh_tokens=weigh,
            text=text if made_there else None,
        )

    async def _read(
        self,
        namespaces: Sequence[str],
        query: SearchQuery | None,
        wanted: MemoryFilter,
        limit: int,
        alone: bool = False,
    ) -> list[ScoredMemory]:
        """The backend's read: ranked by `query`, or newest first without one. Where stored
        data is damaged, each namespace is read `alone`: those that fail are left out (and
        remembered), 503 if all do."""
        try:
            if query is not None:
                return await self.backend.query_memories(namespaces, query, wanted, limit)
            listed = await self.backend.list_memories(namespaces, wanted, limit)
            return [ScoredMemory(memory, None) for memory in listed]
        except StorageDamaged:
            if alone:
                raise
        parts: list[list[ScoredMemory]] = []
        for name in namespaces:
            try:
                parts.append(await self._read([name], query, wanted, limit, alone=True))
            except StorageDamaged as error:
                if name not in self.unreadable:
                    log.error("namespace unreadable, left out of searches: %s (%s)", name, error)
                self.unreadable.add(name)
                continue
            self.unreadable.discard(name)
        if not parts:
            named = ", ".join(namespaces[:5]) + (", ..." if len(namespaces) > 5 else "")
            raise StorageDamaged(
                f"stored data unreadable (damaged files; see the plugin log): {named}",
                tuple(namespaces),
            )
        if query is None:
            listed = merge_listed(([hit.memory for hit in part] for part in parts), limit)
            return [ScoredMemory(memory, None) for memory in listed]
        return merge_scored(parts, limit)
