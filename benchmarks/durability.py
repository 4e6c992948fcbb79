"""What syncing every write costs: the embedded store under `sync` against `async`.

Two real servers, one per durability, each on a fresh data directory on the
same filesystem (printed: on tmpfs an `fsync` costs nothing and the figures say
nothing), each preloaded with PRELOAD memories. Both are measured in this one
run, so the machine's drift hits both alike:

- 8 closed-loop callers commit with ids (what `memory-backfill -apply` sends)
  in WINDOWS windows per server, taken in the order sync, async, async, sync,
  ...; target: `sync` commits at least 0.9x what `async` does (median of the
  per-pair ratios), judged by wrk's figures where Debian's `wrk` is installed
  (callers are other pods, and wrk costs the two cores almost nothing), else by
  the Python client's;
- one client commits with an id, one after another, in two windows per server:
  under `sync` the median stays within the model's single-text time (one ONNX
  Runtime session in this process, measured in this run, servers idle) + 2 ms;
  `async` beside it. Judged by wrk with one connection where installed (the
  Python client adds its own time to every request), else the Python client.

Run: python -m benchmarks.durability [--data-root DIR]   (about 3 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import aiohttp

from benchmarks.closed_loop import CLOSED_LOOP_S
from benchmarks.closed_loop import closed_loop
from benchmarks.closed_loop import commit_script
from benchmarks.closed_loop import post_commit
from benchmarks.closed_loop import wrk_closed_loop
from benchmarks.common import machine
from benchmarks.common import wrk_output
from benchmarks.latency import CONCURRENCY
from benchmarks.latency import NAMESPACE
from benchmarks.latency import TIMEOUT
from benchmarks.latency import preload
from benchmarks.latency import timed
from benchmarks.model import CALLERS
from benchmarks.model import SAMPLES
from benchmarks.model import load_model
from benchmarks.model import single_text_s
from benchmarks.sentences import sentences
from harness.server_process import WIDE_SHARES
from harness.server_process import ServerProcess

PRELOAD = 2_000
WINDOWS = 4  # per server
MODES = ("sync", "async")


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path`, as `df` says."""
    result = subprocess.run(
        ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=False
    )
    return result.stdout.split()[-1] if result.returncode == 0 else "unknown"


def wrk_sequential_s(url: str, texts: list[str], window: int) -> float | None:
    """One wrk connection committing with ids, one after another: the median seconds
    per commit (wrk's `--latency`), when wrk is installed."""
    if shutil.which("wrk") is None:
        return None
    script = commit_script(texts, 100 + window)  # ids apart from the closed loop's
    out = wrk_output(url, script, 1, 4.0, "--latency")
    found = re.search(r"^\s+50%\s+([0-9.]+)(us|ms|s)$", out, re.MULTILINE)
    if found is None or "Non-2xx" in out:
        raise RuntimeError(f"wrk's sequential commits: {out}")
    return float(found.group(1)) / {"us": 1e6, "ms": 1e3, "s": 1.0}[found.group(2)]


async def prepare(session: aiohttp.ClientSession, server: ServerProcess, texts: list[str]) -> str:
    """Create the namespace, preload `texts`, warm up; the commit URL."""
    base = server.base_url
    async with session.put(f"{base}/v1/namespaces/{NAMESPACE}", json={"kind": "workspace"}) as r:
        assert r.status == 200, await r.text()
    counts = await preload(session, base, texts)
    assert counts["failed"] == 0, counts
    url = f"{base}/v1/namespaces/{NAMESPACE}/memories"
    for text in texts[:20]:
        await post_commit(session, url, text)
    return url


async def measure(servers: dict[str, ServerProcess], onnx_dir: str) -> None:
    corpus = sentences(PRELOAD + SAMPLES * 40)
    loaded, rest = corpus[:PRELOAD], corpus[PRELOAD:]
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        urls = {mode: await prepare(session, server, loaded) for mode, server in servers.items()}
        sequential: dict[str, list[float]] = {mode: [] for mode in MODES}
        by_wrk: dict[str, list[float]] = {mode: [] for mode in MODES}
        for window in range(2):
            for mode in MODES if window == 0 else MODES[::-1]:
                durations, failures = await timed(
                    SAMPLES, lambda i, m=mode: post_commit(session, urls[m], rest[i]), 201
                )
                assert failures == 0, f"{failures} sequential commits not 201 under {mode}"
                sequential[mode].append(statistics.median(durations))
                median = await asyncio.to_thread(wrk_sequential_s, urls[mode], rest, window)
                if median is not None:
                    by_wrk[mode].append(median)
        model_s = single_text_s(load_model("onnx", onnx_dir))
        loop_texts = rest[SAMPLES:]
        python: dict[str, list[float]] = {mode: [] for mode in MODES}
        wrk: dict[str, list[float]] = {mode: [] for mode in MODES}
        for window in range(WINDOWS):
            order = MODES if window % 2 == 0 else MODES[::-1]
            for mode in order:
                python[mode].append(await closed_loop(session, urls[mode], loop_texts))
                rate = await asyncio.to_thread(wrk_closed_loop, urls[mode], loop_texts, window)
                if rate is not None:
                    wrk[mode].append(rate)
    report(sequential, by_wrk, model_s, python, wrk)


def report(
    sequential: dict[str, list[float]],
    by_wrk: dict[str, list[float]],
    model_s: float,
    python: dict[str, list[float]],
    wrk: dict[str, list[float]],
) -> None:
    model_ms = model_s * 1000
    print(f"\nmodel alone, one session, one text: {model_ms:.2f} ms median")
    print("sequential commits with an id, median of each window (Python client; wrk -c1):")
    for mode in MODES:
        python_ms = " ".join(f"{s * 1000:.2f}" for s in sequential[mode])
        wrk_ms = " ".join(f"{s * 1000:.2f}" for s in by_wrk[mode]) or "-"
        print(f"  {mode:5}: {python_ms} ms; wrk {wrk_ms} ms")
    judged_by, figures = ("wrk", by_wrk) if by_wrk["sync"] else ("Python client", sequential)
    sync_ms = statistics.median(figures["sync"]) * 1000
    async_ms = statistics.median(figures["async"]) * 1000
    verdict = "met" if sync_ms - model_ms <= 2 else "NOT met"
    print(
        f"  judged by {judged_by}: sync {sync_ms:.2f} ms = model + {sync_ms - model_ms:.2f} ms"
        f" (async: model + {async_ms - model_ms:.2f} ms); target model + 2 ms: {verdict}"
    )
    print(f"\n{CALLERS} closed-loop callers committing with ids, windows of {CLOSED_LOOP_S:g} s:")
    for client, rates in (("Python client", python), ("wrk", wrk)):
        if not rates["sync"]:
            continue
        pairs = list(zip(rates["sync"], rates["async"], strict=True))
        for number, (synced, unsynced) in enumerate(pairs, 1):
            print(
                f"  {client}, window {number}: sync {synced:4.0f}/s, async {unsynced:4.0f}/s"
                f" = {synced / unsynced:.2f}x"
            )
    judged, by = (wrk, "wrk") if wrk["sync"] else (python, "Python client")
    ratio = statistics.median(s / a for s, a in zip(judged["sync"], judged["async"], strict=True))
    verdict = "met" if ratio >= 0.9 else "NOT met"
    print(f"  judged by {by}: sync {ratio:.2f}x async (target 0.9x): {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-root", type=Path, default=None, help="where the data dirs go")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-durability-", dir=args.data_root) as tmp,
        tempfile.TemporaryDirectory(prefix="bench-onnx-") as onnx_dir,
    ):
        from plugin.embedding.model_files import resolve_model_dir
        from plugin.embedding.onnx_model import export_onnx

        export_onnx(resolve_model_dir(None), Path(onnx_dir))  # as the image does at build
        root = Path(tmp)
        print(f"durability: sync against async ({machine()}); data on {filesystem(root)}")
        servers = {
            mode: ServerProcess(
                root / mode / "data",
                root / f"{mode}.log",
                log_level="INFO",  # the shipped default: a JSON line per request
                env={
                    "MEMORY_PLUGIN_DURABILITY": mode,
                    "MEMORY_PLUGIN_ONNX_DIR": onnx_dir,
                    **WIDE_SHARES,  # the preload sends 32 at once into one namespace
                },
            )
            for mode in MODES
        }
        try:
            for server in servers.values():
                server.start()
                server.wait_healthy()
            asyncio.run(measure(servers, onnx_dir))
        finally:
            for server in servers.values():
                server.close()


if __name__ == "__main__":
    main()
