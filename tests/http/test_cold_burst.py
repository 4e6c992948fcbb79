"""A fresh store's first burst: many new namespaces at once, more work than the deadline
holds, on the real server (its own process, the shipped model).

Every namespace's first request is admitted (nothing of it is in flight), so the model's
queue holds several deadlines of work. Each commit is written (201) or refused while it
waited its turn (429, reason `deadline`); none is embedded too late and fails in the
store after its deadline (503), which would count toward the platform's breaker.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.server_process import ServerProcess

NAMESPACES = 120
# Twice the shipped deadline, and so twice the room kept for the store after the model: the
# other test process beside this one slows the store's writes as no plugin of its own would.
# The burst is still several deadlines of the model's work.
DEADLINE_S = 3.0
COMMITS = 3
# A dialog turn of about 150 of the model's tokens: a few milliseconds of the model each,
# so that the burst is several deadlines of the model's work on a small machine.
LONG_TURN = (
    "We went over the router migration again this morning: the old ticket XJ-{n} is "
    "closed, the new firmware goes out on Thursday after the backup window, Priya owns "
    "the rollback plan, and the branch offices in Lyon, Porto and Gdansk move first "
    "because their links are the least loaded; everybody else waits for the report. "
) * 3
REFUSED = (
    "the plugin is over capacity: this request of namespace {} waited its turn behind "
    "other requests until too little of its time was left; retry shortly"
)

Answer = tuple[int, Any, str | None]  # status, body, Retry-After


async def send(session: aiohttp.ClientSession, method: str, path: str, body: Any) -> Answer:
    async with session.request(method, path, data=json.dumps(body)) as response:
        return response.status, await response.json(), response.headers.get("Retry-After")


async def in_turn(session: aiohttp.ClientSession, n: int, name: str) -> list[tuple[str, Answer]]:
    """`COMMITS` long turns into `name`, one after another, each with an id of its own."""
    answers = []
    for turn in range(COMMITS):
        memory_id = f"00000000-0000-4000-8000-{n:06d}{turn:06d}"
        body = {"id": memory_id, "content": LONG_TURN.format(n=turn), "kind": "fact"}
        body["source"] = "agent"
        answer = await send(session, "POST", f"/v1/namespaces/{name}/memories", body)
        answers.append((memory_id, answer))
    return answers


async def burst(base_url: str) -> dict[str, list[tuple[str, Answer]]]:
    names = [f"workspace:cold-{n}" for n in range(NAMESPACES)]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(base_url, connector=connector) as session:
        puts = await asyncio.gather(
            *(
                send(session, "PUT", f"/v1/namespaces/{name}", {"kind": "workspace"})
                for name in names
            )
        )
        assert [status for status, _, _ in puts] == [200] * NAMESPACES
        commits = await asyncio.gather(*(in_turn(session, n, name) for n, name in enumerate(names)))
    return dict(zip(names, commits, strict=True))


@pytest.mark.slow
def test_a_fresh_stores_first_burst_is_written_or_refused_never_a_503(tmp_path: Path) -> None:
    env = {"MEMORY_PLUGIN_BACKEND_TIMEOUT": str(DEADLINE_S)}
    with ServerProcess(tmp_path / "data", tmp_path / "server.log", env=env) as server:
        server.start()
        server.wait_healthy()
        answers = asyncio.run(burst(server.base_url))
    statuses = Counter(status for replies in answers.values() for _, (status, _, _) in replies)
    # Written in part, the rest refused: the burst was past the model's pace, and no 5xx.
    assert set(statuses) == {201, 429}, (statuses, server.log_tail())
    for name, replies in answers.items():
        for memory_id, (status, body, retry_after) in replies:
            if status == 201:
                assert (body, retry_after) == ({"id": memory_id, "namespace": name}, None)
            else:
                assert body == {"code": "unavailable", "message": REFUSED.format(name)}
                assert retry_after == "1"
