"""Hostile input and races for scenarios/__main__.py.

Odd numbers and times, large content, a PUT racing a DELETE, concurrent first
PUTs, a client that hangs up, a 405, a burst of commits with one id.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

NS = "/v1/namespaces/"
Outcome = tuple[str, bool]


async def put_ns(session: aiohttp.ClientSession, base: str, name: str, **body: Any) -> int:
    async with session.put(f"{base}{NS}{name}", json={"kind": "workspace", **body}) as r:
        await r.read()
        return r.status


async def commit(
    session: aiohttp.ClientSession, base: str, name: str, body: Any, **kwargs: Any
) -> tuple[int, str]:
    kwargs.setdefault("json", body)
    async with session.post(f"{base}{NS}{name}/memories", **kwargs) as r:
        return r.status, await r.text()


def memory_body(content: str = "a fact", **extra: Any) -> dict[str, Any]:
    return {"content": content, "kind": "fact", "source": "agent", **extra}


async def numbers(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await put_ns(session, base, "workspace:n")
    raw = '{"content":"x","kind":"fact","source":"agent","propagation":{"a":1e400}}'
    s1, _ = await commit(
        session, base, "workspace:n", None, data=raw, headers={"Content-Type": "application/json"}
    )
    async with session.put(
        f"{base}{NS}workspace:n2",
        data='{"kind":"workspace","metadata":{"a":1e400}}',
        headers={"Content-Type": "application/json"},
    ) as r:
        s2, t2 = r.status, await r.text()
    big = 2**70
    memory_id = "7f3e2a10-0000-4000-8000-000000000001"
    raw = json.dumps(memory_body(id=memory_id, propagation={"big": big, "neg": -(2**65)}))
    s3, _ = await commit(
        session, base, "workspace:n", None, data=raw, headers={"Content-Type": "application/json"}
    )
    async with session.post(f"{base}/v1/search", json={"namespaces": ["workspace:n"]}) as r:
        found = [m["propagation"] for m in (await r.json(loads=json.loads))["memories"]]
    kept = {"big": big, "neg": -(2**65)} in found
    ok = s1 == 400 and s2 == 400 and _strict_json(t2) and s3 == 201 and kept
    return f"1e400 commit {s1}, 1e400 PUT {s2}; 2**70 returned as sent: {kept}", ok


def _strict_json(text: str) -> bool:
    """Whether `text` is JSON without the NaN/Infinity extensions Python accepts."""

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


async def times(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    statuses = []
    for when in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00"):
        statuses.append(await put_ns(session, base, "workspace:t", expires_at=when))
        await put_ns(session, base, "workspace:t")
        status, _ = await commit(session, base, "workspace:t", memory_body(expires_at=when))
        statuses.append(status)
    return f"PUT/commit statuses {statuses}", all(s < 500 for s in statuses)


async def large_content(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await put_ns(session, base, "workspace:big")
    big = ("all work and no play makes the agent a dull agent. " * 18_000)[: 900 * 1024]

    async def small() -> float:
        started = time.perf_counter()
        await commit(session, base, "workspace:big", memory_body("a small fact"))
        return time.perf_counter() - started

    await small()
    alone = min([await small() for _ in range(5)])
    big_task = asyncio.create_task(commit(session, base, "workspace:big", memory_body(big)))
    await asyncio.sleep(0.01)
    beside = await small()
    big_status, _ = await big_task
    ok = big_status == 201 and beside < alone + 0.15
    return f"900 KiB commit {big_status}; small commit beside it {beside * 1000:.0f} ms", ok


async def put_racing_delete(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url

    async def delete() -> tuple[int, str]:
        async with session.delete(f"{base}{NS}workspace:race") as r:
            return r.status, await r.text()

    async def put() -> tuple[int, str]:
        async with session.put(f"{base}{NS}workspace:race", json={"kind": "workspace"}) as r:
            return r.status, await r.text()

    results = await asyncio.gather(*[put() if i % 2 else delete() for i in range(150)])
    statuses = Counter(status for status, _ in results)
    leaks = sum("/" in json.loads(text).get("message", "") for s, text in results if s >= 400)
    ok = all(s in (200, 204, 404) for s in statuses) and leaks == 0
    return f"statuses {dict(statuses)}, bodies naming a path {leaks}", ok


async def first_puts(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url

    async def put() -> str:
        async with session.put(f"{base}{NS}workspace:first", json={"kind": "workspace"}) as r:
            return str((await r.json())["created_at"])

    created = set(await asyncio.gather(*[put() for _ in range(50)]))
    return f"50 concurrent first PUTs answered {len(created)} created_at values", len(created) == 1


async def hang_up(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await put_ns(session, base, "workspace:h")
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(
                b"POST /v1/namespaces/workspace:h/memories HTTP/1.1\r\nHost: x\r\n"
                b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"content":'
            )
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    async with session.get(f"{base}/metrics") as r:
        metrics = await r.text()
    five = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("memory_plugin_http_requests_total") and 'status="500"' in line
    )
    tracebacks = server.log_text().count("Traceback")
    ok = five == 0 and tracebacks == 0
    return f"3 hang-ups: counted as 500 {five:g} times, tracebacks in log {tracebacks}", ok


async def method_not_allowed(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    async with session.get(f"{server.base_url}/v1/search") as r:
        allow = r.headers.get("Allow")
        return f"GET /v1/search: {r.status}, Allow: {allow}", r.status == 405 and bool(allow)


async def burst(server: Any, session: aiohttp.ClientSession, _: Path) -> Outcome:
    base = server.base_url
    await put_ns(session, base, "workspace:burst")
    body = memory_body("the same memory, again", id="7f3e2a10-0000-4000-8000-00000000b0b0")
    results = await asyncio.gather(
        *[commit(session, base, "workspace:burst", body) for _ in range(50)]
    )
    statuses = Counter(status for status, _ in results)
    return f"50 concurrent commits, same id: {dict(statuses)}", set(statuses) == {201}


CASES = {
    "4 numbers": numbers,
    "5 extreme times": times,
    "6 large content": large_content,
    "7 PUT racing DELETE": put_racing_delete,
    "8 concurrent first PUTs": first_puts,
    "9 client hang-up": hang_up,
    "10 405 Allow": method_not_allowed,
    "11 burst, same id": burst,
}
