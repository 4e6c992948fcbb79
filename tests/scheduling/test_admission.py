"""Admission: shares of the requests in flight, decided at once, never for a lone caller."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from adapters.callers import current_caller
from plugin.scheduling.admission import FAIR_SHARE, TENANT_MAX, Admission, OverShare, Shares
from plugin.scheduling.work import search_tenant, tenant_kind


def hold(admission: Admission, stack: ExitStack, tenant: str, count: int) -> None:
    for _ in range(count):
        stack.enter_context(admission.hold(tenant))


def test_a_tenant_alone_may_use_everything_up_to_its_cap() -> None:
    refused: list[OverShare] = []
    admission = Admission(Shares(capacity=8, tenant_max=4), on_refused=refused.append)
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 4)
        with pytest.raises(OverShare) as caught:
            admission.check("workspace:a")
    assert caught.value.reason == TENANT_MAX
    assert "workspace:a" in str(caught.value)
    assert caught.value.retry_after_s >= 1
    assert refused == [caught.value]
    assert admission.in_flight == 0
    assert admission.active_tenants() == 0


def test_when_full_each_tenant_is_held_to_an_equal_share() -> None:
    admission = Admission(Shares(capacity=8, tenant_max=8))
    with ExitStack() as stack:
        hold(admission, stack, "workspace:a", 6)
        hold(admission, stack, "workspace:b", 2)  # now full: 8 in flight
        with pytest.raises(OverShare) as caught:  # a holds 6 of an equal share of 4
            admission.check("workspace:a")
        assert caught.value.reason == FAIR_SHARE
        admission.check("workspace:b")  # b holds 2 of its 4
        hold(admission, stack, "workspace:b", 2)
        with pytest.raises(OverShare):
            admission.check("workspace:b")


def test_a_tenant_with_nothing_in_flight_is_always_admitted() -> None:
    """The sequential backfill writer: one request at a time is never refused, however
    full the plugin is and however many tenants compete."""
    admission = Admission(Shares(capacity=4, tenant_max=4))
    with ExitStack() as stack:
        for n in range(10):
            hold(admission, stack, f"workspace:{n}", 1)
        for _ in range(100):
            with admission.hold("workspace:backfill"):
                pass
        assert admission.in_flight == 10


def test_a_request_that_fails_gives_its_place_back() -> None:
    admission = Admission(Shares(capacity=1, tenant_max=1))
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
    """What the embedded store's engine turns go round robin by (adapters/callers.py)."""
    admission = Admission(Shares(capacity=4, tenant_max=2))
    assert current_caller.get() is None
    with admission.hold("workspace:a"):
        assert current_caller.get() == "workspace:a"
        with admission.hold("workspace:b"):
            assert current_caller.get() == "workspace:b"
        assert current_caller.get() == "workspace:a"
    assert current_caller.get() is None
    with pytest.raises(OverShare), admission.hold("workspace:a"), admission.hold("workspace:a"):
        admission.check("workspace:a")  # a third: over tenant_max
    assert current_caller.get() is None  # a refusal leaves nothing behind
