"""Store-wide facts on Pinecone (the embedding fingerprint): one vector, its metadata.

The vector `store` in the reserved namespace `prefix + "~store"`, a string field per fact; what
this process wrote is laid over what a fetch returns, since Pinecone shows writes late.
"""

from __future__ import annotations

from adapters.pinecone.calls import call
from adapters.pinecone.shared import Shared

STORE_SUFFIX = "~store"
VECTOR_ID = "store"


class PineconeStoreMeta:
    """The `store_meta` part of `PineconeBackend` (adapters/parts.py)."""

    def __init__(self, shared: Shared) -> None:
        self.namespace = shared.prefix + STORE_SUFFIX
        self._shared = shared
        self._written: dict[str, str] = {}

    async def read_store_meta(self) -> dict[str, str]:
        index = await self._shared.ready()
        found = await call(
            "fetch store metadata",
            lambda t: index.fetch(ids=[VECTOR_ID], namespace=self.namespace, timeout=t),
            self._shared.budget_s,
        )
        vector = found.vectors.get(VECTOR_ID)
        stored = {str(k): str(v) for k, v in ((vector.metadata or {}) if vector else {}).items()}
        return stored | self._written

    async def write_store_meta(self, key: str, value: str) -> None:
        facts = await self.read_store_meta() | {key: value}
        item = {"id": VECTOR_ID, "values": self._shared.unit_vector, "metadata": facts}
        index = await self._shared.ready()
        await call(
            "upsert store metadata",
            lambda t: index.upsert(vectors=[item], namespace=self.namespace, timeout=t),
            self._shared.budget_s,
        )
        self._written[key] = value
