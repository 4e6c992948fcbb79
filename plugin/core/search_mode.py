"""How searches with a query rank: MEMORY_PLUGIN_SEARCH, unset the backend's best, against
what the store answers (docs/backends.md, "Hybrid search")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured
from adapters.values import SearchMode

PREFERENCE = (SearchMode.HYBRID, SearchMode.DENSE, SearchMode.KEYWORD)


def may_rerank(configured: str | None) -> bool:
    """Whether MEMORY_PLUGIN_SEARCH lets searches rerank (unset, or `rerank`): what decides,
    before the store answers, whether a store that can keep token vectors keeps them."""
    return configured is None or configured == SearchMode.RERANK


@dataclass(frozen=True, slots=True)
class Ranking:
    """What a search with a query ranks by: `best`, or `dimmed` when `best_now` (the rerank
    dimmer, plugin/scheduling/dimmer.py) says the plugin has no room for `best`."""

    best: SearchMode
    dimmed: SearchMode | None = None  # None: always `best`
    best_now: Callable[[], bool] = field(default=lambda: True, compare=False, repr=False)
    # Whether a rerank weighs the query's tokens by rarity: once the store holds every
    # memory's wordpieces (plugin/upgrades/vector_fill.py); until then all alike.
    weighs_tokens: Callable[[], bool] = field(default=lambda: False, compare=False, repr=False)

    @property
    def reranks(self) -> bool:
        """Whether some searches rerank: token vectors are then computed and kept."""
        return self.best is SearchMode.RERANK

    def mode(self) -> SearchMode:
        """What the search asking now ranks by (a decision made at once)."""
        if self.dimmed is None or self.best_now():
            return self.best
        return self.dimmed


def choose_ranking(configured: str | None, backend: VectorBackend) -> Ranking:
    offered = backend.search_modes
    if configured is None:
        if SearchMode.RERANK in offered and SearchMode.HYBRID in offered:
            return Ranking(SearchMode.RERANK, dimmed=SearchMode.HYBRID)
        return Ranking(next(mode for mode in PREFERENCE if mode in offered))
    mode = SearchMode(configured)
    if mode not in offered:
        allowed = ", ".join(sorted(offered))
        raise BackendMisconfigured(
            f"MEMORY_PLUGIN_SEARCH={mode} is not available on the {backend.name} backend"
            f" (it answers: {allowed}); unset it or choose one of those"
        )
    return Ranking(mode)
