"""The engine workers behind one backend interface, each owning some namespaces.

Sends each call where its declaration says (adapters/crossings.py) and merges the answers (its
typed methods are written into engine_stub.py from the declarations); keeps
the workers' lifecycle, their condition and the copy of the namespace records.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from adapters import frames
from adapters.base import failed_write
from adapters.callers import current_caller
from adapters.crossings import WORKER_CALLS
from adapters.crossings import ByNamespace
from adapters.crossings import ByWalkKey
from adapters.crossings import Call
from adapters.crossings import ToEvery
from adapters.crossings import ToOwner
from adapters.crossings import ToOwners
from adapters.crossings import WalkPage
from adapters.errors import BackendError
from adapters.errors import StorageDamaged
from adapters.merge import answered
from adapters.merge import merge_namespaces
from adapters.pool.engine_process import EngineProcess
from adapters.pool.engine_stub import EngineStub
from adapters.values import DiskWrites
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from adapters.values import StoreCondition
from adapters.walk import Page
from adapters.walk import by_place
from adapters.walk import walk

# A memory and its vectors on their way to be upserted.
Upsert = tuple[MemoryRecord, MemoryVectors]


@dataclass(slots=True)
class Turn:
    """The upserts for one worker in one turn of the loop, their answers, and the call
    that sends them (`EnginePool.upsert_memory`)."""

    upserts: list[Upsert] = field(default_factory=list)
    answers: list[asyncio.Future[BackendError | None]] = field(default_factory=list)
    sending: asyncio.Task[None] | None = None

    def given_up(self) -> bool:
        """Whether every caller stopped waiting (their deadlines passed)."""
        return all(answer.cancelled() for answer in self.answers)


class EnginePool(EngineStub):
    """`workers` as one backend; `route(name)` is the index of a name's worker."""

    sole_writer = True  # each worker holds its part of the store's lock
    makes_keywords = True  # each worker's engine (adapters/keyword_encoder.py)

    def __init__(
        self,
        dimension: int,
        workers: Sequence[EngineProcess],
        route: Callable[[str], int],
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        self.workers = list(workers)
        self.name = self.workers[0].spec.name
        self.route = route
        # The namespace records this server has read or written, by name, each with its
        # worker's restarts when it was kept (`_records`).
        self._known: dict[str, tuple[NamespaceRecord, int]] = {}
        self._changes = 0  # namespace saves and deletes begun
        # The upserts of this turn of the loop, by worker (`upsert_memory`), and those sent.
        self._turn: dict[int, Turn] = {}
        self._sending: set[asyncio.Task[None]] = set()

    def owner(self, name: str) -> EngineProcess:
        return self.workers[self.route(name)]

    def grouped(self, names: Iterable[str]) -> dict[int, list[str]]:
        """`names` by the index of their worker, each once, in their order."""
        groups: dict[int, list[str]] = {}
        for name in dict.fromkeys(names):
            groups.setdefault(self.route(name), []).append(name)
        return groups

    def shares(self, namespaces: Iterable[str]) -> dict[int, list[int]]:
        """The positions of `namespaces` (one an item) by the index of their worker."""
        found: dict[int, list[int]] = {}
        for n, name in enumerate(namespaces):
            found.setdefault(self.route(name), []).append(n)
        return found

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self.workers[0].spec.search_modes

    async def start(self) -> None:
        try:
            answered(
                await asyncio.gather(*(w.start() for w in self.workers), return_exceptions=True)
            )
        except BaseException:
            await asyncio.gather(*(w.close() for w in self.workers), return_exceptions=True)
            raise

    async def close(self) -> None:
        closed = await asyncio.gather(*(w.close() for w in self.workers), return_exceptions=True)
        await asyncio.gather(*self._sending, return_exceptions=True)  # answered or failed
        answered(closed)

    async def ping(self) -> None:
        """Every worker's ping, each one's condition read afresh with it; answered as its
        declaration merges (the store answers while any worker does)."""
        call = Call("ping", (), {})
        route = call.crossing.route
        assert isinstance(route, ToEvery)
        route.merge(
            await asyncio.gather(*(w.ping() for w in self.workers), return_exceptions=True), call
        )

    def condition(self) -> StoreCondition:
        conditions = [worker.condition for worker in self.workers]
        disks = [c.disk for c in conditions if c.disk is not None]
        return StoreCondition(
            unreadable_namespaces=tuple(n for c in conditions for n in c.unreadable_namespaces),
            problems=tuple(p for c in conditions for p in c.problems),
            disk=DiskWrites.merged(disks) if disks else None,
        )

    # -- the copy of the namespace records --------------------------------------------
    # Why: the platform PUTs a namespace before every write and a search reads its
    # namespaces' records first, and a worker answers nothing while its engine runs a long
    # search. Every change of a record passes through this pool, so the copy holds: an
    # answer is kept only if no change was made while it was on its way. A record is
    # answered only while its worker is up (a request over a namespace of a store that is
    # away is refused at its first step, before the model works for it), and not after
    # its worker restarted (it may have rebuilt records).

    async def _copy(self, name: str) -> NamespaceRecord | None:
        """The kept record of `name`, if any; `BackendUnavailable` while its worker is down
        (after waiting for its replacement a moment: `EngineProcess.ready`)."""
        worker = self.owner(name)
        await worker.ready()
        kept = self._known.get(name)
        if kept is None:
            return None
        record, restarts = kept
        if restarts != worker.restarts:
            del self._known[name]
            return None
        return record

    def _keep(self, found: Mapping[str, NamespaceRecord], changes: int) -> None:
        if changes == self._changes:
            for name, record in found.items():
                self._known[name] = (record, self.owner(name).restarts)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        if (known := await self._copy(name)) is not None:
            return known
        changes = self._changes
        found: NamespaceRecord | None = await self.cross(Call("get_namespace", (name,), {}))
        if found is not None:
            self._keep({name: found}, changes)
        return found

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        known: dict[str, NamespaceRecord] = {}
        for name in names:
            if (record := await self._copy(name)) is not None:
                known[name] = record
        missing = [name for name in names if name not in known]
        if not missing:
            return known
        changes = self._changes
        try:
            found: Mapping[str, NamespaceRecord] = await self.cross(
                Call("get_namespaces", (missing,), {})
            )
        except StorageDamaged as damaged:  # raised only when none of `missing` is live
            return merge_namespaces([known, damaged])
        self._keep(found, changes)
        return known | dict(found)

    async def save_namespace(self, record: NamespaceRecord) -> None:
        self._changes += 1
        changes = self._changes
        self._known.pop(record.name, None)  # unknown until the worker has it
        await self.cross(Call("save_namespace", (record,), {}))
        self._keep({record.name: record}, changes)

    async def delete_namespace(self, name: str) -> bool:
        self._changes += 1
        self._known.pop(name, None)
        deleted: bool = await self.cross(Call("delete_namespace", (name,), {}))
        return deleted

    # -- upserts: each worker's share of a batch crosses as one call ---------------------
    # The commits a model batch embedded come here in one turn of the loop: each worker's
    # crosses as one `upsert_batch`, sent at the end of the turn; a lone one waits for
    # nothing but that turn.

    async def upsert_memory(self, memory: MemoryRecord, vectors: MemoryVectors) -> None:
        index = self.route(memory.namespace)
        turn = self._turn.get(index)
        if turn is None:
            turn = self._turn[index] = Turn()
            asyncio.get_running_loop().call_soon(self._send_turn, index)
        answer: asyncio.Future[BackendError | None] = asyncio.get_running_loop().create_future()
        turn.upserts.append((memory, vectors))
        turn.answers.append(answer)
        try:
            failed = await answer
        except asyncio.CancelledError:  # its deadline passed: so has the call's, once all have
            if turn.sending is not None and turn.given_up():
                turn.sending.cancel()
            raise
        if failed is not None:
            raise failed

    def _send_turn(self, index: int) -> None:
        turn = self._turn.pop(index)
        if turn.given_up():  # none of them waits any more: none is written
            return
        turn.sending = asyncio.create_task(self._deliver(index, turn), name="upserts of a turn")
        self._sending.add(turn.sending)
        turn.sending.add_done_callback(self._sending.discard)

    async def _deliver(self, index: int, turn: Turn) -> None:
        waiting = [n for n, answer in enumerate(turn.answers) if not answer.cancelled()]
        try:
            failed = await self._upsert_batch(index, [turn.upserts[n] for n in waiting])
        except asyncio.CancelledError:
            for answer in turn.answers:
                answer.cancel()
            raise
        except BaseException as error:  # the call failed (its worker gone): each fails so
            for answer in turn.answers:
                if not answer.done():
                    answer.set_exception(error)
            return
        for n, one in zip(waiting, failed, strict=True):
            if not turn.answers[n].done():
                turn.answers[n].set_result(one)

    async def upsert_batch(self, batch: Sequence[Upsert]) -> list[BackendError | None]:
        shares = self.shares(memory.namespace for memory, _ in batch)
        done = await asyncio.gather(
            *(self._upsert_batch(k, [batch[n] for n in share]) for k, share in shares.items()),
            return_exceptions=True,
        )
        failed: list[BackendError | None] = [None] * len(batch)
        for share, outcome in zip(shares.values(), done, strict=True):
            for n, answer in zip(share, _outcomes(outcome, len(share)), strict=True):
                failed[n] = answer
        return failed

    async def _upsert_batch(self, index: int, batch: Sequence[Upsert]) -> list[BackendError | None]:
        def about() -> str:
            names = dict.fromkeys(memory.namespace for memory, _ in batch)
            return f"upsert_batch of {', '.join(names)}"

        again = WORKER_CALLS["upsert_batch"].again
        worker = self.workers[index]
        failed: list[BackendError | None] = await worker.call(
            None, "upsert_batch", (list(batch),), None, None, again, about
        )
        return failed

    # -- the router -------------------------------------------------------------------

    async def _ask(self, index: int, call: Call) -> Any:
        """`call`, answered by worker `index`; a queued read waits its turn for its caller."""
        crossing = call.crossing
        caller = current_caller() if crossing.queued else None
        worker = self.workers[index]
        return await worker.call(
            call.part, call.method, call.args, dict(call.kwargs), caller, crossing.again, call.about
        )

    async def _all(self, asked: Iterable[tuple[int, Call]]) -> list[Any]:
        """Each worker's answer to its call, all at once; a failure as its exception."""
        calls = [self._ask(index, call) for index, call in asked]
        return await asyncio.gather(*calls, return_exceptions=True)

    async def cross(self, call: Call) -> Any:
        route = call.crossing.route
        if isinstance(route, ToOwner):
            return await self._ask(self._owner_of(call, route), call)
        if isinstance(route, ToOwners):
            groups = self.grouped(call.arg(route.arg)) or {0: []}
            asked = [(i, call.with_args(**{route.arg: some})) for i, some in groups.items()]
            if len(asked) == 1:  # one worker's answer is already as one store orders it
                return await self._ask(*asked[0])
            return route.merge(await self._all(asked), call)
        if isinstance(route, ToEvery):
            if route.in_turn:
                everyone = range(len(self.workers))
                return route.merge([await self._ask(index, call) for index in everyone], call)
            return route.merge(await self._all(enumerate([call] * len(self.workers))), call)
        if isinstance(route, WalkPage):
            return await self._walk(call)
        if isinstance(route, ByWalkKey):
            return await self._keyed(call, route)
        if isinstance(route, ByNamespace):
            return await self._grouped(call, route)
        raise TypeError(f"{call.key} is not sent to the workers")

    async def cross_pages(self, call: Call) -> AsyncIterator[Any]:
        route = call.crossing.route
        assert isinstance(route, ToOwner)  # a namespace's pages come from its worker
        worker = self.workers[self._owner_of(call, route)]
        pages = await worker.open(call.part, call.method, call.args, dict(call.kwargs))
        try:
            while (page := await worker.next(pages, current_caller())) != frames.END:
                yield page
        finally:  # a caller that stops early leaves the worker's generator open
            worker.discard(pages)

    def _owner_of(self, call: Call, route: ToOwner) -> int:
        return self.route(call.owner(route))

    async def _walk(self, call: Call) -> Page[Any]:
        """One page of the walk over every worker in turn, from the call's `cursor`: its
        places are the workers' indexes (adapters/walk.py)."""

        async def page(worker: str, inner: str | None) -> Page[Any]:
            found: Page[Any] = await self._ask(int(worker), call.with_args(cursor=inner))
            return found

        return await walk([str(n) for n in range(len(self.workers))], call.arg("cursor"), page)

    async def _keyed(self, call: Call, route: ByWalkKey) -> int:
        """Items keyed by a walk's keys, each worker's in one call; how many, summed."""
        done = 0
        for worker, items in by_place(call.arg(route.arg)).items():
            done += await self._ask(int(worker), call.with_args(**{route.arg: items}))
        return done

    async def _grouped(self, call: Call, route: ByNamespace) -> int:
        """Each worker's items in one call, the workers in turn (a failure stops there:
        what was written stays, and a retry writes it again, as for one store)."""
        items = call.arg(route.arg)
        groups = self.shares(route.namespace_of(item) for item in items)
        done = 0
        for index, positions in groups.items():
            values: dict[str, list[Any] | None] = {route.arg: [items[n] for n in positions]}
            for name in route.aligned:
                aligned = call.arg(name)
                values[name] = None if aligned is None else [aligned[n] for n in positions]
            done += await self._ask(index, call.with_args(**values))
        return done


def _outcomes(outcome: list[BackendError | None] | BaseException, count: int) -> list[Any]:
    """One worker's answers to its share of a batch: its list, or its failure for each."""
    if isinstance(outcome, BaseException):
        return [failed_write(outcome)] * count
    return outcome
