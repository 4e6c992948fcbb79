"""Issue 27 item 7: searches at least as fast as commits.

Both cost one model call, so a search should answer about as many a second as a
commit. Against the real server process (the shipped INFO log), with LoCoMo's
dialog turns as memories and its questions as queries: closed-loop commits, then
closed-loop searches (one namespace each, limit 10), 8 and 64 callers, over 64
namespaces of 50 memories and over one of 5,000. Admission is widened here (64 in
flight per namespace) so that the pipeline, not the shares, is measured. The
model's own rate, in this process, is printed as the yardstick. About 3 minutes.
`python -m benchmarks.search_throughput [--duration 8] [--data PATH]`
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import machine
from benchmarks.fairness_load import (
    DEFAULT_DATA,
    Flood,
    Texts,
    check,
    describe,
    model_rate,
    ok,
    phase,
    served,
)

SMALL = tuple(f"workspace:small-{n:02d}" for n in range(64))
BIG = "workspace:big"
WIDE = {"MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT": "64", "MEMORY_PLUGIN_QUEUE_CAPACITY": "256"}


def measure(base: str, texts: Texts, duration: float) -> list[bool]:
    results = []
    for label, names in (("64 namespaces of 50", SMALL), ("one of 5,000", (BIG,))):
        for callers in (8, 64):
            rates = {}
            for kind in ("commit", "search"):
                tenants: Sequence[str] = names[:callers]
                per = max(1, callers // len(tenants))
                flood = Flood(kind, tuple(tenants), per, texts.turns, texts.questions)
                out = phase(base, texts, duration, flood, False, 5)
                rates[kind] = sum(map(ok, out)) / duration
                print(describe(f"{callers} callers, {kind}s, {label}", out, duration))
            ratio = rates["search"] / max(rates["commit"], 1e-9)
            results.append(
                check(
                    f"searches / commits, {callers} callers, {label} >= 0.9",
                    ratio >= 0.9,
                    f"{ratio:.2f}x",
                )
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    texts = Texts(args.data)
    print(f"search throughput ({machine()}); {model_rate()}")
    with served(WIDE, {name: 50 for name in SMALL} | {BIG: 5000}, texts) as base:
        results = measure(base, texts, args.duration)
    print(f"{sum(results)} of {len(results)} checks passed")


if __name__ == "__main__":
    main()
