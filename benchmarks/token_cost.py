"""What keeping token vectors costs a write: commits a second and bytes on disk.

    git worktree add /tmp/base <a commit before token vectors>
    python -m benchmarks.token_cost --baseline /tmp/base [--rounds 2]

Writes LoCoMo's development half (both memory modes, every memory committed with an
explicit id over HTTP, 8 in flight, as benchmarks/retrieval.py does) through a server
of the baseline checkout and one of this checkout, in turns (A B B A ...: drift hits
both alike), each into a fresh data directory, with the same Python environment.
Prints each round's commits a second, the medians and their ratio, and the store's
size on disk after a clean stop, per memory (`du`: blocks held, sparse files count
what they hold).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import locomo
from benchmarks.common import REPO_ROOT
from benchmarks.common import machine
from benchmarks.retrieval import DEFAULT_DATA
from benchmarks.retrieval import write_all
from harness.server_process import ServerProcess


def serve_from(root: Path) -> list[str]:
    """`memory-plugin-vector serve`, importing the plugin from the checkout at `root`."""
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); from plugin.cli import main;"
        " sys.exit(main())"
    )
    return [sys.executable, "-c", code, "serve"]


def disk_bytes(path: Path) -> int:
    found = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(found.stdout.split()[0]) * 1024


def one_round(
    root: Path, work: Path, conversations: list[locomo.Conversation]
) -> tuple[float, int]:
    """Commits a second and bytes on disk for one write of every memory."""
    data = work / "data"
    # This checkout keeps token vectors in the rerank mode only; the baseline has none.
    env = {"MEMORY_PLUGIN_SEARCH": "rerank"} if root == REPO_ROOT else {}
    with ServerProcess(data, work / "server.log", command=serve_from(root), env=env) as server:
        server.start()
        server.wait_healthy()
        started = time.perf_counter()
        count = asyncio.run(write_all(server.base_url, conversations))
        rate = count / (time.perf_counter() - started)
        server.terminate()
    return rate, disk_bytes(data / "store")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    conversations = locomo.load(args.data, "speaker")
    memories = sum(len(c.memories[mode]) for c in conversations for mode in locomo.MODES)
    print(f"token cost on {args.data.name}: {memories} memories ({machine()})")
    roots = {"baseline": args.baseline.resolve(), "this": REPO_ROOT}
    rates: dict[str, list[float]] = {name: [] for name in roots}
    sizes: dict[str, int] = {}
    order = [n for r in range(args.rounds) for n in ("baseline", "this")[:: 1 - 2 * (r % 2)]]
    for name in order:
        with tempfile.TemporaryDirectory(prefix="bench-token-cost-") as tmp:
            rate, size = one_round(roots[name], Path(tmp), conversations)
        rates[name].append(rate)
        sizes[name] = size
        print(f"  {name:<8} {rate:6.1f} commits/s  {size / memories / 1024:6.1f} KiB/memory")
    medians = {name: statistics.median(found) for name, found in rates.items()}
    print(
        f"median commits/s: baseline {medians['baseline']:.1f}, this {medians['this']:.1f}"
        f" ({medians['this'] / medians['baseline']:.2f}x; at least 0.95x:"
        f" {'met' if medians['this'] >= 0.95 * medians['baseline'] else 'NOT met'})"
    )
    extra = (sizes["this"] - sizes["baseline"]) / memories / 1024
    print(f"on disk: {extra:+.1f} KiB/memory for the token vectors")


if __name__ == "__main__":
    main()
