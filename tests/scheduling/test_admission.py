"""Admission: the requests in flight weighed in time, decided at once, never for a lone caller.

Each test owns a hand-moved clock, so what the plugin has measured is what the test
made it measure: no sleeps, no timing.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from harness.clocks import ManualClock
from plugin.scheduling.admission import FAIR_SHARE
from plugin.scheduling.admission import INITIAL_S
from plugin.scheduling.admission import LEAST_S
from plugin.scheduling.admission import MODEL_WINDOW_TEXTS
from plugin.scheduling.admission import TENANT_MAX
from plugin.scheduling.admission import Admission
from plugin.scheduling.admission import OverShare
from plugin.scheduling.admission import ServiceTime
from plugin.scheduling.admission import Shares
from plugin.scheduling.work import search_tenant
from plugin.scheduling.work import tenant_kind


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def service_time(clock: ManualClock) -> ServiceTime:
    """The service time of two sessions, on the test's hand-moved clock."""
    return ServiceTime(parallelism=2, clock=clock)


def hold(admission: Admission, stack: ExitStack, tenant: str, count: int) -> None:
    for _ in range(count):
        stack.enter_context(admission.hold(tenant))


def admission_of(
    budget_s: float, cost_s: float, tenant_max: int | None = None
) -> tuple[Admission, list[OverShare]]:
    """An admission whose measured cost of a request is `cost_s` (one session, a model
    that took that long a text over a window of texts)."""
    service_time = ServiceTime(parallelism=1, clock=ManualClock())
    service_time.observe_model(MODEL_WINDOW_TEXTS, cost_s * MODEL_WINDOW_TEXTS)
    refused: list[OverShare] = []
    return Admission(Shares(budget_s, tenant_max), service_time, refused.append), refused


def test_a_lone_tenants_burst_on_an_idle_plugin_is_admitted_whole() -> None:
    """Forty agents of one workspace, each a PUT then a commit, all at once: 80 requests
    of one tenant, well inside a second's work at the cost a fresh plugin assumes."""
    admission = Admission(Shares(budget_s=1.0), ServiceTime(2, ManualClock()))
    assert admission.capacity() == int(1.0 / INITIAL_S)
    with ExitStack() as stack:
        hold(admission, stack, "workspace:busy", 80)
        assert admission.in_flight == 80
        assert admission.queued_s == pytest.approx(80 * INITIAL_S)


def test_a_tenant_alone_may_use_the_whole_budget_and_no_more() -> None:
    admission, refused = admission_of(budget_s=1.0, cost_s=0.1)
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 10)  # ten requests of 0.1 s: the budget
        with pytest.raises(OverShare) as caught:
            admission.check("workspace:a")
    assert caught.value.reason == FAIR_SHARE
    assert caught.value.retry_after_s >= 1
    assert str(caught.value) == (
        "too many requests in flight for namespace workspace:a: 10 already; the plugin has "
        "1.00 s of work queued and each namespace's share is 10 requests; retry shortly"
    )
    assert refused == [caught.value]
    assert admission.in_flight == 0
    assert admission.active_tenants() == 0


def test_a_refusal_comes_only_under_contention_and_to_the_tenant_over_its_share() -> None:
    admission, refused = admission_of(budget_s=1.0, cost_s=0.1)
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 7)
        hold(admission, stack, "workspace:b", 2)
        admission.check("workspace:a")  # 9 of 10: under budget, a may take what b leaves
        hold(admission, stack, "workspace:a", 1)  # the budget is spent: 10 in flight
        with pytest.raises(OverShare) as caught:  # a holds 8 of an equal share of 5
            admission.check("workspace:a")
        assert caught.value.share == 5
        admission.check("workspace:b")  # b holds 2 of its 5: still admitted
        hold(admission, stack, "workspace:b", 3)
        with pytest.raises(OverShare):
            admission.check("workspace:b")
    assert [r.tenant for r in refused] == ["workspace:a", "workspace:b"]


def test_a_tenant_with_nothing_in_flight_is_always_admitted() -> None:
    """The sequential backfill writer: one request at a time is never refused, however
    full the plugin is and however many tenants compete."""
    admission, _ = admission_of(budget_s=0.4, cost_s=0.1)
    with ExitStack() as stack:
        for n in range(10):
            hold(admission, stack, f"workspace:{n}", 1)
        for _ in range(100):
            with admission.hold("workspace:backfill"):
                pass
        assert admission.in_flight == 10


def test_the_budget_adapts_to_a_slower_model(service_time: ServiceTime) -> None:
    """The same burst is admitted on a fast model and held to the budget on one ten
    times slower: the cost of a request follows the model's batches."""
    admission = Admission(Shares(budget_s=1.0), service_time)
    for _ in range(4):  # 5 ms a text, 2 sessions: 2.5 ms
        service_time.observe_model(texts=4, seconds=0.02)
    assert admission.capacity() == 400
    for _ in range(80):  # the node is throttled: each batch now takes ten times as long
        service_time.observe_model(texts=4, seconds=0.2)
    assert service_time.seconds == pytest.approx(0.025, rel=0.01)
    assert admission.capacity() == 40
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 40)
        with pytest.raises(OverShare):
            admission.check("workspace:a")


def test_the_cost_of_a_request_is_the_busy_time_per_answer(
    clock: ManualClock, service_time: ServiceTime
) -> None:
    """Saturated (more in flight than sessions): an answer every 50 ms is 50 ms a
    request, whatever the bottleneck; the model's own, smaller time does not hide it."""
    for _ in range(4):
        service_time.observe_model(4, 0.02)
    for _ in range(64):
        service_time.started()
    for _ in range(60):  # at least 4 in flight throughout: sessions full
        clock.advance(0.05)
        service_time.finished()
    assert service_time.seconds == pytest.approx(0.05)
    assert Admission(Shares(budget_s=1.0), service_time).capacity() == 20


def test_light_load_counts_in_proportion_to_the_sessions_in_use(
    clock: ManualClock, service_time: ServiceTime
) -> None:
    """One request in flight at a time on two sessions, each admitted as the last is
    answered, one every 10 ms: half of those 10 ms is the plugin's cost."""
    service_time.started()
    for _ in range(40):
        clock.advance(0.01)
        service_time.started()  # the next arrives as this one is answered
        service_time.finished()
    assert service_time.seconds == pytest.approx(0.005)


def test_a_bursts_wait_for_its_first_answer_is_not_a_cost(
    clock: ManualClock, service_time: ServiceTime
) -> None:
    """Forty requests arrive at once on an idle plugin; the first answer comes after
    100 ms (one request's latency), then one every 4 ms. The cost is 4 ms, not the
    100 ms spread over the first few answers."""
    for _ in range(40):
        service_time.started()
    clock.advance(0.1)
    service_time.finished()
    for _ in range(39):
        clock.advance(0.004)
        service_time.finished()
    assert service_time.seconds == pytest.approx(0.004)


def test_sequential_requests_teach_nothing_of_a_busy_plugins_cost(
    clock: ManualClock, service_time: ServiceTime
) -> None:
    """One caller at a time: each answer is the first of its spell, so the cost stays
    what the model measured (or the start-up guess), never one request's latency."""
    for _ in range(64):
        service_time.started()
        clock.advance(0.05)
        service_time.finished()
    assert service_time.seconds == INITIAL_S


def test_an_operators_cap_holds_however_idle_the_plugin() -> None:
    admission, _ = admission_of(budget_s=1.0, cost_s=0.001, tenant_max=4)
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 4)
        with pytest.raises(OverShare) as caught:
            admission.check("workspace:a")
    assert caught.value.reason == TENANT_MAX
    assert "at most 4 requests of one namespace are served at once" in str(caught.value)


def test_a_request_that_fails_gives_its_place_back() -> None:
    admission, _ = admission_of(budget_s=0.1, cost_s=0.1)
    with pytest.raises(RuntimeError), admission.hold("workspace:a"):
        raise RuntimeError("the handler failed")
    assert admission.in_flight == 0
    with admission.hold("workspace:a"):
        assert admission.in_flight_by_kind() == {"workspace": 1}


def test_a_search_works_for_the_callers_own_workspace() -> None:
    assert search_tenant(["team:t", "workspace:w", "org:o"]) == "workspace:w"
    assert search_tenant(["team:t", "org:o"]) == "team:t"
    assert [tenant_kind(n) for n in ("workspace:w", "team:t", "org:o", "agent:x")] == [
        "workspace",
        "team",
        "org",
        "other",
    ]


def test_a_held_request_makes_its_backend_calls_for_its_tenant() -> None:
    """What the embedded store's engine turns go round robin by (adapters/callers.py):
    each request its own `Caller`, its tenant and a `Waiting` of its own."""
    admission, _ = admission_of(budget_s=0.2, cost_s=0.1)
    with admission.hold("workspace:a") as first, admission.hold("workspace:b") as second:
        assert (first.tenant, second.tenant) == ("workspace:a", "workspace:b")
        assert first.waiting is not None
        assert second.waiting is not None
        assert first.waiting is not second.waiting
        assert first.waiting.queue is None  # waiting nowhere yet


def test_a_clock_too_coarse_to_see_busy_time_still_gives_a_cost(service_time: ServiceTime) -> None:
    """Windows whose busy time reads zero: the cost is the least one, never zero."""
    admission = Admission(Shares(budget_s=1.0), service_time)
    service_time.started()
    for _ in range(64):  # always one in flight, the clock standing still
        service_time.started()
        service_time.finished()
    assert service_time.seconds == LEAST_S
    assert admission.capacity() == int(1.0 / LEAST_S)
