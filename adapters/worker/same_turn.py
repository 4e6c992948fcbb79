"""`SameTurn`: the calls made in one turn of the event loop, sent on as one.

The commits a batch of the model releases resume in one turn: their upserts cross to the engine
worker in one frame (engine_pool.py). A lone call waits only for the end of its own turn; a
call whose callers all gave up is cancelled, as each was.
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


class SameTurn(Generic[Item, Result]):
    """`call` takes the items of one turn and returns one result per item, in order."""

    def __init__(self, call: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]]) -> None:
        self._call = call
        self._items: list[Item] = []
        self._futures: list[asyncio.Future[Result]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def submit(self, item: Item) -> Result:
        """The result for `item`; raise what its call raised."""
        loop = asyncio.get_running_loop()
        if not self._items:
            loop.call_soon(self._send)
        future: asyncio.Future[Result] = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        return await future

    def _send(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures = [], []
        task = asyncio.create_task(self._answer(items, futures), name="same turn")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

        def given_up(_: asyncio.Future[Result]) -> None:
            """Once every caller of the turn gave up (its deadline), so does the call."""
            if all(future.cancelled() for future in futures):
                task.cancel()

        for future in futures:
            future.add_done_callback(given_up)

    async def _answer(self, items: list[Item], futures: list[asyncio.Future[Result]]) -> None:
        try:
            results = await self._call(items)
        except BaseException as error:  # every caller's, a cancellation too
            for future in futures:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for future, result in zip(futures, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def drain(self) -> None:
        """Wait for the calls under way (at close)."""
        while self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
