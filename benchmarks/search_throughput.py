"""Searches at least as fast as commits.

Both cost one model call, so a search should answer about as many a second as a
commit. Against the real server process (the shipped INFO log), with LoCoMo's
dialog turns as memories and its questions as queries: closed-loop commits, then
closed-loop searches (one namespace each, limit 10), 8 and 64 callers, over 64
namespaces of 50 memories and over one of 5,000. Admission is widened here (64 in
flight per namespace) so that the pipeline, not the shares, is measured. The
model's own rate, in this process, is printed as the yardstick. About 3 minutes.
With `--plot DIR`, also draws the commits and searches a second of each load into
DIR/search_throughput.svg.
`python -m benchmarks.search_throughput [--duration 8] [--data PATH] [--plot DIR]`
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from benchmarks.fairness_load import Flood
from benchmarks.fairness_load import Texts
from benchmarks.fairness_load import check
from benchmarks.fairness_load import describe
from benchmarks.fairness_load import ok
from benchmarks.fairness_load import phase
from benchmarks.fairness_load import run_checks
from benchmarks.plots import Series
from benchmarks.plots import bar_chart

SMALL = tuple(f"workspace:small-{n:02d}" for n in range(64))
BIG = "workspace:big"
WIDE = {"MEMORY_PLUGIN_ADMISSION_BUDGET": "60"}


def measure(
    base: str, texts: Texts, duration: float, figures: dict[str, dict[str, float]] | None = None
) -> list[bool]:
    """The phases and their checks; each load's commits and searches a second go into
    `figures` (keyed by load, then "commit" and "search") when one is given."""
    results = []
    # Each phase its own seed: a commit phase seeded as an earlier one re-sends that
    # phase's ids and contents, which the plugin answers without a model call or a
    # write (an idempotent retry), and counted those as commits.
    seeds = iter(range(5, 100))
    for label, names in (("64 namespaces of 50", SMALL), ("one of 5,000", (BIG,))):
        for callers in (8, 64):
            rates = {}
            for kind in ("commit", "search"):
                tenants: Sequence[str] = names[:callers]
                per = max(1, callers // len(tenants))
                flood = Flood(kind, tuple(tenants), per, texts.turns, texts.questions)
                out = phase(base, texts, duration, flood, False, next(seeds))
                rates[kind] = sum(map(ok, out)) / duration
                print(describe(f"{callers} callers, {kind}s, {label}", out, duration))
            ratio = rates["search"] / max(rates["commit"], 1e-9)
            if figures is not None:
                figures[f"{callers} callers,\n{label}"] = rates
            results.append(
                check(
                    f"searches / commits, {callers} callers, {label} >= 0.9",
                    ratio >= 0.9,
                    f"{ratio:.2f}x",
                )
            )
    return results


def draw_rates(figures: Mapping[str, Mapping[str, float]], path: Path, note: str) -> Path:
    """Commits and searches a second, a pair of bars per load (`figures[load][kind]`)."""
    loads = list(figures)
    series = [
        Series(f"{kind}s a second", [round(figures[load][kind]) for load in loads])
        for kind in ("commit", "search")
    ]
    title = "Closed-loop commits and searches a second"
    return bar_chart(path, title, loads, series, y_label="answers a second", note=note)


def main() -> None:
    layout = {name: 50 for name in SMALL} | {BIG: 5000}
    figures: dict[str, dict[str, float]] = {}
    run_checks(
        __doc__,
        "search throughput",
        WIDE,
        layout,
        partial(measure, figures=figures),
        lambda directory, note: [draw_rates(figures, directory / "search_throughput.svg", note)],
    )


if __name__ == "__main__":
    main()
