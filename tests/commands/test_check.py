"""`memory-plugin-vector check URL`: passes on a correct plugin, names the broken step.

The real plugin runs in-process on a real port (real model, embedded store)
and the command runs as a separate process against it. Broken plugins are a
small in-memory implementation of the contract in this file, each with one
deliberate fault; the check must fail at the step that exercises it, and
must delete its scratch namespace all the same.
"""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from harness.server_process import REPO_ROOT
from harness.server_process import clean_env
from harness.server_process import refusing_port
from plugin.commands.check import CheckOptions
from plugin.commands.check import run_check
from tests.support.app import ContractClient

STEPS = [
    "health",
    "create namespace",
    "commit",
    "search finds the memory",
    "same-id commit updates in place",
    "forget",
    "ttl",
    "delete namespace",
    "commit after delete",
]


@dataclass
class FakePlugin:
    """The v1 contract in memory, correct unless a fault is switched on."""

    faults: frozenset[str] = frozenset()
    capabilities: tuple[str, ...] = ("embedding", "ttl", "pin")
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    memories: list[dict[str, Any]] = field(default_factory=list)
    ever_created: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/health", self.health)
        app.router.add_put("/v1/namespaces/{name}", self.put_namespace)
        app.router.add_delete("/v1/namespaces/{name}", self.delete_namespace)
        app.router.add_post("/v1/namespaces/{name}/memories", self.commit)
        app.router.add_post("/v1/search", self.search)
        app.router.add_delete("/v1/memories/{id}", self.forget)
        return app

    @staticmethod
    def error(status: int, code: str) -> web.Response:
        return web.json_response({"code": code, "message": code}, status=status)

    async def health(self, request: web.Request) -> web.Response:
        if "slow_health" in self.faults:
            await asyncio.sleep(5)
        body = {"status": "ok", "version": "1.0.0", "capabilities": list(self.capabilities)}
        return web.json_response(body)

    async def put_namespace(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json()
        record = {"name": name, "kind": body["kind"], "created_at": "2026-01-01T00:00:00Z"}
        self.namespaces[name] = record
        self.ever_created.append(name)
        return web.json_response(record)

    async def delete_namespace(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if self.namespaces.pop(name, None) is None:
            return self.error(404, "not_found")
        self.memories = [m for m in self.memories if m["namespace"] != name]
        return web.Response(status=204)

    async def commit(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self.namespaces:
            if "resurrects" not in self.faults:
                return self.error(404, "not_found")
            self.namespaces[name] = {"name": name, "kind": "workspace"}
        body = await request.json()
        memory = {
            "id": body.get("id") or str(uuid.uuid4()),
            "namespace": name,
            "content": body["content"],
            "kind": body["kind"],
            "source": body["source"],
            "expires_at": body.get("expires_at"),
        }
        if "duplicates" not in self.faults:
            self.memories = [
                m for m in self.memories if (m["id"], m["namespace"]) != (memory["id"], name)
            ]
        self.memories.append(memory)
        return web.json_response({"id": memory["id"], "namespace": name}, status=201)

    def live(self, memory: dict[str, Any]) -> bool:
        expires = memory["expires_at"]
        if expires is None or "ttl_ignored" in self.faults:
            return True
        return datetime.fromisoformat(expires) > datetime.now(UTC)

    async def search(self, request: web.Request) -> web.Response:
        body = await request.json()
        score = 0.5 if body.get("query") else None
        found = [
            {**m, "score": score}
            for m in reversed(self.memories)
            if m["namespace"] in body["namespaces"] and self.live(m)
        ]
        return web.json_response({"memories": found})

    async def forget(self, request: web.Request) -> web.Response:
        body = await request.json()
        key = (request.match_info["id"], body["requested_by_namespace"])
        kept = [m for m in self.memories if (m["id"], m["namespace"]) != key]
        if len(kept) == len(self.memories):
            return self.error(404, "not_found")
        if "forget_keeps" not in self.faults:
            self.memories = kept
        return web.Response(status=204)


ServeFake = Callable[[FakePlugin], Awaitable[str]]


@pytest.fixture
async def serve_fake() -> AsyncIterator[ServeFake]:
    servers: list[TestServer] = []

    async def start(fake: FakePlugin) -> str:
        server = TestServer(fake.app(), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    yield start
    for server in servers:
        await server.close()


async def check(url: str, **options: Any) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = await run_check(CheckOptions(url, ttl_s=0.5, **options), lines.append)
    return code, lines


async def run_cli(*args: str) -> tuple[int, list[str], str]:
    """The console command as a separate process; the test's loop keeps serving meanwhile."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "plugin.cli",
        "check",
        *args,
        cwd=REPO_ROOT,
        env=clean_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        stdout, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stdout.decode().splitlines(), stderr.decode()


def expected_lines(namespace: str, memory_id: str, *, semantic: bool = True) -> list[str]:
    search = "listing and a semantic query return it" if semantic else "listing returns it"
    return [
        "ok   health: status ok, version 1.0.0, capabilities embedding,pin,ttl",
        f"ok   create namespace: {namespace} (200)",
        f"ok   commit: 201, id {memory_id}",
        f"ok   search finds the memory: {search}",
        "ok   same-id commit updates in place: one memory with that id, new content",
        "ok   forget: 204, gone from search, forgetting again is 404",
        "ok   ttl: returned before expires_at, gone 0.5 s after it",
        "ok   delete namespace: 204, search returns nothing, deleting again is 404",
        "ok   commit after delete: 404",
    ]


def scratch_names(lines: list[str]) -> tuple[str, str]:
    match = re.search(r"create namespace: (workspace:check-([0-9a-f]{32})) ", "\n".join(lines))
    assert match, lines
    hex_id = match.group(2)
    memory_id = f"{hex_id[:8]}-{hex_id[8:12]}-{hex_id[12:16]}-{hex_id[16:20]}-{hex_id[20:]}"
    return match.group(1), memory_id


@pytest.mark.every_backend
async def test_real_plugin_passes_every_step(api: ContractClient) -> None:
    url = str(api.client.make_url("")).rstrip("/")
    code, lines, stderr = await run_cli(url, "--ttl", "1", "--timeout", "5")
    assert (code, stderr) == (0, ""), lines
    namespace, memory_id = scratch_names(lines)
    assert lines == expected_lines(namespace, memory_id, semantic=True)
    # Nothing left behind: the scratch namespace is gone.
    listing = await api.search(namespace, limit=100)
    assert (listing.status, listing.body) == (200, {"memories": []})
    assert (await api.call("DELETE", f"/v1/namespaces/{namespace}")).status == 404


async def test_correct_fake_passes(serve_fake: ServeFake) -> None:
    fake = FakePlugin()
    code, lines = await check(await serve_fake(fake))
    assert code == 0, lines
    namespace, memory_id = scratch_names(lines)
    assert lines == expected_lines(namespace, memory_id)
    assert fake.ever_created == [namespace]
    assert fake.namespaces == {}


BROKEN = [
    pytest.param("wrong_capabilities", "health", id="wrong-capabilities"),
    pytest.param("duplicates", "same-id commit updates in place", id="duplicates-same-id"),
    pytest.param("forget_keeps", "forget", id="forgotten-still-returned"),
    pytest.param("ttl_ignored", "ttl", id="expired-still-returned"),
    pytest.param("resurrects", "commit after delete", id="commit-recreates-namespace"),
]


@pytest.mark.parametrize(("fault", "step"), BROKEN)
async def test_broken_plugin_fails_at_its_step_and_cleans_up(
    fault: str, step: str, serve_fake: ServeFake
) -> None:
    fake = FakePlugin(faults=frozenset({fault}))
    if fault == "wrong_capabilities":
        fake.capabilities = ("embedding", "pin")
    code, lines = await check(await serve_fake(fake))
    assert code == 1, lines
    failed = STEPS.index(step)
    assert [line[:5] for line in lines] == ["ok   "] * failed + ["FAIL "], lines
    assert lines[-1].startswith(f"FAIL {step}: "), lines
    assert fake.namespaces == {}, "the scratch namespace was left behind"


async def test_failure_messages_say_what_was_wrong(
    serve_fake: ServeFake,
) -> None:
    fake = FakePlugin(faults=frozenset({"wrong_capabilities"}), capabilities=("embedding", "pin"))
    _, lines = await check(await serve_fake(fake))
    assert lines == ["FAIL health: capability ttl not advertised (has embedding,pin)"]

    fake = FakePlugin(faults=frozenset({"duplicates"}))
    _, lines = await check(await serve_fake(fake))
    _, memory_id = scratch_names(lines)
    assert lines[-1] == (
        "FAIL same-id commit updates in place: after a second commit with the same id: "
        f"2 memories {[memory_id, memory_id]}"
    )


async def test_capabilities_not_advertised_are_skipped_unless_required(
    serve_fake: ServeFake,
) -> None:
    fake = FakePlugin(capabilities=("pin",))
    url = await serve_fake(fake)
    code, lines = await check(url, required=("pin",))
    assert code == 0, lines
    assert lines[3] == "ok   search finds the memory: listing returns it"
    assert lines[6] == "skip ttl: the plugin does not advertise ttl"
    assert [line[:5] for line in lines] == ["ok   "] * 6 + ["skip "] + ["ok   "] * 2

    code, lines, _ = await run_cli(url, "--require-capability", "pin,ttl")
    assert (code, lines) == (1, ["FAIL health: capability ttl not advertised (has pin)"])
    code, lines, _ = await run_cli(url, "--require-capability=", "--ttl", "0.5")
    assert code == 0, lines


async def test_unreachable_plugin_is_one_line() -> None:
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}"
        code, lines, stderr = await run_cli(url)
    assert (code, stderr) == (1, "")
    [line] = lines
    assert line.startswith(f"FAIL health: cannot reach {url}: "), line


async def test_slow_plugin_fails_on_the_timeout(serve_fake: ServeFake) -> None:
    url = await serve_fake(FakePlugin(faults=frozenset({"slow_health"})))
    code, lines = await check(url, timeout_s=0.2)
    assert (code, lines) == (1, ["FAIL health: no answer to GET /v1/health within 0.2 s"])


async def test_url_without_scheme_is_a_usage_error() -> None:
    code, lines, stderr = await run_cli("127.0.0.1:9100")
    assert (code, lines) == (2, [])
    assert "URL must start with http:// or https://" in stderr
