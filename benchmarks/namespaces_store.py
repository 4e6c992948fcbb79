"""The model's own rate, and a store of thousands of namespaces built offline, for namespaces.py.

Step 1 of benchmarks/namespaces.py embeds sentences in-process (no server) for
the model's rate and for the memories of step 3, which builds a 10,000-namespace
store with them and measures its start-up, a server on it and mixed load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import aiohttp

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.values import MemoryRecord
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import TokenVectors
from benchmarks import load
from benchmarks.common import percentile
from benchmarks.sentences import sentences
from harness.server_process import ServerProcess
from plugin.embedding.encoders import SentenceTransformerEncoder

BATCH = 8
BATCHES = 40
SINGLES = 100
DISTINCT = 3_000  # distinct sentences embedded for the store-scale preload
EMBED_CHUNK = BATCH  # the model's best rate here (batches of 64 were slower)
PRELOAD_TASKS = 4  # the backend's own worker threads

# -- 1. the model alone ----------------------------------------------------------------


@dataclass
class Model:
    load_s: float
    batch_rate: float  # sentences/s, median over batches of BATCH
    batch_rates: list[float]
    single_s: list[float]
    embed_s: float
    texts: list[str]
    vectors: list[list[float]]
    tokens: list[TokenVectors | None]  # each text's token vectors where asked for


def measure_model(distinct: int, *, tokens: bool = False) -> Model:
    """The model's rates, and `distinct` sentences embedded (with their token vectors
    where `tokens` asks, for a store in `rerank` mode)."""
    started = time.perf_counter()
    encoder = SentenceTransformerEncoder.load()
    load_s = time.perf_counter() - started
    probe = sentences(BATCH * (BATCHES + 1) + SINGLES, seed=21)
    for _ in range(3):  # warm-up
        encoder.encode(probe[:BATCH])
    rates = []
    for b in range(1, BATCHES + 1):
        batch = probe[b * BATCH : (b + 1) * BATCH]
        started = time.perf_counter()
        encoder.encode(batch)
        rates.append(len(batch) / (time.perf_counter() - started))
    single = []
    for text in probe[BATCH * (BATCHES + 1) :]:
        started = time.perf_counter()
        encoder.encode([text])
        single.append(time.perf_counter() - started)
    texts = sentences(distinct, seed=7) if distinct else []
    started = time.perf_counter()
    embedded = [
        found
        for first in range(0, len(texts), EMBED_CHUNK)
        for found in encoder.embed(texts[first : first + EMBED_CHUNK], tokens=tokens)
    ]
    embed_s = time.perf_counter() - started
    del encoder
    gc.collect()
    vectors = [found.vector for found in embedded]
    token_vectors = [found.tokens for found in embedded]
    return Model(
        load_s, statistics.median(rates), rates, single, embed_s, texts, vectors, token_vectors
    )


def print_model(model: Model) -> None:
    single_ms = [s * 1000 for s in model.single_s]
    print(
        f"model (all-MiniLM-L6-v2, in this process, no server running): "
        f"load {model.load_s:.1f} s (imports included)\n"
        f"  batches of {BATCH}: median {model.batch_rate:.0f} sentences/s "
        f"(min {min(model.batch_rates):.0f}, max {max(model.batch_rates):.0f}, "
        f"{BATCHES} batches)\n"
        f"  one sentence: median {statistics.median(single_ms):.1f} ms, "
        f"p99 {percentile(single_ms, 99):.1f} ms ({len(single_ms)} calls)"
    )
    if model.texts:
        print(
            f"  embedded {len(model.texts):,} distinct sentences for the store-scale "
            f"preload in {model.embed_s:.1f} s (chunks of {EMBED_CHUNK}); model freed"
        )


# -- 3. store scale --------------------------------------------------------------------


async def build_store(data: Path, names: list[str], per_namespace: int, model: Model) -> None:
    """Namespaces and memories written offline through the backend's public methods."""
    token_rows = model.tokens[0]
    sizes = {"token_dimension": len(token_rows[0])} if token_rows else {}
    backend = QdrantEdgeBackend(len(model.vectors[0]), data, **sizes)
    await backend.start()
    try:
        now = datetime.now(UTC)
        started = time.perf_counter()
        for name in names:
            await backend.save_namespace(NamespaceRecord(name, name.split(":", 1)[0], now))
        saved_s = time.perf_counter() - started
        total = len(names) * per_namespace
        oldest = now - timedelta(seconds=total)
        rng = random.Random(5)
        pending = iter(range(total))
        keywords = KeywordEncoder()
        documents = [keywords.document(text) for text in model.texts]

        async def writer() -> None:
            for i in pending:  # shared: memory i goes to namespace i % len(names)
                memory = MemoryRecord(
                    id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    namespace=names[i % len(names)],
                    content=model.texts[i % len(model.texts)],
                    kind="fact",
                    source="agent",
                    created_at=oldest + timedelta(seconds=i),
                )
                n = i % len(model.vectors)
                await backend.upsert_memory(
                    memory, MemoryVectors(model.vectors[n], documents[n], model.tokens[n])
                )

        started = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(PRELOAD_TASKS)))
        took = time.perf_counter() - started
        print(
            f"preload (offline, in-process QdrantEdgeBackend): {len(names):,} namespace records "
            f"in {saved_s:.1f} s; {total:,} memories via upsert_memory ({PRELOAD_TASKS} "
            f"concurrent tasks) in {took:.1f} s ({total / took:,.0f}/s)\n"
            f"  vectors: real embeddings of {len(model.vectors):,} distinct sentences, each "
            f"reused by ~{total // len(model.vectors)} memories (content = its sentence)"
        )
    finally:
        await backend.close()


async def store_start(data: Path, dimension: int) -> tuple[float, int]:
    backend = QdrantEdgeBackend(dimension, data)
    started = time.perf_counter()
    await backend.start()
    took = time.perf_counter() - started
    try:
        return took, len(await backend.list_namespaces())
    finally:
        await backend.close()


async def mixed_load(url: str, names: list[str], duration: float) -> list[load.Phase]:
    """`duration` s of closed-loop callers on the server at `url`: half commits into a random
    namespace of `names`, half searches over some of them."""
    traffic = load.Traffic(url, seed=77)
    commit = load.Phase("commit, random of all", 201)
    search = load.Phase(
        f"search {load.SEARCH_NAMESPACES} random ns, limit {load.SEARCH_LIMIT}", 200
    )

    def make(rng: random.Random) -> tuple[load.Phase, load.Request]:
        if rng.random() < 0.5:
            return commit, traffic.commit(rng.choice(names), rng)
        return search, traffic.search(names, rng)

    connector = aiohttp.TCPConnector(limit=load.CALLERS * 2)
    async with aiohttp.ClientSession(timeout=load.TIMEOUT, connector=connector) as session:
        await traffic.warm_up(session, names)
        await load.closed_loop(session, [commit, search], duration, make, seed=78)
    return [commit, search]


def run_store_scale(args: argparse.Namespace, model: Model, empty_cold: list[float]) -> None:
    names = load.namespace_names(args.store_namespaces, seed=1234)
    total = len(names) * args.per_namespace
    print()
    print(
        f"store scale: {len(names):,} namespaces x {args.per_namespace} = {total:,} memories, "
        f"`{args.search}` search, {args.workers} engine worker(s) (goals: server RSS < 1.5 GB, "
        "start-up < 2 s beyond loading the model)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        data = Path(tmp) / "data"
        asyncio.run(build_store(data, names, args.per_namespace, model))
        start_s, loaded = asyncio.run(store_start(data, len(model.vectors[0])))
        print(f"  QdrantEdgeBackend.start() on it, in-process: {start_s:.2f} s ({loaded:,} ns)")
        settings = {
            "MEMORY_PLUGIN_SEARCH": args.search,
            "MEMORY_PLUGIN_ENGINE_WORKERS": str(args.workers),
        }
        with ServerProcess(data, Path(tmp) / "server.log", env=settings) as server:
            server.start()
            first = server.wait_healthy()
            first_exit = server.terminate()
            server.start()  # a second start, to see the spread; this one takes the load
            second = server.wait_healthy()
            print(
                f"  server spawn -> first healthy 200: {first:.2f} s, {second:.2f} s on a "
                f"restart (SIGTERM exit code {first_exit})"
            )
            if empty_cold:
                extra = min(first, second) - min(empty_cold)
                print(
                    f"    on an empty data dir (step 2): {min(empty_cold):.2f} s, so the store "
                    f"adds {extra:.2f} s"
                )
            print(
                f"    model load in-process (step 1): {model.load_s:.2f} s; spawn -> healthy "
                f"minus that: {min(first, second) - model.load_s:.2f} s (interpreter, imports, "
                "store)"
            )
            print(f"  server RSS after start: {load.server_rss(server)}")
            try:
                phases = asyncio.run(mixed_load(server.base_url, names, args.mixed))
            except BaseException:
                print("server log tail:\n" + server.log_tail())
                raise
            after = load.server_rss(server)
            code = server.terminate()
        print(
            f"  {args.mixed:g} s mixed load, {load.CALLERS} callers, half commits, half searches:"
        )
        load.print_phases(phases)
        print(f"  server RSS after the mixed load: {after}")
        print(
            f"  p99 > {load.SLOW_P99_MS:.0f} ms: {load.slow_p99(phases)}; SIGTERM exit code {code}"
        )
        if code != 0 or any(p.bad for p in phases):
            print("  server log tail:\n" + server.log_tail(2000))
