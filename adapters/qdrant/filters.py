"""The one filter builder for every Qdrant layout and engine.

Each engine spells conditions through a small `Dialect`; which conditions a read, a sweep or a
purge needs is decided here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Generic
from typing import Protocol
from typing import TypeVar

from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import FIELD_EXPIRES_US
from adapters.qdrant.layout import FIELD_KIND
from adapters.qdrant.layout import FIELD_NAMESPACE
from adapters.qdrant.layout import FIELD_PINNED
from adapters.qdrant.layout import Scope
from adapters.times import to_micros
from adapters.values import MemoryFilter

F = TypeVar("F", covariant=True)
C = TypeVar("C")


class Dialect(Protocol, Generic[F, C]):
    """How one engine spells a filter (`F`) and a condition (`C`)."""

    def match_value(self, key: str, value: str | int) -> C: ...

    def match_any(self, key: str, values: Sequence[str]) -> C: ...

    def at_most(self, key: str, value: int) -> C: ...

    def filter(self, must: list[C], must_not: list[C]) -> F: ...


def _expired_by(dialect: Dialect[F, C], now: datetime) -> C:
    return dialect.at_most(FIELD_EXPIRES_US, to_micros(now))


def _in_scope(dialect: Dialect[F, C], scope: Scope) -> list[C]:
    """Tenant key first (the engine plans on it), then the incarnations still alive."""
    if len(scope.names) == 1:
        return [
            dialect.match_value(FIELD_NAMESPACE, scope.names[0]),
            dialect.match_value(FIELD_EPOCH, scope.epochs[0]),
        ]
    return [
        dialect.match_any(FIELD_NAMESPACE, sorted(scope.names)),
        dialect.match_any(FIELD_EPOCH, sorted(scope.epochs)),
    ]


def memories(dialect: Dialect[F, C], memory_filter: MemoryFilter, scope: Scope | None = None) -> F:
    """What a read may return: in `scope` (shared layout), not expired, pin side and kinds."""
    must = [] if scope is None else _in_scope(dialect, scope)
    if memory_filter.pinned is not None:
        must.append(dialect.match_value(FIELD_PINNED, int(memory_filter.pinned)))
    if memory_filter.kinds is not None:
        must.append(dialect.match_any(FIELD_KIND, sorted(memory_filter.kinds)))
    return dialect.filter(must, [_expired_by(dialect, memory_filter.now)])


def any_side(dialect: Dialect[F, C], scope: Scope) -> F:
    """Every memory of the scope's incarnations, either pin side, expired or not: one
    condition, where the engine starts from its index and checks nothing point by
    point (edge/search_passes.py `lean_search` says why, and what checks the answer)."""
    epochs = sorted(scope.epochs)
    if len(epochs) == 1:
        return dialect.filter([dialect.match_value(FIELD_EPOCH, epochs[0])], [])
    return dialect.filter([dialect.match_any(FIELD_EPOCH, epochs)], [])


def expired(dialect: Dialect[F, C], now: datetime) -> F:
    """Every memory whose `expires_at` is at or before `now`, in every namespace."""
    return dialect.filter([_expired_by(dialect, now)], [])


def incarnations(dialect: Dialect[F, C], epochs: Sequence[str]) -> F:
    """Every memory written by these namespace incarnations (a namespace delete)."""
    return dialect.filter([dialect.match_any(FIELD_EPOCH, sorted(epochs))], [])


def incarnation(dialect: Dialect[F, C], name: str, epoch: str) -> F:
    """Every memory of one namespace incarnation: by name and epoch, never the epoch alone."""
    return dialect.filter(
        [dialect.match_value(FIELD_NAMESPACE, name), dialect.match_value(FIELD_EPOCH, epoch)], []
    )
