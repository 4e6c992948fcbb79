"""A quiet tenant's searches beside 8 callers searching a namespace of 100,000 memories.

Against the real server process (`serve` defaults: embedded store, the shipped INFO
log). The big namespace is built in seconds, not hours: a generated export file
(LoCoMo's dialog turns, numbered, with seeded random unit vectors; their keyword
vectors are made by the import) loaded with `memory-plugin-vector import` before the
server starts. The quiet tenant's 200 memories and its shared namespaces are
committed over HTTP. Then, each phase `--duration` seconds:

1. the quiet tenant alone: one search at a time, 20 ms apart, over `workspace:quiet`
   and the `team:` and `org:` namespaces it shares;
2. the same beside 8 closed-loop callers searching the big namespace (limit 10);
3. alone again (the figures of 1 and 3 are pooled).

Prints each phase's p50/p99 and the big searches answered a second, and checks the
quiet tenant's p99 beside the flood against its p99 alone (target: at most 4x).
`python -m benchmarks.quiet_tenant [--big 100000] [--duration 10] [--data PATH]`
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from datetime import UTC
from datetime import datetime
from pathlib import Path

import numpy as np

from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from benchmarks.common import machine
from benchmarks.common import percentile
from benchmarks.fairness_load import QUIET
from benchmarks.fairness_load import Flood
from benchmarks.fairness_load import Outcome
from benchmarks.fairness_load import Texts
from benchmarks.fairness_load import check
from benchmarks.fairness_load import command_line
from benchmarks.fairness_load import describe
from benchmarks.fairness_load import model_rate
from benchmarks.fairness_load import phase
from benchmarks.fairness_load import seed
from plugin.transfer import jsonl

BIG = "workspace:big"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def write_export(path: Path, texts: Texts, big: int, fingerprint: str, dimension: int) -> None:
    """One namespace of `big` memories, as `memory-plugin-vector export` writes them."""
    rng = np.random.default_rng(11)
    with path.open("wb") as out:
        out.write(jsonl.dumps(jsonl.Header(fingerprint, dimension, T0, "benchmark").to_json()))
        record = NamespaceRecord(name=BIG, kind="workspace", created_at=T0)
        out.write(jsonl.dumps(jsonl.namespace_line(record)))
        for start in range(0, big, 1000):
            vectors = rng.standard_normal((min(1000, big - start), dimension), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            for offset, vector in enumerate(vectors):
                n = start + offset
                memory = MemoryRecord(
                    id=f"00000000-0000-4000-8000-{n:012d}",
                    namespace=BIG,
                    content=f"{texts.turns[n % len(texts.turns)]} (#{n})",
                    kind="fact",
                    source="agent",
                    created_at=T0,
                )
                out.write(jsonl.dumps(jsonl.memory_line(memory, vector.tolist())))
        out.write(jsonl.dumps(jsonl.Trailer(1, big, T0).to_json()))


def quiet_only(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.stream == "quiet"]


def main() -> None:
    args = command_line(__doc__, big=100_000, duration=10.0).parse_args()
    from harness.server_process import REPO_ROOT
    from harness.server_process import ServerProcess
    from harness.server_process import clean_env
    from plugin.embedding.encoders import load_encoder
    from plugin.settings import Settings

    texts = Texts(args.data)
    encoder = load_encoder(Settings())
    print(f"quiet tenant beside a big namespace ({machine()}); {model_rate()}")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        data, export = Path(tmp) / "data", Path(tmp) / "big.jsonl"
        started = time.perf_counter()
        write_export(export, texts, args.big, encoder.fingerprint, encoder.dimension)
        subprocess.run(
            [sys.executable, "-m", "plugin.cli", "import", "--in", str(export)],
            cwd=REPO_ROOT,
            env=clean_env({"MEMORY_PLUGIN_DATA_DIR": str(data)}),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(f"imported {args.big:,} memories in {time.perf_counter() - started:.0f} s")
        with ServerProcess(data, Path(tmp) / "log", log_level="INFO") as server:
            server.start()
            print(f"cold start: {server.wait_healthy():.2f} s")
            base = server.base_url
            layout = {QUIET: 200, "team:shared": 100, "org:shared": 100}
            asyncio.run(seed(base, layout, texts))
            flood = Flood("search", (BIG,), 8, texts.turns, texts.questions)
            phase(base, texts, 3.0, flood, True, 1)  # warm: the big namespace's pages
            alone = quiet_only(phase(base, texts, args.duration, None, True, 2))
            beside_all = phase(base, texts, args.duration, flood, True, 3)
            alone += quiet_only(phase(base, texts, args.duration, None, True, 4))
    beside = quiet_only(beside_all)
    big = [o for o in beside_all if o.stream != "quiet"]
    print(describe("quiet tenant alone", alone, 2 * args.duration))
    print(describe("quiet tenant beside the flood", beside, args.duration))
    print(describe("8 callers searching the big namespace", big, args.duration))
    p99_alone = percentile([o.seconds for o in alone], 99)
    p99_beside = percentile([o.seconds for o in beside], 99)
    ratio = p99_beside / p99_alone
    passed = check("quiet p99 beside / alone <= 4", ratio <= 4.0, f"{ratio:.1f}x")
    print(f"{int(passed)} of 1 checks passed")


if __name__ == "__main__":
    main()
