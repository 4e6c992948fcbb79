"""429 for a namespace over its share, at once, in the contract's envelope; others served.

The app runs the real embedded store with a gated encoder: a request admitted
waits inside the model until the test opens the gate, so what is in flight when
the next request arrives is decided by the test, not by timing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plugin.http.app import create_app
from plugin.http.keys import ADMISSION
from plugin.settings import Settings
from tests.support.app import ContractClient, Reply, served
from tests.support.clocks import WallClock
from tests.support.encoders import GatedEncoder
from tests.support.platform_client import Breaker, CallError, surfaced


@pytest.fixture
def gated() -> GatedEncoder:
    return GatedEncoder()


@pytest.fixture
async def api(
    settings: Settings, clock: WallClock, gated: GatedEncoder
) -> AsyncIterator[ContractClient]:
    def build(**overrides: Any) -> Any:
        shares = {"queue_capacity": 2, "tenant_max_in_flight": 2} | overrides
        return create_app(settings.model_copy(update=shares), encoder=gated, clock=clock)

    async for client in served(build, clock):
        gated.gate.set()  # set-up writes pass; each test closes it again
        for name in ("workspace:a", "workspace:b", "workspace:c", "team:shared"):
            assert (await client.put_ns(name)).status == 200
        gated.gate.clear()
        yield client
        gated.gate.set()


async def held(api: ContractClient, count: int, name: str) -> list[asyncio.Task[Reply]]:
    """`count` commits into `name`, admitted and waiting for the (gated) model."""
    admission = api.app[ADMISSION]
    before = admission.in_flight
    tasks = [asyncio.create_task(api.commit(name, f"held {n}")) for n in range(count)]
    async with asyncio.timeout(5):
        while admission.in_flight < before + count:  # noqa: ASYNC110 (nothing to wait on)
            await asyncio.sleep(0.001)
    return tasks


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
        "at most 2 requests of one namespace are served at once; retry shortly",
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
    assert (
        "the plugin is busy and each namespace gets 1 requests at once" in refused.body["message"]
    )
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
    assert 'memory_plugin_requests_refused_total{reason="tenant_max"} 1.0' in text
    assert 'memory_plugin_requests_refused_total{reason="fair_share"} 0.0' in text
    assert 'memory_plugin_requests_in_flight{tenant_kind="workspace"} 2.0' in text
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
