"""Store-wide facts on Pinecone (the embedding fingerprint): one vector, its metadata.

The vector `store` in the reserved namespace `prefix + "~store"`, a string field per fact; what
this process wrote is laid over what a fetch returns, since Pinecone shows writes late.
"""

from __future__ import annotations

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
        found = await self._shared.fetch("fetch store metadata", [VECTOR_ID], self.namespace)
        vector = found.get(VECTOR_ID)
        stored = {str(k): str(v) for k, v in ((vector.metadata or {}) if vector else {}).items()}
        return stored | self._written

    async def write_store_meta(self, key: str, value: str) -> None:
        facts = await self.read_store_meta() | {key: value}
        item = {"id": VECTOR_ID, "values": self._shared.unit_vector, "metadata": facts}
        await self._shared.upsert("upsert store metadata", [item], self.namespace)
        self._written[key] = value
