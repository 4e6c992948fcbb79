"""Prometheus metrics: one registry per app, served as text on `GET /metrics`.

A registry of its own lets tests build apps side by side; labels come from fixed sets, never
a namespace, an id or anything a caller chose.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from adapters.values import DISK_REFUSALS
from adapters.values import SYNC_BUCKETS
from adapters.values import SearchMode
from adapters.values import StoreCondition
from plugin.core.search import NEWEST
from plugin.core.service import SweepReport
from plugin.scheduling.admission import REASONS
from plugin.scheduling.admission import Admission
from plugin.scheduling.admission import OverShare
from plugin.scheduling.work import Priority

# The 0.0.4 text format, which every scraper understands.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
PREFIX = "memory_plugin"
UNMATCHED_ROUTE = "unmatched"
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
TENANT_KINDS = ("workspace", "team", "org", "other")
# 1.5 s is the default backend deadline, 2 s the platform's client timeout.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0)
BACKEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
EMBEDDING_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _Scraped(Collector):
    """Metric families made by `families()` when scraped: reading what is cached costs no I/O."""

    def __init__(self, families: Callable[[], Iterator[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return self._families()


def _labelled(name: str, doc: str, label: str, values: Mapping[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=[label])
    for value_label, value in values.items():
        family.add_metric([value_label], value)
    return family


def _disk_families(condition: Callable[[], StoreCondition]) -> Iterator[Metric]:
    """How the store's writes reach its disk, from the last condition its engine worker
    reported; none for a backend without a disk of its own."""
    disk = condition().disk
    if disk is None:
        return
    bounds = [f"{bound:g}" for bound in SYNC_BUCKETS] + ["+Inf"]
    yield HistogramMetricFamily(
        f"{PREFIX}_store_sync_duration_seconds",
        "Time one sync of the store's write-ahead logs and counts to its disk took.",
        buckets=list(zip(bounds, disk.sync_buckets, strict=True)),
        sum_value=disk.sync_seconds,
    )
    yield GaugeMetricFamily(
        f"{PREFIX}_store_sync_waiting_seconds",
        "How long the oldest sync not yet done has waited (0: none pending); every write"
        " waits for a sync before it is answered.",
        value=disk.sync_waiting_s,
    )
    refused = CounterMetricFamily(
        f"{PREFIX}_store_writes_refused",
        "Writes answered 503 because of the disk, by reason: volume_full, sync_timeout"
        " (the deadline passed while the write waited for its sync), sync_failed,"
        " disk_stalled (refused at once: the sync under way had stalled).",
        labels=["reason"],
    )
    for reason, count in zip(DISK_REFUSALS, disk.refused, strict=True):
        refused.add_metric([reason], count)
    yield refused


def _sharing_families(
    admission: Admission, queued: Callable[[], Mapping[Priority, int]]
) -> Iterator[Metric]:
    """Requests in flight by tenant kind, the admission budget in use, texts queued by priority."""
    counts = admission.in_flight_by_kind()
    yield _labelled(
        "requests_in_flight",
        "Requests admitted and not yet answered, by the kind of namespace they work for.",
        "tenant_kind",
        {kind: counts.get(kind, 0) for kind in TENANT_KINDS},
    )
    for name, doc, value in (
        (
            "tenants_in_flight",
            "Namespaces (tenants) with at least one request in flight.",
            admission.active_tenants(),
        ),
        (
            "admission_queued_seconds",
            "The wait the requests in flight make (requests times the measured cost of one); "
            "at the budget, each namespace is held to an equal share.",
            admission.queued_s,
        ),
        (
            "admission_budget_seconds",
            "The wait the requests in flight may make before each namespace is held to a share.",
            admission.shares.budget_s,
        ),
        (
            "admission_request_cost_seconds",
            "What one more request adds to the wait, as measured while the plugin is busy.",
            admission.service_time.seconds,
        ),
    ):
        yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=value)
    waiting = queued()
    yield _labelled(
        "embedding_queued_texts",
        "Texts waiting for the model, by priority.",
        "priority",
        {p.name.lower(): waiting.get(p, 0) for p in Priority},
    )


class SharingMetrics:
    """Fair sharing's refusals and queue waits, counted as they happen; in-flight gauges read
    at scrape. Labels: a tenant's kind, a priority, a refusal reason; never a namespace."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self.refused = Counter(
            f"{PREFIX}_requests_refused",
            "Requests refused at once with 429 (a namespace over its share), by reason.",
            ["reason"],
            registry=registry,
        )
        self.queue_wait = Histogram(
            f"{PREFIX}_embedding_queue_wait_seconds",
            "Time a text waited for a batch of the model, by priority.",
            ["priority"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self._waits = {p: self.queue_wait.labels(p.name.lower()) for p in Priority}
        for reason in REASONS:
            self.refused.labels(reason)

    def observe_refused(self, refusal: OverShare) -> None:
        self.refused.labels(refusal.reason).inc()

    def observe_wait(self, priority: Priority, seconds: float) -> None:
        self._waits[priority].observe(seconds)

    def watch(self, admission: Admission, queued: Callable[[], Mapping[Priority, int]]) -> None:
        self._registry.register(_Scraped(lambda: _sharing_families(admission, queued)))


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
        self.observe_vector_reused = self._counter(
            "embeddings_avoided",
            "Commits whose content was already stored as is: its vector was reused, the model"
            " not asked.",
        ).inc
        self.observe_keywords_indexed = self._filled("keyword_vectors_indexed", "keyword vector")
        self.observe_tokens_indexed = self._filled("token_vectors_indexed", "token vectors")
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

    def _filled(self, name: str, what: str) -> Callable[[float], None]:
        """Counts stored memories given their `what` after the fact."""
        doc = f"Stored memories given their {what} after the fact (plugin/upgrades/vector_fill.py)."
        return self._counter(name, doc).inc

    def _histogram(
        self, name: str, doc: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(f"{PREFIX}_{name}", doc, labels, buckets=buckets, registry=self.registry)

    def _gauge(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A gauge read at scrape time from `read` (no I/O: what it reads is cached)."""
        Gauge(f"{PREFIX}_{name}", doc, registry=self.registry).set_function(read)

    def watch_condition(self, condition: Callable[[], StoreCondition]) -> None:
        """Gauges read from the store's condition at scrape time, and its disk's writes."""
        self._gauge(
            "unreadable_namespaces",
            "Namespaces whose stored data cannot be read: 503 for them, left out of searches.",
            lambda: len(condition().unreadable_namespaces),
        )
        self._gauge(
            "store_problems",
            "Problems the store serves around (e.g. 1 while the data volume is full).",
            lambda: len(condition().problems),
        )
        self.registry.register(_Scraped(lambda: _disk_families(condition)))

    def watch_rerank_share(self, share: Callable[[], float]) -> None:
        """The rerank dimmer's share, read at scrape time (plugin/scheduling/dimmer.py)."""
        self._gauge(
            "rerank_share",
            "The share of searches the default ranking reranks now (1: all; under load less,"
            " the rest ranked by hybrid).",
            share,
        )

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
