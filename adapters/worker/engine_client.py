"""A backend in a worker process, as the server sees it: the backend interface, forwarded.

A backend whose engine holds the GIL for the whole of every call (the embedded
store, adapters/qdrant/edge/) would stop every request, refusal and answer of the
server meanwhile. So it runs in a child process (engine_worker.py, watched by
engine_process.py), built there from a `WorkerSpec`, and this class forwards the
backend interface and its parts to it as plain values (frames.py): each call's
method is derived from its declaration (adapters/crossings.py, `derived`); what
is written here is the client's own: the worker's lifecycle, its condition, and
the copy of the namespace records. The event loop only encodes, sends and waits. A
worker that dies takes the store away only until it is restarted: calls answer
`BackendUnavailable` (503) meanwhile and health is `degraded`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.base import VectorBackend
from adapters.crossings import Call
from adapters.crossings import derived
from adapters.errors import StorageDamaged
from adapters.merge import merge_namespaces
from adapters.values import NamespaceRecord
from adapters.values import SearchMode
from adapters.values import StoreCondition
from adapters.worker import frames
from adapters.worker.engine_process import EngineProcess


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Which backend a worker builds, and how: all of it plain values, for its command line."""

    backend: str  # its name in adapters/registry.py, built in the worker with `options`
    options: Mapping[str, Any]  # its keyword arguments, as JSON
    data_dir: Path  # what the backend owns: one process holds it at a time (a lock file)
    search_modes: frozenset[SearchMode]
    name: str  # the backend's, as the server names it

    def argv(self) -> list[str]:
        return [
            "--backend",
            self.backend,
            "--options",
            json.dumps(dict(self.options)),
            "--data-dir",
            str(self.data_dir.absolute()),
        ]


@derived
class EngineClient(VectorBackend):
    """The backend `spec` builds, in a worker process, behind the backend interface: each
    declared call (adapters/crossings.py) is sent to the worker as it was made."""

    def __init__(
        self,
        dimension: int,
        spec: WorkerSpec,
        label: str = "engine worker",
        token_dimension: int | None = None,
    ) -> None:
        super().__init__(dimension, token_dimension)
        self.name = spec.name
        self._search_modes = spec.search_modes
        self.worker = EngineProcess(spec.argv(), label)
        self._known: dict[str, NamespaceRecord] = {}
        self._records_of = 0  # the worker's restarts when `_known` was filled
        self._changes = 0  # namespace saves and deletes begun

    async def cross(self, call: Call) -> Any:
        """`call`, answered by the worker; a queued read waits its turn for its caller."""
        args, kwargs = call.sent()
        caller = call.caller() if call.crossing.queued else None
        return await self.worker.call(call.part, call.method, args, kwargs, caller)

    async def cross_pages(self, call: Call) -> AsyncIterator[Any]:
        args, kwargs = call.sent()
        pages = await self.worker.open(call.part, call.method, args, kwargs)
        try:
            while (page := await self.worker.next(pages, call.caller())) != frames.END:
                yield page
        finally:  # a caller that stops early leaves the worker's generator open
            self.worker.discard(pages)

    @property
    def search_modes(self) -> frozenset[SearchMode]:
        return self._search_modes

    async def start(self) -> None:
        await self.worker.start()

    async def close(self) -> None:
        await self.worker.close()

    async def ping(self) -> None:
        """`BackendUnavailable` while the worker is being restarted, as for any outage."""
        await self.cross(Call("ping", (), {}))
        self.worker.condition = await self.worker.call(None, "condition")

    def condition(self) -> StoreCondition:
        return self.worker.condition

    def _records(self) -> dict[str, NamespaceRecord]:
        """The namespace records this server has read or written, by name.

        Why: the platform PUTs a namespace before every write and a search reads its
        namespaces' records first, and the worker answers nothing while the engine
        runs a long search. Every change of a record passes through this client, so
        the copy holds: an answer is kept only if no change was made while it was on
        its way. A restarted worker may have rebuilt records: the copy starts over."""
        if self._records_of != self.worker.restarts:
            self._known.clear()
            self._records_of = self.worker.restarts
        return self._known

    def _keep(self, found: Mapping[str, NamespaceRecord], changes: int) -> None:
        if changes == self._changes:
            self._records().update(found)

    async def get_namespace(self, name: str) -> NamespaceRecord | None:
        # A copy is answered only while the worker is up: a request over a namespace of
        # a store that is away is refused at its first step, before the model works for it.
        self.worker.require_up()
        if (known := self._records().get(name)) is not None:
            return known
        changes = self._changes
        found: NamespaceRecord | None = await self.cross(Call("get_namespace", (name,), {}))
        if found is not None:
            self._keep({name: found}, changes)
        return found

    async def get_namespaces(self, names: Sequence[str]) -> Mapping[str, NamespaceRecord]:
        self.worker.require_up()  # as get_namespace
        records = self._records()
        known = {name: records[name] for name in names if name in records}
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
        self._records().pop(record.name, None)  # unknown until the worker has it
        await self.cross(Call("save_namespace", (record,), {}))
        self._keep({record.name: record}, changes)

    async def delete_namespace(self, name: str) -> bool:
        self._changes += 1
        self._records().pop(name, None)
        deleted: bool = await self.cross(Call("delete_namespace", (name,), {}))
        return deleted
