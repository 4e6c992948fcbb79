"""Which ranking a search with a query uses: MEMORY_PLUGIN_SEARCH against what the store answers.

Unset means the first of PREFERENCE that the backend answers: hybrid on Qdrant and on a
dotproduct Pinecone index, dense where keyword vectors cannot be kept (docs/backends.md,
"Hybrid search"). `feedback` (hybrid, then again with the keyword query widened by the first
results' words; the embedded store only) and `rerank` (reranked by token vectors: on the
embedded store after feedback, on a Qdrant server the hybrid candidates) recall more but are
never chosen by themselves: each costs a search more engine time, and token vectors are
computed and kept only in rerank mode (docs/backends.md, "Keyword feedback" and "Reranking by
token vectors"). A mode the backend cannot answer stops start-up with one line instead of
silently ranking another way.
"""

from __future__ import annotations

from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured
from adapters.values import SearchMode

PREFERENCE = (SearchMode.HYBRID, SearchMode.DENSE, SearchMode.KEYWORD)


def choose_search_mode(configured: str | None, backend: VectorBackend) -> SearchMode:
    offered = backend.search_modes
    if configured is None:
        return next(mode for mode in PREFERENCE if mode in offered)
    mode = SearchMode(configured)
    if mode not in offered:
        allowed = ", ".join(sorted(offered))
        raise BackendMisconfigured(
            f"MEMORY_PLUGIN_SEARCH={mode} is not available on the {backend.name} backend"
            f" (it answers: {allowed}); unset it or choose one of those"
        )
    return mode
