"""The walk over a store's places (adapters/walk.py): every place once, in order, nested keys,
and a place gone since the cursor was made."""

from __future__ import annotations

from adapters.walk import Page
from adapters.walk import by_place
from adapters.walk import walk

# Each place's items, two a page.
HELD = {"a": ["1", "2", "3"], "b": [], "c": ["4"]}


async def page(place: str, after: str | None) -> Page[str]:
    items = HELD[place]
    start = 0 if after is None else items.index(after) + 1
    found = items[start : start + 2]
    more = start + 2 < len(items)
    return [(item, f"content {item}") for item in found], found[-1] if more else None


async def everything(places: list[str], cursor: str | None = None) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    while True:
        items, cursor = await walk(places, cursor, page)
        found += items
        if cursor is None:
            return found


async def test_the_walk_gives_every_place_once_in_order_keyed_by_place() -> None:
    assert await everything(["a", "b", "c"]) == [
        ("a/1", "content 1"),
        ("a/2", "content 2"),
        ("a/3", "content 3"),
        ("c/4", "content 4"),
    ]
    assert await walk([], None, page) == ([], None)


async def test_a_place_gone_since_the_cursor_goes_on_at_the_next() -> None:
    assert await everything(["a", "c"], "b/") == [("c/4", "content 4")]
    assert await everything(["a"], "b/") == []


async def test_keys_go_back_to_their_places_and_nest() -> None:
    outer, _ = await walk(["0", "1"], "1/", lambda _, __: walk(["a"], None, page))
    assert outer == [("1/a/1", "content 1"), ("1/a/2", "content 2")]
    assert by_place([("1/a/1", 1), ("0/b/4", 2), ("1/a/2", 3)]) == {
        "1": [("a/1", 1), ("a/2", 3)],
        "0": [("b/4", 2)],
    }
