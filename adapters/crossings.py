"""How each backend call crosses to a backend held by engine workers, declared once.

`WORKER_CALLS`: where each call of `VectorBackend` and its parts goes among the workers, and how
their answers merge. The server's typed methods are written from it into
adapters/pool/engine_stub.py (scripts/generate-engine-stub); docs/development.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.base import VectorBackend
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.merge import answered
from adapters.merge import merge_listed
from adapters.merge import merge_namespaces
from adapters.merge import merge_scored
from adapters.parts import BulkTransfer
from adapters.parts import StoreMeta
from adapters.parts import StoreSizes
from adapters.parts import VectorFill
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from adapters.values import ScoredMemory
from adapters.values import StoreSize

# Where each call's signature is read: the backend (None) and each part, by its name.
INTERFACES: Mapping[str | None, type] = {
    None: VectorBackend,
    "vector_fill": VectorFill,
    "transfer": BulkTransfer,
    "store_meta": StoreMeta,
    "store_size": StoreSizes,
}


Merge = Callable[[Sequence[Any], "Call"], Any]


@dataclass(frozen=True, slots=True)
class ToOwner:
    """To the worker owning the namespace argument `arg` names (or its `field`)."""

    arg: str
    field: str | None = None  # the name is this field of the argument


@dataclass(frozen=True, slots=True)
class ToOwners:
    """To each worker about its own namespaces of argument `arg`, the answers merged."""

    arg: str
    merge: Merge


@dataclass(frozen=True, slots=True)
class ToEvery:
    """To every worker, at once (or one after another, `in_turn`), the answers merged."""

    merge: Merge
    in_turn: bool = False


@dataclass(frozen=True, slots=True)
class WalkPage:
    """One page of a walk over the workers, one after another (adapters/walk.py)."""


@dataclass(frozen=True, slots=True)
class ByWalkKey:
    """Items keyed by a walk's keys, each worker's in one call."""

    arg: str = "items"


@dataclass(frozen=True, slots=True)
class ByNamespace:
    """Argument `arg`'s items grouped by their namespace's worker, one call each, in turn."""

    arg: str
    namespace_of: Callable[[Any], str]
    aligned: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NotSent:
    """The pool's own: answered in the server, not sent as declared."""


Route = ToOwner | ToOwners | ToEvery | WalkPage | ByWalkKey | ByNamespace | NotSent


@dataclass(frozen=True, slots=True)
class WorkerCall:
    """How one backend call is sent to the engine workers: its route, and whether it waits
    its turn in the fair read queue (`queued`) or answers pages (`pages`)."""

    route: Route
    queued: bool = False
    pages: bool = False
    # The same call twice does the same (a read, an upsert by id): in flight when its worker
    # dies, it is sent again to the replacement (adapters/pool/engine_process.py).
    again: bool = False


# -- how several workers' answers to one call make one answer ------------------------


def nothing(answers: Sequence[Any], call: Call) -> None:
    answered(answers)


def serving(answers: Sequence[Any], call: Call) -> None:
    """A ping answers while any worker does: one restarting is a degradation (its condition
    says so), not an outage of the whole store."""
    failures = [a for a in answers if isinstance(a, BaseException)]
    if failures and len(failures) == len(answers):
        raise failures[0]
    for failure in failures:
        if not isinstance(failure, BackendUnavailable):
            raise failure


def lines(answers: Sequence[Any], call: Call) -> tuple[str, ...]:
    return tuple(line for found in answered(answers) for line in found)


def sorted_names(answers: Sequence[Any], call: Call) -> list[str]:
    return sorted(name for found in answered(answers) for name in found)


def concatenated(answers: Sequence[Any], call: Call) -> list[Any]:
    return [item for found in answered(answers) for item in found]


def summed(answers: Sequence[Any], call: Call) -> int:
    return sum(answered(answers))


def namespaces(answers: Sequence[Any], call: Call) -> dict[str, NamespaceRecord]:
    return merge_namespaces(answers)


def scored(answers: Sequence[Any], call: Call) -> list[ScoredMemory]:
    return merge_scored(answered(answers), call.arg("limit"))


def listed(answers: Sequence[Any], call: Call) -> list[MemoryRecord]:
    return merge_listed(answered(answers), call.arg("limit"))


def agreed(answers: Sequence[Any], call: Call) -> dict[str, str]:
    """Store-wide facts, the same in every worker's store; stores that disagree are refused."""
    facts: dict[str, str] = {}
    for found in answered(answers):
        for key, value in found.items():
            if facts.setdefault(key, value) != value:
                raise BackendMisconfigured(
                    f"the engine workers' stores disagree on {key!r}: they were not"
                    " written by one plugin; see docs/repair.md#engine-workers"
                )
    return facts


def sizes(answers: Sequence[Any], call: Call) -> StoreSize:
    found: Sequence[StoreSize] = answered(answers)
    used = [s.bytes_used for s in found if s.bytes_used is not None]
    free = [s.bytes_free for s in found if s.bytes_free is not None]
    return StoreSize(
        sum(s.namespaces for s in found),
        sum(s.memories for s in found),
        sum(used) if used else None,
        min(free) if free else None,  # one volume, seen by each
    )


def _stored_namespace(item: Any) -> str:
    memory, _ = item
    return str(memory.namespace)


WORKER_CALLS: Mapping[str, WorkerCall] = {
    "start": WorkerCall(NotSent()),
    "close": WorkerCall(NotSent()),
    "maintain": WorkerCall(ToEvery(nothing)),
    "ping": WorkerCall(ToEvery(serving), again=True),
    "verify": WorkerCall(ToEvery(lines), queued=True, again=True),
    "accept": WorkerCall(ToEvery(sorted_names)),
    "get_namespace": WorkerCall(ToOwner("name"), again=True),
    "get_namespaces": WorkerCall(ToOwners("names", namespaces), again=True),
    "save_namespace": WorkerCall(ToOwner("record", "name"), again=True),
    "delete_namespace": WorkerCall(ToOwner("name")),
    "list_namespaces": WorkerCall(ToEvery(concatenated), again=True),
    "expired_namespaces": WorkerCall(ToEvery(concatenated), again=True),
    "get_stored_memory": WorkerCall(ToOwner("namespace"), queued=True, again=True),
    "get_memory": WorkerCall(ToOwner("namespace"), queued=True, again=True),
    # the pool's own: the upserts of one turn cross to each worker as one `upsert_batch`
    "upsert_memory": WorkerCall(NotSent()),
    "upsert_batch": WorkerCall(NotSent(), again=True),
    "query_memories": WorkerCall(ToOwners("namespaces", scored), queued=True, again=True),
    "list_memories": WorkerCall(ToOwners("namespaces", listed), queued=True, again=True),
    "delete_memory": WorkerCall(ToOwner("namespace")),
    "delete_expired_memories": WorkerCall(ToEvery(summed)),
    "vector_fill.prepare": WorkerCall(ToEvery(nothing, in_turn=True)),
    "vector_fill.missing": WorkerCall(WalkPage(), queued=True, again=True),
    "vector_fill.fill": WorkerCall(ByWalkKey(), again=True),
    "transfer.iter_memories": WorkerCall(ToOwner("namespace"), queued=True, pages=True),
    "transfer.upsert_memories": WorkerCall(
        ByNamespace("memories", _stored_namespace, aligned=("keywords",)), again=True
    ),
    "transfer.place_memories": WorkerCall(ToOwner("namespace"), again=True),
    # in turn: the first worker holds a fact before the next is told it
    "store_meta.read_store_meta": WorkerCall(ToEvery(agreed), again=True),
    "store_meta.write_store_meta": WorkerCall(ToEvery(nothing, in_turn=True), again=True),
    "store_size.measure": WorkerCall(ToEvery(sizes), again=True),
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
    def crossing(self) -> WorkerCall:
        return WORKER_CALLS[self.key]

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

    def owner(self, route: ToOwner) -> str:
        """The namespace whose worker answers the call, as `route` names it."""
        named = self.arg(route.arg)
        return str(named if route.field is None else getattr(named, route.field))

    def about(self) -> str:
        """The call and the namespaces it names, for a log line."""
        route = self.crossing.route
        if isinstance(route, ToOwner):
            return f"{self.key} of {self.owner(route)}"
        if isinstance(route, ToOwners):
            return f"{self.key} of {', '.join(map(str, self.arg(route.arg) or ()))}"
        return self.key


# Each declared call's parameter names, read from the interface once, and where each is.
PARAMETERS: Mapping[str, tuple[str, ...]] = {key: _parameters(key) for key in WORKER_CALLS}
_POSITIONS = {key: {name: n for n, name in enumerate(names)} for key, names in PARAMETERS.items()}
_SPLIT = {key: split(key) for key in WORKER_CALLS}
