"""The neighbours' lift (plugin/core/neighbours.py): who rises, by how much, and who not."""

from __future__ import annotations

import pytest

from adapters.values import ScoredMemory
from plugin.core import neighbours
from tests.support.records import memory


def hit(namespace: str, position: int | None, score: float, pin: bool = False) -> ScoredMemory:
    return ScoredMemory(memory(namespace, position=position, pin=pin), score)


def scores(hits: list[ScoredMemory]) -> list[tuple[int | None, float | None]]:
    return [(h.memory.position, h.score) for h in hits]


def test_a_memory_rises_by_its_share_of_the_gap_to_its_best_neighbour_by_distance() -> None:
    hits = [
        hit("team:a", 5, 0.9),
        hit("team:a", 9, 0.5),
        hit("team:a", 6, 0.4),
        hit("team:a", 3, 0.3),
        hit("team:a", 4, 0.1),
    ]
    lifted = neighbours.lift(hits, (0.5, 0.2))
    assert scores(lifted) == [
        (5, 0.9),  # its neighbours score lower: unchanged
        (6, pytest.approx(0.65)),  # 0.4 + 0.5 x (0.9 - 0.4): now above place 9
        (9, 0.5),  # no neighbour in the pool
        (4, pytest.approx(0.5)),  # 0.1 + 0.5 x (0.9 - 0.1); ties keep their order
        (3, pytest.approx(0.42)),  # 0.3 + 0.2 x (0.9 - 0.3) from place 5, two away
    ]


def test_the_most_of_each_distances_lift_counts() -> None:
    hits = [hit("team:a", 0, 1.0), hit("team:a", 3, 0.6), hit("team:a", 2, 0.0)]
    # place 2: 0.5 x 0.6 from place 3 (one away), 0.2 x 1.0 from place 0 (two away)
    assert scores(neighbours.lift(hits, (0.5, 0.2)))[2] == (2, pytest.approx(0.3))
    assert scores(neighbours.lift(hits, (0.5, 0.4)))[2] == (2, pytest.approx(0.4))


def test_neighbours_are_of_one_namespace_and_one_pin_side() -> None:
    hits = [
        hit("team:a", 1, 0.9, pin=True),
        hit("team:b", 2, 0.8),  # place 1 of team:a is no neighbour of team:b's place 2
        hit("team:a", 2, 0.3),  # its neighbour is pinned: another side
        hit("team:a", 7, 0.2),
    ]
    assert neighbours.lift(hits, (0.5, 0.2)) == hits


def test_a_memory_without_a_place_keeps_its_score_and_lends_none() -> None:
    hits = [hit("team:a", None, 0.9), hit("team:a", 0, 0.5), hit("team:a", 1, 0.1)]
    assert scores(neighbours.lift(hits, (0.5,))) == [
        (None, 0.9),
        (0, 0.5),
        (1, pytest.approx(0.3)),
    ]


def test_no_share_changes_nothing_and_no_memory_passes_the_one_lifting_it() -> None:
    hits = [hit("team:a", n, 1.0 - n / 10) for n in range(10)][::-1]
    assert neighbours.lift(hits, (0.0, 0.0)) == hits
    ranked = sorted(hits, key=lambda h: -(h.score or 0))
    lifted = neighbours.lift(ranked, (0.99, 0.99))
    assert [h.memory.position for h in lifted] == list(range(10))
