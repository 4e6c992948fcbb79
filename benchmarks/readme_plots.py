"""The charts kept in benchmarks/plots/, drawn from the figures benchmarks/README.md reports.

    python -m benchmarks.readme_plots [DIR]   (default: benchmarks/plots/)

The benchmarks' own drawing functions (what `--plot DIR` runs) given the README's
figures, not a new measurement; each chart's note names the date and the command
its figures came from. Run it again when the README's figures change.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import fairness
from benchmarks import retrieval
from benchmarks import search_throughput


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("plots")
    recall = {  # categories 1-4, dialog turns / observations, R@1/5/10/20/50
        "dense": ((0.181, 0.408, 0.510, 0.604, 0.732), (0.355, 0.535, 0.588, 0.648, 0.716)),
        "keyword": ((0.356, 0.569, 0.635, 0.696, 0.761), (0.401, 0.529, 0.578, 0.628, 0.671)),
        "hybrid": ((0.370, 0.600, 0.685, 0.746, 0.838), (0.426, 0.582, 0.628, 0.670, 0.721)),
        "feedback": ((0.386, 0.616, 0.699, 0.766, 0.856), (0.428, 0.584, 0.633, 0.674, 0.728)),
        "rerank": ((0.394, 0.629, 0.722, 0.790, 0.854), (0.443, 0.599, 0.641, 0.683, 0.732)),
    }
    rows = {mode: {"dialog": d, "observations": o} for mode, (d, o) in recall.items()}
    note = "python -m benchmarks.retrieval: dense, keyword 2026-11-25; the rest 2026-11-26"
    retrieval.draw_recall(rows, out / "recall_at_k.svg", note)
    rates = {  # 64 callers; commits and searches a second
        "64 of 50,\n2026-11-26": {"commit": 188, "search": 344},
        "one of 5,000,\n2026-11-26": {"commit": 186, "search": 297},
        "64 of 50,\n2026-11-27": {"commit": 151, "search": 277},
        "one of 5,000,\n2026-11-27": {"commit": 139, "search": 164},
    }
    note = (
        "2026-11-26 and 2026-11-27, python -m benchmarks.search_throughput;"
        " 64 callers, 64 namespaces of 50 or one of 5,000"
    )
    search_throughput.draw_rates(rates, out / "search_throughput.svg", note)
    floods = {  # quiet tenant's p99, refusals' p99, ms
        "commits,\nwaiting Retry-After": (58, 6),
        "commits,\nretrying at once": (72, 207),
        "searches,\nwaiting Retry-After": (77, 5),
        "searches,\nretrying at once": (76, 211),
    }
    p99s = {k: {fairness.QUIET_P99: q, fairness.REFUSALS_P99: r} for k, (q, r) in floods.items()}
    fairness.draw_floods(
        p99s, out / "fairness_floods.svg", "2026-11-26, python -m benchmarks.fairness"
    )


if __name__ == "__main__":
    main()
