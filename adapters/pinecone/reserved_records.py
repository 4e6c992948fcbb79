"""The reserved namespaces on Pinecone: namespace records, and store-wide facts.

The records are one vector per namespace, all in `prefix + "~namespaces"`, so one fetch reads a
search's records; reads see the overlay first, then a short cache, then Pinecone. The facts (the
embedding fingerprint) are the metadata of the vector `store` in `prefix + "~store"`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from adapters.pinecone import vector_metadata
from adapters.pinecone.index_connection import Shared
from adapters.values import NamespaceRecord

RECORDS_SUFFIX = "~namespaces"
STORE_SUFFIX = "~store"
STORE_VECTOR_ID = "store"
PAGE = 100  # ids per list page and per fetch (fetch ids travel in the URL)
STATE_CACHE_S = 1.0
STATE_CACHE_MAX = 1024

NamespaceState = tuple[NamespaceRecord, str] | None


class NamespaceRecords:
    """The namespace calls of `PineconeBackend` (backend.py) but the delete, and each
    namespace's epoch for its other parts."""

    def __init__(self, shared: Shared, clock: Callable[[], float] = time.monotonic) -> None:
        self.namespace = shared.prefix + RECORDS_SUFFIX
        self._shared = shared
        self._clock = clock
        self._states: OrderedDict[str, tuple[float, NamespaceState]] = OrderedDict()

    async def state(self, name: str) -> NamespaceState:
        """The live record and its epoch, or None."""
        return (await self.states([name])).get(name)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        state = await self.state(name)
        return state[0] if state else None

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        """One fetch of every name the overlay and the short cache do not answer."""
        return {name: record for name, (record, _) in (await self.states(names)).items()}

    async def list_namespaces(self) -> list[NamespaceRecord]:
        """Every record (the janitor's use only: its cost grows with the namespace count)."""
        return [record for record, _ in (await self.all()).values()]

    async def states(self, names: Sequence[str]) -> dict[str, tuple[NamespaceRecord, str]]:
        """The live records and epochs of those `names` that exist; what the overlay or the
        cache does not answer is fetched at once, one request per `PAGE` names."""
        known: dict[str, NamespaceState] = {}
        missing: list[str] = []
        for name in dict.fromkeys(names):
            entry = self._shared.overlay.namespace(name)
            cached = self._states.get(name)
            if entry is not None:
                known[name] = (entry.record, entry.epoch) if entry.record and entry.epoch else None
            elif cached is not None and self._clock() - cached[0] < STATE_CACHE_S:
                known[name] = cached[1]
            else:
                missing.append(name)
        if missing:
            pages = [missing[start : start + PAGE] for start in range(0, len(missing), PAGE)]
            for page in await asyncio.gather(*(self._fetch(ids) for ids in pages)):
                known.update(page)
        return {name: state for name, state in known.items() if state is not None}

    async def _fetch(self, names: list[str]) -> dict[str, NamespaceState]:
        """Read `names` from Pinecone (one request) and remember the answers briefly."""
        found = await self._shared.fetch("fetch namespace records", names, self.namespace)
        fetched: dict[str, NamespaceState] = {}
        for name in names:
            vector = found.get(name)
            fetched[name] = (
                vector_metadata.namespace_from_metadata(vector.metadata or {}) if vector else None
            )
            self._states.pop(name, None)
            self._states[name] = (self._clock(), fetched[name])
        while len(self._states) > STATE_CACHE_MAX:
            self._states.popitem(last=False)
        return fetched

    async def save_namespace(self, record: NamespaceRecord) -> None:
        """Write the record, keeping the epoch of a live namespace, minting one otherwise."""
        state = await self.state(record.name)
        epoch = state[1] if state else uuid.uuid4().hex
        metadata = vector_metadata.namespace_to_metadata(record, epoch)
        item = {"id": record.name, "values": self._shared.unit_vector, "metadata": metadata}
        await self._shared.upsert("upsert namespace record", [item], self.namespace)
        self._shared.overlay.namespace_saved(record, epoch)
        self._states.pop(record.name, None)

    async def delete(self, name: str) -> None:
        await self._shared.call(
            "delete namespace record",
            lambda i, t: i.delete(ids=[name], namespace=self.namespace, timeout=t),
        )
        self._shared.overlay.namespace_deleted(name)
        self._states.pop(name, None)

    async def all(self) -> dict[str, tuple[NamespaceRecord, str]]:
        """Every live record with its epoch: the reserved namespace's ids listed, fetched in
        pages, the overlay applied. The janitor's only: its cost grows with the namespaces."""
        listed = "list namespace records"
        names, token = await self._shared.list_page(listed, self.namespace, PAGE, None)
        while token:
            more, token = await self._shared.list_page(listed, self.namespace, PAGE, token)
            names += more
        states: dict[str, tuple[NamespaceRecord, str]] = {}
        for start in range(0, len(names), PAGE):
            fetched = await self._fetch(names[start : start + PAGE])
            states.update((name, state) for name, state in fetched.items() if state is not None)
        for entry in self._shared.overlay.namespaces():
            if entry.record is None or entry.epoch is None:
                states.pop(entry.name, None)
            else:
                states[entry.name] = (entry.record, entry.epoch)
        return dict(sorted(states.items()))


class PineconeStoreMeta:
    """The `store_meta` part of `PineconeBackend`: what this process wrote is laid over what
    a fetch returns, since Pinecone shows writes late."""

    def __init__(self, shared: Shared) -> None:
        self.namespace = shared.prefix + STORE_SUFFIX
        self._shared = shared
        self._written: dict[str, str] = {}

    async def read_store_meta(self) -> dict[str, str]:
        found = await self._shared.fetch("fetch store metadata", [STORE_VECTOR_ID], self.namespace)
        vector = found.get(STORE_VECTOR_ID)
        stored = {str(k): str(v) for k, v in ((vector.metadata or {}) if vector else {}).items()}
        return stored | self._written

    async def write_store_meta(self, key: str, value: str) -> None:
        facts = await self.read_store_meta() | {key: value}
        item = {"id": STORE_VECTOR_ID, "values": self._shared.unit_vector, "metadata": facts}
        await self._shared.upsert("upsert store metadata", [item], self.namespace)
        self._written[key] = value
