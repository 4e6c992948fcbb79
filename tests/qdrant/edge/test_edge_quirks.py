"""Pins the qdrant-edge-py 0.9.0 behaviours that shaped the embedded backend.

If one of these tests starts failing after an upgrade, the quirk is gone:
- a bool match: `pinned` could be stored as a bool again (adapters/qdrant/layout.py);
- the GIL: engine calls that release it could again run on worker threads without
  freezing the event loop, and `EngineCalls.here` should be revisited
  (adapters/engine/call_threads.py, `EngineCalls`).
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import qdrant_edge as qe


def test_bool_match_value_never_matches(tmp_path: Path) -> None:
    shard = qe.EdgeShard.create(
        str(tmp_path / "s"),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=2, distance=qe.Distance.Cosine)),
    )
    shard.update(
        qe.UpdateOperation.upsert_points([qe.Point(1, [1.0, 0.0], {"flag": True, "flag_int": 1})])
    )

    def hits(condition: object) -> int:
        records, _ = shard.scroll(qe.ScrollRequest(limit=10, filter=qe.Filter(must=[condition])))
        return len(records)

    assert hits(qe.FieldCondition("flag", match=qe.MatchValue(True))) == 0
    assert hits(qe.FieldCondition("flag_int", match=qe.MatchValue(1))) == 1
    shard.close()


def test_engine_calls_keep_the_gil(tmp_path: Path) -> None:
    """While the engine writes, no other Python thread runs: a ticker thread is frozen."""
    shard = qe.EdgeShard.create(
        str(tmp_path / "s"),
        qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=64, distance=qe.Distance.Cosine)),
    )
    rng = random.Random(7)
    points = [qe.Point(i, [rng.random() for _ in range(64)], {"n": i}) for i in range(1, 30_001)]
    operation = qe.UpdateOperation.upsert_points(points)
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.02)
    started = time.perf_counter()
    shard.update(operation)
    ended = time.perf_counter()
    stop.set()
    thread.join()
    shard.close()
    during = [tick for tick in ticks if started < tick < ended]
    # A call that released the GIL would let the ticker run every half millisecond.
    assert ended - started > 0.03, "the update was too quick to tell"
    assert len(during) <= 2, f"{len(during)} ticks in {ended - started:.3f} s"
