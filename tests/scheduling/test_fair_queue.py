"""The fair queue: tenants in turn, a sparse tenant first, nobody starved."""

from __future__ import annotations

from plugin.scheduling.fair_queue import FairQueue


def fill(queue: FairQueue[str], tenant: str, count: int) -> None:
    for n in range(count):
        queue.push(tenant, f"{tenant}{n}")


def test_backlogged_tenants_are_served_in_turn() -> None:
    queue: FairQueue[str] = FairQueue()
    fill(queue, "a", 3)
    fill(queue, "b", 3)
    assert queue.take(6) == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert len(queue) == 0


def test_a_tenant_with_one_item_is_served_next_whatever_another_has_queued() -> None:
    queue: FairQueue[str] = FairQueue()
    fill(queue, "flood", 100)
    assert queue.take(2) == ["flood0", "flood1"]
    queue.push("quiet", "q")
    assert queue.pop() == "q"
    assert queue.pop() == "flood2"


def test_a_tenant_that_sends_again_at_once_is_not_new_again() -> None:
    """Served from the new list, it goes to the back of the old one: two backlogged tenants
    get their turns although the third refills after every turn of its own."""
    queue: FairQueue[str] = FairQueue()
    fill(queue, "a", 10)
    fill(queue, "b", 10)
    served = []
    for n in range(9):
        queue.push("c", f"c{n}")
        served.append(queue.pop())
        served.append(queue.pop())
    assert served.count("c0") == 1
    assert sum(item.startswith("a") for item in served) >= 5
    assert sum(item.startswith("b") for item in served) >= 5


def test_counts_and_dead_items() -> None:
    queue: FairQueue[str] = FairQueue()
    fill(queue, "a", 2)
    fill(queue, "b", 1)
    assert (len(queue), queue.tenants()) == (3, 2)
    assert queue.take(5, live=lambda item: item != "a0") == ["b0", "a1"]
    assert (len(queue), queue.tenants()) == (0, 0)
    assert list(queue.drain()) == []


def test_an_overdue_item_goes_first_oldest_first() -> None:
    """A tenant's later items wait a round each in fair order; overdue, they go next."""
    late: set[str] = set()  # the items queued longest, as a clock would make them
    queue: FairQueue[str] = FairQueue(overdue=lambda item: item in late)
    fill(queue, "a", 3)
    for tenant in "bcd":
        fill(queue, tenant, 1)
    assert queue.take(2) == ["a0", "b0"]  # fair order while nothing is overdue
    late.update({"a1", "a2"})
    assert queue.take(2) == ["a1", "a2"]  # in arrival order, whatever the round
    assert queue.take(3) == ["c0", "d0"]  # then fair order again
    assert (len(queue), queue.tenants()) == (0, 0)


def test_an_item_taken_in_fair_order_is_not_taken_again_when_it_would_be_overdue() -> None:
    queue: FairQueue[str] = FairQueue(overdue=lambda item: True)
    fill(queue, "a", 2)
    fill(queue, "b", 2)
    # everything is overdue: arrival order, each item once, none left behind
    assert queue.take(10) == ["a0", "a1", "b0", "b1"]
    queue.push("a", "again")
    assert queue.take(10) == ["again"]
    assert len(queue) == 0


def test_a_tenant_emptied_by_overdue_items_keeps_its_place() -> None:
    late = {"b0"}
    queue: FairQueue[str] = FairQueue(overdue=lambda item: item in late)
    fill(queue, "b", 1)
    fill(queue, "a", 1)
    assert queue.pop() == "b0"
    queue.push("b", "b1")  # b is still first of the new tenants
    assert queue.take(10) == ["b1", "a0"]
    assert list(queue.drain()) == []


def test_drain_empties_every_tenant() -> None:
    queue: FairQueue[str] = FairQueue(overdue=lambda item: False)
    fill(queue, "a", 2)
    fill(queue, "b", 1)
    assert sorted(queue.drain()) == ["a0", "a1", "b0"]
    assert (len(queue), queue.tenants()) == (0, 0)
    queue.push("c", "c0")
    assert queue.take(2) == ["c0"]
