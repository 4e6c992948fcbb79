"""The background sweep: expired namespaces and memories (already hidden from searches)
are deleted for real. A failed sweep is logged and retried next interval."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict

from plugin.core.service import MemoryService
from plugin.core.service import SweepReport

log = logging.getLogger("memory_plugin.janitor")
SWEEP_TIMEOUT_S = 300.0


async def run_janitor(
    service: MemoryService,
    interval_s: float,
    observe: Callable[[SweepReport | None], None],  # each sweep's report, None when it failed
) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            async with asyncio.timeout(SWEEP_TIMEOUT_S):
                report = await service.sweep()
        except Exception as error:
            log.warning("sweep failed: %s", error)
            observe(None)
            continue
        observe(report)
        if report.namespaces_deleted or report.memories_deleted:
            log.info("sweep", extra=asdict(report))
