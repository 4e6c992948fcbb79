"""Text to vectors by the in-process model (plugin/embedding/encoders.py), requests batched.

Texts wait in fair queues, searches first; a batch per session, or a lone text on the event
loop (docs/embedding.md, "Sessions side by side"; docs/behaviour.md, "Fair sharing").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from dataclasses import field
from functools import partial

from adapters.callers import TooLate
from adapters.callers import Waiting
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import Encoder
from plugin.embedding.length_groups import encode_by_length
from plugin.scheduling.fair_queue import FairQueue
from plugin.scheduling.thread_priority import low_priority_pool
from plugin.scheduling.work import UNATTRIBUTED
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work

# Called after each batch the model embedded: (texts in the batch, seconds it took).
BatchObserver = Callable[[int, float], None]
# Called for each text a batch takes: (its priority, seconds it waited in the queue).
WaitObserver = Callable[[Priority, float], None]
# all-MiniLM-L6-v2 reads 256 tokens, about 1,000 to 1,500 characters of prose; 8,192
# characters hold more than 256 tokens of any text short of one padded with spaces.
MAX_EMBEDDED_CHARS = 8192


def clip_for_model(text: str) -> str:
    """What of `text` the model can read: tokenising the rest costs time and changes nothing."""
    return text[:MAX_EMBEDDED_CHARS]


# A text waiting for the model: (text, its future, when it was queued (the event loop's
# clock), its priority, where its request waits or None, whether its token vectors are
# wanted).
Pending = tuple[str, "asyncio.Future[Embedding]", float, Priority, Waiting | None, bool]
# Under load, wait for expected callers at most this share of the last batch's time.
LINGER_SHARE = 0.5
MAX_BATCH = 4
# When writes wait, at least one place in WRITE_SHARE of a full batch is theirs.
WRITE_SHARE = 4
# A text waiting this long goes first, oldest first (fair_queue.py): the app passes two
# thirds of the request deadline, leaving the rest for the model and the store.
OVERDUE_S = 1.0
# What a text's request needs after the model, at least (the store's write or read, the
# answer): a text taken with less of its time left, beyond the batch's, is refused. The app
# passes a sixth of the request deadline.
AFTER_MODEL_S = 0.25


@dataclass
class BatchStats:
    """Counters for tests and metrics: how much batching actually happened."""

    batches: int = 0
    texts: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)

    def record(self, size: int) -> None:
        self.batches += 1
        self.texts += size
        self.largest = max(self.largest, size)
        if len(self.sizes) < 10_000:
            self.sizes.append(size)


class BatchingEmbedder:
    """Async front of an `Encoder` that merges concurrent requests into batches."""

    def __init__(
        self,
        encoder: Encoder,
        max_batch: int = MAX_BATCH,
        observer: BatchObserver | None = None,
        max_linger_s: float = 0.004,
        wait_observer: WaitObserver | None = None,
        overdue_s: float = OVERDUE_S,
        requests_in_flight: Callable[[], int] | None = None,
        keep_tokens: bool = False,
        after_model_s: float = AFTER_MODEL_S,
    ) -> None:
        self.encoder = encoder
        # Whether each text's token vectors come with it: only where searches rerank
        # (the ranking the app chose, plugin/http/app.py).
        self.keep_tokens = keep_tokens
        self.dimension = encoder.dimension
        self.fingerprint = encoder.fingerprint
        self.max_batch = max_batch
        self.max_linger_s = max_linger_s
        self.stats = BatchStats()
        self.served = 0  # texts embedded (adapters/callers.py, `Waiting`)
        self.after_model_s = after_model_s
        self.refused = 0  # texts refused at their turn, too late to be of use (`_in_time`)
        self._observer = observer
        self._wait_observer = wait_observer
        # The server's requests in flight: more than one, and a lone text is not sequential.
        self._requests_in_flight = requests_in_flight or (lambda: 1)
        self._expected = 1  # callers expected at the next batch (see _gather)
        self._last_s = 0.0  # how long the last batch took

        # Texts waiting for the next batch, by priority and tenant. The embedder task
        # sleeps on `_wake` until `_wake_at` of them are queued: one wake-up per batch.
        def overdue(item: Pending) -> bool:
            return time.monotonic() - item[2] > overdue_s  # the loop's clock

        self._queues = {priority: FairQueue[Pending](overdue) for priority in Priority}
        self._wake: asyncio.Future[None] | None = None
        self._wake_at = 1
        # One worker task per encode the encoder runs at once; one gathers at a time.
        self._workers: list[asyncio.Task[None]] = []
        self._gathering = asyncio.Lock()
        self._idle = 0  # workers not inside an encode
        self._executor: ThreadPoolExecutor | None = None

    async def start(self) -> None:
        count = max(1, self.encoder.parallelism)
        self._executor = low_priority_pool(count, "embedder")
        self._idle = count
        self._workers = [
            asyncio.create_task(self._run(), name=f"embedder {n}") for n in range(count)
        ]

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        for queue in self._queues.values():
            for _, future, *_ in queue.drain():
                if not future.done():
                    future.set_exception(RuntimeError("embedder is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    @property
    def queued(self) -> int:
        """Texts waiting for a batch."""
        return sum(len(queue) for queue in self._queues.values())

    def queued_by_priority(self) -> dict[Priority, int]:
        return {priority: len(queue) for priority, queue in self._queues.items()}

    def embed(
        self, text: str, work: Work = UNATTRIBUTED, *, tokens: bool | None = None
    ) -> asyncio.Future[Embedding]:
        """`text`'s embedding, queued for the next batch before this returns: a future, so
        the caller may do other work meanwhile; cancelled, it leaves a batch not yet started.
        `work`: its place in the fair queues; `tokens`: its token vectors too (None:
        `keep_tokens`)."""
        if not self._workers:
            raise RuntimeError("embedder is not started")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Embedding] = loop.create_future()
        waiting = work.waiting
        wanted = self.keep_tokens if tokens is None else tokens and self.keep_tokens
        queued = (clip_for_model(text), future, loop.time(), work.priority, waiting, wanted)
        self._queues[work.priority].push(work.tenant, queued)
        if waiting is not None:  # for the request's deadline
            waiting.joined(self)
            future.add_done_callback(partial(_embedded, waiting))
        if self._wake is not None and self.queued >= self._wake_at:
            _resolve(self._wake)
        return future

    async def _until_queued(self, count: int, timeout_s: float | None = None) -> None:
        """Return once `count` texts are queued, or after `timeout_s` seconds."""
        if self.queued >= count:
            return
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        timer = None
        if timeout_s is not None:
            timer = loop.call_later(timeout_s, _resolve, wake)
        self._wake, self._wake_at = wake, count
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

    async def _gather(self) -> list[Pending]:
        """The next batch: what waits now and, under load, the callers expected back (those
        of the last batch and those behind it), waited for at most a share of a batch's time;
        else closed-loop callers alternate in half batches. A lone caller never waits. What
        waits is shared among the idle sessions, to run side by side."""
        await self._until_queued(1)
        expected = min(self.max_batch, self._expected)
        if self.queued < expected and self._expected > 1:
            linger_s = min(self.max_linger_s, self._last_s * LINGER_SHARE)
            await self._until_queued(expected, linger_s)
        share = -(-self.queued // max(1, self._idle))  # ceiling division
        return self._take(min(self.max_batch, share))

    def _take(self, size: int) -> list[Pending]:
        """`size` texts at most: searches in fair order, with a write for every
        `WRITE_SHARE - 1` of them; writes alone when no search waits."""
        searches, writes = self._queues[Priority.SEARCH], self._queues[Priority.WRITE]
        live = self._in_time
        if not searches:
            return writes.take(size, live)
        taken = searches.take(size - min(len(writes), size // WRITE_SHARE), live)
        if not taken:  # every search waiting was cancelled or refused
            return writes.take(size, live)
        owed = min(size - len(taken), len(taken) // (WRITE_SHARE - 1))
        return taken + writes.take(owed, live)

    def _in_time(self, item: Pending) -> bool:
        """Whether a text taken for a batch is embedded: its request still waits, with time
        left for the batch and what follows (`after_model_s`). One that waited behind others
        and would run out of time is refused now (`TooLate`), its place given to one in time;
        one that waited behind nobody is embedded, and its deadline decides."""
        _, future, _, _, waiting, _ = item
        if future.cancelled():
            return False
        if waiting is None or waiting.deadline is None or not waiting.behind_others():
            return True
        left = waiting.deadline - asyncio.get_running_loop().time()
        if left >= self._last_s + self.after_model_s:
            return True
        self.refused += 1
        future.set_exception(
            TooLate(f"{left:.2f} s left when the model's turn came, too little to finish")
        )
        return False

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with self._gathering:
                batch = await self._gather()
                if not batch:
                    continue
                self._idle -= 1  # before the next worker gathers: it shares among fewer
            texts = [item[0] for item in batch]
            self._observe_waits(batch, loop.time())
            started = time.perf_counter()
            try:
                lone = self._alone(len(texts))
                embed = self.encoder.embed_lone if lone else self.encoder.embed
                group = partial(_embed_group, embed, texts, [item[5] for item in batch])
                if lone:
                    embedded = encode_by_length(group, texts)
                else:
                    embedded = await loop.run_in_executor(
                        self._executor, encode_by_length, group, texts
                    )
            except Exception as error:  # a model failure fails this batch, not the worker
                for _, future, *_ in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            finally:
                self._idle += 1
            self._last_s = time.perf_counter() - started
            self._expected = len(batch) + self.queued
            self.stats.record(len(batch))
            self.served += len(batch)
            if self._observer is not None:
                self._observer(len(batch), self._last_s)
            for (_, future, *_), embedding in zip(batch, embedded, strict=True):
                if not future.done():
                    future.set_result(embedding)

    def _alone(self, count: int) -> bool:
        """Embed on the event loop? Only a lone text of callers one at a time: nothing queued,
        no other encode, a lone text last time too, no other request in flight."""
        busy = len(self._workers) - self._idle  # this worker's batch included
        sequential = self._expected == 1 and not self.queued
        alone = sequential and busy == 1 and self._requests_in_flight() <= 1
        return self.encoder.inline_lone_text and count == 1 and alone

    def _observe_waits(self, batch: list[Pending], now: float) -> None:
        if self._wait_observer is not None:
            for _, _, queued_at, priority, *_ in batch:
                self._wait_observer(priority, now - queued_at)


def _embed_group(
    embed: Callable[..., list[Embedding]], texts: list[str], wanted: list[bool], group: list[int]
) -> list[Embedding]:
    """One model call for the texts of `group` (their indices), token vectors where wanted."""
    chosen = [wanted[i] for i in group]
    return embed([texts[i] for i in group], tokens=chosen if any(chosen) else False)


def _embedded(waiting: Waiting, future: asyncio.Future[Embedding]) -> None:
    """A text's wait is over once it is embedded or failed (not when cancelled)."""
    if not future.cancelled():
        waiting.left()


def _resolve(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)
