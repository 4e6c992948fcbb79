"""The default ranking through the real app: reranked while the plugin has room, ranked by
hybrid when the wait a search faces is over the dimmer's target; what ranked each search in
its metrics, and the dimmer's share as a gauge. A forced ranking is never dimmed.

Admission's clock stands still (`ticks`), and the test holds other requests in flight itself
(`Admission.hold`), so the wait a search faces is what the test made it: no timing.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import Any

import pytest

from harness.clocks import ManualClock
from harness.clocks import WallClock
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.app import create_app
from plugin.http.keys import ADMISSION
from plugin.scheduling.dimmer import WINDOW_S
from plugin.settings import Settings
from tests.support.app import ContractClient
from tests.support.app import served

NS = "workspace:ranked"
QUESTION = "when does the release train leave?"
# A target one other request in flight is over twice (the test's model has one place): a
# search beside it is ranked by hybrid at once.
TARGET = 0.25


class Apps:
    def __init__(
        self, encoder: SentenceTransformerEncoder, settings: Settings, clock: WallClock
    ) -> None:
        self.encoder, self.settings, self.clock = encoder, settings, clock
        self.ticks = ManualClock()

    async def served(self, **settings: Any) -> AsyncIterator[ContractClient]:
        chosen = self.settings.model_copy(update={"rerank_queue": TARGET, **settings})

        def build() -> Any:
            return create_app(chosen, encoder=self.encoder, clock=self.clock, ticks=self.ticks)

        async for api in served(build, self.clock):
            assert (await api.put_ns(NS)).status == 200
            for content in ("release train leaves every other tuesday", "lunch is at noon"):
                assert (await api.commit(NS, content)).status == 201
            yield api


@pytest.fixture
def apps(encoder: SentenceTransformerEncoder, settings: Settings, clock: WallClock) -> Apps:
    return Apps(encoder, settings, clock)


async def metrics(api: ContractClient) -> str:
    async with api.client.get("/metrics") as response:
        assert response.status == 200
        return await response.text()


def searches(text: str) -> dict[str, float]:
    found = re.findall(r'^memory_plugin_searches_total\{ranking="(\w+)"\} (\S+)$', text, re.M)
    return {ranking: float(count) for ranking, count in found if float(count)}


def share(text: str) -> float | None:
    found = re.search(r"^memory_plugin_rerank_share (\S+)$", text, re.M)
    return None if found is None else float(found.group(1))


async def ranked(api: ContractClient) -> str:
    """Search once; what ranked it, from the metrics' count of searches."""
    before = searches(await metrics(api))
    reply = await api.search(NS, query=QUESTION)
    assert reply.status == 200
    assert reply.body["memories"][0]["content"] == "release train leaves every other tuesday"
    after = searches(await metrics(api))
    [ranking] = [name for name, count in after.items() if count != before.get(name, 0)]
    return ranking


async def test_reranked_with_room_ranked_by_hybrid_while_others_make_it_wait(apps: Apps) -> None:
    async for api in apps.served():
        admission = api.app[ADMISSION]
        assert share(await metrics(api)) == 1.0
        assert await ranked(api) == "rerank"
        with ExitStack() as others:
            others.enter_context(admission.hold("workspace:busy"))
            assert await ranked(api) == "hybrid"  # a spike: at once, whatever the share
            apps.ticks.advance(WINDOW_S)
            assert await ranked(api) == "hybrid"
            dimmed = share(await metrics(api))
            assert dimmed is not None
            assert dimmed < 1.0
        # the load eased: the window of the last search under load closes, then four pass
        # without a wait
        apps.ticks.advance(5 * WINDOW_S)
        assert share(await metrics(api)) == 1.0
        assert await ranked(api) == "rerank"
        listing = await api.search(NS)
        assert listing.status == 200
        assert searches(await metrics(api)) == {"rerank": 2, "hybrid": 2, "newest": 1}


@pytest.mark.parametrize("forced", ["rerank", "hybrid"])
async def test_a_forced_ranking_is_never_dimmed(apps: Apps, forced: str) -> None:
    async for api in apps.served(search=forced):
        with api.app[ADMISSION].hold("workspace:busy"):
            assert await ranked(api) == forced
            apps.ticks.advance(4 * WINDOW_S)
            assert await ranked(api) == forced
        assert share(await metrics(api)) is None  # no dimmer, no gauge
