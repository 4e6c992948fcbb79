"""Admission at the door: refuse only the work that would wait past the deadline.

The queue is weighed in time (`ServiceTime`: the larger of busy time per answer and the
model's time per text over its sessions), and a tenant over its share of that wait is refused
at once (429, `OverShare`); the rules: docs/behaviour.md, "Fair sharing".
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from adapters.callers import Caller
from adapters.callers import TooLate
from adapters.callers import Waiting
from adapters.callers import acting_for
from plugin.core.service_errors import DeadlinePassed
from plugin.scheduling.work import tenant_kind

TENANT_MAX = "tenant_max"
FAIR_SHARE = "fair_share"
DEADLINE = "deadline"
REASONS = (TENANT_MAX, FAIR_SHARE, DEADLINE)
# A request's cost before anything was measured: a short text's model time on one core.
INITIAL_S = 0.005
# The least a request is taken to cost (a clock too coarse for a window reads zero).
LEAST_S = 0.0001
WINDOW_REQUESTS = 32
WINDOW_S = 0.1
LEAST_WINDOW_REQUESTS = 8
MODEL_WINDOW_TEXTS = 16
SMOOTHING = 0.3  # weight of the newest window's sample


class ServiceTime:
    """Seconds of the plugin's time per request, learnt from the requests in flight."""

    def __init__(self, parallelism: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self.parallelism = max(1, parallelism)
        self._clock = clock
        self._busy_s: float | None = None  # busy time per answer, smoothed
        self._model_s: float | None = None  # the model's time per text (one session), smoothed
        self._in_flight = 0
        self._since = clock()
        self._window_busy = 0.0
        self._window_answered = 0
        self._answering = False  # this busy spell has had its first answer
        self._model_window_s = 0.0
        self._model_window_texts = 0

    @property
    def seconds(self) -> float:
        """The estimate: what one more request in the queue adds to everybody's wait."""
        model_s = None if self._model_s is None else self._model_s / self.parallelism
        measured = [s for s in (self._busy_s, model_s) if s is not None]
        return max(LEAST_S, *measured) if measured else INITIAL_S

    def started(self) -> None:
        """A request was admitted."""
        self._account()
        self._in_flight += 1

    def finished(self) -> None:
        """A request admitted earlier was answered (or failed)."""
        self._account()
        self._in_flight -= 1
        first, self._answering = not self._answering, self._in_flight > 0
        if first:  # what came before it was latency, not cost
            return
        self._window_answered += 1
        answered = self._window_answered
        if answered >= WINDOW_REQUESTS or (
            answered >= LEAST_WINDOW_REQUESTS and self._window_busy >= WINDOW_S
        ):
            self._busy_s = _smoothed(self._busy_s, self._window_busy / self._window_answered)
            self._window_busy, self._window_answered = 0.0, 0

    def observe_model(self, texts: int, seconds: float) -> None:
        """The model embedded `texts` texts in one batch, in `seconds`."""
        self._model_window_s += seconds
        self._model_window_texts += texts
        if self._model_window_texts >= MODEL_WINDOW_TEXTS:
            sample = self._model_window_s / self._model_window_texts
            self._model_s = _smoothed(self._model_s, sample)
            self._model_window_s, self._model_window_texts = 0.0, 0

    def _account(self) -> None:
        now = self._clock()
        if self._in_flight and self._answering:
            share = min(self._in_flight, self.parallelism) / self.parallelism
            self._window_busy += (now - self._since) * share
        self._since = now


def _smoothed(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + SMOOTHING * (sample - previous)


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


class Admission:
    """Counts requests in flight per tenant and decides, at once, whether one more may start;
    `on_refused` is told of each refusal before it is raised (the metrics count them)."""

    def __init__(
        self,
        shares: Shares,
        service_time: ServiceTime,
        on_refused: Callable[[OverShare], None] | None = None,
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
        plugin's `parallelism` places. The rerank dimmer's signal: a count, not a time,
        because what one queued request costs varies with batching and contention by more
        than the queue of a loaded plugin differs from a saturated one's."""
        return max(0, self._total - self.service_time.parallelism)

    def capacity(self) -> int:
        """Requests in flight that fill the budget at the measured cost (at least 1)."""
        return max(1, int(self.shares.budget_s / self.service_time.seconds))

    def active_tenants(self) -> int:
        return len(self._in_flight)

    def in_flight_by_kind(self) -> dict[str, int]:
        """Requests in flight by tenant kind (workspace, team, org, other): for metrics."""
        counts: Counter[str] = Counter()
        for tenant, count in self._in_flight.items():
            counts[tenant_kind(tenant)] += count
        return dict(counts)

    def fair_share(self, tenant: str, capacity: int) -> int:
        """What `tenant` may hold while the budget (`capacity` requests) is spent."""
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
        request's `Caller`, whom the block's backend calls are for (adapters/callers.py)."""
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
