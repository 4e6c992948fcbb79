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
# Each gauge's help; the bytes are exported once the store reports them (not every store does).
HELP = {
    "namespaces": "Live namespaces in the store.",
    "memories": "Memories in the store's live namespaces (expired ones until the janitor"
    " deletes them), from the counts the store keeps.",
    "bytes": "Bytes the store's files occupy on its volume.",
    "free_bytes": "Bytes left on the store's volume for the plugin.",
}


class StoreSizeGauges:
    """`refresh()` asks the store and sets the gauges; `run()` does so every REFRESH_S."""

    def __init__(self, part: StoreSizes, registry: CollectorRegistry) -> None:
        self._part = part
        self._registry = registry
        self._gauges: dict[str, Gauge] = {}
        for name in ("namespaces", "memories"):
            self._gauge(name)

    def _gauge(self, name: str) -> Gauge:
        if name not in self._gauges:
            self._gauges[name] = Gauge(
                f"{PREFIX}_store_{name}", HELP[name], registry=self._registry
            )
        return self._gauges[name]

    async def refresh(self) -> None:
        size = await self._part.measure()
        found = (size.namespaces, size.memories, size.bytes_used, size.bytes_free)
        for name, value in zip(HELP, found, strict=True):
            if value is not None:
                self._gauge(name).set(value)

    async def run(self) -> None:
        """Refresh now and every REFRESH_S, until cancelled; a failure is logged, not fatal."""
        while True:
            try:
                await self.refresh()
            except Exception as error:  # at most one line per REFRESH_S
                log.warning("store size not measured: %s", error)
            await asyncio.sleep(REFRESH_S)
