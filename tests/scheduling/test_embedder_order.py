"""The order in which the batcher hands texts to the model: fair, searches first.

A gated encoder holds the first batch in the model while the test queues the rest,
so every order below is decided by the queues alone, with no sleep and no timing.
Texts are of equal length, so a batch is one model call (length groups).
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.callers import TooLate
from adapters.callers import Waiting
from plugin.embedding.embedder import BatchingEmbedder
from plugin.embedding.length_groups import encode_by_length
from plugin.embedding.length_groups import length_groups
from plugin.scheduling.work import Priority
from plugin.scheduling.work import Work
from tests.support.encoders import GatedEncoder


def write(tenant: str) -> Work:
    return Work(tenant, Priority.WRITE)


def search(tenant: str) -> Work:
    return Work(tenant, Priority.SEARCH)


async def batches_after_first(
    queue: list[tuple[str, Work]], overdue_s: float = 60.0
) -> list[list[str]]:
    """Hold batch ["w00"] in the model, queue `queue`, open the gate: the batches after it."""
    encoder = GatedEncoder()
    embedder = BatchingEmbedder(encoder, max_batch=4, overdue_s=overdue_s)
    await embedder.start()
    try:
        first = embedder.embed("w00", write("workspace:first"))
        await asyncio.to_thread(encoder.entered.wait, 5)
        futures = [embedder.embed(text, work) for text, work in queue]
        encoder.gate.set()
        await asyncio.gather(first, *futures)
    finally:
        await embedder.close()
    assert encoder.batches[0] == ["w00"]
    return encoder.batches[1:]


async def test_a_search_goes_first_and_alone() -> None:
    flood = [(f"f{n:02d}", write("workspace:noisy")) for n in range(11)]
    batches = await batches_after_first([*flood, ("q00", search("workspace:quiet"))])
    assert batches == [
        ["q00"],
        ["f00", "f01", "f02", "f03"],
        ["f04", "f05", "f06", "f07"],
        ["f08", "f09", "f10"],
    ]


async def test_a_tenant_with_one_write_is_in_the_next_batch() -> None:
    flood = [(f"a{n:02d}", write("workspace:a")) for n in range(10)]
    batches = await batches_after_first([*flood, ("b00", write("workspace:b"))])
    assert batches[0] == ["a00", "b00", "a01", "a02"]


async def test_texts_waiting_past_their_time_go_oldest_first() -> None:
    """Overdue (here: at once), a tenant's later writes wait no more rounds: the batch
    takes them in arrival order, where fair order would have served b00 second."""
    flood = [(f"a{n:02d}", write("workspace:a")) for n in range(3)]
    batches = await batches_after_first([*flood, ("b00", write("workspace:b"))], overdue_s=0.0)
    assert batches[0] == ["a00", "a01", "a02", "b00"]


async def test_a_search_flood_leaves_writes_a_place_in_every_batch() -> None:
    searches = [(f"s{n:02d}", search("workspace:s")) for n in range(12)]
    writes = [(f"w{n:02d}", write("workspace:w")) for n in range(1, 5)]
    batches = await batches_after_first([*writes, *searches])
    assert batches[:4] == [
        ["s00", "s01", "s02", "w01"],
        ["s03", "s04", "s05", "w02"],
        ["s06", "s07", "s08", "w03"],
        ["s09", "s10", "s11", "w04"],
    ]


async def test_tenants_of_a_search_flood_share_it() -> None:
    one = [(f"x{n:02d}", search("workspace:x")) for n in range(8)]
    other = [(f"y{n:02d}", search("workspace:y")) for n in range(2)]
    batches = await batches_after_first([*one, *other])
    assert batches[0] == ["x00", "y00", "x01", "y01"]


def test_texts_of_a_batch_are_grouped_by_length_and_returned_in_order() -> None:
    texts = ["a" * 300, "bb", "c" * 280, "dd", "e" * 40]
    assert length_groups(texts) == [[1, 3], [4], [2, 0]]
    calls: list[list[int]] = []

    def encode(group: list[int]) -> list[list[float]]:
        calls.append(group)
        return [[float(len(texts[n]))] for n in group]

    vectors = encode_by_length(encode, texts)
    assert vectors == [[300.0], [2.0], [280.0], [2.0], [40.0]]
    assert calls == [[1, 3], [4], [2, 0]]


def with_time_left(seconds: float) -> Waiting:
    """The place of a request whose deadline is `seconds` from now."""
    return Waiting(deadline=asyncio.get_running_loop().time() + seconds)


async def test_a_text_whose_time_ran_short_behind_others_is_refused_at_its_turn() -> None:
    """Its turn comes with less time left than a batch and the store need: refused, not
    embedded, and the batch is the texts still in time."""
    encoder = GatedEncoder()
    embedder = BatchingEmbedder(encoder, max_batch=4, after_model_s=0.5)
    await embedder.start()
    try:
        first = embedder.embed("w00", write("workspace:first"))
        await asyncio.to_thread(encoder.entered.wait, 5)
        short = Waiting()
        late = embedder.embed("late", Work("workspace:a", Priority.WRITE, short))
        short.deadline = asyncio.get_running_loop().time() + 0.1  # set as `within` does
        in_time = embedder.embed("t00", Work("workspace:b", Priority.WRITE, with_time_left(60)))
        encoder.gate.set()
        await asyncio.gather(first, in_time)
        with pytest.raises(TooLate):
            await late
    finally:
        await embedder.close()
    assert encoder.batches == [["w00"], ["t00"]]
    assert embedder.refused == 1


async def test_a_text_that_waited_behind_nobody_is_embedded_however_late() -> None:
    """Its request was slow elsewhere: the queue has nothing to make room for, and the
    request's deadline decides."""
    encoder = GatedEncoder()
    encoder.gate.set()
    embedder = BatchingEmbedder(encoder, max_batch=4, after_model_s=0.5)
    await embedder.start()
    try:
        work = Work("workspace:a", Priority.WRITE, with_time_left(0.1))
        await embedder.embed("late", work)
    finally:
        await embedder.close()
    assert encoder.batches == [["late"]]
    assert embedder.refused == 0
