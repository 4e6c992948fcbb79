"""One JSON access line per request: the fields, the request id, and never any content.

Real requests through the real app; the lines are rendered by the plugin's own
`JsonFormatter` from a handler on the "memory_plugin.access" logger.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from harness.clocks import WallClock
from plugin.http.app import create_app
from plugin.observability.logs import JsonFormatter
from plugin.settings import Settings
from tests.support.app import ContractClient
from tests.support.app import served
from tests.support.encoders import GatedEncoder

NS = "workspace:logs"
OTHER = "team:logs"
MEMORIES = "/v1/namespaces/{name}/memories"
CONTENT = "the vault passphrase hint is purple-otter-42"
QUERY = "what is the hint for the vault passphrase"


class AccessLog:
    """What the access logger wrote, as parsed JSON lines."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    def text(self) -> str:
        return self.stream.getvalue()

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text().splitlines()]

    def for_request(self, request_id: str) -> dict[str, Any]:
        [line] = [line for line in self.lines() if line.get("request_id") == request_id]
        return line


@pytest.fixture
def access_log() -> Iterator[AccessLog]:
    logger = logging.getLogger("memory_plugin.access")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield AccessLog(stream)
    logger.removeHandler(handler)
    logger.setLevel(previous)


def traced(request_id: str) -> dict[str, str]:
    """The headers of a request sent with its own id."""
    return {"X-Request-ID": request_id}


def request_line(line: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The whole expected line; time and latency are taken from the line itself."""
    assert isinstance(line["latency_ms"], float)
    assert line["latency_ms"] >= 0
    return {
        "ts": line["ts"],
        "level": "info",
        "logger": "memory_plugin.access",
        "msg": "request",
        "namespace": None,
        "memory_id": None,
        "latency_ms": line["latency_ms"],
        **fields,
    }


async def test_commit_search_forget_lines(api: ContractClient, access_log: AccessLog) -> None:
    assert (await api.put_ns(NS)).status == 200
    assert (await api.put_ns(OTHER, "team")).status == 200
    note = {"content": CONTENT, "kind": "fact", "source": "agent"}
    commit = await api.call("POST", MEMORIES.format(name=NS), note, headers=traced("trace-commit"))
    assert commit.status == 201
    memory_id = commit.body["id"]
    asked = {"namespaces": [NS, OTHER, NS], "query": QUERY}
    search = await api.call("POST", "/v1/search", asked, headers=traced("trace-search"))
    assert (search.status, [m["content"] for m in search.body["memories"]]) == (200, [CONTENT])
    forget = await api.call(
        "DELETE",
        f"/v1/memories/{memory_id.upper()}",
        {"requested_by_namespace": NS},
        headers=traced("trace-forget"),
    )
    assert forget.status == 204

    memory = {"namespace": NS, "memory_id": memory_id}
    expected: dict[str, dict[str, Any]] = {
        "trace-commit": {"method": "POST", "route": MEMORIES, "status": 201, **memory},
        "trace-search": {"method": "POST", "route": "/v1/search", "status": 200}
        | {"namespaces": [NS, OTHER], "namespaces_count": 2, "ranking": "rerank"},
        "trace-forget": {"method": "DELETE", "route": "/v1/memories/{id}", "status": 204, **memory},
    }
    for request_id, fields in expected.items():
        line = access_log.for_request(request_id)
        assert line == request_line(line, request_id=request_id, **fields)
    assert len(access_log.lines()) == 5  # two PUTs, commit, search, forget
    assert CONTENT not in access_log.text()
    assert QUERY not in access_log.text()


async def test_rejected_requests_log_no_content(api: ContractClient, access_log: AccessLog) -> None:
    assert (await api.put_ns(NS)).status == 200
    bad_commit = {"content": CONTENT, "kind": "opinion", "source": "agent"}
    reply = await api.call(
        "POST", f"/v1/namespaces/{NS}/memories", bad_commit, headers={"X-Request-ID": "bad-1"}
    )
    assert reply.status == 400
    bad_search = {"namespaces": [NS], "query": QUERY, "limit": 1000}
    reply = await api.call("POST", "/v1/search", bad_search, headers={"X-Request-ID": "bad-2"})
    assert reply.status == 400

    line = access_log.for_request("bad-1")
    assert line == request_line(
        line, request_id="bad-1", method="POST", route=MEMORIES, namespace=NS, status=400
    )
    line = access_log.for_request("bad-2")
    assert line == request_line(
        line, request_id="bad-2", method="POST", route="/v1/search", status=400
    )
    assert CONTENT not in access_log.text()
    assert QUERY not in access_log.text()


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(None, id="absent"),
        pytest.param("", id="empty"),
        pytest.param("x" * 129, id="too-long"),
        pytest.param("bad\tid", id="not-printable"),
    ],
)
async def test_request_id_minted_when_absent_or_unusable(
    api: ContractClient, access_log: AccessLog, given: str | None
) -> None:
    headers = {} if given is None else {"X-Request-ID": given}
    reply = await api.call("GET", "/no/such/route", headers=headers)
    assert reply.status == 404
    minted = reply.headers["X-Request-ID"]
    assert re.fullmatch("[0-9a-f]{32}", minted), minted
    line = access_log.for_request(minted)
    assert line == request_line(line, request_id=minted, method="GET", route=None, status=404)


async def test_request_id_is_echoed_on_every_answer(
    api: ContractClient, access_log: AccessLog
) -> None:
    for path, status in [("/v1/health", 200), ("/metrics", 200), ("/nope", 404)]:
        async with api.client.get(path, headers={"X-Request-ID": f"echo{path}"}) as response:
            assert response.status == status
            assert response.headers["X-Request-ID"] == f"echo{path}"
        assert access_log.for_request(f"echo{path}")["status"] == status


async def test_search_logs_at_most_50_namespaces(
    api: ContractClient, access_log: AccessLog
) -> None:
    names = [f"workspace:many-{i:02d}" for i in range(60)]
    reply = await api.call(
        "POST", "/v1/search", {"namespaces": names}, headers={"X-Request-ID": "many"}
    )
    assert (reply.status, reply.body) == (200, {"memories": []})
    line = access_log.for_request("many")
    assert line == request_line(
        line,
        request_id="many",
        method="POST",
        route="/v1/search",
        status=200,
        namespaces=names[:50],
        namespaces_count=60,
        ranking="newest",  # no query: newest first
    )


@pytest.mark.settings(backend_timeout_s=0.3)
async def test_a_5xx_line_says_why(
    settings: Settings, clock: WallClock, access_log: AccessLog
) -> None:
    """A model that stands still: the commit's 503 line carries the answer's message."""
    encoder = GatedEncoder()
    async for api in served(lambda: create_app(settings, encoder=encoder, clock=clock), clock):
        encoder.gate.set()
        assert (await api.put_ns(NS)).status == 200
        encoder.gate.clear()
        try:
            note = {"content": CONTENT, "kind": "fact", "source": "agent"}
            reply = await api.call("POST", MEMORIES.format(name=NS), note, headers=traced("stuck"))
        finally:
            encoder.gate.set()
        message = "backend unavailable: no answer within 0.3 s"
        assert (reply.status, reply.body) == (503, {"code": "unavailable", "message": message})
        line = access_log.for_request("stuck")
        assert line == request_line(
            line,
            request_id="stuck",
            method="POST",
            route=MEMORIES,
            namespace=NS,
            status=503,
            error=message,
        )
        assert CONTENT not in access_log.text()
