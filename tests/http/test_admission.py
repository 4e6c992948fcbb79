"""429 for a namespace over its share, at once, in the contract's envelope; others served.

The app runs the real embedded store with a gated encoder: a request admitted
waits inside the model until the test opens the gate, so what is in flight when
the next request arrives is decided by the test, not by timing. Admission's clock
stands still (`ticks`), so the cost of a request is what the test tells it: a model
window of a second a text, against a budget of two seconds, fills the budget with two
requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.clocks import ManualClock
from harness.clocks import WallClock
from harness.platform_client import Breaker
from harness.platform_client import CallError
from harness.platform_client import surfaced
from plugin.http import middleware
from plugin.http.app import create_app
from plugin.http.keys import ADMISSION
from plugin.scheduling.admission import INITIAL_S
from plugin.settings import Settings
from tests.support.app import ContractClient
from tests.support.app import Reply
from tests.support.app import served
from tests.support.encoders import GatedEncoder


@pytest.fixture
def gated() -> GatedEncoder:
    return GatedEncoder()


@pytest.fixture
async def api(
    settings: Settings, clock: WallClock, gated: GatedEncoder, request: pytest.FixtureRequest
) -> AsyncIterator[ContractClient]:
    marker = request.node.get_closest_marker("settings")
    budget_marked = marker is not None and "admission_budget_s" in marker.kwargs

    def build() -> Any:
        budget = {} if budget_marked else {"admission_budget_s": 2.0}
        return create_app(
            settings.model_copy(update=budget), encoder=gated, clock=clock, ticks=ManualClock()
        )

    async for client in served(build, clock):
        gated.gate.set()  # set-up writes pass; each test closes it again
        for name in ("workspace:a", "workspace:b", "workspace:c", "team:shared"):
            assert (await client.put_ns(name)).status == 200
        gated.gate.clear()
        if not budget_marked:
            client.app[ADMISSION].service_time.observe_model(texts=16, seconds=16.0)
        yield client
        gated.gate.set()


async def held(api: ContractClient, count: int, name: str) -> list[asyncio.Task[Reply]]:
    """`count` commits into `name`, admitted and waiting for the (gated) model."""
    before = api.app[ADMISSION].in_flight
    tasks = [asyncio.create_task(api.commit(name, f"held {n}")) for n in range(count)]
    await held_until(api, before + count)
    return tasks


async def held_until(api: ContractClient, in_flight: int) -> None:
    """Return once `in_flight` requests are admitted (the gated model holds them)."""
    admission = api.app[ADMISSION]
    async with asyncio.timeout(5):
        while admission.in_flight < in_flight:  # noqa: ASYNC110 (nothing to wait on)
            await asyncio.sleep(0.001)


async def test_a_namespace_over_its_share_is_refused_at_once_and_others_are_served(
    api: ContractClient, gated: GatedEncoder, caplog: pytest.LogCaptureFixture
) -> None:
    flood = await held(api, 2, "workspace:a")
    with caplog.at_level(logging.INFO):
        refused = await api.commit("workspace:a", "one too many")
    assert refused.status == 429
    assert refused.headers["Retry-After"] == "1"
    assert refused.body == {
        "code": "unavailable",
        "message": "too many requests in flight for namespace workspace:a: 2 already; "
        "the plugin has 2.00 s of work queued and each namespace's share is 2 requests; "
        "retry shortly",
    }
    lines = [r for r in caplog.records if r.name == "memory_plugin.admission"]
    assert [getattr(r, "namespace", None) for r in lines] == ["workspace:a"]
    assert not [r for r in caplog.records if r.name == "memory_plugin.access" and r.status == 429]
    other = asyncio.create_task(api.commit("workspace:b", "a neighbour writes"))
    gated.gate.set()
    assert (await other).status == 201
    assert [(await task).status for task in flood] == [201, 201]
    assert (await api.commit("workspace:a", "served again")).status == 201


async def test_a_full_plugin_holds_each_namespace_to_an_equal_share(
    api: ContractClient, gated: GatedEncoder
) -> None:
    flood = await held(api, 1, "workspace:a") + await held(api, 1, "workspace:b")
    refused = await api.commit("workspace:a", "over an equal share")
    assert refused.status == 429
    assert refused.body == {
        "code": "unavailable",
        "message": "too many requests in flight for namespace workspace:a: 1 already; "
        "the plugin has 2.00 s of work queued and each namespace's share is 1 requests; "
        "retry shortly",
    }
    newcomer = asyncio.create_task(api.commit("workspace:c", "nothing in flight yet"))
    gated.gate.set()
    assert (await newcomer).status == 201
    assert {(await task).status for task in flood} == {201}


async def test_a_search_counts_against_the_callers_workspace_not_a_shared_namespace(
    api: ContractClient, gated: GatedEncoder
) -> None:
    flood = await held(api, 2, "workspace:a")
    mine = await api.search("team:shared", "workspace:a", query="anything")
    assert mine.status == 429
    assert "namespace workspace:a" in mine.body["message"]
    neighbour = asyncio.create_task(api.search("team:shared", "workspace:b", query="anything"))
    gated.gate.set()
    assert (await neighbour).status == 200
    assert {(await task).status for task in flood} == {201}


async def test_refusals_are_counted_by_reason(api: ContractClient, gated: GatedEncoder) -> None:
    flood = await held(api, 2, "workspace:a")
    assert (await api.commit("workspace:a", "refused")).status == 429
    async with api.client.get("/metrics") as response:
        text = await response.text()
    gated.gate.set()
    await asyncio.gather(*flood)
    assert 'memory_plugin_requests_refused_total{reason="tenant_max"} 0.0' in text
    assert 'memory_plugin_requests_refused_total{reason="fair_share"} 1.0' in text
    assert 'memory_plugin_requests_in_flight{tenant_kind="workspace"} 2.0' in text
    assert "memory_plugin_admission_queued_seconds 2.0" in text
    assert "memory_plugin_admission_budget_seconds 2.0" in text
    assert "memory_plugin_admission_request_cost_seconds 1.0" in text
    route = 'route="/v1/namespaces/{name}/memories"'
    assert f'memory_plugin_http_requests_total{{method="POST",{route},status="429"}} 1.0' in text


async def test_the_platform_client_gives_the_refusal_to_that_caller_and_keeps_its_breaker_closed(
    api: ContractClient, gated: GatedEncoder
) -> None:
    """NOTES.md's client: a 4xx is that call's error and resets the breaker's count."""
    breaker = Breaker()
    for status in (503, 503):  # the plugin's own trouble, twice in a row
        breaker.record(status)
    flood = await held(api, 2, "workspace:a")
    refused = await api.commit("workspace:a", "one too many")
    breaker.record(refused.status)
    assert surfaced(refused.status, refused.body) == CallError(
        429, "unavailable", refused.body["message"]
    )
    neighbour = asyncio.create_task(api.search("workspace:b", query="anything"))
    gated.gate.set()
    answered = await neighbour
    breaker.record(answered.status)
    assert surfaced(answered.status, answered.body) is None
    await asyncio.gather(*flood)
    breaker.record(503)  # one more 503 after the 429: the count started again
    assert (breaker.opened, breaker.longest_run, breaker.is_open) == (0, 2, False)


@pytest.mark.settings(admission_budget_s=1.0)
async def test_forty_agents_of_one_workspace_on_an_idle_plugin_all_get_their_writes_in(
    api: ContractClient, gated: GatedEncoder
) -> None:
    """What the platform does for each agent: PUT the namespace, then commit. Forty at
    once are eighty requests of one tenant, a small part of a second's work on a model
    that takes 5 ms a text (what a fresh plugin assumes): none is refused."""
    assert api.app[ADMISSION].service_time.seconds == INITIAL_S

    async def agent(n: int) -> tuple[int, int]:
        # Unchecked: forty conformance checks on the test's loop would pace the agents.
        put = await api.call(
            "PUT", "/v1/namespaces/workspace:a", {"kind": "workspace"}, check=False
        )
        commit = await api.commit("workspace:a", f"agent {n} remembers")
        return put.status, commit.status

    agents = [asyncio.create_task(agent(n)) for n in range(40)]
    await held_until(api, 40)
    gated.gate.set()
    assert [await task for task in agents] == [(200, 201)] * 40


@pytest.mark.settings(tenant_max_in_flight=2, admission_budget_s=60.0)
async def test_an_operators_cap_per_namespace_refuses_however_idle_the_plugin(
    api: ContractClient, gated: GatedEncoder
) -> None:
    flood = await held(api, 2, "workspace:a")
    refused = await api.commit("workspace:a", "one too many")
    assert refused.status == 429
    assert refused.body["message"] == (
        "too many requests in flight for namespace workspace:a: 2 already; "
        "at most 2 requests of one namespace are served at once; retry shortly"
    )
    gated.gate.set()
    assert [(await task).status for task in flood] == [201, 201]


class _Transport(asyncio.ReadTransport):
    """Just the reading state of a connection's transport."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False


async def test_a_refused_connection_rests_then_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller that sends again the moment it is refused is read again only after the
    rest; then as any other (docs/behaviour.md, "A refused caller's connection rests")."""
    transport = _Transport()
    monkeypatch.setattr(middleware, "REFUSED_PAUSE_S", 0.0)
    middleware.rest_connection(transport)
    assert not transport.is_reading()
    for _ in range(2):  # the timer's callback runs in the next iteration
        await asyncio.sleep(0)
    assert transport.is_reading()
