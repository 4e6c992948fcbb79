"""The rerank dimmer: every search reranked while the queue is short, fewer as it grows, all
again soon after it empties; decided at once, never flapping.

Each test owns a hand-moved clock and says what queue the searches find, so what the dimmer
measured is what the test made it measure.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from harness.clocks import ManualClock
from plugin.scheduling.dimmer import WINDOW_S
from plugin.scheduling.dimmer import WINDOW_SEARCHES
from plugin.scheduling.dimmer import RerankDimmer

TARGET = 1 / 64  # a binary fraction: the shares the tests expect come out exact


class Queue:
    """The queue a search finds, as the test sets it."""

    def __init__(self) -> None:
        self.length = 0.0

    def __call__(self) -> float:
        return self.length


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def queue() -> Queue:
    return Queue()


@pytest.fixture
def dimmer(clock: ManualClock, queue: Queue) -> RerankDimmer:
    return RerankDimmer(TARGET, queue, clock)


def searches(dimmer: RerankDimmer, clock: ManualClock, count: int, seconds: float) -> int:
    """`count` searches spread over `seconds`; how many were reranked."""
    reranked = 0
    for _ in range(count):
        reranked += dimmer.rerank()
        clock.advance(seconds / count)
    return reranked


def test_with_room_every_search_is_reranked(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    queue.length = TARGET / 2
    assert searches(dimmer, clock, 1000, 10.0) == 1000
    assert dimmer.share == 1.0


@pytest.mark.parametrize(("times_target", "windows"), [(1.9, 3), (1.5, 4)])
def test_a_sustained_queue_over_the_target_turns_reranking_off_within_windows(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue, times_target: float, windows: int
) -> None:
    """The further over the target, the faster (under the spike guard: only the windows
    turn it down); at most half of all searches a window."""
    queue.length = TARGET * times_target
    searches(dimmer, clock, 16 * windows, windows * WINDOW_S)
    assert dimmer.share == 0.0
    queue.length = TARGET * 1.1  # still over it: it stays off
    assert searches(dimmer, clock, 1024, 8.0) == 0
    assert dimmer.share == 0.0


def test_a_search_arriving_to_a_spike_is_ranked_by_hybrid_at_once(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    queue.length = TARGET * 2.5
    assert dimmer.rerank() is False
    assert dimmer.share == 1.0  # no window has ended: the share itself has not moved yet
    queue.length = 0.0
    assert dimmer.rerank() is True


def test_reranking_comes_back_within_two_seconds_of_the_load_easing(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    queue.length = TARGET * 4
    searches(dimmer, clock, 256, 4.0)
    assert dimmer.share == 0.0
    queue.length = 0.0
    searches(dimmer, clock, 64, 4 * WINDOW_S)
    assert dimmer.share == 1.0
    assert searches(dimmer, clock, 100, 1.0) == 100


def test_windows_without_searches_count_the_queue_seen_now(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    """After a burst, searches may not come back at once: the share still recovers, as
    the gauge reads it and as the next search finds it."""
    queue.length = TARGET * 4
    searches(dimmer, clock, 256, 4.0)
    assert dimmer.share == 0.0
    queue.length = 0.0
    clock.advance(4 * WINDOW_S)
    assert dimmer.share == 1.0
    assert dimmer.rerank() is True


def test_the_share_follows_evenly_not_by_chance(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    queue.length = TARGET * 1.5  # a relative distance of -0.5: the share falls by 1/4
    searches(dimmer, clock, 16, WINDOW_S)
    assert dimmer.share == 0.75
    queue.length = TARGET  # at the setpoint: the share stands still
    picked = [dimmer.rerank() for _ in range(800)]
    assert dimmer.share == 0.75
    assert sum(picked) == 600
    assert all(sum(picked[n : n + 4]) == 3 for n in range(0, 800, 4))


def test_a_window_closes_early_once_it_holds_enough_searches(
    dimmer: RerankDimmer, clock: ManualClock, queue: Queue
) -> None:
    """At a high rate the share moves sooner: on as many searches as at a low one."""
    queue.length = TARGET * 1.9
    searches(dimmer, clock, 3 * WINDOW_SEARCHES, WINDOW_S / 4)
    assert dimmer.level == 0.0


def test_a_load_the_plugin_can_half_carry_settles_at_the_setpoint_without_flapping(
    clock: ManualClock,
) -> None:
    """A plant like the plugin's: the queue grows with the share reranked (a rerank costs
    more), from under the target with none to twice it with all. The share settles where
    the queue meets the target and stays there, moving little window to window."""
    shares: list[float] = []
    dimmer: RerankDimmer

    def plant() -> float:
        return TARGET * (0.5 + 1.5 * dimmer.level)

    dimmer = RerankDimmer(TARGET, plant, clock)
    for _ in range(60):
        searches(dimmer, clock, 64, WINDOW_S)
        shares.append(dimmer.level)
    settled = shares[20:]
    assert all(abs(share - 1 / 3) < 0.05 for share in settled)
    steps = [abs(b - a) for a, b in pairwise(settled)]
    assert max(steps) < 0.02
