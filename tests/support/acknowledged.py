"""Writers that remember what the plugin acknowledged, and a check of what survived.

Each `Writer` owns a few namespaces and writes to them one request at a time,
of every kind: create (PUT), commit a new memory, commit over an existing id,
forget, change the metadata (PATCH), delete the namespace. An answered write
is acknowledged: it must be there after any crash. The one request a writer
had in flight when the power went is in doubt: either its effect is there,
whole, or nothing of it (`check`).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any

import aiohttp


@dataclass(frozen=True)
class NamespaceState:
    """One namespace as the plugin should hold it: its memories by id, its metadata."""

    exists: bool = False
    memories: dict[str, str] = field(default_factory=dict)  # id -> content
    metadata: dict[str, Any] | None = None
    unreadable: str = ""  # a 503's message: the plugin knows it lost something


GONE = NamespaceState()
CREATE = {"kind": "workspace"}
MAX_MEMORIES = 60  # below the contract's search limit of 100: one search lists them all


class Writer:
    """One caller: its namespaces, what was acknowledged, and the write in doubt."""

    def __init__(self, number: int, names: int, seed: int) -> None:
        self.names = [f"workspace:writer{number}-{n}" for n in range(names)]
        self.acknowledged: dict[str, NamespaceState] = dict.fromkeys(self.names, GONE)
        self.in_doubt: tuple[str, NamespaceState] | None = None
        self.counts: dict[str, int] = {}  # acknowledged writes by kind
        self.stopped_by = ""  # why `run` returned
        self._rng = random.Random(seed)
        self._serial = 0

    async def create_all(self, session: aiohttp.ClientSession, base_url: str) -> None:
        """Create every namespace of this writer (before the first cut: a new shard is slow
        on the power-cut filesystem, and the writes that matter come after)."""
        for name in self.names:
            async with session.put(f"{base_url}/v1/namespaces/{name}", json=CREATE) as response:
                assert response.status == 200, await response.text()
            self.acknowledged[name] = NamespaceState(exists=True)

    async def run(self, session: aiohttp.ClientSession, base_url: str) -> None:
        """Write until a request fails (the power went); then that write is in doubt."""
        while True:
            name = self._rng.choice(self.names)
            kind, method, path, body, after = self._next(name)
            self.in_doubt = (name, after)
            try:
                async with session.request(method, base_url + path, json=body) as response:
                    text = await response.text()
                    expected = {"create": 200, "patch": 200}.get(kind, 201)
                    if kind in ("forget", "delete"):
                        expected = 204
                    if response.status != expected:  # refused or failed: in doubt
                        self.stopped_by = f"{method} {path}: {response.status} {text}"
                        return
            except (aiohttp.ClientError, OSError) as error:
                self.stopped_by = f"{method} {path}: {error!r}"
                return
            self.acknowledged[name], self.in_doubt = after, None
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def _next(self, name: str) -> tuple[str, str, str, Any, NamespaceState]:
        """The next write to `name`: kind, method, path, body, and the state it makes."""
        now = self.acknowledged[name]
        self._serial += 1
        base = f"/v1/namespaces/{name}"
        if not now.exists:
            return "create", "PUT", base, CREATE, NamespaceState(exists=True)
        roll = self._rng.random()
        ids = sorted(now.memories)
        if roll < 0.02:
            return "delete", "DELETE", base, None, GONE
        if roll < 0.10:
            metadata = {"serial": self._serial}
            return "patch", "PATCH", base, {"metadata": metadata}, replace(now, metadata=metadata)
        if ids and (roll < 0.25 or len(ids) >= MAX_MEMORIES):
            forgotten = self._rng.choice(ids)
            after = replace(now, memories={k: v for k, v in now.memories.items() if k != forgotten})
            body = {"requested_by_namespace": name}
            return "forget", "DELETE", f"/v1/memories/{forgotten}", body, after
        memory_id = self._rng.choice(ids) if ids and roll < 0.40 else str(uuid.uuid4())
        content = f"note {self._serial} of {name}: the build uses tabs, version {self._serial}"
        body = {"id": memory_id, "content": content, "kind": "fact", "source": "agent"}
        after = replace(now, memories={**now.memories, memory_id: content})
        return "commit", "POST", f"{base}/memories", body, after


async def read_namespace(
    session: aiohttp.ClientSession, base_url: str, name: str
) -> NamespaceState:
    """What the plugin holds for `name`: PATCH of an unchanged field reads the record
    (404: no namespace), and one search lists its memories."""
    base = f"{base_url}/v1/namespaces/{name}"
    async with session.patch(base, json={"expires_at": None}) as response:
        if response.status == 404:
            return GONE
        assert response.status == 200, (name, response.status, await response.text())
        record = await response.json()
    search = {"namespaces": [name], "limit": 100}
    async with session.post(f"{base_url}/v1/search", json=search) as response:
        if response.status == 503:
            return NamespaceState(True, unreadable=(await response.json())["message"])
        assert response.status == 200, (name, response.status, await response.text())
        found = (await response.json())["memories"]
    memories = {memory["id"]: memory["content"] for memory in found}
    return NamespaceState(True, memories, record["metadata"])


async def check(session: aiohttp.ClientSession, base_url: str, writer: Writer) -> list[str]:
    """Compare what the plugin holds with what `writer` was told; what differs. The
    write in doubt may be there or not, whole; what is found becomes the new truth."""
    wrong = []
    for name in writer.names:
        found = await read_namespace(session, base_url, name)
        allowed = [writer.acknowledged[name]]
        if writer.in_doubt is not None and writer.in_doubt[0] == name:
            allowed.append(writer.in_doubt[1])
        if found not in allowed:
            wrong.append(f"{name}: found {_show(found)}, acknowledged {_show(allowed[0])}")
        writer.acknowledged[name] = found
    writer.in_doubt = None
    return wrong


def _show(state: NamespaceState) -> str:
    if not state.exists:
        return "no namespace"
    if state.unreadable:
        return f"503: {state.unreadable}"
    return f"{len(state.memories)} memories {sorted(state.memories.items())}, {state.metadata}"
