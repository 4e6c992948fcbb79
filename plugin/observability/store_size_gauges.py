"""The store's size as gauges, refreshed on a timer (adapters/parts.py, `StoreSizes`).

A timer, not the scrape: the bytes a store occupies take a walk of its files, and a scrape must
cost nothing. A backend without the part exports none of these gauges.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry
from prometheus_client import Gauge

from adapters.parts import StoreSizes

log = logging.getLogger(__name__)

PREFIX = "memory_plugin"
REFRESH_S = 30.0


class StoreSizeGauges:
    """`refresh()` asks the store and sets the gauges; `run()` does so every REFRESH_S."""

    def __init__(self, part: StoreSizes, registry: CollectorRegistry) -> None:
        self._part = part
        self._registry = registry
        self._namespaces = self._gauge("namespaces", "Live namespaces in the store.")
        self._memories = self._gauge(
            "memories",
            "Memories in the store's live namespaces (expired ones until the janitor"
            " deletes them), from the counts the store keeps.",
        )
        self._used: Gauge | None = None
        self._free: Gauge | None = None

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(f"{PREFIX}_store_{name}", doc, registry=self._registry)

    async def refresh(self) -> None:
        size = await self._part.measure()
        self._namespaces.set(size.namespaces)
        self._memories.set(size.memories)
        if size.bytes_used is not None:
            self._used = self._used or self._gauge(
                "bytes", "Bytes the store's files occupy on its volume."
            )
            self._used.set(size.bytes_used)
        if size.bytes_free is not None:
            self._free = self._free or self._gauge(
                "free_bytes", "Bytes left on the store's volume for the plugin."
            )
            self._free.set(size.bytes_free)

    async def run(self) -> None:
        """Refresh now and every REFRESH_S, until cancelled; a failure is logged, not fatal."""
        while True:
            try:
                await self.refresh()
            except Exception as error:  # at most one line per REFRESH_S
                log.warning("store size not measured: %s", error)
            await asyncio.sleep(REFRESH_S)
