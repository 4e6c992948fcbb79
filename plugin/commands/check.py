"""`memory-plugin-vector check URL`: the swap-in runbook's first step as a command.

It speaks only the v1 contract over HTTP, so it verifies any memory plugin, in a scratch
namespace of its own; the steps: docs/observability.md, "`memory-plugin-vector check URL`".
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from typing import Any

import aiohttp

from plugin.commands import Print

DEFAULT_CAPABILITIES = ("embedding", "ttl", "pin")
TTL_MARGIN_S = 0.5  # past expires_at before the probe must be gone


@dataclass(frozen=True)
class CheckOptions:
    url: str
    timeout_s: float = 5.0
    ttl_s: float = 2.0
    required: tuple[str, ...] = DEFAULT_CAPABILITIES


def required_capabilities(values: list[str] | None) -> tuple[str, ...]:
    """`--require-capability` values (repeatable, comma-separated); none given: the default."""
    if values is None:
        return DEFAULT_CAPABILITIES
    return tuple(cap for value in values for cap in value.split(",") if cap.strip())


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, as the contract writes times (no import from adapters/:
    this command checks any plugin)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class StepFailed(Exception):
    """The plugin's answer differs from the contract; the message says how."""


class StepSkipped(Exception):
    """The step needs a capability the plugin does not advertise."""


@dataclass
class Reply:
    status: int
    body: Any
    request_id: str

    def describe(self) -> str:
        """Status, error code and message when there is one, and the request id."""
        text = str(self.status)
        if isinstance(self.body, dict) and "code" in self.body:
            text += f" {self.body.get('code')}: {self.body.get('message')}"
        return f"{text} (request {self.request_id})"


@dataclass
class Checker:
    """One run against one plugin: the steps, in order, sharing a session."""

    options: CheckOptions
    session: aiohttp.ClientSession
    run: str = field(default_factory=lambda: uuid.uuid4().hex)
    capabilities: frozenset[str] = frozenset()
    namespace_may_exist: bool = False
    _sent: int = 0

    @property
    def namespace(self) -> str:
        return f"workspace:check-{self.run}"

    async def call(self, method: str, path: str, body: Any = None) -> Reply:
        self._sent += 1
        request_id = f"check-{self.run[:12]}-{self._sent}"
        url = self.options.url.rstrip("/") + path
        headers = {"X-Request-ID": request_id, "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body)
        try:
            async with self.session.request(method, url, data=data, headers=headers) as response:
                raw = await response.read()
                status = response.status
        except aiohttp.ClientConnectorError as error:
            raise StepFailed(f"cannot reach {self.options.url}: {error}") from None
        except TimeoutError:
            timeout = self.options.timeout_s
            raise StepFailed(f"no answer to {method} {path} within {timeout:g} s") from None
        except aiohttp.ClientError as error:
            raise StepFailed(f"{method} {path} failed: {error!r}") from None
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")[:200]
        return Reply(status, parsed, request_id)

    async def expect(self, status: int, method: str, path: str, body: Any = None) -> Reply:
        reply = await self.call(method, path, body)
        if reply.status != status:
            raise StepFailed(f"{method} {path}: expected {status}, got {reply.describe()}")
        return reply

    async def commit(self, memory_id: str, content: str, **fields: Any) -> None:
        body = {"id": memory_id, "content": content, "kind": "fact", "source": "agent", **fields}
        path = f"/v1/namespaces/{self.namespace}/memories"
        reply = await self.expect(201, "POST", path, body)
        if reply.body != {"id": memory_id, "namespace": self.namespace}:
            raise StepFailed(f"commit answered {reply.body!r}, expected its id and namespace")

    async def search(self, **fields: Any) -> list[dict[str, Any]]:
        body = {"namespaces": [self.namespace], "limit": 100, **fields}
        reply = await self.expect(200, "POST", "/v1/search", body)
        memories = reply.body.get("memories") if isinstance(reply.body, dict) else None
        if not isinstance(memories, list) or not all(isinstance(m, dict) for m in memories):
            raise StepFailed(f"search answered {reply.body!r}, expected {{'memories': [...]}}")
        return memories

    # -- the steps -------------------------------------------------------------------

    async def health(self) -> str:
        reply = await self.expect(200, "GET", "/v1/health")
        body = reply.body if isinstance(reply.body, dict) else {}
        status, version, caps = body.get("status"), body.get("version"), body.get("capabilities")
        if status != "ok" or not isinstance(version, str) or not isinstance(caps, list):
            raise StepFailed(f"expected status ok, a version and capabilities, got {reply.body!r}")
        self.capabilities = frozenset(str(cap) for cap in caps)
        listed = ",".join(sorted(self.capabilities)) or "none"
        missing = [cap for cap in self.options.required if cap not in self.capabilities]
        if missing:
            raise StepFailed(f"capability {','.join(missing)} not advertised (has {listed})")
        return f"status ok, version {version}, capabilities {listed}"

    async def create_namespace(self) -> str:
        self.namespace_may_exist = True
        body: dict[str, Any] = {"kind": "workspace"}
        if "ttl" in self.capabilities:
            body["expires_at"] = format_time(datetime.now(UTC) + timedelta(hours=1))
        reply = await self.expect(200, "PUT", f"/v1/namespaces/{self.namespace}", body)
        got = reply.body if isinstance(reply.body, dict) else {}
        if got.get("name") != self.namespace or got.get("kind") != "workspace":
            raise StepFailed(f"PUT answered {reply.body!r}, expected the namespace")
        return f"{self.namespace} (200)"

    async def commit_memory(self) -> str:
        await self.commit(self.first_id, self.content(1))
        return f"201, id {self.first_id}"

    async def search_finds(self) -> str:
        memories = await self.search()
        expected = {"id": self.first_id, "namespace": self.namespace, "content": self.content(1)}
        if len(memories) != 1 or not _has(memories[0], expected):
            raise StepFailed(f"listing returned {_summary(memories)}, expected only the memory")
        if "embedding" not in self.capabilities:
            return "listing returns it"
        hits = await self.search(query="when do the deploys of this check happen?", limit=10)
        found = [m for m in hits if m.get("id") == self.first_id]
        if not found or not isinstance(found[0].get("score"), int | float):
            raise StepFailed(f"a query search returned {_summary(hits)}, expected it with a score")
        return "listing and a semantic query return it"

    async def same_id_updates(self) -> str:
        await self.commit(self.first_id, self.content(2))
        memories = await self.search()
        same = [m for m in memories if m.get("id") == self.first_id]
        if len(same) != 1 or len(memories) != 1:
            raise StepFailed(f"after a second commit with the same id: {_summary(memories)}")
        if same[0].get("content") != self.content(2):
            raise StepFailed("the memory still has its old content after the second commit")
        return "one memory with that id, new content"

    async def forget(self) -> str:
        path, body = f"/v1/memories/{self.first_id}", {"requested_by_namespace": self.namespace}
        await self.expect(204, "DELETE", path, body)
        memories = await self.search()
        if any(m.get("id") == self.first_id for m in memories):
            raise StepFailed("search still returns the forgotten memory")
        await self.expect(404, "DELETE", path, body)
        return "204, gone from search, forgetting again is 404"

    async def ttl(self) -> str:
        if "ttl" not in self.capabilities:
            raise StepSkipped("the plugin does not advertise ttl")
        probe = str(uuid.uuid4())
        expires = datetime.now(UTC) + timedelta(seconds=self.options.ttl_s)
        await self.commit(probe, self.content(3), expires_at=format_time(expires))
        if not any(m.get("id") == probe for m in await self.search()):
            raise StepFailed("not returned before its expires_at (plugin clock ahead of ours?)")
        remaining = (expires - datetime.now(UTC)).total_seconds() + TTL_MARGIN_S
        await asyncio.sleep(max(0.0, remaining))
        if any(m.get("id") == probe for m in await self.search()):
            late = f"{TTL_MARGIN_S:g} s after its expires_at"
            raise StepFailed(f"still returned {late} (plugin clock behind ours?)")
        return f"returned before expires_at, gone {TTL_MARGIN_S:g} s after it"

    async def delete_namespace(self) -> str:
        path = f"/v1/namespaces/{self.namespace}"
        await self.expect(204, "DELETE", path)
        self.namespace_may_exist = False
        memories = await self.search()
        if memories:
            raise StepFailed(f"search still returns {_summary(memories)}")
        await self.expect(404, "DELETE", path)
        return "204, search returns nothing, deleting again is 404"

    async def commit_after_delete(self) -> str:
        path = f"/v1/namespaces/{self.namespace}/memories"
        body = {"content": self.content(4), "kind": "fact", "source": "agent"}
        reply = await self.call("POST", path, body)
        if reply.status == 404:
            return "404"
        if 200 <= reply.status < 300:
            self.namespace_may_exist = True
        raise StepFailed(f"expected 404 for a deleted namespace, got {reply.describe()}")

    async def cleanup(self) -> str | None:
        """Delete the scratch namespace if it may still exist; a message when that failed."""
        if not self.namespace_may_exist:
            return None
        try:
            reply = await self.call("DELETE", f"/v1/namespaces/{self.namespace}")
        except StepFailed as error:
            return str(error)
        if reply.status not in (204, 404):
            return f"DELETE answered {reply.describe()}"
        self.namespace_may_exist = False
        return None

    # -- data ------------------------------------------------------------------------

    @property
    def first_id(self) -> str:
        return str(uuid.UUID(self.run))

    def content(self, version: int) -> str:
        return f"check {self.run} memory {version}: the deploys of this check happen on Tuesdays"


def _has(memory: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(memory.get(key) == value for key, value in expected.items())


def _summary(memories: list[dict[str, Any]]) -> str:
    ids = [str(m.get("id")) for m in memories]
    return f"{len(memories)} memories {ids}" if memories else "no memories"


async def run_check(options: CheckOptions, out: Print) -> int:
    """Run every step, printing one line each; 0 when all passed, else 1."""
    timeout = aiohttp.ClientTimeout(total=options.timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        checker = Checker(options, session)
        steps = [
            ("health", checker.health),
            ("create namespace", checker.create_namespace),
            ("commit", checker.commit_memory),
            ("search finds the memory", checker.search_finds),
            ("same-id commit updates in place", checker.same_id_updates),
            ("forget", checker.forget),
            ("ttl", checker.ttl),
            ("delete namespace", checker.delete_namespace),
            ("commit after delete", checker.commit_after_delete),
        ]
        passed = True
        try:
            for name, step in steps:
                try:
                    detail = await step()
                except StepSkipped as skipped:
                    out(f"skip {name}: {skipped}")
                    continue
                except StepFailed as failure:
                    out(f"FAIL {name}: {failure}")
                    passed = False
                    break
                out(f"ok   {name}: {detail}")
        finally:
            problem = await checker.cleanup()
            if problem is not None:
                out(f"FAIL cleanup: scratch namespace {checker.namespace} left behind: {problem}")
                passed = False
        return 0 if passed else 1
