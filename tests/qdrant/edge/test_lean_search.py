"""The embedded store's plain search (edge/search_passes.py, `lean_search`): the unpinned
side asked by incarnation alone and checked afterwards answers what the full filters answer.

Real embedded store, real keyword vectors; dense vectors are small seeded random
unit vectors, so rankings are rich but reproducible. Namespaces stay under the
fused plan's candidate lists, so the answers must be equal, not merely close.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from adapters.engine import search_passes
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.qdrant.layout import memory_to_payload
from adapters.values import MemoryFilter
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from tests.support.backends import started
from tests.support.edge_plans import full_filter_answer
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

KEYWORDS = KeywordEncoder()
WORDS = ["router", "ticket", "firmware", "lake", "lunch", "crash", "fix", "team", "printer"]


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[QdrantEdgeBackend]:
    async with started(QdrantEdgeBackend(DIM, tmp_path)) as store:
        yield store


def _counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A call to search_passes's `name` per item: a congruence that never ran it proves nothing."""
    calls: list[int] = []
    real = getattr(search_passes, name)

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(search_passes, name, counted)
    return calls


@pytest.fixture
def lean_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many searches took the lean plan."""
    return _counted(monkeypatch, "lean_search")


def _random_unit(rng: random.Random) -> list[float]:
    return unit(*(rng.gauss(0, 1) for _ in range(DIM)))


async def _fill(
    store: QdrantEdgeBackend, name: str, count: int, rng: random.Random, *, pinned_every: int = 7
) -> None:
    """`count` memories; one in `pinned_every` pinned, one in five expiring after T0."""
    await store.save_namespace(NamespaceRecord(name=name, kind="team", created_at=T0))
    for n in range(count):
        content = " ".join(rng.sample(WORDS, 3)) + f" note {n}"
        expires_at = T0 + timedelta(hours=1) if n % 5 == 0 else None
        written = memory(name, content=content, pin=n % pinned_every == 0, expires_at=expires_at)
        tokens = [_random_unit(rng) for _ in range(3)]
        await store.upsert_memory(
            written, MemoryVectors(_random_unit(rng), KEYWORDS.document(content), tokens)
        )


QueryMaker = Callable[[random.Random], SearchQuery]
QUERIES: dict[str, QueryMaker] = {
    "hybrid": lambda rng: SearchQuery(_random_unit(rng), KEYWORDS.query(rng.choice(WORDS))),
    "dense": lambda rng: SearchQuery(_random_unit(rng), None),
    "keyword": lambda rng: SearchQuery(None, KEYWORDS.query(" ".join(rng.sample(WORDS, 2)))),
}


def _answer(hits: list[ScoredMemory]) -> tuple[int, list[tuple[bool, float, frozenset[str]]]]:
    """Pin side and score in order, each run of equal ones with its ids (the engine may
    order ties either way); the last run, which the limit may cut anywhere, without."""
    runs: list[tuple[bool, float, frozenset[str]]] = []
    for hit in hits:
        key = (hit.memory.pin, round(hit.score, 6))
        if runs and runs[-1][:2] == key:
            runs[-1] = (*key, runs[-1][2] | {hit.memory.id})
        else:
            runs.append((*key, frozenset({hit.memory.id})))
    return len(hits), [*runs[:-1], (*runs[-1][:2], frozenset())] if runs else []


@pytest.mark.parametrize("mode", QUERIES)
async def test_answers_what_the_full_filters_answer(
    backend: QdrantEdgeBackend, lean_calls: list[int], mode: str
) -> None:
    """One namespace, and two namespaces of one shard and of two, at several limits and
    clocks (half of the expiring memories expired at the later one)."""
    shards = backend.store.shards
    rng = random.Random(5)
    first = "team:a"
    home = shards.index_of(first)
    same = next(n for n in (f"team:s{i}" for i in range(200)) if shards.index_of(n) == home)
    other = next(n for n in (f"team:o{i}" for i in range(200)) if shards.index_of(n) != home)
    for name, count in ((first, 40), (same, 30), (other, 30)):
        await _fill(backend, name, count, rng)
    groups = [[first], [first, same], [first, other], [same, other, first]]
    for n in range(30):
        names = groups[n % len(groups)]
        when = everything(T0 + timedelta(hours=2)) if n % 2 else everything()
        asked, limit = QUERIES[mode](rng), rng.choice([1, 3, 8, 20])
        found = await backend.query_memories(names, asked, when, limit)
        assert _answer(found) == _answer(
            await full_filter_answer(backend, names, asked, when, limit)
        )
    assert len(lean_calls) == 30


async def _never_answered(
    backend: QdrantEdgeBackend,
    lean_calls: list[int],
    target: list[float],
    excluded: str,
    limit: int,
) -> None:
    """A dense search of team:a for `target`, on the lean plan, leaves `excluded` out, still
    answers `limit` memories, and answers what the full filters answer."""
    asked = SearchQuery(target, None)
    found = await backend.query_memories(["team:a"], asked, everything(), limit)
    assert lean_calls
    assert excluded not in [hit.memory.id for hit in found]
    expected = await full_filter_answer(backend, ["team:a"], asked, everything(), limit)
    assert _answer(found) == _answer(expected)
    assert len(found) == limit


async def test_an_expired_memory_not_yet_swept_is_never_answered(
    backend: QdrantEdgeBackend, lean_calls: list[int]
) -> None:
    """The best match has expired and the janitor has not removed it: the shard is asked
    again with the full filters, and the answer is still `limit` long."""
    rng = random.Random(9)
    await _fill(backend, "team:a", 20, rng, pinned_every=1000)
    target = _random_unit(rng)
    gone = memory("team:a", content="expired", expires_at=T0 - timedelta(seconds=1))
    await backend.upsert_memory(gone, MemoryVectors(target, KEYWORDS.document("expired")))
    await _never_answered(backend, lean_calls, target, gone.id, 5)


async def test_more_pinned_than_the_limit_answers_pinned_only(
    backend: QdrantEdgeBackend, lean_calls: list[int]
) -> None:
    rng = random.Random(3)
    await _fill(backend, "team:a", 30, rng, pinned_every=2)  # 15 pinned
    asked = QUERIES["hybrid"](rng)
    found = await backend.query_memories(["team:a"], asked, everything(), 10)
    assert [hit.memory.pin for hit in found] == [True] * 10
    expected = await full_filter_answer(backend, ["team:a"], asked, everything(), 10)
    assert _answer(found) == _answer(expected)
    assert lean_calls


async def test_a_point_naming_another_namespace_is_never_answered(
    backend: QdrantEdgeBackend, lean_calls: list[int]
) -> None:
    """A point with the incarnation's token but another namespace's name (only damage
    could write one): the full filters decide, so no namespace reads another's memory."""
    rng = random.Random(4)
    await _fill(backend, "team:a", 10, rng, pinned_every=1000)
    live = backend.store.records.live["team:a"]
    target = _random_unit(rng)
    stray = memory("team:b", content="not yours")
    shard = backend.store.shards.of("team:a")
    payload = memory_to_payload(stray, live.epoch)
    shard.update(qe.UpdateOperation.upsert_points([qe.Point(str(uuid.uuid4()), target, payload)]))
    await _never_answered(backend, lean_calls, target, stray.id, 3)


async def test_kinds_asked_keep_the_full_filters(
    backend: QdrantEdgeBackend, lean_calls: list[int]
) -> None:
    rng = random.Random(6)
    await _fill(backend, "team:a", 10, rng)
    kinds = MemoryFilter(now=T0, kinds=frozenset({"fact"}))
    asked = QUERIES["hybrid"](rng)
    found = await backend.query_memories(["team:a"], asked, kinds, 5)
    assert _answer(found) == _answer(await full_filter_answer(backend, ["team:a"], asked, kinds, 5))
    assert not lean_calls


@pytest.mark.parametrize("stage", ["feedback", "feedback and rerank"])
async def test_feedback_answers_what_the_full_filters_answer(
    backend: QdrantEdgeBackend, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """Its first pass and second are asked by incarnation alone too (the rerank's
    candidates are not): with an expired memory not yet swept as the best match,
    pinned memories, and two shards, the answer is the one every request with its
    full filter gives."""
    shards = backend.store.shards
    rng = random.Random(8)
    other = next(n for n in (f"team:o{i}" for i in range(200)) if shards.index_of(n) != 0)
    same = next(n for n in (f"team:s{i}" for i in range(200)) if shards.index_of(n) == 0)
    first = next(n for n in (f"team:f{i}" for i in range(200)) if shards.index_of(n) == 0)
    for name in (first, same, other):
        await _fill(backend, name, 25, rng)
    checked = _counted(monkeypatch, "admitted")
    for n in range(12):
        target = _random_unit(rng)
        text = " ".join(rng.sample(WORDS, 2))
        gone = memory(first, content=text, expires_at=T0 - timedelta(seconds=1), pin=n % 3 == 0)
        await backend.upsert_memory(gone, MemoryVectors(target, KEYWORDS.document(text), [target]))
        asked = SearchQuery(
            target,
            KEYWORDS.query(text),
            [target, _random_unit(rng)] if "rerank" in stage else None,
            feedback="feedback" in stage,
        )
        names = [[first], [first, same], [first, same, other]][n % 3]
        limit = rng.choice([1, 4, 10])
        found = await backend.query_memories(names, asked, everything(), limit)
        assert gone.id not in [hit.memory.id for hit in found]
        with monkeypatch.context() as full:
            full.setattr(search_passes, "lean_applies", lambda _: False)
            expected = await backend.query_memories(names, asked, everything(), limit)
        assert _answer(found) == _answer(expected)
    assert checked
