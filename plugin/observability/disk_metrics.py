"""How the store's writes reach its disk, read from its condition at scrape time.

The server holds the last condition the engine worker reported, so a scrape costs no call;
a backend without a disk of its own (`StoreCondition.disk` None) exports none.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from adapters.values import DISK_REFUSALS
from adapters.values import SYNC_BUCKETS
from adapters.values import StoreCondition

PREFIX = "memory_plugin"


class DiskWriteCollector(Collector):
    """The sync histogram, the oldest pending sync's wait, and the writes refused by reason."""

    def __init__(self, condition: Callable[[], StoreCondition]) -> None:
        self._condition = condition

    def collect(self) -> Iterator[Metric]:
        disk = self._condition().disk
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
