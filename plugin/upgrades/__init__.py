"""Store upgrades run beside the serving plugin: keyword and token vectors filled in, memories
placed in the write order.

Each is retried every `retry_s` while the store is unavailable; a store that cannot be upgraded
(`BackendMisconfigured`) is left as it is, with one log line. Neither stops the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from collections.abc import Callable

from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured


async def retried(
    job: Callable[[], Awaitable[None]], not_done: str, log: logging.Logger, retry_s: float
) -> None:
    """Run `job` until it ends; `not_done` says what is missing meanwhile, in `log`."""
    while True:
        try:
            await job()
            return
        except BackendMisconfigured as error:  # retrying cannot help; the log says why
            log.error("%s: %s", not_done, error)
            return
        except BackendError as error:
            log.warning("%s yet, store unavailable: %s", not_done, error)
        await asyncio.sleep(retry_s)
