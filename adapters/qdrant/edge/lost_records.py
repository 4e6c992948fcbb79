"""Namespaces whose record was lost while their shard could not be read.

Why: the records (`namespaces.sqlite3`) are rebuilt from the memories when the
file is lost (integrity.py), but a shard that does not open (damaged files, or
a volume too full to map them) cannot say which namespaces it holds. Answering
404 for them would drop them silently, and inventing a record would serve them
empty. So such a shard is remembered in the records (`lost_shards`) until it
opens again: any name that hashes to it and has no record answers 503 naming
itself, health is `degraded` and counts the names asked for; once the shard
opens (repaired, at the next start, on `verify-store`, or when a full volume has
room again), the records of what it holds are rebuilt and it is forgotten.
"""

from __future__ import annotations

from adapters.errors import BackendError, StorageDamaged
from adapters.qdrant.edge.integrity import some
from adapters.qdrant.edge.namespace_records import RecordStore
from adapters.qdrant.edge.shards import ShardSet

REPAIR = "docs/repair.md#records-lost-and-a-shard-does-not-open"


class LostRecords:
    """Which shards' namespaces are unknown, and the answer for a name in one of them."""

    def __init__(self, records: RecordStore, shards: ShardSet) -> None:
        self._records = records
        self._shards = shards
        self.asked: set[str] = set()  # names refused so far, for health's count

    def settle(self) -> None:
        """At start, once the shards opened and the open ones' records were rebuilt."""
        lost = set(self._records.lost_shards)
        if self._records.started_empty:
            lost |= self._shards.unopened()
        # Open now (their records rebuilt), or moved aside by an operator: known again.
        self._records.set_lost_shards(lost & self._shards.unopened())

    def opened(self, indexes: list[int]) -> None:
        """These shards serve again (their records rebuilt): their names are known."""
        self._records.set_lost_shards(self._records.lost_shards - set(indexes))

    def covers(self, name: str) -> bool:
        """`name` has no record, and its shard cannot say whether it exists."""
        records = self._records
        if not records.lost_shards or name in records.live or name in records.damaged:
            return False
        return self._shards.index_of(name) in records.lost_shards

    def refusal(self, *names: str) -> BackendError:
        """What a request for `names` gets while they are `covers`ed: a 503 naming them."""
        self.asked.update(names)
        waiting = self._shards.waiting_for_room.get(self._shards.index_of(names[0]))
        why = waiting or "its part of the embedded store could not be opened (damaged files)"
        return StorageDamaged(
            f"namespace {', '.join(names)} is unknown for now: its record was lost and {why};"
            f" see {REPAIR}",
            names,
        )

    def problems(self) -> tuple[str, ...]:
        """What health says while shards are unknown, and while rebuilt records are unconfirmed."""
        found = []
        if lost := sorted(self._records.lost_shards):
            shards = ", ".join(f"{i:02d}" for i in lost)
            found.append(
                f"namespace records lost while memory shard(s) {shards} could not be opened:"
                f" their namespaces answer 503 until the shard opens ({len(self.asked)} asked"
                f" for so far); see {REPAIR}"
            )
        if rebuilt := sorted(self._records.rebuilt):
            found.append(
                f"{len(rebuilt)} namespace record(s) rebuilt from their memories and not yet"
                f" confirmed (memories lost at the same time would not show): {some(rebuilt)};"
                " see docs/repair.md#lost-or-damaged-namespace-records"
            )
        return tuple(found)
