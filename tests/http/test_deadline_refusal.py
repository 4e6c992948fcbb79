"""A request whose time runs out: refused (429) when its work was still waiting its
turn behind others' work, a 503 when nothing moved.

A burst of many tenants, each with nothing in flight, passes the door (admission
admits every tenant's first request); on a model slower than the burst, the last of
them cannot be answered in time. They are the plugin being full, not broken: answered
429, which the platform's breaker ignores, instead of 503s that would open it for
every workspace. A model that stands still is broken: 503.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from harness.clocks import WallClock
from plugin.backends import build_backend
from plugin.http.app import create_app
from plugin.settings import Settings
from tests.support.app import ContractClient
from tests.support.app import served
from tests.support.encoders import GatedEncoder
from tests.support.encoders import PacedEncoder

TENANTS = [f"workspace:w{n}" for n in range(16)]
REFUSED = {
    "code": "unavailable",
    "message": "the plugin is over capacity: this request of namespace {} waited its "
    "turn behind other requests until too little of its time was left; retry shortly",
}


async def refused_count(api: ContractClient) -> str:
    async with api.client.get("/metrics") as response:
        text = await response.text()
    return next(
        line
        for line in text.splitlines()
        if line.startswith('memory_plugin_requests_refused_total{reason="deadline"}')
    )


@pytest.mark.settings(backend_timeout_s=0.5)
async def test_a_burst_past_the_models_pace_is_served_in_part_and_the_rest_refused(
    settings: Settings, clock: WallClock
) -> None:
    """16 tenants at once, 4 texts a batch, 0.2 s a batch, 0.5 s to answer: the first
    batches are written, the rest were waiting behind them."""
    encoder = PacedEncoder(batch_s=0.2)
    async for api in served(lambda: create_app(settings, encoder=encoder, clock=clock), clock):
        for name in TENANTS:
            assert (await api.put_ns(name)).status == 200
        replies = await asyncio.gather(*(api.commit(name, "a memory") for name in TENANTS))
        statuses = [reply.status for reply in replies]
        assert set(statuses) == {201, 429}, statuses
        for name, reply in zip(TENANTS, replies, strict=True):
            if reply.status == 429:
                assert reply.headers["Retry-After"] == "1"
                assert reply.body == {**REFUSED, "message": REFUSED["message"].format(name)}
        assert await refused_count(api) == (
            f'memory_plugin_requests_refused_total{{reason="deadline"}} '
            f"{float(statuses.count(429))}"
        )


@pytest.mark.settings(backend_timeout_s=0.3)
async def test_a_model_that_stands_still_fails_every_request_waiting_for_it(
    settings: Settings, clock: WallClock
) -> None:
    encoder = GatedEncoder()  # its gate stays closed: the first batch never ends
    # The store's writes get a deadline of their own, longer: the namespaces' PUTs are not
    # what this is about, and at 0.3 s a slow sync on a busy machine refuses them.
    roomy = settings.model_copy(update={"backend_timeout_s": 10.0})
    backend = build_backend(roomy, encoder.dimension, encoder.token_dimension, cpus=2)

    def app() -> web.Application:
        return create_app(settings, encoder=encoder, backend=backend, clock=clock)

    async for api in served(app, clock):
        encoder.gate.set()
        for name in TENANTS[:6]:
            assert (await api.put_ns(name)).status == 200
        encoder.gate.clear()
        try:
            replies = await asyncio.gather(*(api.commit(name, "a memory") for name in TENANTS[:6]))
        finally:
            encoder.gate.set()
        assert [(reply.status, reply.body) for reply in replies] == [
            (503, {"code": "unavailable", "message": "backend unavailable: no answer within 0.3 s"})
        ] * 6
        assert await refused_count(api) == (
            'memory_plugin_requests_refused_total{reason="deadline"} 0.0'
        )
