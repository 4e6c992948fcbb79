"""Recall@10 of qdrant-edge's HNSW index against exact search, on real embeddings.

Why `adapters/shards.py:edge_config` turns indexing off: this builds one shard
with qdrant-edge's defaults (HNSW built by `optimize()`) and one with the
project's settings (no index, every search exact), loads the same 10,000
all-MiniLM-L6-v2 embeddings of varied memory sentences into both, and compares
recall@10 over 200 held-out queries, per-query latency, how long `optimize()`
took, and how long it blocked a concurrently ticking asyncio loop (the GIL).

Run: python -m benchmarks.recall   (about 2 minutes on 2 cores, most of it embedding)
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from adapters.engine.engine import edge_config
from benchmarks.common import machine
from benchmarks.common import percentile
from benchmarks.sentences import queries
from benchmarks.sentences import sentences
from plugin.embedding.encoders import SentenceTransformerEncoder

CORPUS = 10_000
QUERIES = 200
K = 10
DIM = 384
UPSERT_BATCH = 500


class LoopWatch:
    """An asyncio loop on its own thread that sleeps 10 ms at a time and records
    how late each wake-up was: the longest delay is how long it was starved."""

    TICK_S = 0.01

    def __init__(self) -> None:
        self.worst_s = 0.0
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        while not self._stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(self.TICK_S)
            self.worst_s = max(self.worst_s, time.perf_counter() - before - self.TICK_S)
            self.ticks += 1

    def __enter__(self) -> LoopWatch:
        self._thread.start()
        time.sleep(0.05)  # let it tick before the measured work starts
        self.worst_s = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def build(path: Path, config: Any, vectors: np.ndarray) -> tuple[Any, float, float, float]:
    """Create a shard, upsert all vectors, optimize; return (shard, upsert s, optimize s,
    worst loop delay during optimize s)."""
    shard = qe.EdgeShard.create(str(path), config)
    started = time.perf_counter()
    for first in range(0, len(vectors), UPSERT_BATCH):
        points = [
            qe.Point(i, vectors[i].tolist(), {"n": i})
            for i in range(first, min(first + UPSERT_BATCH, len(vectors)))
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    upsert_s = time.perf_counter() - started
    with LoopWatch() as watch:
        started = time.perf_counter()
        shard.optimize()
        optimize_s = time.perf_counter() - started
    return shard, upsert_s, optimize_s, watch.worst_s


def run_queries(
    shard: Any, vectors: np.ndarray, params: Callable[[], Any]
) -> tuple[list[list[int]], list[float]]:
    results: list[list[int]] = []
    latencies: list[float] = []
    for vector in vectors:
        request = qe.QueryRequest(limit=K, query=qe.Query.Nearest(vector.tolist()), params=params())
        started = time.perf_counter()
        points = shard.query(request)
        latencies.append(time.perf_counter() - started)
        results.append([int(p.id) for p in points])
    return results, latencies


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    hits = sum(len(set(f) & set(t)) for f, t in zip(found, truth, strict=True))
    return hits / sum(len(t) for t in truth)


def describe(shard: Any) -> str:
    info = shard.info()
    return (
        f"{info.points_count} points, {info.segments_count} segments, "
        f"{info.indexed_vectors_count} vectors in an HNSW index"
    )


def main() -> None:
    print(f"recall.py: qdrant-edge HNSW vs exact, {CORPUS} real embeddings ({machine()})")
    corpus = sentences(CORPUS)
    held_out = queries(QUERIES, exclude=set(corpus))

    started = time.perf_counter()
    encoder = SentenceTransformerEncoder.load()
    print(f"model load: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    chunks = [encoder.encode(corpus[i : i + 256]) for i in range(0, CORPUS, 256)]
    doc_vectors = np.array([v for chunk in chunks for v in chunk], dtype=np.float32)
    query_vectors = np.array(encoder.encode(held_out), dtype=np.float32)
    embed_s = time.perf_counter() - started
    total = CORPUS + QUERIES
    print(f"embedding {total} sentences (batch 256): {embed_s:.1f} s ({total / embed_s:.0f}/s)")

    # Brute force in numpy: the ground truth's ground truth.
    numpy_truth = np.argsort(-(query_vectors @ doc_vectors.T), axis=1)[:, :K].tolist()

    workdir = Path(tempfile.mkdtemp(prefix="recall-bench-"))
    try:
        default_config = qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)
        )
        print()
        print("shard with qdrant-edge defaults (HNSW), real embeddings:")
        rows = compare(workdir / "hnsw", default_config, doc_vectors, query_vectors, numpy_truth)

        print()
        print("shard with the project's edge_config (indexing off, searches exact):")
        project, upsert_s, optimize_s, blocked_s = build(
            workdir / "project", edge_config(DIM), doc_vectors
        )
        report_build(project, upsert_s, optimize_s, blocked_s)
        found, latencies = run_queries(project, query_vectors, lambda: qe.SearchParams(exact=True))
        rows.append(("project edge_config (no index)", recall(found, numpy_truth), latencies))
        project.close()
        print_rows(f"recall@{K}, real embeddings, {QUERIES} held-out queries:", rows)

        # The same shapes with random unit vectors: no structure for HNSW to exploit.
        rng = np.random.default_rng(0)
        random_docs = unit_rows(rng.standard_normal((CORPUS, DIM)).astype(np.float32))
        random_queries = unit_rows(rng.standard_normal((QUERIES, DIM)).astype(np.float32))
        random_truth = np.argsort(-(random_queries @ random_docs.T), axis=1)[:, :K].tolist()
        print()
        print("for comparison, qdrant-edge defaults (HNSW) on random unit vectors:")
        rows = compare(
            workdir / "random", default_config, random_docs, random_queries, random_truth
        )
        print_rows(f"recall@{K}, random unit vectors, {QUERIES} random queries:", rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def report_build(shard: Any, upsert_s: float, optimize_s: float, blocked_s: float) -> None:
    print(f"  upsert {CORPUS} points (batches of {UPSERT_BATCH}): {upsert_s:.2f} s")
    print(
        f"  optimize(): {optimize_s:.2f} s; a 10 ms-ticking asyncio loop on another "
        f"thread was blocked for up to {blocked_s:.2f} s"
    )
    print(f"  after optimize: {describe(shard)}")


def compare(
    path: Path,
    config: Any,
    docs: np.ndarray,
    query_vectors: np.ndarray,
    numpy_truth: list[list[int]],
) -> list[tuple[str, float, list[float]]]:
    """Build an HNSW shard; recall of each search setting against exact=True."""
    shard, upsert_s, optimize_s, blocked_s = build(path, config, docs)
    report_build(shard, upsert_s, optimize_s, blocked_s)
    truth, exact_lat = run_queries(shard, query_vectors, lambda: qe.SearchParams(exact=True))
    print(f"  exact=True vs numpy brute force: recall@{K} {recall(truth, numpy_truth):.4f}")
    rows: list[tuple[str, float, list[float]]] = [("exact=True (ground truth)", 1.0, exact_lat)]
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("default search params", lambda: None),
        ("hnsw_ef=128", lambda: qe.SearchParams(hnsw_ef=128)),
        ("hnsw_ef=512", lambda: qe.SearchParams(hnsw_ef=512)),
    ]
    for name, params in variants:
        found, latencies = run_queries(shard, query_vectors, params)
        rows.append((name, recall(found, truth), latencies))
    shard.close()
    return rows


def print_rows(title: str, rows: list[tuple[str, float, list[float]]]) -> None:
    print()
    print(title)
    print(f"  {'search':<34} {'recall':>7} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for name, value, latencies in rows:
        ms = [v * 1000 for v in latencies]
        print(
            f"  {name:<34} {value:>7.4f} {percentile(ms, 50):>10.2f} "
            f"{percentile(ms, 95):>8.2f} {max(ms):>8.2f}"
        )


if __name__ == "__main__":
    main()
