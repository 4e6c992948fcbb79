"""Prometheus metrics: one registry per app, served as text on `GET /metrics`.

A registry of its own lets tests build apps side by side; labels come from fixed sets, never
a namespace, an id or anything a caller chose.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from adapters.values import SearchMode
from adapters.values import StoreCondition
from plugin.core.search import NEWEST
from plugin.core.service import SweepReport
from plugin.observability.disk_metrics import DiskWriteCollector
from plugin.observability.sharing_metrics import SharingMetrics

# The 0.0.4 text format, which every scraper understands.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
PREFIX = "memory_plugin"
UNMATCHED_ROUTE = "unmatched"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# 1.5 s is the default backend deadline, 2 s the platform's client timeout.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0)
BACKEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
EMBEDDING_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    """Every metric the plugin exports, registered in this instance's own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = self._counter(
            "http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
        )
        self.probe_requests = self._counter(
            "probe_requests",
            "Requests of the kubelet's probes (User-Agent kube-probe/), by route template and"
            " status; not counted in http_requests.",
            ["route", "status"],
        )
        self.request_seconds = self._histogram(
            "http_request_duration_seconds",
            "Time from receiving a request to having its response, by route and method.",
            REQUEST_BUCKETS,
            ["route", "method"],
        )
        self.backend_seconds = self._histogram(
            "backend_operation_duration_seconds",
            "Duration of one VectorBackend call, by operation and outcome.",
            BACKEND_BUCKETS,
            ["operation", "outcome"],
        )
        self.embedding_seconds = self._histogram(
            "embedding_batch_duration_seconds",
            "Time the model took to embed one batch of texts.",
            EMBEDDING_BUCKETS,
        )
        self.embedding_batch_size = self._histogram(
            "embedding_batch_size",
            "Texts per embedding batch (concurrent requests are merged).",
            BATCH_SIZE_BUCKETS,
        )
        self.janitor_deleted = self._counter(
            "janitor_deleted",
            "Expired namespaces and memories the janitor deleted, by kind.",
            ("kind",),
        )
        self.janitor_sweeps = self._counter(
            "janitor_sweeps", "Janitor sweeps, by outcome (ok or failed).", ["outcome"]
        )
        self.vectors_reused = self._counter(
            "embeddings_avoided",
            "Commits whose content was already stored as is: its vector was reused, the model"
            " not asked.",
        )
        self.keywords_indexed = self._counter(
            "keyword_vectors_indexed",
            "Stored memories given their keyword vector after the fact"
            " (plugin/upgrades/vector_fill.py).",
        )
        self.tokens_indexed = Counter(
            f"{PREFIX}_token_vectors_indexed",
            "Stored memories given their token vectors after the fact"
            " (plugin/upgrades/vector_fill.py).",
            registry=self.registry,
        )
        self.searches = self._counter(
            "searches",
            "Searches answered, by what ranked them: a search mode, or newest (no query).",
            ("ranking",),
        )
        self.sharing = SharingMetrics(self.registry)
        # Labelled children by label values: `labels()` costs a lock and a tuple build on
        # every call, and these are looked up several times per request.
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._backend_children: dict[tuple[str, str], Any] = {}
        # Export zeros from the start: "no deletions yet" differs from "no data".
        for kind in ("namespace", "memory"):
            self.janitor_deleted.labels(kind)
        for outcome in ("ok", "failed"):
            self.janitor_sweeps.labels(outcome)
        for ranking in (*SearchMode, NEWEST):
            self.searches.labels(ranking)

    def _counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(f"{PREFIX}_{name}", doc, labels, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(f"{PREFIX}_{name}", doc, labels, buckets=buckets, registry=self.registry)

    def watch_condition(self, condition: Callable[[], StoreCondition]) -> None:
        """Gauges read from the store's condition at scrape time (no I/O: it is cached)."""
        Gauge(
            f"{PREFIX}_unreadable_namespaces",
            "Namespaces whose stored data cannot be read: 503 for them, left out of searches.",
            registry=self.registry,
        ).set_function(lambda: len(condition().unreadable_namespaces))
        Gauge(
            f"{PREFIX}_store_problems",
            "Problems the store serves around (e.g. 1 while the data volume is full).",
            registry=self.registry,
        ).set_function(lambda: len(condition().problems))
        self.registry.register(DiskWriteCollector(condition))

    def watch_rerank_share(self, share: Callable[[], float]) -> None:
        """The rerank dimmer's share, read at scrape time (plugin/scheduling/dimmer.py)."""
        Gauge(
            f"{PREFIX}_rerank_share",
            "The share of searches the default ranking reranks now (1: all; under load less,"
            " the rest ranked by hybrid).",
            registry=self.registry,
        ).set_function(share)

    def observe_search(self, ranking: str) -> None:
        self.searches.labels(ranking).inc()

    def observe_probe(self, route: str | None, status: int) -> None:
        self.probe_requests.labels(route or UNMATCHED_ROUTE, str(status)).inc()

    def observe_request(self, route: str | None, method: str, status: int, seconds: float) -> None:
        route_label = route or UNMATCHED_ROUTE
        method_label = method if method in KNOWN_METHODS else "other"
        key = (route_label, method_label, status)
        children = self._request_children.get(key)
        if children is None:  # label sets are bounded (module docstring), so is this dict
            children = (
                self.requests.labels(route_label, method_label, str(status)),
                self.request_seconds.labels(route_label, method_label),
            )
            self._request_children[key] = children
        count, duration = children
        count.inc()
        duration.observe(seconds)

    def observe_backend(self, operation: str, outcome: str, seconds: float) -> None:
        child = self._backend_children.get((operation, outcome))
        if child is None:
            child = self.backend_seconds.labels(operation, outcome)
            self._backend_children[(operation, outcome)] = child
        child.observe(seconds)

    def observe_embedding(self, size: int, seconds: float) -> None:
        self.embedding_batch_size.observe(size)
        self.embedding_seconds.observe(seconds)

    def observe_vector_reused(self) -> None:
        self.vectors_reused.inc()

    def observe_keywords_indexed(self, count: int) -> None:
        self.keywords_indexed.inc(count)

    def observe_tokens_indexed(self, count: int) -> None:
        self.tokens_indexed.inc(count)

    def observe_sweep(self, report: SweepReport | None) -> None:
        """Count one sweep; `None` means it failed."""
        if report is None:
            self.janitor_sweeps.labels("failed").inc()
            return
        self.janitor_sweeps.labels("ok").inc()
        self.janitor_deleted.labels("namespace").inc(report.namespaces_deleted)
        self.janitor_deleted.labels("memory").inc(report.memories_deleted)

    def render(self) -> bytes:
        return generate_latest(self.registry)
