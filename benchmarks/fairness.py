"""One workspace's flood never takes memory away from the others.

Against the real server process (`serve` defaults: embedded store, the shipped
INFO log), with LoCoMo's dialog turns as memories and its questions as queries:

1. The quiet tenant alone: one search at a time, 20 ms apart, over
   `workspace:quiet` (200 memories) and the `team:` and `org:` namespaces it shares.
2. A flood of 256 closed-loop callers committing into `workspace:noisy`, alone and
   beside the quiet tenant (alone, beside, beside, alone: the figures are the sums).
   A flood caller sends its next request as soon as the last was answered; refused
   with 429, it waits its `Retry-After` (as a retrying client does), or, in the second
   run of each flood, sends again at once (as the platform's client and an agent loop
   do).
3. The same with 256 searching callers.
4. The commit flood again with the quiet tenant and a sequential backfill writer
   (PUT, then a commit with an id, one row at a time, as `memory-backfill` sends).
5. 64 tenants flooding at 4 callers each (commits): Jain's fairness index of their
   accepted throughput, and each tenant's p99 against the median tenant's.

Every answer of every phase, merged in the order they finished, goes through a
model of the platform's one client (2 s timeout; 3 consecutive 5xx or timeouts
open its breaker; a 4xx or a 2xx resets the count). The model's own rate, in this
process, is printed as the yardstick; at the end, the server log's 5xx answers and errors,
counted by message (the access line's `error`). About 6 minutes. With `--plot DIR`, also draws
each flood's p99s (DIR/fairness_floods.svg) and every stream's answers a second over
the run (DIR/fairness_timeline.svg).
`python -m benchmarks.fairness [--duration 8] [--data PATH] [--plot DIR]`
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from functools import partial
from pathlib import Path

from benchmarks.common import percentile
from benchmarks.fairness_load import BACKFILL
from benchmarks.fairness_load import QUIET
from benchmarks.fairness_load import REFUSAL_LIMIT_S
from benchmarks.fairness_load import Flood
from benchmarks.fairness_load import Outcome
from benchmarks.fairness_load import Texts
from benchmarks.fairness_load import check
from benchmarks.fairness_load import describe
from benchmarks.fairness_load import ok
from benchmarks.fairness_load import phase
from benchmarks.fairness_load import run_checks
from benchmarks.plots import PALETTE
from benchmarks.plots import Series
from benchmarks.plots import bar_chart
from benchmarks.plots import line_chart
from harness.platform_client import Breaker

NOISY = "workspace:noisy"
FLOOD = 256
TENANTS = tuple(f"workspace:tenant-{t:02d}" for t in range(64))


def breaker_opened(outcomes: list[Outcome]) -> tuple[int, int]:
    """(times the platform's breaker would have opened, longest run of failures)."""
    breaker = Breaker()
    for o in sorted(outcomes, key=lambda o: o.finished):
        breaker.record(o.status, o.seconds)
    return breaker.opened, breaker.longest_run


def jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if values else 0.0


@dataclass
class Record:
    """What `--plot` draws: each flood's p99s in ms, and every answer of every phase."""

    floods: dict[str, dict[str, float]] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)


def measure_floods(
    base: str, texts: Texts, duration: float, record: Record | None = None
) -> list[bool]:
    def run(flood: Flood | None, quiet: bool, number: int, backfill: bool = False) -> list[Outcome]:
        out = phase(base, texts, duration, flood, quiet, number, backfill=backfill)
        if record is not None:
            record.outcomes.extend(out)
        return out

    results = []
    quiet_alone = run(None, True, 1)
    print(
        describe("quiet alone: searches", [o for o in quiet_alone if o.stream == "quiet"], duration)
    )
    mixed: list[Outcome] = list(quiet_alone)
    seed_ = 2
    for kind in ("commit", "search"):
        for honour in (True, False):
            flood = Flood(kind, (NOISY,), FLOOD, texts.turns, texts.questions, honour)
            callers = "waiting Retry-After" if honour else "retrying at once"
            # A B B A: this machine's speed drifts within a minute; the order cancels a drift.
            alone = run(flood, False, seed_)
            both = run(flood, True, seed_ + 1)
            both += run(flood, True, seed_ + 2)
            alone += run(flood, False, seed_ + 3)
            seed_ += 4
            span = 2 * duration
            mixed += both
            quiet = [o for o in both if o.stream == "quiet"]
            noisy = [o for o in both if o.stream == NOISY]
            print(f"{FLOOD} callers flooding {kind}s into {NOISY}, {callers}:")
            print(describe("flood alone", alone, span))
            print(describe("flood beside the quiet tenant", noisy, span))
            print(describe("quiet tenant's searches", quiet, span))
            quiet_p99 = percentile([o.seconds for o in quiet], 99) * 1000
            bad = sum(1 for o in quiet if o.status == 0 or o.status >= 500)
            refusals = [o.seconds for o in noisy + alone if o.status == 429]
            refusal_p99 = percentile(refusals or [0.0], 99)
            ratio = sum(map(ok, noisy)) / max(1, sum(map(ok, alone)))
            flood_bad = sum(1 for o in noisy + alone if o.status == 0 or o.status >= 500)
            if record is not None:
                record.floods[f"{kind}s,\n{callers}"] = {
                    QUIET_P99: round(quiet_p99),
                    REFUSALS_P99: round(refusal_p99 * 1000),
                }
            results += [
                check(
                    f"quiet p99 under a {kind} flood <= 250 ms",
                    quiet_p99 <= 250,
                    f"{quiet_p99:.0f} ms",
                ),
                check("quiet answers over 2 s or 5xx == 0", bad == 0, str(bad)),
                check("flood answers over 2 s or 5xx == 0", flood_bad == 0, str(flood_bad)),
                check(
                    "refusals answered with p99 <= 50 ms",
                    refusal_p99 <= REFUSAL_LIMIT_S,
                    f"{len(refusals)} refusals, p99 {refusal_p99 * 1000:.0f} ms,"
                    f" {sum(r > REFUSAL_LIMIT_S for r in refusals)} over 50 ms,"
                    f" max {max(refusals, default=0) * 1000:.0f} ms",
                ),
                check("flood accepted, beside quiet / alone >= 0.8", ratio >= 0.8, f"{ratio:.2f}x"),
            ]
    flood = Flood("commit", (NOISY,), FLOOD, texts.turns, texts.questions)
    with_writer = run(flood, True, seed_, True)
    mixed += with_writer
    writer = [o for o in with_writer if o.stream == "backfill"]
    print(f"{FLOOD} callers flooding commits, the quiet tenant and a sequential backfill writer:")
    print(describe("backfill writer (PUT, commit with id)", writer, duration))
    results.append(
        check(
            "a sequential backfill writer is never refused",
            bool(writer) and all(o.status in (200, 201) for o in writer),
            f"{len(writer)} requests: {dict(Counter(o.status for o in writer))}",
        )
    )
    tenants = TENANTS
    many = run(Flood("commit", tenants, 4, texts.turns, ()), False, seed_ + 1)
    mixed += many
    rates = [sum(1 for o in many if o.stream == t and ok(o)) / duration for t in tenants]
    p99s = [
        percentile([o.seconds for o in many if o.stream == t and ok(o)] or [0.0], 99)
        for t in tenants
    ]
    median = statistics.median(p99s)  # 0 when most tenants had nothing accepted
    worst = max(p99s) / median if median else float("inf")
    print("64 tenants x 4 callers committing:")
    print(describe("all tenants", many, duration))
    print(
        f"  accepted per tenant: min {min(rates):.1f}/s, "
        f"median {statistics.median(rates):.1f}/s, max {max(rates):.1f}/s"
    )
    opened, longest = breaker_opened(mixed)
    results += [
        check(
            "Jain's index of accepted throughput >= 0.95", jain(rates) >= 0.95, f"{jain(rates):.3f}"
        ),
        check("worst tenant p99 / median tenant p99 <= 3", worst <= 3, f"{worst:.2f}x"),
        check(
            "the platform's breaker never opens (all phases, one client)",
            opened == 0,
            f"opened {opened} times; longest run of failures {longest}; {len(mixed)} answers",
        ),
    ]
    return results


QUIET_P99, REFUSALS_P99 = "quiet tenant's p99", "flood's refusals' p99"


def draw_floods(floods: Mapping[str, Mapping[str, float]], path: Path, note: str) -> Path:
    """Per flood (`floods[flood][figure]`): the quiet tenant's p99 and the refusals' p99."""
    names = list(floods)
    series = [Series(f, [floods[n][f] for n in names]) for f in (QUIET_P99, REFUSALS_P99)]
    targets = {"quiet p99 target 250 ms": 250.0, "refusals p99 target 50 ms": 50.0}
    title = "A 256-caller flood beside a quiet tenant: p99s"
    return bar_chart(path, title, names, series, y_label="ms", note=note, references=targets)


def draw_timeline(outcomes: Sequence[Outcome], path: Path, note: str) -> Path:
    """Answers a second over the run, by stream (a colour each) and by accepted (2xx),
    refused (429, dashed) or failed (anything else, a colour of its own)."""
    start = min(o.finished - o.seconds for o in outcomes)
    seconds = int(max(o.finished for o in outcomes) - start) + 1
    streams, tenants = ("flood", "quiet", "backfill", "64 tenants"), frozenset(TENANTS)
    lines: dict[tuple[str, str], list[float]] = {}
    for o in outcomes:
        who = o.stream if o.stream in ("quiet", "backfill") else "flood"
        who = "64 tenants" if o.stream in tenants else who
        what = "accepted" if ok(o) else "refused" if o.status == 429 else "failed"
        lines.setdefault((who, what), [0.0] * seconds)[int(o.finished - start)] += 1
    series = [
        Series(
            f"{who}, {what}",
            lines[who, what],
            PALETTE[i + 4 * (what == "failed")],
            what == "refused",
        )
        for i, who in enumerate(streams)
        for what in ("accepted", "refused", "failed")
        if (who, what) in lines
    ]
    title = "Answers a second over the fairness run, by stream"
    x = list(range(seconds))
    return line_chart(path, title, x, series, x_label="second", y_label="answers", note=note)


def draw(record: Record, directory: Path, note: str) -> list[Path]:
    drawn = [draw_floods(record.floods, directory / "fairness_floods.svg", note)]
    if record.outcomes:
        drawn.append(draw_timeline(record.outcomes, directory / "fairness_timeline.svg", note))
    return drawn


def main() -> None:
    layout = {QUIET: 200, NOISY: 200, "team:shared": 50, "org:shared": 50, BACKFILL: 0}
    layout |= {tenant: 20 for tenant in TENANTS}
    record = Record()
    measure = partial(measure_floods, record=record)
    run_checks(__doc__, "fairness", {}, layout, measure, partial(draw, record))


if __name__ == "__main__":
    main()
