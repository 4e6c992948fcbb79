"""Metrics of fair sharing: work in flight and queued, admission, refusals, model waits.

Labels stay bounded: a tenant's kind, a priority and a refusal reason; never a namespace name.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping

from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from plugin.scheduling.admission import REASONS
from plugin.scheduling.admission import Admission
from plugin.scheduling.admission import OverShare
from plugin.scheduling.work import Priority

PREFIX = "memory_plugin"
TENANT_KINDS = ("workspace", "team", "org", "other")
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _ScrapedGauges(Collector):
    """Gauges read when scraped: requests in flight by tenant kind, the admission budget in
    use, texts queued by priority."""

    def __init__(self, admission: Admission, queued: Callable[[], Mapping[Priority, int]]) -> None:
        self._admission, self._queued = admission, queued

    def collect(self) -> Iterator[GaugeMetricFamily]:
        admission = self._admission
        counts = admission.in_flight_by_kind()
        yield _labelled(
            "requests_in_flight",
            "Requests admitted and not yet answered, by the kind of namespace they work for.",
            "tenant_kind",
            {kind: counts.get(kind, 0) for kind in TENANT_KINDS},
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_tenants_in_flight",
            "Namespaces (tenants) with at least one request in flight.",
            value=admission.active_tenants(),
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_admission_queued_seconds",
            "The wait the requests in flight make (requests times the measured cost of one); "
            "at the budget, each namespace is held to an equal share.",
            value=admission.queued_s,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_admission_budget_seconds",
            "The wait the requests in flight may make before each namespace is held to a share.",
            value=admission.shares.budget_s,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_admission_request_cost_seconds",
            "What one more request adds to the wait, as measured while the plugin is busy.",
            value=admission.service_time.seconds,
        )
        waiting = self._queued()
        yield _labelled(
            "embedding_queued_texts",
            "Texts waiting for the model, by priority.",
            "priority",
            {p.name.lower(): waiting.get(p, 0) for p in Priority},
        )


def _labelled(
    name: str, help_text: str, label: str, values: Mapping[str, int]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", help_text, labels=[label])
    for value_label, value in values.items():
        family.add_metric([value_label], value)
    return family


class SharingMetrics:
    """Refusals and queue waits, counted as they happen; in-flight gauges read at scrape."""

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
        self._registry.register(_ScrapedGauges(admission, queued))
