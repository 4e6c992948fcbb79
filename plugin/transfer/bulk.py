"""Export a store to JSON Lines and import one, on any backend (`export`, `import`).

Import (and `import-postgres`) writes through `StoreWriter`, under the HTTP API's rules; what
both guarantee: docs/export-format.md.
"""

from __future__ import annotations

from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from datetime import datetime

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from adapters.parts import BulkTransfer
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord
from plugin.core.contract_names import canonical_uuid
from plugin.core.contract_names import check_namespace_name
from plugin.core.service import unexpired_namespace
from plugin.embedding.embedder import clip_for_model
from plugin.transfer import jsonl
from plugin.upgrades.place_upgrade import place_namespace

# Texts in, vectors out (the model on a worker thread); None when vectors are reused.
EmbedMany = Callable[[list[str]], Awaitable[list[list[float]]]]
Progress = Callable[[int], None]
WRITE_BATCH = 256


def _nothing(_: int) -> None:
    pass


def transfer_of(backend: VectorBackend) -> BulkTransfer:
    """The backend's bulk transfer part (every backend here has one)."""
    if backend.transfer is None:
        raise NotImplementedError(f"the {backend.name} backend cannot stream its memories")
    return backend.transfer


async def stream_export(
    backend: VectorBackend,
    header: jsonl.Header,
    write: Callable[[bytes], Awaitable[None]],
    clock: Callable[[], datetime],
    progress: Progress = _nothing,
) -> jsonl.Trailer:
    """Write the whole export through `write` (a file or an HTTP response), one page at a time;
    liveness is judged at `header.exported_at` (what expires later, expires on the target).
    The end line it wrote counts what it holds."""
    now = header.exported_at
    await write(jsonl.dumps(header.to_json()))
    records = sorted(await backend.list_namespaces(), key=lambda record: record.name)
    live = [record for record in records if not record.is_expired(now)]
    await write(b"".join(jsonl.dumps(jsonl.namespace_line(record)) for record in live))
    transfer = transfer_of(backend)
    memories = 0
    for record in live:
        async for page in transfer.iter_memories(record.name, now):
            await write(b"".join(jsonl.dumps(jsonl.memory_line(m, v)) for m, v in page))
            memories += len(page)
            progress(len(page))
    trailer = jsonl.Trailer(len(live), memories, clock())
    await write(jsonl.dumps(trailer.to_json()))
    return trailer


@dataclass
class ImportReport:
    """What a run did; `written == 0 and namespaces_written == 0` on a repeated run."""

    namespaces_written: int = 0
    namespaces_unchanged: int = 0
    namespaces_skipped_expired: int = 0
    written: int = 0
    unchanged: int = 0
    skipped_expired: int = 0
    skipped_invalid: int = 0
    embedded: int = 0
    reused: int = 0  # same content already stored: its vector, not the model's
    problems: list[str] = field(default_factory=list)

    def problem(self, line: str) -> None:
        self.skipped_invalid += 1
        if len(self.problems) < 20:
            self.problems.append(line)

    @property
    def memories_seen(self) -> int:
        return self.written + self.unchanged + self.skipped_expired + self.skipped_invalid


class StoreWriter:
    """Writes namespaces and memories into a backend under the HTTP API's rules, in batches.
    Memories arrive grouped by namespace: what the store holds is read a namespace at a time,
    to tell an unchanged memory from one to write without holding the whole store."""

    def __init__(
        self,
        backend: VectorBackend,
        now: datetime,
        embed: EmbedMany | None,
        keywords: KeywordEncoder | None,
        *,
        batch: int = WRITE_BATCH,
        progress: Progress = _nothing,
    ) -> None:
        self.backend = backend
        self._transfer = transfer_of(backend)
        self.now = now
        self.report = ImportReport()
        self._embed = embed
        self._keywords = keywords
        self._batch = batch
        self._progress = progress
        self._live: set[str] = set()
        self._stored_ns: str | None = None
        self._stored: dict[str, MemoryRecord] = {}
        self._pending: list[tuple[MemoryRecord, list[float]]] = []
        self._unplaced: set[str] = set()  # namespaces given memories without a place

    async def namespace(self, record: NamespaceRecord) -> None:
        """Create or replace the record (keeping the file's `created_at`); skip an expired one."""
        try:
            check_namespace_name(record.name)
        except ValueError as error:
            self.report.problem(f"namespace {record.name!r}: {error}")
            return
        if record.is_expired(self.now):
            self.report.namespaces_skipped_expired += 1
            return
        existing = await unexpired_namespace(self.backend, record.name, self.now)  # as a PUT
        if existing == record:
            self.report.namespaces_unchanged += 1
        else:
            await self.backend.save_namespace(record)
            self.report.namespaces_written += 1
        self._live.add(record.name)

    async def memory(self, memory: MemoryRecord, vector: list[float]) -> None:
        """Queue one memory (its vector, or [] to embed its content); written in batches."""
        try:
            memory = _checked(memory)
        except ValueError as error:
            self.report.problem(f"memory {memory.id!r} in {memory.namespace!r}: {error}")
            return
        if memory.namespace not in self._live:
            self.report.problem(
                f"memory {memory.id} names namespace {memory.namespace!r}, which"
                " is not in the import (or expired)"
            )
            return
        if memory.is_expired(self.now):
            self.report.skipped_expired += 1
            self._progress(1)
            return
        stored = (await self._stored_in(memory.namespace)).get(memory.id)
        if memory.position is None and stored is not None:  # a file without places
            memory = replace(memory, position=stored.position)
        if stored == memory:
            self.report.unchanged += 1
            self._progress(1)
            return
        if not vector and stored is not None and stored.content == memory.content:
            found = await self.backend.get_stored_memory(memory.namespace, memory.id)
            if found is not None and found[0].content == memory.content and found[1]:
                vector = found[1]
                self.report.reused += 1
        if memory.position is None:
            self._unplaced.add(memory.namespace)
        self._pending.append((memory, vector))
        if len(self._pending) >= self._batch:
            await self.flush()

    async def _stored_in(self, namespace: str) -> dict[str, MemoryRecord]:
        if self._stored_ns != namespace:
            await self.flush()  # so the store holds everything queued before
            self._stored = {
                memory.id: memory
                async for page in self._transfer.iter_memories(
                    namespace, self.now, with_vectors=False
                )
                for memory, _ in page
            }
            self._stored_ns = namespace
        return self._stored

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        missing = [index for index, (_, vector) in enumerate(pending) if not vector]
        if missing:
            if self._embed is None:
                raise ValueError("a memory without a vector, and no model to embed it")
            texts = [clip_for_model(pending[i][0].content) for i in missing]
            for index, vector in zip(missing, await self._embed(texts), strict=True):
                pending[index] = (pending[index][0], vector)
            self.report.embedded += len(missing)
        keywords = None  # without an encoder, left to the keyword index (migrate-layout)
        if self._keywords is not None:
            keywords = [self._keywords.document(memory.content) for memory, _ in pending]
        await self._transfer.upsert_memories(pending, keywords)
        self.report.written += len(pending)
        self._progress(len(pending))

    async def place(self) -> None:
        """Write what is queued, then place the memories written without a place (a file
        from before places, or from the postgres plugin) by their `created_at`."""
        await self.flush()
        for namespace in sorted(self._unplaced):
            await place_namespace(self._transfer, namespace, self.now)
        self._unplaced.clear()


def _checked(memory: MemoryRecord) -> MemoryRecord:
    """The wire's rules for what a memory may hold; the id in canonical form."""
    if not memory.content.strip():
        raise ValueError("content is blank")
    if memory.kind not in ("fact", "summary", "checkpoint"):
        raise ValueError(f"kind {memory.kind!r} is not fact, summary or checkpoint")
    if memory.source not in ("agent", "runtime", "user"):
        raise ValueError(f"source {memory.source!r} is not agent, runtime or user")
    if memory.propagation is not None and not isinstance(memory.propagation, dict):
        raise ValueError("propagation is not a JSON object")
    memory_id = canonical_uuid(memory.id)
    return memory if memory_id == memory.id else replace(memory, id=memory_id)


async def import_lines(
    lines: Iterator[jsonl.Line], writer: StoreWriter, *, reuse_vectors: bool
) -> None:
    """Feed an export's lines after its header into `writer`, then write what is queued."""
    for line in lines:
        if isinstance(line, NamespaceRecord):
            await writer.namespace(line)
        elif isinstance(line, tuple):
            memory, vector = line
            await writer.memory(memory, vector if reuse_vectors else [])
    await writer.place()
