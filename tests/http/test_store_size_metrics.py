"""The store's size gauges against the store: commits, a forget, an expiry, a delete.

Real model, real embedded store, real HTTP; the gauges are refreshed at once
(`STORE_SIZES.refresh()`, what the timer does every 30 s) and read from a scrape.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from adapters.disk import allocated_bytes
from plugin.http.keys import STORE_SIZES
from plugin.settings import Settings
from tests.http.test_metrics import scrape
from tests.support.app import ContractClient

TEAM, WORKSPACE = "team:sized", "workspace:sized"
MiB = 1024 * 1024


async def sizes(api: ContractClient) -> dict[str, float]:
    await api.app[STORE_SIZES].refresh()
    samples = await scrape(api)
    sized = ("namespaces", "memories", "bytes", "free_bytes")
    return {
        name: samples[f"memory_plugin_store_{name}"][()]
        for name in sized
        if f"memory_plugin_store_{name}" in samples
    }


async def test_store_size_follows_commits_forgets_expiry_and_deletes(
    swept: ContractClient, settings: Settings
) -> None:
    api = swept
    soon = (api.clock() + timedelta(minutes=1)).isoformat()
    for name in (TEAM, WORKSPACE):
        assert (await api.put_ns(name)).status == 200
    for n in range(3):
        assert (await api.commit(WORKSPACE, f"workspace memory {n}")).status == 201
    assert (await api.commit(WORKSPACE, "short lived", expires_at=soon)).status == 201
    committed = [await api.commit(TEAM, f"team memory {n}") for n in range(2)]
    forget = {"requested_by_namespace": TEAM}
    forgotten = await api.call("DELETE", f"/v1/memories/{committed[0].body['id']}", forget)
    assert forgotten.status == 204

    found = await sizes(api)
    store = Path(settings.data_dir) / "store"
    volume = os.statvfs(store)
    assert (found["namespaces"], found["memories"]) == (2, 5)  # the expired one until swept
    assert abs(found["bytes"] - allocated_bytes(store)) < 16 * MiB
    assert abs(found["free_bytes"] - volume.f_bavail * volume.f_frsize) < 256 * MiB

    api.clock.advance(minutes=2)
    for _ in range(200):  # until the janitor deleted the expired one (10 s at most)
        if (await sizes(api))["memories"] == 4:
            break
        await asyncio.sleep(0.05)
    assert (await sizes(api))["memories"] == 4
    assert (await api.call("DELETE", f"/v1/namespaces/{TEAM}")).status == 204
    found = await sizes(api)
    assert (found["namespaces"], found["memories"]) == (1, 3)
