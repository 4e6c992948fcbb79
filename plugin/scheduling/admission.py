"""Admission at the door: refuse only the work that would wait past the deadline.

The queue is weighed in time, and a tenant over its share of that wait is refused at once
(429, `OverShare`); the rules: docs/behaviour.md, "Fair sharing".
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from adapters.callers import Caller
from adapters.callers import TooLate
from adapters.callers import Waiting
from adapters.callers import acting_for
from plugin.core.service_errors import DeadlinePassed
from plugin.scheduling.service_time import ServiceTime
from plugin.scheduling.work import tenant_kind

TENANT_MAX = "tenant_max"
FAIR_SHARE = "fair_share"
DEADLINE = "deadline"
REASONS = (TENANT_MAX, FAIR_SHARE, DEADLINE)


@dataclass(frozen=True, slots=True)
class Shares:
    budget_s: float  # the longest wait the queue may hold before shares are enforced
    tenant_max: int | None = None  # requests one tenant may have in flight, ever


class OverShare(Exception):
    """A tenant asked for more than its share; it should retry after `retry_after_s`."""

    def __init__(
        self, tenant: str, reason: str, in_flight: int, share: int, wait_s: float = 0.0
    ) -> None:
        if reason == DEADLINE:
            message = (
                f"the plugin is over capacity: this request of namespace {tenant} waited its "
                "turn behind other requests until too little of its time was left; retry shortly"
            )
        else:
            why = (
                f"at most {share} requests of one namespace are served at once"
                if reason == TENANT_MAX
                else f"the plugin has {wait_s:.2f} s of work queued and each namespace's "
                f"share is {share} requests"
            )
            message = (
                f"too many requests in flight for namespace {tenant}: {in_flight} already; "
                f"{why}; retry shortly"
            )
        super().__init__(message)
        self.tenant = tenant
        self.reason = reason
        self.in_flight = in_flight
        self.share = share
        self.retry_after_s = 1


# Called with each refusal, before it is raised (the metrics count them by reason).
RefusalObserver = Callable[[OverShare], None]


class Admission:
    """Counts requests in flight per tenant and decides, at once, whether one more may start."""

    def __init__(
        self,
        shares: Shares,
        service_time: ServiceTime,
        on_refused: RefusalObserver | None = None,
    ) -> None:
        self.shares = shares
        self.service_time = service_time
        self._in_flight: dict[str, int] = {}
        self._total = 0
        self._on_refused = on_refused

    @property
    def in_flight(self) -> int:
        return self._total

    @property
    def queued_s(self) -> float:
        """The wait the requests in flight make: what a newcomer would queue behind."""
        return self._total * self.service_time.seconds

    def queued_ahead(self) -> int:
        """The requests a request already admitted waits behind: those in flight beyond the
        plugin's `parallelism` places (as in a queue of several servers). The rerank
        dimmer's signal (plugin/scheduling/dimmer.py): a count, not a time, because what
        one queued request costs varies with batching and contention by more than the
        queue of a loaded plugin differs from a saturated one's."""
        return max(0, self._total - self.service_time.parallelism)

    def capacity(self) -> int:
        """Requests in flight that fill the budget at the measured cost (at least 1)."""
        return max(1, int(self.shares.budget_s / self.service_time.seconds))

    def active_tenants(self) -> int:
        return len(self._in_flight)

    def in_flight_by_kind(self) -> dict[str, int]:
        """Requests in flight by tenant kind (workspace, team, org, other): for metrics."""
        counts: dict[str, int] = {}
        for tenant, count in self._in_flight.items():
            kind = tenant_kind(tenant)
            counts[kind] = counts.get(kind, 0) + count
        return counts

    def fair_share(self, tenant: str, capacity: int) -> int:
        """What `tenant` may hold while the budget (`capacity` requests) is spent: an
        equal part of it."""
        active = len(self._in_flight) + (tenant not in self._in_flight)
        return max(1, capacity // active)

    def check(self, tenant: str) -> None:
        """Raise `OverShare` unless one more request of `tenant` may start now."""
        mine = self._in_flight.get(tenant, 0)
        if mine == 0:
            return
        cap = self.shares.tenant_max
        if cap is not None and mine >= cap:
            self._refuse(OverShare(tenant, TENANT_MAX, mine, cap))
        capacity = self.capacity()
        if self._total >= capacity:
            share = self.fair_share(tenant, capacity)
            if mine >= share:
                self._refuse(OverShare(tenant, FAIR_SHARE, mine, share, self.queued_s))

    @contextmanager
    def hold(self, tenant: str) -> Iterator[Caller]:
        """Admit one request of `tenant` (or raise `OverShare`) for the `with` block; the
        request's `Caller`, whom the block's backend calls are for (adapters/callers.py:
        where they wait for a shared resource, tenants take turns)."""
        self.check(tenant)
        self._in_flight[tenant] = self._in_flight.get(tenant, 0) + 1
        self._total += 1
        self.service_time.started()
        waiting = Waiting()
        caller = Caller(tenant, waiting)
        try:
            with acting_for(caller):
                yield caller
        except (DeadlinePassed, TooLate) as error:
            # TooLate: refused by a queue that served others while it waited
            if isinstance(error, DeadlinePassed) and not waiting.behind_others():
                raise
            mine = self._in_flight[tenant] - 1
            refusal = OverShare(tenant, DEADLINE, mine, self.fair_share(tenant, self.capacity()))
            self._refuse(refusal, error)
        finally:
            self.service_time.finished()
            self._total -= 1
            left = self._in_flight[tenant] - 1
            if left:
                self._in_flight[tenant] = left
            else:
                del self._in_flight[tenant]

    def _refuse(self, refusal: OverShare, cause: BaseException | None = None) -> None:
        if self._on_refused is not None:
            self._on_refused(refusal)
        raise refusal from cause
