"""The background sweep: expired namespaces and memories are deleted for real.

Search already hides anything expired; the janitor reclaims the space. A failed
sweep is logged and retried next interval; it never stops the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from plugin.core.service import MemoryService
from plugin.core.service import SweepReport

log = logging.getLogger("memory_plugin.janitor")
SWEEP_TIMEOUT_S = 300.0
# Told about every sweep: its report, or None when it failed (for metrics).
SweepObserver = Callable[[SweepReport | None], None]


def _ignore(report: SweepReport | None) -> None:
    """The default observer: nobody is counting."""


async def run_janitor(
    service: MemoryService, interval_s: float, observe: SweepObserver = _ignore
) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            async with asyncio.timeout(SWEEP_TIMEOUT_S):
                report = await service.sweep()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.warning("sweep failed: %s", error)
            observe(None)
            continue
        observe(report)
        if report.namespaces_deleted or report.memories_deleted:
            log.info(
                "sweep",
                extra={
                    "namespaces_deleted": report.namespaces_deleted,
                    "memories_deleted": report.memories_deleted,
                },
            )
