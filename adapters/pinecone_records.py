"""Namespace records on Pinecone: one reserved namespace, one vector per namespace.

The record (kind, created_at, expires_at, metadata, and the namespace's epoch)
is the metadata of a vector whose id is the namespace name, in the Pinecone
namespace `prefix + "~namespaces"`. Reads see recent saves and deletes through
the overlay first, then a short cache (one request usually reads the record
twice), then Pinecone.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from pinecone import AsyncIndex

from adapters import pinecone_layout as layout
from adapters.base import NamespaceRecord
from adapters.pinecone_calls import call
from adapters.pinecone_overlay import FreshnessOverlay

RECORDS_SUFFIX = "~namespaces"
PAGE = 100  # ids per list page and per fetch (fetch ids travel in the URL)
STATE_CACHE_S = 1.0
STATE_CACHE_MAX = 1024

NamespaceState = tuple[NamespaceRecord, str] | None


class NamespaceRecords:
    def __init__(
        self,
        *,
        prefix: str,
        unit_vector: list[float],
        overlay: FreshnessOverlay,
        ready: Callable[[], Awaitable[AsyncIndex]],
        budget_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespace = prefix + RECORDS_SUFFIX
        self._unit = unit_vector
        self._overlay = overlay
        self._ready = ready
        self._budget_s = budget_s
        self._clock = clock
        self._states: OrderedDict[str, tuple[float, NamespaceState]] = OrderedDict()

    async def state(self, name: str) -> NamespaceState:
        """The live record and its epoch, or None."""
        entry = self._overlay.namespace(name)
        if entry is not None:
            return (entry.record, entry.epoch) if entry.record and entry.epoch else None
        cached = self._states.get(name)
        if cached is not None and self._clock() - cached[0] < STATE_CACHE_S:
            return cached[1]
        index = await self._ready()
        found = await call(
            "fetch namespace record",
            lambda t: index.fetch(ids=[name], namespace=self.namespace, timeout=t),
            self._budget_s,
        )
        vector = found.vectors.get(name)
        state = layout.namespace_from_metadata(vector.metadata or {}) if vector else None
        self._states.pop(name, None)
        self._states[name] = (self._clock(), state)
        while len(self._states) > STATE_CACHE_MAX:
            self._states.popitem(last=False)
        return state

    async def save(self, record: NamespaceRecord) -> None:
        """Write the record, keeping the epoch of a live namespace, minting one otherwise."""
        state = await self.state(record.name)
        epoch = state[1] if state else uuid.uuid4().hex
        item = {
            "id": record.name,
            "values": self._unit,
            "metadata": layout.namespace_to_metadata(record, epoch),
        }
        index = await self._ready()
        await call(
            "upsert namespace record",
            lambda t: index.upsert(vectors=[item], namespace=self.namespace, timeout=t),
            self._budget_s,
        )
        self._overlay.namespace_saved(record, epoch)
        self._states.pop(record.name, None)

    async def delete(self, name: str) -> None:
        index = await self._ready()
        await call(
            "delete namespace record",
            lambda t: index.delete(ids=[name], namespace=self.namespace, timeout=t),
            self._budget_s,
        )
        self._overlay.namespace_deleted(name)
        self._states.pop(name, None)

    async def all(self) -> list[NamespaceRecord]:
        """Every namespace record: list the reserved namespace's ids, fetch them in pages.

        Used by the janitor only; its cost grows with the number of namespaces.
        """
        index = await self._ready()

        async def page_after(token: str | None) -> tuple[list[str], str | None]:
            page = await call(
                "list namespace records",
                lambda t: index.list_paginated(
                    namespace=self.namespace, limit=PAGE, pagination_token=token, timeout=t
                ),
                self._budget_s,
            )
            ids = [item.id for item in page.vectors if item.id]
            return ids, page.pagination.next if page.pagination else None

        async def fetch(ids: list[str]) -> list[NamespaceRecord]:
            found = await call(
                "fetch namespace records",
                lambda t: index.fetch(ids=ids, namespace=self.namespace, timeout=t),
                self._budget_s,
            )
            return [
                layout.namespace_from_metadata(v.metadata or {})[0] for v in found.vectors.values()
            ]

        names, token = await page_after(None)
        while token:
            more, token = await page_after(token)
            names += more
        records: dict[str, NamespaceRecord] = {}
        for start in range(0, len(names), PAGE):
            for record in await fetch(names[start : start + PAGE]):
                records[record.name] = record
        for entry in self._overlay.namespaces():
            if entry.record is None:
                records.pop(entry.name, None)
            else:
                records[entry.name] = entry.record
        return sorted(records.values(), key=lambda record: record.name)
