"""`CallBatcher`: the calls arriving while one runs joined into the next, one call for them all.

A sync or an engine call costs about the same for one item as for many, so concurrent callers
share one (log_sync.py, edge_writes.py, edge_reads.py); a lone call waits for nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from typing import Generic
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
MAX_BATCH = 256


class CallBatcher(Generic[Item, Result]):
    """`call` takes a list of items and returns one result per item, in order."""

    def __init__(
        self, call: Callable[[list[Item]], Awaitable[list[Result]]], max_batch: int = MAX_BATCH
    ) -> None:
        self._call = call
        self._max_batch = max_batch
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        """The result for `item`, once its batch is done; raise what its batch raised."""
        return (await self.submit_all([item]))[0]

    async def submit_all(self, items: Sequence[Item]) -> list[Result]:
        """The results for `items`, in order, each once its batch is done."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Result]] = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures, strict=True))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush(), name="edge calls")
        return list(await asyncio.gather(*futures))

    async def drain(self) -> None:
        """Wait until every submitted call is done (at close)."""
        while self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    results = await self._call([item for item, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._flushing = None
