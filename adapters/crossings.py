"""How each backend call crosses to a backend held by engine workers, declared once.

`CROSSINGS`: where each call of `VectorBackend` and its parts goes among the workers, and how
their answers merge; `derived` writes the forwarding from it (docs/development.md).
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from functools import partial
from typing import Any
from typing import Protocol
from typing import TypeVar

from adapters import merge
from adapters.base import VectorBackend
from adapters.parts import BulkTransfer
from adapters.parts import KeywordIndex
from adapters.parts import StoreMeta
from adapters.parts import StoreSizes
from adapters.parts import TokenIndex

# Where each call's signature is read: the backend (None) and each part, by its name.
INTERFACES: Mapping[str | None, type] = {
    None: VectorBackend,
    "keyword_index": KeywordIndex,
    "token_index": TokenIndex,
    "transfer": BulkTransfer,
    "store_meta": StoreMeta,
    "store_size": StoreSizes,
}


@dataclass(frozen=True, slots=True)
class Owner:
    arg: str
    field: str | None = None  # the name is this field of the argument


@dataclass(frozen=True, slots=True)
class Spread:
    arg: str
    merge: merge.Merge


@dataclass(frozen=True, slots=True)
class Every:
    merge: merge.Merge
    in_turn: bool = False


@dataclass(frozen=True, slots=True)
class Walk:
    pass


@dataclass(frozen=True, slots=True)
class Keyed:
    arg: str = "items"


@dataclass(frozen=True, slots=True)
class Grouped:
    arg: str
    namespace_of: Callable[[Any], str]
    aligned: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Own:
    pass


Route = Owner | Spread | Every | Walk | Keyed | Grouped | Own


@dataclass(frozen=True, slots=True)
class Crossing:
    route: Route
    queued: bool = False
    pages: bool = False
    # The same call twice does the same (a read, an upsert by id): in flight when its worker
    # dies, it is sent again to the replacement (adapters/pool/engine_process.py).
    again: bool = False


def _stored_namespace(item: Any) -> str:
    memory, _ = item
    return str(memory.namespace)


CROSSINGS: Mapping[str, Crossing] = {
    "start": Crossing(Own()),
    "close": Crossing(Own()),
    "maintain": Crossing(Every(merge.nothing)),
    "ping": Crossing(Every(merge.serving), again=True),
    "verify": Crossing(Every(merge.lines), queued=True, again=True),
    "accept": Crossing(Every(merge.sorted_names)),
    "get_namespace": Crossing(Owner("name"), again=True),
    "get_namespaces": Crossing(Spread("names", merge.namespaces), again=True),
    "save_namespace": Crossing(Owner("record", "name"), again=True),
    "delete_namespace": Crossing(Owner("name")),
    "list_namespaces": Crossing(Every(merge.concatenated), again=True),
    "expired_namespaces": Crossing(Every(merge.concatenated), again=True),
    "get_stored_memory": Crossing(Owner("namespace"), queued=True, again=True),
    "get_memory": Crossing(Owner("namespace"), queued=True, again=True),
    # the pool's own: the upserts of one turn cross to each worker as one `upsert_batch`
    "upsert_memory": Crossing(Own()),
    "upsert_batch": Crossing(Own(), again=True),
    "query_memories": Crossing(Spread("namespaces", merge.scored), queued=True, again=True),
    "list_memories": Crossing(Spread("namespaces", merge.listed), queued=True, again=True),
    "delete_memory": Crossing(Owner("namespace")),
    "delete_expired_memories": Crossing(Every(merge.summed)),
    "keyword_index.prepare_keywords": Crossing(Every(merge.nothing, in_turn=True)),
    "keyword_index.unindexed_memories": Crossing(Walk(), queued=True, again=True),
    "keyword_index.index_keywords": Crossing(Keyed(), again=True),
    "token_index.prepare_tokens": Crossing(Every(merge.nothing, in_turn=True)),
    "token_index.untokenized_memories": Crossing(Walk(), queued=True, again=True),
    "token_index.index_tokens": Crossing(Keyed(), again=True),
    "transfer.iter_memories": Crossing(Owner("namespace"), queued=True, pages=True),
    "transfer.upsert_memories": Crossing(
        Grouped("memories", _stored_namespace, aligned=("keywords",)), again=True
    ),
    "transfer.place_memories": Crossing(Owner("namespace"), again=True),
    # in turn: the first worker holds a fact before the next is told it
    "store_meta.read_store_meta": Crossing(Every(merge.agreed), again=True),
    "store_meta.write_store_meta": Crossing(Every(merge.nothing, in_turn=True), again=True),
    "store_size.measure": Crossing(Every(merge.sizes), again=True),
}


def split(key: str) -> tuple[str | None, str]:
    """A declaration's key as (part or None, method)."""
    part, _, method = key.rpartition(".")
    return part or None, method


def _parameters(key: str) -> tuple[str, ...]:
    part, method = split(key)
    signature = inspect.signature(getattr(INTERFACES[part], method))
    return tuple(signature.parameters)[1:]  # less self


@dataclass(frozen=True, slots=True)
class Call:
    """One call of the interface as it was made: what a forwarder sends, a router routes."""

    key: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]

    @property
    def crossing(self) -> Crossing:
        return CROSSINGS[self.key]

    @property
    def part(self) -> str | None:
        return _SPLIT[self.key][0]

    @property
    def method(self) -> str:
        return _SPLIT[self.key][1]

    def arg(self, name: str) -> Any:
        """The argument `name` as the call gave it (None where it took the default)."""
        if name in self.kwargs:
            return self.kwargs[name]
        position = _POSITIONS[self.key][name]
        return self.args[position] if position < len(self.args) else None

    def with_args(self, **values: Any) -> Call:
        """The same call with those arguments replaced (given by keyword from here on)."""
        names = PARAMETERS[self.key]
        positional = {name: value for name, value in zip(names, self.args, strict=False)}
        return Call(self.key, (), {**positional, **self.kwargs, **values})

    def owner(self, route: Owner) -> str:
        """The namespace whose worker answers the call, as `route` names it."""
        named = self.arg(route.arg)
        return str(named if route.field is None else getattr(named, route.field))

    def about(self) -> str:
        """The call and the namespaces it names, for a log line."""
        route = self.crossing.route
        if isinstance(route, Owner):
            return f"{self.key} of {self.owner(route)}"
        if isinstance(route, Spread):
            return f"{self.key} of {', '.join(map(str, self.arg(route.arg) or ()))}"
        return self.key


# Each declared call's parameter names, read from the interface once, and where each is.
PARAMETERS: Mapping[str, tuple[str, ...]] = {key: _parameters(key) for key in CROSSINGS}
_POSITIONS = {key: {name: n for n, name in enumerate(names)} for key, names in PARAMETERS.items()}
_SPLIT = {key: split(key) for key in CROSSINGS}


# -- the forwarder's methods, derived from the declarations ---------------------------

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
