"""The app the `shares_server` modules share: reset between tests to a new app's state."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.app import ContractClient
from tests.support.shared_server import SharedServer

pytestmark = pytest.mark.shares_server

NS = "workspace:shared"
MEMORY_ID = "6f1c2b4e-8d0a-4c1e-9f5b-2a7d3e4c5b6a"


async def test_a_reset_leaves_no_namespace_and_the_clock_at_wall_time(
    api: ContractClient, shared_server: SharedServer
) -> None:
    assert api.app is shared_server.app
    first = await api.put_ns(NS, metadata={"run": 1})
    await api.commit(NS, "a memory of the test before", id=MEMORY_ID)
    api.clock.advance(hours=3)

    shared_server.reset()

    assert api.clock.offset == timedelta()
    gone = await api.call("DELETE", f"/v1/memories/{MEMORY_ID}", {"requested_by_namespace": NS})
    assert (gone.status, gone.body) == (
        404,
        {"code": "not_found", "message": f"memory {MEMORY_ID} not found in {NS}"},
    )
    again = await api.put_ns(NS)
    assert again.status == 200
    assert again.body["metadata"] is None
    assert again.body["created_at"] != first.body["created_at"]
    search = await api.search(NS)
    assert (search.status, search.body) == (200, {"memories": []})
