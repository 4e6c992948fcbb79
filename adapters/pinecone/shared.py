"""What every part of `PineconeBackend` (backend.py) is handed: one value, not five arguments.

The namespace prefix, the placeholder vector of records, the overlay, the index once connected,
and the time budget of one call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import dataclass

from pinecone import AsyncIndex

from adapters.pinecone.overlay import FreshnessOverlay


@dataclass(frozen=True, slots=True)
class Shared:
    prefix: str
    unit_vector: list[float]  # stored with records and metadata, which have no embedding
    overlay: FreshnessOverlay
    ready: Callable[[], Awaitable[AsyncIndex]]  # the index, connected on first use
    budget_s: float  # one call's time, retries included (calls.py)

    def pinecone_namespace(self, name: str) -> str:
        return self.prefix + name
