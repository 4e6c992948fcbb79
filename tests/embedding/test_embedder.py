"""The real model, offline, and the batching in front of it."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from plugin.embedding.embedder import MAX_BATCH
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.embedding_tokens import Embedding
from plugin.embedding.encoders import SentenceTransformerEncoder
from tests.support.encoders import GatedEncoder
from tests.support.encoders import PacedEncoder


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_are_unit_length_and_meaningful(encoder: SentenceTransformerEncoder) -> None:
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        tabs, spaces, weather = await asyncio.gather(
            embedder.embed("the user prefers tabs for indentation"),
            embedder.embed("indent code with tab characters"),
            embedder.embed("it will rain in lisbon tomorrow"),
        )
    finally:
        await embedder.close()
    assert encoder.dimension == len(tabs.vector) == 384
    assert tabs.tokens is None  # not asked for (BatchingEmbedder.keep_tokens)
    assert math.isclose(dot(tabs.vector, tabs.vector), 1.0, abs_tol=1e-4)
    assert dot(tabs.vector, spaces.vector) > dot(tabs.vector, weather.vector) + 0.2


async def test_concurrent_requests_share_batches(encoder: SentenceTransformerEncoder) -> None:
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        texts = [f"sentence number {i}" for i in range(50)]
        vectors = await asyncio.gather(*(embedder.embed(t) for t in texts))
        alone = encoder.encode([texts[17]])[0]
    finally:
        await embedder.close()
    assert embedder.stats.texts == 50
    assert embedder.stats.largest <= MAX_BATCH
    assert embedder.stats.batches <= 50 // MAX_BATCH + encoder.parallelism
    assert max(abs(a - b) for a, b in zip(vectors[17].vector, alone, strict=True)) < 1e-4


class FailingEncoder:
    dimension = 3
    token_dimension = 3  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "failing/test"
    parallelism = 1
    inline_lone_text = False

    def encode(self, texts: list[str]) -> list[list[float]]:
        if "bad" in texts:
            raise RuntimeError("model exploded")
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        return [Embedding(vector) for vector in self.encode(texts)]

    embed_lone = embed


async def test_a_failed_batch_does_not_stop_the_worker() -> None:
    embedder = BatchingEmbedder(FailingEncoder())
    await embedder.start()
    try:
        results = await asyncio.gather(embedder.embed("bad"), return_exceptions=True)
        assert isinstance(results[0], RuntimeError)
        assert await embedder.embed("good") == Embedding([1.0, 0.0, 0.0])
    finally:
        await embedder.close()


async def test_a_lone_caller_never_lingers() -> None:
    """After batches of one with nobody queued behind them, nobody else is expected: the
    next text starts at once, and one arriving a moment later is not waited for."""
    encoder = PacedEncoder(batch_s=0.2)  # a linger would wait half of that for a second text
    embedder = BatchingEmbedder(encoder, max_linger_s=10.0)
    await embedder.start()
    try:
        for i in range(3):
            await embedder.embed(f"sequential write number {i}")
        first = embedder.embed("sequential write number 3")
        await asyncio.sleep(0.02)  # its batch is in the model by now, unless it lingers
        await asyncio.gather(first, embedder.embed("sequential write number 4"))
    finally:
        await embedder.close()
    assert embedder.stats.sizes == [1] * 5


async def test_closed_loop_callers_are_gathered_into_full_batches(
    encoder: SentenceTransformerEncoder,
) -> None:
    """8 callers that come back at staggered times (their upsert, their HTTP round trip)
    are waited for, so the model runs batches of 8 instead of alternating halves."""
    embedder = BatchingEmbedder(encoder, max_batch=8, max_linger_s=0.05)
    await embedder.start()

    async def caller(k: int) -> None:
        for round_ in range(6):
            await embedder.embed(f"caller {k} writes memory {round_}")
            await asyncio.sleep(0.0003 * k)

    try:
        await asyncio.gather(*(caller(k) for k in range(8)))
    finally:
        await embedder.close()
    assert embedder.stats.texts == 48
    assert embedder.stats.sizes[1:] == [8] * 5, embedder.stats.sizes


async def test_a_cancelled_embedding_is_left_out_of_its_batch() -> None:
    """What a request's deadline does to its queued embedding: it leaves the batch."""
    encoder = GatedEncoder()
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        first = embedder.embed("first")
        await asyncio.to_thread(encoder.entered.wait, 5)  # batch 1 is in the model
        kept, dropped = embedder.embed("kept"), embedder.embed("dropped")
        dropped.cancel()
        encoder.gate.set()
        assert await first == Embedding([1.0, 0.0, 0.0])
        assert await kept == Embedding([1.0, 0.0, 0.0])
    finally:
        await embedder.close()
    assert encoder.batches == [["first"], ["kept"]]


async def test_the_linger_ends_when_expected_callers_do_not_come_back() -> None:
    """8 callers, then only 3 of them again: the batch of 3 goes after the linger."""
    encoder = GatedEncoder()
    encoder.gate.set()
    embedder = BatchingEmbedder(encoder, max_batch=8, max_linger_s=0.01)
    await embedder.start()
    try:
        async with asyncio.timeout(5):  # a linger that never ended would hang here
            await asyncio.gather(*(embedder.embed(f"all {k}") for k in range(8)))
            await asyncio.gather(*(embedder.embed(f"some {k}") for k in range(3)))
    finally:
        await embedder.close()
    assert embedder.stats.sizes == [8, 3]


async def test_embedding_before_start_or_after_close_is_refused() -> None:
    embedder = BatchingEmbedder(FailingEncoder())
    with pytest.raises(RuntimeError, match="not started"):
        embedder.embed("too early")
    await embedder.start()
    await embedder.close()
    with pytest.raises(RuntimeError, match="not started"):
        embedder.embed("too late")


async def test_texts_queued_together_are_shared_among_the_sessions() -> None:
    """With two sessions, eight texts that arrive at once run as two batches side by
    side; a lone text afterwards is a batch of one (the encoder's fast path)."""
    encoder = GatedEncoder(parallelism=2)
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        pending = [embedder.embed(f"text {i}") for i in range(8)]
        await asyncio.sleep(0.05)
        assert encoder.most_inside == 2
        assert sorted(len(batch) for batch in encoder.batches) == [4, 4]
        encoder.gate.set()
        assert len(await asyncio.gather(*pending)) == 8
        await embedder.embed("alone")
        assert encoder.batches[-1] == ["alone"]
    finally:
        encoder.gate.set()
        await embedder.close()
    assert embedder.stats.sizes == [4, 4, 1]


class ThreadRecordingEncoder:
    """Records how many texts each embed got, on which thread it ran, and whether it was
    `embed_lone` (the session with every core's threads)."""

    dimension = 3
    token_dimension = 3  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "threads/test"
    inline_lone_text = True

    def __init__(self, parallelism: int = 1) -> None:
        self.parallelism = parallelism
        self.calls: list[tuple[int, int]] = []
        self.lone: list[bool] = []

    def encode(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        self.calls.append((len(texts), threading.get_ident()))
        self.lone.append(False)
        return [Embedding(vector) for vector in self.encode(texts)]

    def embed_lone(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        embedded = self.embed(texts, tokens=tokens)
        self.lone[-1] = True
        return embedded


async def test_a_lone_text_is_embedded_on_the_event_loop() -> None:
    encoder = ThreadRecordingEncoder(parallelism=2)
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        for i in range(3):
            embedded = await embedder.embed(f"sequential write number {i}")
            assert embedded == Embedding([1.0, 0.0, 0.0])
    finally:
        await embedder.close()
    assert encoder.calls == [(1, threading.get_ident())] * 3
    assert encoder.lone == [True] * 3  # nothing else runs: it may use every core


async def embedded_together(encoder: ThreadRecordingEncoder, count: int) -> None:
    """`count` texts arriving at once at a batcher in front of `encoder`."""
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        await asyncio.gather(*(embedder.embed(f"text {i}") for i in range(count)))
    finally:
        await embedder.close()


async def test_texts_arriving_together_are_embedded_on_the_threads() -> None:
    encoder = ThreadRecordingEncoder(parallelism=2)
    await embedded_together(encoder, 8)
    assert [size for size, _ in encoder.calls] == [4, 4]  # shared between the sessions
    assert threading.get_ident() not in {thread for _, thread in encoder.calls}
    assert encoder.lone == [False, False]


async def test_a_lone_text_of_a_load_takes_its_share_of_the_cores() -> None:
    """One text left over from a load runs on a worker's session: given every core's
    threads, a batch starting beside it would put more threads than cores to work."""
    encoder = ThreadRecordingEncoder(parallelism=2)
    await embedded_together(encoder, 9)
    assert sum(size for size, _ in encoder.calls) == 9
    assert 1 in [size for size, _ in encoder.calls]
    assert not any(encoder.lone)


async def test_a_lone_text_takes_a_thread_unless_the_encoder_allows_otherwise() -> None:
    encoder = ThreadRecordingEncoder()
    encoder.inline_lone_text = False  # as torch declares
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        await embedder.embed("one text")
    finally:
        await embedder.close()
    assert [thread for _, thread in encoder.calls] != [threading.get_ident()]


async def test_a_lone_text_failing_on_the_event_loop_fails_its_caller_only() -> None:
    encoder = FailingEncoder()
    encoder.inline_lone_text = True
    embedder = BatchingEmbedder(encoder)
    await embedder.start()
    try:
        with pytest.raises(RuntimeError, match="model exploded"):
            await embedder.embed("bad")
        assert await embedder.embed("good") == Embedding([1.0, 0.0, 0.0])
    finally:
        await embedder.close()


async def test_a_text_alone_for_a_moment_in_a_load_takes_a_thread() -> None:
    encoder = ThreadRecordingEncoder(parallelism=2)
    embedder = BatchingEmbedder(encoder, max_linger_s=0.001)
    await embedder.start()
    try:
        await asyncio.gather(*(embedder.embed(f"text {i}") for i in range(8)))
        await embedder.embed("the load ebbs")  # the last batches held 4: not sequential yet
        await embedder.embed("one at a time")
    finally:
        await embedder.close()
    loop_thread = threading.get_ident()
    assert [thread == loop_thread for _, thread in encoder.calls] == [False] * 3 + [True]


async def test_a_lone_text_takes_a_thread_while_other_requests_are_in_flight() -> None:
    """Callers whose requests wait elsewhere (on the store) reach the model one at a
    time: not sequential, so their texts take the threads, one core each."""
    in_flight = [1]
    encoder = ThreadRecordingEncoder(parallelism=2)
    embedder = BatchingEmbedder(encoder, requests_in_flight=lambda: in_flight[0])
    await embedder.start()
    try:
        await embedder.embed("the only request")
        in_flight[0] = 8
        await embedder.embed("one of eight, the others waiting on the store")
    finally:
        await embedder.close()
    loop_thread = threading.get_ident()
    assert [thread == loop_thread for _, thread in encoder.calls] == [True, False]
    assert encoder.lone == [True, False]
