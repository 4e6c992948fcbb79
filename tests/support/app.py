"""The plugin app under test, driven through a client that checks every reply.

`ContractClient` sends a request and asserts that the reply conforms to the
contract before the test sees it; the `api` fixture (tests/conftest.py) hands one out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import TypeVar

from aiohttp import ClientSession
from aiohttp import web
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from harness.clocks import WallClock
from plugin.http.keys import BACKEND
from plugin.settings import Settings
from tests.support.contract import assert_conforms

AppFactory = Callable[..., web.Application]
Backend = TypeVar("Backend")


def app_settings(data_dir: Path, **overrides: Any) -> Settings:
    """The settings every test's app starts from, with `overrides`."""
    return Settings(
        **{
            "data_dir": data_dir,
            "janitor_interval_s": 3600,
            "admission_budget_s": 60,
            "engine_workers": 1,  # whatever the machine's cores; the pool's tests ask for more
            **overrides,
        }
    )


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


class ContractClient:
    """Sends requests and asserts each reply conforms to the contract."""

    def __init__(
        self,
        client: TestClient[Any, Any] | ClientSession,
        app: web.Application,
        clock: WallClock,
    ):
        self.client = client
        self.app = app
        self.clock = clock

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        check: bool = True,
    ) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        async with self.client.request(method, path, data=data, headers=headers) as response:
            text = await response.read()
            parsed = json.loads(text) if text else None
            reply = Reply(response.status, parsed, dict(response.headers))
        if check:
            assert_conforms(method, path, reply.status, reply.body)
        return reply

    async def put_ns(self, name: str, kind: str = "workspace", **fields: Any) -> Reply:
        return await self.call("PUT", f"/v1/namespaces/{name}", {"kind": kind, **fields})

    async def commit(self, name: str, content: str, **fields: Any) -> Reply:
        body = {"content": content, "kind": "fact", "source": "agent", **fields}
        return await self.call("POST", f"/v1/namespaces/{name}/memories", body)

    async def search(self, *namespaces: str, **fields: Any) -> Reply:
        return await self.call("POST", "/v1/search", {"namespaces": list(namespaces), **fields})


async def served(
    make_app: AppFactory, clock: WallClock, **settings: Any
) -> AsyncIterator[ContractClient]:
    """`make_app(**settings)` on a test server, for one pass of `async for api in served(...)`."""
    app = make_app(**settings)
    async with TestClient(TestServer(app)) as client:
        yield ContractClient(client, app, clock)


def contract_health(body: dict[str, object]) -> dict[str, object]:
    """Health's body less what it carries beside the contract's fields: the sizes start-up
    chose (tests/test_sizing.py) and the rerank's weights
    (tests/http/test_rerank_weights.py)."""
    return {key: value for key, value in body.items() if key not in ("sizes", "rerank_weights")}


def backend_of(api: ContractClient, kind: type[Backend]) -> Backend:
    """The app's backend, checked to be a `kind` (the one the test's settings chose)."""
    backend = api.app[BACKEND]
    assert isinstance(backend, kind)
    return backend
