"""The backend interface's methods for a forwarder, derived from adapters/crossings.py.

`derived(cls)` gives a class each declared call of the backend interface it does not
write itself, and each part (adapters/parts.py) with each of that part's calls: every
one makes a `Call` of its arguments and hands it to the backend's `cross` (or, for pages,
`cross_pages`). So a call is declared once, in `CROSSINGS`, and its forwarding is written
once, here: `EngineClient` sends a `Call` to its worker, `EnginePool` routes it to its
clients.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from collections.abc import Callable
from functools import cached_property
from functools import partial
from typing import Any
from typing import Protocol
from typing import TypeVar

from adapters.crossings import CROSSINGS
from adapters.crossings import INTERFACES
from adapters.crossings import Call
from adapters.crossings import Own
from adapters.crossings import split

T = TypeVar("T", bound=type)


class Crosser(Protocol):
    """What the derived methods hand their calls to."""

    async def cross(self, call: Call) -> Any: ...

    def cross_pages(self, call: Call) -> AsyncIterator[Any]: ...


def _method(key: str) -> Callable[..., Any]:
    """The method of declared call `key`, named and documented as the interface's."""
    part, name = split(key)
    if CROSSINGS[key].pages:

        async def pages(self: Crosser, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for page in self.cross_pages(Call(key, args, kwargs)):
                yield page

        method: Callable[..., Any] = pages
    else:

        async def call(self: Crosser, *args: Any, **kwargs: Any) -> Any:
            return await self.cross(Call(key, args, kwargs))

        method = call
    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(INTERFACES[part], name).__doc__
    return method


def derived(cls: T) -> T:
    """`cls` with a method for each declared backend call it does not define (abstract
    no more), and each part (adapters/parts.py), made on first use."""
    for key, crossing in CROSSINGS.items():
        part, name = split(key)
        if part is None and not isinstance(crossing.route, Own) and name not in vars(cls):
            setattr(cls, name, _method(key))
    for part in _PART_CLASSES:
        made = cached_property(partial(_part, name=part))
        made.__set_name__(cls, part)
        setattr(cls, part, made)
    abc.update_abstractmethods(cls)
    return cls


def _part(backend: Crosser, name: str) -> CrossingPart:
    return _PART_CLASSES[name](backend)


class CrossingPart:
    """A part (adapters/parts.py) of a forwarded backend: its calls go to the backend's."""

    def __init__(self, backend: Crosser) -> None:
        self._backend = backend

    async def cross(self, call: Call) -> Any:
        return await self._backend.cross(call)

    def cross_pages(self, call: Call) -> AsyncIterator[Any]:
        return self._backend.cross_pages(call)


_PART_CLASSES: dict[str, type[CrossingPart]] = {
    part: type(
        f"Forwarded{INTERFACES[part].__name__}",
        (CrossingPart,),
        {split(key)[1]: _method(key) for key in CROSSINGS if split(key)[0] == part},
    )
    for part in INTERFACES
    if part is not None
}
