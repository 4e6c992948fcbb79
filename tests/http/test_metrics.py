"""GET /metrics after real requests: counters, histograms, bounded labels.

Real model, real embedded store, real HTTP; the scrape is parsed with
prometheus_client's own parser and compared value by value.
"""

from __future__ import annotations

import asyncio
import inspect
from datetime import timedelta
from pathlib import Path

from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from adapters.base import VectorBackend
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.parts import BulkTransfer
from adapters.parts import StoreMeta
from adapters.parts import VectorFill
from adapters.qdrant.server.tenants import QdrantServerBackend
from adapters.values import MemoryVectors
from adapters.values import NamespaceRecord
from adapters.values import SearchQuery
from adapters.values import VectorKind
from harness.clocks import WallClock
from harness.server_process import refusing_port
from plugin.http.keys import EMBEDDER
from plugin.observability.instrumented import instrumented
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.records import DIM
from tests.support.records import T0
from tests.support.records import everything
from tests.support.records import memory
from tests.support.records import unit

NS = "workspace:metrics"
MEMORY_ID = "7d1c3a52-1d4e-4b8e-9a55-0c2f6f2f4b11"
MEMORIES = "/v1/namespaces/{name}/memories"
Labels = tuple[tuple[str, str], ...]


async def scrape(api: ContractClient) -> dict[str, dict[Labels, float]]:
    """Every sample of the scrape: name -> labels (sorted) -> value."""
    async with api.client.get("/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = await response.text()
    samples: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def request_key(route: str, method: str, status: int) -> Labels:
    return (("method", method), ("route", route), ("status", str(status)))


def route_key(route: str, method: str) -> Labels:
    return (("method", method), ("route", route))


def op_key(operation: str, outcome: str = "ok") -> Labels:
    return (("operation", operation), ("outcome", outcome))


async def test_requests_by_route_method_and_status(api: ContractClient) -> None:
    assert (await api.put_ns(NS)).status == 200
    assert (await api.commit(NS, "the build runs on tuesdays")).status == 201
    assert (await api.commit(NS, "")).status == 400  # blank content
    assert (await api.commit("workspace:never-made", "orphan")).status == 404
    assert (await api.search(NS, query="when does the build run?")).status == 200
    assert (await api.call("GET", "/no/such/route")).status == 404
    assert (await api.call("PROPFIND", "/v1/health", check=False)).status == 405
    forget = {"requested_by_namespace": NS}
    missing = "/v1/memories/11111111-2222-4333-8444-555555555555"
    assert (await api.call("DELETE", missing, forget)).status == 404

    samples = await scrape(api)
    assert samples["memory_plugin_http_requests_total"] == {
        request_key("/v1/namespaces/{name}", "PUT", 200): 1.0,
        request_key(MEMORIES, "POST", 201): 1.0,
        request_key(MEMORIES, "POST", 400): 1.0,
        request_key(MEMORIES, "POST", 404): 1.0,
        request_key("/v1/search", "POST", 200): 1.0,
        request_key("unmatched", "GET", 404): 1.0,
        request_key("unmatched", "other", 405): 1.0,
        request_key("/v1/memories/{id}", "DELETE", 404): 1.0,
    }
    latency = samples["memory_plugin_http_request_duration_seconds_count"]
    assert latency == {
        route_key("/v1/namespaces/{name}", "PUT"): 1.0,
        route_key(MEMORIES, "POST"): 3.0,
        route_key("/v1/search", "POST"): 1.0,
        route_key("unmatched", "GET"): 1.0,
        route_key("unmatched", "other"): 1.0,
        route_key("/v1/memories/{id}", "DELETE"): 1.0,
    }
    # Each histogram's +Inf bucket equals its count.
    buckets = samples["memory_plugin_http_request_duration_seconds_bucket"]
    for labels, count in latency.items():
        assert buckets[(("le", "+Inf"), *labels)] == count

    # The scrape itself is counted, for the next scrape.
    again = await scrape(api)
    assert again["memory_plugin_http_requests_total"][request_key("/metrics", "GET", 200)] == 1.0


async def test_the_kubelets_probes_are_counted_apart(api: ContractClient) -> None:
    """Probes (User-Agent kube-probe/...) are not the callers' traffic: their own counter."""
    probe = {"User-Agent": "kube-probe/1.33"}
    assert (await api.call("GET", "/v1/health", headers=probe)).status == 200
    async with api.client.get("/metrics", headers=probe) as response:
        assert response.status == 200
    assert (await api.call("GET", "/v1/health")).status == 200
    samples = await scrape(api)
    assert samples["memory_plugin_probe_requests_total"] == {
        (("route", "/v1/health"), ("status", "200")): 1.0,
        (("route", "/metrics"), ("status", "200")): 1.0,
    }
    assert samples["memory_plugin_http_requests_total"] == {
        request_key("/v1/health", "GET", 200): 1.0,
    }


async def test_embedding_batches_and_backend_operations(api: ContractClient) -> None:
    assert (await api.put_ns(NS)).status == 200
    assert (await api.commit(NS, "one memory on its own")).status == 201
    replies = await asyncio.gather(*(api.commit(NS, f"parallel memory {i}") for i in range(10)))
    assert [r.status for r in replies] == [201] * 10, [r.body for r in replies if r.status != 201]
    assert (await api.search(NS, query="parallel")).status == 200

    samples = await scrape(api)
    stats = api.app[EMBEDDER].stats
    assert stats.texts == 12
    sizes = samples["memory_plugin_embedding_batch_size_sum"][()]
    batches = samples["memory_plugin_embedding_batch_size_count"][()]
    assert (sizes, batches) == (12.0, float(stats.batches))
    assert batches < 12, "concurrent commits should have shared batches"
    assert samples["memory_plugin_embedding_batch_duration_seconds_count"][()] == batches
    assert samples["memory_plugin_embedding_batch_duration_seconds_sum"][()] > 0

    operations = samples["memory_plugin_backend_operation_duration_seconds_count"]
    assert operations[op_key("save_namespace")] == 1.0
    assert operations[op_key("upsert_memory")] == 11.0
    assert operations[op_key("query_memories")] == 1.0  # both pin sides, every namespace
    assert {dict(labels)["outcome"] for labels in operations} == {"ok"}


async def test_a_commit_of_stored_content_is_counted_as_an_embedding_avoided(
    api: ContractClient,
) -> None:
    memory_id = "0b7c2e1a-4f3d-4e5a-9c8b-7a6d5e4f3c2b"
    assert (await api.put_ns(NS)).status == 200
    for kind in ("fact", "summary", "fact"):  # the backfill's retry: same content
        reply = await api.commit(NS, "deploys happen on Tuesdays", id=memory_id, kind=kind)
        assert reply.status == 201
    assert (await api.commit(NS, "deploys moved to Wednesdays", id=memory_id)).status == 201
    samples = await scrape(api)
    assert samples["memory_plugin_embeddings_avoided_total"][()] == 2.0
    assert api.app[EMBEDDER].stats.texts == 2  # the first write and the changed content
    operations = samples["memory_plugin_backend_operation_duration_seconds_count"]
    # the first commit's id is new to a namespace created here: not looked up
    assert operations[op_key("get_stored_memory")] == 3.0


async def test_backend_outage_is_counted_as_unavailable(
    make_app: AppFactory, clock: WallClock
) -> None:
    with refusing_port() as port:
        down = QdrantServerBackend(384, url=f"http://127.0.0.1:{port}", timeout_s=1.0)
        app = make_app(backend=down)
        async with TestClient(TestServer(app)) as client:
            api = ContractClient(client, app, clock)
            assert (await api.call("GET", "/v1/health")).status == 503
            samples = await scrape(api)
    operations = samples["memory_plugin_backend_operation_duration_seconds_count"]
    assert operations == {op_key("ping", "unavailable"): 1.0}
    requests = samples["memory_plugin_http_requests_total"]
    assert requests == {request_key("/v1/health", "GET", 503): 1.0}


async def test_janitor_deletions_are_counted(swept: ContractClient) -> None:
    api = swept
    soon = (api.clock() + timedelta(minutes=1)).isoformat()
    assert (await api.put_ns("org:temporary", "org", expires_at=soon)).status == 200
    assert (await api.commit("org:temporary", "goes with its namespace")).status == 201
    assert (await api.put_ns(NS)).status == 200
    assert (await api.commit(NS, "short lived", expires_at=soon)).status == 201
    assert (await api.commit(NS, "long lived")).status == 201
    before = await scrape(api)
    assert before["memory_plugin_janitor_deleted_total"] == {
        (("kind", "namespace"),): 0.0,
        (("kind", "memory"),): 0.0,
    }
    api.clock.advance(minutes=2)
    deleted: dict[Labels, float] = {}
    async with asyncio.timeout(10):
        while sum(deleted.values()) < 2:
            await asyncio.sleep(0.05)
            samples = await scrape(api)
            deleted = samples["memory_plugin_janitor_deleted_total"]
    # The namespace's own memory goes with it: it is not counted as a memory.
    assert deleted == {(("kind", "namespace"),): 1.0, (("kind", "memory"),): 1.0}
    sweeps = samples["memory_plugin_janitor_sweeps_total"]
    assert sweeps[(("outcome", "ok"),)] >= 1
    assert sweeps[(("outcome", "failed"),)] == 0.0
    assert (
        samples["memory_plugin_backend_operation_duration_seconds_count"][
            op_key("delete_expired_memories")
        ]
        >= 1
    )


async def test_each_app_has_its_own_registry(
    api: ContractClient, make_app: AppFactory, clock: WallClock, tmp_path: Path
) -> None:
    other = make_app(data_dir=tmp_path / "other")
    async with TestClient(TestServer(other)) as client:
        second = ContractClient(client, other, clock)
        assert (await second.call("GET", "/v1/health")).status == 200
        assert (await second.call("GET", "/v1/health")).status == 200
        assert (await api.call("GET", "/v1/health")).status == 200
        ours, theirs = await scrape(api), await scrape(second)
    health = request_key("/v1/health", "GET", 200)
    assert ours["memory_plugin_http_requests_total"] == {health: 1.0}
    assert theirs["memory_plugin_http_requests_total"] == {health: 2.0}


# Every backend operation's label, as the metrics have named them since they exist.
OPERATIONS = {
    *("start", "close", "maintain", "ping", "verify", "accept"),
    *("get_namespace", "get_namespaces", "save_namespace", "delete_namespace"),
    *("list_namespaces", "expired_namespaces"),
    *("get_memory", "get_stored_memory", "upsert_memory", "upsert_batch"),
    *("query_memories", "list_memories"),
    *("delete_memory", "delete_expired_memories"),
    *("iter_memories", "upsert_memories", "place_memories"),
    *("read_store_meta", "write_store_meta"),
    *("prepare", "missing", "fill"),  # vectors filled in place, of either kind
}


def interface_operations() -> set[str]:
    """The coroutines of `VectorBackend` and of its parts: what a backend can be asked."""
    found = set()
    for kind in (VectorBackend, VectorFill, BulkTransfer, StoreMeta):
        for name, member in inspect.getmembers(kind, inspect.isfunction):
            returns = str(inspect.signature(member).return_annotation)
            if not name.startswith("_") and (
                inspect.iscoroutinefunction(member) or "AsyncIterator" in returns
            ):
                found.add(name)
    return found


async def test_instrumented_backend_times_every_operation(tmp_path: Path) -> None:
    """Every operation of the interface and its parts is timed under its own name: one
    added to either is timed without a method of its own in the proxy."""
    seen: set[str] = set()
    backend = instrumented(
        QdrantEdgeBackend(DIM, tmp_path), lambda operation, _, __: seen.add(operation)
    )
    ns, query = "workspace:timed", SearchQuery(unit(1))
    transfer, meta, fill = backend.transfer, backend.store_meta, backend.vector_fill
    assert transfer is not None
    assert meta is not None
    assert fill is not None
    await backend.start()
    try:
        await backend.save_namespace(NamespaceRecord(name=ns, kind="workspace", created_at=T0))
        await backend.upsert_memory(memory(ns, id=MEMORY_ID), MemoryVectors(unit(1)))
        await backend.upsert_batch([])
        await backend.get_namespace(ns)
        await backend.get_namespaces([ns])
        await backend.list_namespaces()
        await backend.expired_namespaces(T0)
        await backend.get_memory(ns, MEMORY_ID)
        await backend.get_stored_memory(ns, MEMORY_ID)
        await backend.query_memories([ns], query, everything(), 5)
        await backend.list_memories([ns], everything(), 5)
        assert [page async for page in transfer.iter_memories(ns, T0)]
        await transfer.upsert_memories([])
        await transfer.place_memories(ns, [(MEMORY_ID, 0)])
        await meta.write_store_meta("timed", "yes")
        await meta.read_store_meta()
        for kind in VectorKind:
            await fill.prepare(kind)
            await fill.missing(kind, None, 5)
            await fill.fill(kind, [])
        await backend.delete_memory(ns, MEMORY_ID)
        await backend.delete_expired_memories(T0)
        await backend.delete_namespace(ns)
        await backend.ping()
        await backend.verify()
        await backend.accept()
        await backend.maintain()
    finally:
        await backend.close()
    assert seen == OPERATIONS == interface_operations()
