"""The read-your-writes overlay on its own: merging, the time window, the size bound."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.pinecone.overlay import FreshnessOverlay
from adapters.values import MemoryFilter
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import SearchQuery
from harness.clocks import ManualClock
from tests.support.records import T0
from tests.support.records import cosine
from tests.support.records import memory
from tests.support.records import unit


@pytest.fixture
def overlay(ticks: ManualClock) -> FreshnessOverlay:
    return FreshnessOverlay(window_s=30.0, max_entries=100, clock=ticks)


def test_query_merge_replaces_stale_hits_hides_deletes_and_adds_unseen_writes(
    overlay: FreshnessOverlay,
) -> None:
    stale = memory("org:a", content="old text")
    updated = memory("org:a", id=stale.id, content="new text")
    deleted = memory("org:a")
    untouched = memory("org:a")
    unseen = memory("org:a", created_at=T0 + timedelta(seconds=1))
    overlay.memory_written(updated, unit(1, 1), "e1")
    overlay.memory_deleted("org:a", deleted.id, "e1")
    overlay.memory_written(unseen, unit(1), "e1")
    from_index = [
        ScoredMemory(stale, 0.9),
        ScoredMemory(deleted, 0.8),
        ScoredMemory(untouched, 0.1),
    ]

    merged = overlay.merge_query(
        "org:a", "e1", SearchQuery(unit(1)), MemoryFilter(now=T0), from_index, 10
    )

    assert [(hit.memory, round(hit.score, 6)) for hit in merged] == [
        (unseen, 1.0),
        (updated, round(cosine(unit(1), unit(1, 1)), 6)),
        (untouched, 0.1),
    ]


def test_writes_of_another_epoch_or_failing_the_filter_are_not_merged(
    overlay: FreshnessOverlay,
) -> None:
    overlay.memory_written(memory("org:a"), unit(1), "old-epoch")
    overlay.memory_written(memory("org:a", kind="summary"), unit(1), "e1")
    overlay.memory_written(memory("org:a", expires_at=T0), unit(1), "e1")
    only_facts = MemoryFilter(now=T0, kinds=frozenset({"fact"}))
    assert overlay.merge_query("org:a", "e1", SearchQuery(unit(1)), only_facts, [], 10) == []
    assert overlay.merge_listing("org:a", "e1", only_facts, [], 10) == []


def test_listing_merge_is_newest_first_and_cut_to_limit(overlay: FreshnessOverlay) -> None:
    older = memory("org:a", created_at=T0)
    newer = memory("org:a", created_at=T0 + timedelta(seconds=5))
    overlay.memory_written(newer, unit(1), "e1")
    everything = MemoryFilter(now=T0)
    assert overlay.merge_listing("org:a", "e1", everything, [older], 10) == [newer, older]
    assert overlay.merge_listing("org:a", "e1", everything, [older], 1) == [newer]


def test_entries_leave_after_the_window(overlay: FreshnessOverlay, ticks: ManualClock) -> None:
    written = memory("org:a")
    overlay.memory_written(written, unit(1), "e1")
    overlay.namespace_saved(NamespaceRecord(name="org:a", kind="org", created_at=T0), "e1")
    ticks.now += 29.9
    assert overlay.memory("org:a", written.id, "e1") is not None
    assert overlay.namespace("org:a") is not None
    ticks.now += 0.2
    assert overlay.memory("org:a", written.id, "e1") is None
    assert overlay.namespace("org:a") is None
    assert len(overlay) == 0
    assert overlay.evicted_early == 0


def test_size_is_bounded_and_early_evictions_are_counted(ticks: ManualClock) -> None:
    overlay = FreshnessOverlay(window_s=30.0, max_entries=3, clock=ticks)
    written = [memory("org:a") for _ in range(5)]
    for item in written:
        ticks.now += 0.01
        overlay.memory_written(item, unit(1), "e1")
    assert len(overlay) == 3
    assert overlay.evicted_early == 2
    assert overlay.ids_in("org:a") == {m.id for m in written[2:]}


def test_namespace_delete_forgets_that_namespaces_writes(overlay: FreshnessOverlay) -> None:
    overlay.memory_written(memory("org:a"), unit(1), "e1")
    overlay.namespace_deleted("org:a")
    assert overlay.ids_in("org:a") == set()
    entry = overlay.namespace("org:a")
    assert entry is not None
    assert entry.record is None
