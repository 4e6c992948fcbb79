"""Parity between the built-in postgres plugin's tables and this plugin's store.

Modelled on the platform's `memory-backfill -verify`: sampled namespaces' live contents compared
as multisets, in full and through the verifier's own listing (docs/runbook.md).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from typing import Any

import psycopg

from adapters.base import VectorBackend
from adapters.values import MemoryFilter
from plugin.transfer.bulk import transfer_of

LISTING_LIMIT = 100  # what the platform's verifier asks for
SHOWN = 3  # contents quoted per mismatch
LIVE_NAMESPACES = (
    "SELECT name FROM memory_namespaces WHERE expires_at IS NULL OR expires_at > %(now)s"
    " ORDER BY name"
)
LIVE_CONTENTS = (
    "SELECT content FROM memory_records WHERE namespace = %(name)s"
    " AND (expires_at IS NULL OR expires_at > %(now)s)"
)


@dataclass(frozen=True, slots=True)
class Mismatch:
    namespace: str
    expected: int
    found: int
    missing: Counter[str]
    extra: Counter[str]
    note: str = ""

    def line(self) -> str:
        def shown(contents: Counter[str]) -> str:
            quoted = [repr(text[:60]) for text in list(contents.elements())[:SHOWN]]
            return ", ".join(quoted) + (", ..." if contents.total() > SHOWN else "")

        counts = f"postgres {self.expected}, plugin {self.found}"
        parts = [f"verify: MISMATCH {self.namespace}: {counts}"]
        if self.missing:
            parts.append(f"missing {self.missing.total()} ({shown(self.missing)})")
        if self.extra:
            parts.append(f"extra {self.extra.total()} ({shown(self.extra)})")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


@dataclass
class ParityReport:
    namespaces_total: int = 0
    sampled: list[str] = field(default_factory=list)
    memories_compared: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    def lines(self) -> list[str]:
        found = [mismatch.line() for mismatch in self.mismatches]
        verdict = "OK" if not self.mismatches else "FAILED: do not cut over"
        found.append(
            f"verify: {len(self.sampled)} of {self.namespaces_total} namespaces sampled,"
            f" {self.memories_compared} memories compared,"
            f" {len(self.mismatches)} mismatches: {verdict}"
        )
        return found


async def verify(
    conn: psycopg.AsyncConnection[Any],
    backend: VectorBackend,
    now: datetime,
    *,
    sample: int,
    seed: int | None = None,
) -> ParityReport:
    """Compare `sample` random live namespaces (all of them when fewer) at `now`."""
    names = [row[0] for row in await (await conn.execute(LIVE_NAMESPACES, {"now": now})).fetchall()]
    report = ParityReport(namespaces_total=len(names))
    report.sampled = sorted(random.Random(seed).sample(names, min(sample, len(names))))
    present = await backend.get_namespaces(report.sampled)
    for name in report.sampled:
        rows = await (await conn.execute(LIVE_CONTENTS, {"name": name, "now": now})).fetchall()
        expected = Counter(str(row[0]) for row in rows)
        report.memories_compared += expected.total()
        if name not in present or present[name].is_expired(now):
            report.mismatches.append(
                Mismatch(name, expected.total(), 0, expected, Counter(), "namespace missing")
            )
            continue
        stored = Counter(
            [
                memory.content
                async for page in transfer_of(backend).iter_memories(name, now, with_vectors=False)
                for memory, _ in page
            ]
        )
        listed = await backend.list_memories([name], MemoryFilter(now=now), LISTING_LIMIT)
        listing = Counter(memory.content for memory in listed)
        short = listing.total() != min(expected.total(), LISTING_LIMIT) or listing - expected
        if stored != expected or short:
            note = "" if not short else f"listing (limit {LISTING_LIMIT}) gave {listing.total()}"
            missing, extra = expected - stored, stored - expected
            report.mismatches.append(
                Mismatch(name, expected.total(), stored.total(), missing, extra, note)
            )
    return report
