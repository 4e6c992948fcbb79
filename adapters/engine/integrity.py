"""The embedded store checks itself: records against the memories the engine holds.

`check` compares each incarnation's count with what the engine finds, reports a loss, and rebuilds
lost records from the memories. What it reports and the repairs: docs/repair.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from typing import Any

import qdrant_edge as qe

from adapters.engine.engine import fatal
from adapters.engine.engine import parsed_memory
from adapters.engine.record_store import RecordStore
from adapters.engine.shards import ShardSet
from adapters.qdrant.layout import FIELD_CREATED_US
from adapters.qdrant.layout import FIELD_EPOCH
from adapters.qdrant.layout import FIELD_NAMESPACE
from adapters.values import NamespaceRecord

log = logging.getLogger(__name__)

# Namespace kinds a name prefix can tell ("workspace:abc"); anything else is `custom`.
_KINDS = ("workspace", "team", "org")
_EVERY_EPOCH = 1_000_000_000  # a facet limit above any number of incarnations


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A namespace whose engine holds fewer memories than its record counted."""

    name: str
    counted: int
    found: int
    epoch: str = ""


@dataclass(slots=True)
class IntegrityReport:
    """What one check found; `problems()` is what health and the log say."""

    shortfalls: list[Shortfall] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)
    # Names live under another epoch whose earlier incarnation still has memories.
    strays: list[str] = field(default_factory=list)
    # Rebuilt namespaces whose memories cannot all be read back (they answer 503).
    unreadable: list[str] = field(default_factory=list)
    recounted: int = 0

    def problems(self) -> tuple[str, ...]:
        found = []
        if self.shortfalls:
            named = some([f"{s.name} ({s.found} of {s.counted})" for s in self.shortfalls])
            found.append(
                f"{len(self.shortfalls)} namespace(s) hold fewer memories than recorded"
                f" (lost from the store's files): {named};"
                " see docs/repair.md#memories-lost-from-the-stores-files"
            )
        if self.strays:
            found.append(
                f"memories of {len(self.strays)} namespace(s) belong to no recorded"
                f" incarnation: {some(self.strays)};"
                " see docs/repair.md#memories-of-no-recorded-incarnation"
            )
        return tuple(found)


def some(names: Sequence[str], shown: int = 10) -> str:
    """`names` for a message: the first `shown` of them, then "..." if there are more."""
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


def engine_counts(shard: Any, where: Any = None) -> dict[str, int]:
    """Memories per incarnation (epoch) that the shard can find (matching `where`)."""
    request = qe.FacetRequest(FIELD_EPOCH, limit=_EVERY_EPOCH, exact=True, filter=where)
    return {str(hit.value): int(hit.count) for hit in shard.facet(request).hits}


def _incarnation(epoch: str) -> Any:
    return qe.Filter(must=[qe.FieldCondition(FIELD_EPOCH, match=qe.MatchValue(epoch))])


def _owner(shard: Any, epoch: str) -> tuple[str, datetime] | None:
    """The namespace name of an incarnation and the time of its oldest memory, from the payload
    indexes alone: a garbled payload page must not stop the records around it being rebuilt."""
    where = _incarnation(epoch)
    names = shard.facet(qe.FacetRequest(FIELD_NAMESPACE, limit=2, exact=True, filter=where)).hits
    if len(names) != 1:  # none, or an epoch shared by two names (a hand edit): not guessed
        return None
    oldest = qe.OrderBy(FIELD_CREATED_US, direction=qe.Direction.Asc)
    points = shard.query(qe.QueryRequest(limit=1, query=oldest, filter=where, with_payload=False))
    if not points or points[0].order_value is None:
        return None
    created = datetime.fromtimestamp(int(points[0].order_value) / 1e6, UTC)
    return str(names[0].value), created


def readable(shard: Any, epoch: str, memories: int) -> bool:
    """Whether every memory of an incarnation can be read back (a rebuilt one is probed:
    health must not say `ok` for a namespace whose first read will fail)."""
    request = qe.QueryRequest(limit=max(1, memories), filter=_incarnation(epoch), with_payload=True)
    try:
        return all(parsed_memory(point) is not None for point in shard.query(request))
    except BaseException as error:
        if fatal(error):
            raise
        log.error("memories of a rebuilt namespace unreadable (epoch %s): %s", epoch, error)
        return False


def kind_of(name: str) -> str:
    prefix = name.split(":", 1)[0]
    return prefix if prefix in _KINDS else "custom"


def check(shards: ShardSet, records: RecordStore, *, at_start: bool) -> IntegrityReport:
    """Compare the records with the open shards; at start, also rebuild and re-count.

    Namespaces of a shard that is not open are left out (they answer 503 already);
    a shard whose indexes cannot be read is taken out of service (`give_up`)."""
    report = IntegrityReport()
    found, holder = _counted(shards, range(len(shards.shards)), at_start)
    baseline: dict[str, int] = {}
    for name, live in sorted(records.live.items()):
        if shards.shards[shards.index_of(name)] is None:
            continue
        counted = records.count_store.counts.get(live.epoch)
        held = found.get(live.epoch, 0)
        if counted is None or (at_start and held > counted):
            baseline[live.epoch] = held  # a store from before counts, or a crash's drift
        elif held < counted:
            report.shortfalls.append(Shortfall(name, counted, held, live.epoch))
    if baseline:
        records.set_counts(baseline)
        report.recounted = len(baseline)
    _orphans(shards, records, found, holder, report, rebuild=at_start)
    if at_start:
        _from_counts(shards, records, report)
    _log(report)
    return report


def _from_counts(shards: ShardSet, records: RecordStore, report: IntegrityReport) -> None:
    """Records lost with every memory of their namespace (or of one without memories),
    known from the counts alone: brought back, so that they answer 503 (short of their
    memories) or serve empty, never 404. Created now: the time is not known."""
    known = {live.epoch for live in records.live.values()}
    known |= set(records.damaged.values()) | set(records.purges)
    now = datetime.now(UTC)
    for epoch, name in sorted(records.count_store.names.items()):
        if epoch in known or not name or name in records.live or name in records.damaged:
            continue
        records.restore(NamespaceRecord(name, kind_of(name), now), epoch, 0)
        report.rebuilt.append(name)
        counted = records.count_store.counts.get(epoch, 0)
        if counted and shards.shards[shards.index_of(name)] is not None:
            report.shortfalls.append(Shortfall(name, counted, 0, epoch))


def rebuild(shards: ShardSet, records: RecordStore, indexes: list[int]) -> IntegrityReport:
    """Rebuild the lost records of shards opened late (a full volume kept them closed)."""
    report = IntegrityReport()
    _orphans(shards, records, *_counted(shards, indexes, True), report, rebuild=True)
    _log(report)
    return report


def _counted(
    shards: ShardSet, indexes: Any, give_up: bool
) -> tuple[dict[str, int], dict[str, int]]:
    """Memories per epoch of the open shards of `indexes`, and each epoch's shard. One that
    cannot say is given up (only at start: while serving, requests may be using it, so the
    error goes up)."""
    found: dict[str, int] = {}
    holder: dict[str, int] = {}
    for index in indexes:
        if (shard := shards.shards[index]) is None:
            continue
        try:
            epochs = engine_counts(shard)
        except BaseException as error:
            if fatal(error) or not give_up:
                raise
            shards.give_up(index, error)
            continue
        found.update(epochs)
        holder.update(dict.fromkeys(epochs, index))
    return found, holder


def _orphans(
    shards: ShardSet,
    records: RecordStore,
    found: dict[str, int],
    holder: dict[str, int],
    report: IntegrityReport,
    *,
    rebuild: bool,
) -> None:
    known = {live.epoch for live in records.live.values()}
    known |= set(records.damaged.values()) | set(records.purges)
    for epoch in sorted(set(found) - known):
        shard = shards.shards[holder[epoch]]
        if shard is None:  # given up meanwhile
            continue
        try:
            owner = _owner(shard, epoch)
            if owner is None:
                continue
            name, created = owner
            memories = found[epoch]
            if rebuild and name not in records.live and name not in records.damaged:
                records.restore(NamespaceRecord(name, kind_of(name), created), epoch, memories)
                report.rebuilt.append(name)
                # The count that survived in counts.sqlite3, or what was found.
                counted = records.count_store.counts.get(epoch, memories)
                if memories < counted:
                    report.shortfalls.append(Shortfall(name, counted, memories, epoch))
                elif memories > counted:  # a crash's drift, as for a live one at start
                    records.set_counts({epoch: memories})
                if not readable(shard, epoch, memories):
                    report.unreadable.append(name)
            elif name not in report.strays:
                report.strays.append(name)
        except BaseException as error:
            if fatal(error) or not rebuild:
                raise
            shards.give_up(holder[epoch], error)


def _log(report: IntegrityReport) -> None:
    if report.rebuilt:
        log.error(
            "rebuilt %d namespace record(s) from their memories (kind from the name, no ttl"
            " or metadata): %s",
            len(report.rebuilt),
            ", ".join(report.rebuilt),
        )
    for problem in report.problems():
        log.error("store integrity: %s", problem)
    if report.recounted:
        log.info("memory counts taken from the engine for %d namespace(s)", report.recounted)
