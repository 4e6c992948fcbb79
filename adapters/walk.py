"""A walk over a store's places (shards, collections, engine workers), a page at a time.

What `VectorFill.missing` pages through and `VectorFill.fill` is keyed by (adapters/parts.py). A
cursor, and each key, is a place, a slash, and what the place gave: its own cursor (empty at its
start) or key. Places hold no slash, so walks nest: the engine pool's places are its workers,
whose own walks are over their shards.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import TypeVar

V = TypeVar("V")
# A page of keyed values, and where the next starts (None: no more).
Page = tuple[list[tuple[str, V]], str | None]


def joined(place: str, inner: str | None) -> str:
    return f"{place}/{inner or ''}"


def parted(text: str) -> tuple[str, str | None]:
    """A cursor or key as (place, what the place gave; None at its start)."""
    place, _, inner = text.partition("/")
    return place, inner or None


async def walk(
    places: Sequence[str],
    cursor: str | None,
    page: Callable[[str, str | None], Awaitable[Page[V]]],
) -> Page[V]:
    """One `page(place, its cursor)` of the walk over `places` in order, from `cursor` (None:
    the first place's start). A place gone since the cursor was made is followed by the first
    after it in sort order (places that can go are given sorted)."""
    if cursor is None:
        place, inner = (places[0] if places else None), None
    else:
        place, inner = parted(cursor)
        if place not in places:
            place, inner = next((p for p in places if p > place), None), None
    if place is None:
        return [], None
    found, after = await page(place, inner)
    keyed = [(joined(place, key), value) for key, value in found]
    if after is not None:
        return keyed, joined(place, after)
    following = places.index(place) + 1
    return keyed, joined(places[following], None) if following < len(places) else None


def by_place(items: Iterable[tuple[str, V]]) -> dict[str, list[tuple[str, V]]]:
    """Items keyed by a walk's keys, grouped by place, each with the key its place gave."""
    found: dict[str, list[tuple[str, V]]] = {}
    for key, value in items:
        place, inner = parted(key)
        found.setdefault(place, []).append((inner or "", value))
    return found
