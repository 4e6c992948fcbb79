"""The engine workers behind one backend interface, each owning some namespaces.

`route(name)` names the worker that owns a namespace (a fixed function of the name). Each
call goes where its declaration says (adapters/crossings.py): one about a namespace to
its worker; a search or listing over namespaces of several workers to each for its own,
the answers merged as one store orders them (adapters/merge.py); store-wide calls to every
worker; the background fills' walks from worker to worker. This router is the one place
that reads the declarations' routes; its methods are derived (crossings.py). A worker
that stops takes only its namespaces away: their calls answer `BackendUnavailable` (503)
until it is back, health says `degraded`, and the other workers' namespaces are served
throughout. One worker is a pool of one: the server's shape whatever the count.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

from adapters.base import VectorBackend
from adapters.crossings import Call
from adapters.crossings import Every
from adapters.crossings import Grouped
from adapters.crossings import Keyed
from adapters.crossings import Owner
from adapters.crossings import Spread
from adapters.crossings import Walk
from adapters.crossings import derived
from adapters.merge import answered
from adapters.values import DiskWrites
from adapters.values import SearchMode
from adapters.values import StoreCondition
from adapters.worker.engine_client import EngineClient


@derived
class EnginePool(VectorBackend):
    """`clients`' workers as one backend; `route(name)` is the index of a name's worker."""

    def __init__(
        self,
        dimension: int,
        clients: Sequence[EngineClient],
        route: Callable[[str], int],
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        self.clients = list(clients)
        self.name = self.clients[0].name
        self.route = route

    def owner(self, name: str) -> EngineClient:
        return self.clients[self.route(name)]

    def grouped(self, names: Iterable[str]) -> dict[int, list[str]]:
        """`names` by the index of their worker, each once, in their order."""
        groups: dict[int, list[str]] = {}
        for name in dict.fromkeys(names):
            groups.setdefault(self.route(name), []).append(name)
        return groups

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self.clients[0].search_modes

    async def start(self) -> None:
        try:
            answered(
                await asyncio.gather(*(c.start() for c in self.clients), return_exceptions=True)
            )
        except BaseException:
            await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)
            raise

    async def close(self) -> None:
        answered(await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True))

    def condition(self) -> StoreCondition:
        conditions = [client.condition() for client in self.clients]
        disks = [c.disk for c in conditions if c.disk is not None]
        return StoreCondition(
            unreadable_namespaces=tuple(n for c in conditions for n in c.unreadable_namespaces),
            problems=tuple(p for c in conditions for p in c.problems),
            disk=DiskWrites.merged(disks) if disks else None,
        )

    # -- the router -------------------------------------------------------------------

    @staticmethod
    async def _ask(client: EngineClient, call: Call) -> Any:
        """`call` made of `client` (its part's method, for a part's call)."""
        target = client if call.part is None else getattr(client, call.part)
        return await getattr(target, call.method)(*call.args, **call.kwargs)

    async def _all(self, asked: Iterable[tuple[int, Call]]) -> list[Any]:
        """Each worker's answer to its call, all at once; a failure as its exception."""
        calls = [self._ask(self.clients[index], call) for index, call in asked]
        return await asyncio.gather(*calls, return_exceptions=True)

    async def cross(self, call: Call) -> Any:
        route = call.crossing.route
        if isinstance(route, Owner):
            return await self._ask(self._owner_of(call, route), call)
        if isinstance(route, Spread):
            groups = self.grouped(call.arg(route.arg)) or {0: []}
            asked = [(i, call.with_args(**{route.arg: some})) for i, some in groups.items()]
            if len(asked) == 1:  # one worker's answer is already as one store orders it
                index, only = asked[0]
                return await self._ask(self.clients[index], only)
            return route.merge(await self._all(asked), call)
        if isinstance(route, Every):
            if route.in_turn:
                return route.merge([await self._ask(client, call) for client in self.clients], call)
            return route.merge(await self._all(enumerate([call] * len(self.clients))), call)
        if isinstance(route, Walk):
            return await self._walk(call)
        if isinstance(route, Keyed):
            return await self._keyed(call, route)
        if isinstance(route, Grouped):
            return await self._grouped(call, route)
        raise TypeError(f"{call.key} is not sent to the workers")

    async def cross_pages(self, call: Call) -> AsyncIterator[Any]:
        route = call.crossing.route
        assert isinstance(route, Owner)  # a namespace's pages come from its worker
        target = self._owner_of(call, route)
        part = target if call.part is None else getattr(target, call.part)
        async for page in getattr(part, call.method)(*call.args, **call.kwargs):
            yield page

    def _owner_of(self, call: Call, route: Owner) -> EngineClient:
        named = call.arg(route.arg)
        return self.owner(named if route.field is None else getattr(named, route.field))

    async def _walk(self, call: Call) -> tuple[list[tuple[str, Any]], str | None]:
        """One page of the walk over every worker in turn, from the call's `cursor`: a
        cursor, and each key, is the worker's index, a slash, and what the worker gave."""
        index, _, inner = (call.arg("cursor") or "0/").partition("/")
        worker = int(index)
        items, after = await self._ask(self.clients[worker], call.with_args(cursor=inner or None))
        keyed = [(f"{worker}/{key}", value) for key, value in items]
        if after is not None:
            return keyed, f"{worker}/{after}"
        return keyed, (f"{worker + 1}/" if worker + 1 < len(self.clients) else None)

    async def _keyed(self, call: Call, route: Keyed) -> int:
        """Items keyed by a walk's keys, each worker's in one call; how many, summed."""
        by_worker: dict[int, list[tuple[str, Any]]] = {}
        for key, value in call.arg(route.arg):
            index, _, inner = key.partition("/")
            by_worker.setdefault(int(index), []).append((inner, value))
        done = 0
        for index, items in by_worker.items():
            done += await self._ask(self.clients[index], call.with_args(**{route.arg: items}))
        return done

    async def _grouped(self, call: Call, route: Grouped) -> int:
        """Each worker's items in one call, the workers in turn (a failure stops there:
        what was written stays, and a retry writes it again, as for one store)."""
        items = call.arg(route.arg)
        groups: dict[int, list[int]] = {}
        for n, item in enumerate(items):
            groups.setdefault(self.route(route.namespace_of(item)), []).append(n)
        done = 0
        for index, positions in groups.items():
            values: dict[str, list[Any] | None] = {route.arg: [items[n] for n in positions]}
            for name in route.aligned:
                aligned = call.arg(name)
                values[name] = None if aligned is None else [aligned[n] for n in positions]
            done += await self._ask(self.clients[index], call.with_args(**values))
        return done
