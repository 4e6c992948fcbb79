"""What the engine worker's socket adds to a commit's two store calls.

A sequential commit with an id makes two calls to the embedded store: the id's lookup
(`get_stored_memory`, the id is new) and the upsert, under `sync` and `async`. Each is
timed (median of RUNS) on the same store two ways, in-process (`QdrantEdgeBackend` on
this event loop) and in its engine worker (`embedded_store`, a pool of one, as the server
runs it), and with two gaps before each call: none (calls back to back) and the model's time for one
text spent spinning on this core, as in a real commit, while the worker waits idle. The
difference between the two ways is the socket's cost; between the gaps, what waking an
idle process costs on this machine.

Run: python -m benchmarks.engine_calls   (about 1 minute)
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC
from datetime import datetime
from pathlib import Path

import numpy as np

from adapters.base import VectorBackend
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.pool.embedded_store import embedded_store
from adapters.values import Durability
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from benchmarks.common import machine

NAMESPACE = "workspace:engine-calls"
DIMENSION = 384
RUNS = 300
WARM_UP = 20
MODEL_GAP_S = 0.003  # about the model's time for one text here


def spin(seconds: float) -> None:
    """Keep this core busy for `seconds`, as the model does on the event loop."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def timed_calls(store: VectorBackend, gap_s: float) -> tuple[float, float]:
    """Median milliseconds of the lookup and of the upsert, each after `gap_s` of spinning."""
    now = datetime.now(UTC)
    await store.save_namespace(NamespaceRecord(NAMESPACE, "workspace", now))
    rng = np.random.default_rng(7)
    lookups, upserts = [], []
    for n in range(WARM_UP + RUNS):
        vector = rng.standard_normal(DIMENSION)
        memory_id = str(uuid.uuid4())
        spin(gap_s)
        begun = time.perf_counter()
        await store.get_stored_memory(NAMESPACE, memory_id)
        looked_up = time.perf_counter()
        spin(gap_s)
        memory = MemoryRecord(memory_id, NAMESPACE, f"memory {n}", "fact", "agent", now)
        written = time.perf_counter()
        await store.upsert_memory(memory, MemoryVectors((vector / np.linalg.norm(vector)).tolist()))
        done = time.perf_counter()
        if n >= WARM_UP:
            lookups.append(looked_up - begun)
            upserts.append(done - written)
    return statistics.median(lookups) * 1000, statistics.median(upserts) * 1000


async def measure(where: str, durability: Durability, gap_s: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-calls-", dir="/var/tmp") as tmp:
        store: VectorBackend
        if where == "in-process":
            store = QdrantEdgeBackend(DIMENSION, Path(tmp), durability=durability)
        else:
            store = embedded_store(DIMENSION, Path(tmp), durability=durability)
        await store.start()
        try:
            return await timed_calls(store, gap_s)
        finally:
            await store.close()


async def run() -> None:
    print(f"engine_calls: a commit's two store calls, median of {RUNS} ({machine()})")
    print(f"  {'durability':<10} {'gap':<14} {'where':<14} {'lookup ms':>10} {'upsert ms':>10}")
    for durability in ("sync", "async"):
        for gap_s, gap in ((0.0, "none"), (MODEL_GAP_S, "model's 3 ms")):
            for where in ("in-process", "engine worker"):
                lookup, upsert = await measure(where, durability, gap_s)
                print(f"  {durability:<10} {gap:<14} {where:<14} {lookup:>10.3f} {upsert:>10.3f}")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
