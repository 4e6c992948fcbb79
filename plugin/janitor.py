"""The background sweep: expired namespaces and memories are deleted for real.

Search already hides anything expired; the janitor reclaims the space. A failed
sweep is logged and retried next interval; it never stops the server.
"""

from __future__ import annotations

import asyncio
import logging

from plugin.service import MemoryService

log = logging.getLogger("memory_plugin.janitor")
SWEEP_TIMEOUT_S = 300.0


async def run_janitor(service: MemoryService, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            async with asyncio.timeout(SWEEP_TIMEOUT_S):
                report = await service.sweep()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("sweep failed: %s", error)
            continue
        if report.namespaces_deleted or report.memories_deleted:
            log.info(
                "sweep",
                extra={
                    "namespaces_deleted": report.namespaces_deleted,
                    "memories_deleted": report.memories_deleted,
                },
            )
