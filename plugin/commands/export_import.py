"""The `export` and `import` commands, and what every transfer command shares: the store from
settings, with a bulk call's longer deadline; a progress bar on stderr when it is a terminal.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO
from typing import Any

import aiohttp

from adapters.base import VectorBackend
from adapters.keyword_encoder import KeywordEncoder
from plugin.backends import build_backend
from plugin.commands import Print
from plugin.core.fingerprint import check_store
from plugin.core.fingerprint import same_vector_space
from plugin.core.service import utc_now
from plugin.embedding.encoders import Encoder
from plugin.embedding.encoders import configured_dimension
from plugin.embedding.encoders import configured_fingerprint
from plugin.embedding.encoders import configured_token_dimension
from plugin.embedding.encoders import load_encoder as load_encoder  # re-exported: tests replace it
from plugin.settings import Settings
from plugin.transfer import jsonl
from plugin.transfer.bulk import EmbedMany
from plugin.transfer.bulk import StoreWriter
from plugin.transfer.bulk import import_lines
from plugin.transfer.bulk import stream_export
from plugin.upgrades import vector_fill

BULK_TIMEOUT_S = 10.0  # per backend call, retries included (the setting's maximum)
EMBED_CHUNK = 128


def embedder(encoder: Encoder) -> EmbedMany:
    """The model on a worker thread, `EMBED_CHUNK` texts per call."""

    async def embed(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_CHUNK):
            vectors += await asyncio.to_thread(encoder.encode, texts[start : start + EMBED_CHUNK])
        return vectors

    return embed


@asynccontextmanager
async def opened_backend(settings: Settings, dimension: int) -> AsyncIterator[VectorBackend]:
    """The store the settings name, started, closed (flushed) at the end."""
    bulk = settings.model_copy(update={"backend_timeout_s": BULK_TIMEOUT_S})
    backend = build_backend(bulk, dimension, configured_token_dimension(settings))
    await backend.start()
    try:
        await backend.ping()
        yield backend
    finally:
        await backend.close()


class ProgressBar:
    """tqdm on stderr when it is a terminal; nothing otherwise (logs stay clean)."""

    def __init__(self, what: str) -> None:
        self._bar: Any = None
        if sys.stderr.isatty():
            from tqdm import tqdm  # type: ignore[import-untyped]

            self._bar = tqdm(desc=what, unit=" memories", file=sys.stderr)

    def update(self, count: int) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "n/a"


# -- export --------------------------------------------------------------------------


async def export_local(settings: Settings, out: IO[bytes], bar: ProgressBar) -> tuple[int, int]:
    """Export straight from the store (a Qdrant server, Pinecone, or a stopped embedded one),
    the header naming what made the stored vectors (recorded with the store)."""
    dimension = configured_dimension(settings)
    async with opened_backend(settings, dimension) as backend:
        recorded = await check_store(backend, configured_fingerprint(settings))
        header = jsonl.Header(recorded, dimension, utc_now(), backend.name)

        async def write(data: bytes) -> None:
            await asyncio.to_thread(out.write, data)

        counts = await stream_export(backend, header, write, utc_now, bar.update)
    return counts.namespaces, counts.memories


async def export_remote(url: str, out: IO[bytes], bar: ProgressBar) -> tuple[int, int]:
    """Download `GET /admin/export` from a running plugin, checking the end line's counts."""
    counts = {b"namespace": 0, b"memory": 0}
    tail, last = b"", b""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url.rstrip("/") + "/admin/export") as response,
    ):
        if response.status != 200:
            text = (await response.text())[:300]
            raise RuntimeError(f"{url} answered {response.status}: {text}")
        async for chunk in response.content.iter_chunked(1 << 20):
            await asyncio.to_thread(out.write, chunk)
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                kind = line[9:18].split(b'"')[0]  # lines start with {"type":"<kind>"
                if kind in counts:
                    counts[kind] += 1
                    bar.update(kind == b"memory")
                if line:
                    last = line
    trailer = json.loads(last) if last.startswith(b'{"type":"end"') else None
    found = (counts[b"namespace"], counts[b"memory"])
    if trailer is None or (trailer["namespaces"], trailer["memories"]) != found:
        raise RuntimeError("the export was cut short (no end line, or counts differ): retry")
    return found


def run_export(settings: Settings, out_path: str, from_url: str | None, echo: Print) -> int:
    started = time.perf_counter()
    out = jsonl.open_out(out_path)
    bar = ProgressBar("export")
    try:
        if from_url is not None:
            namespaces, memories = asyncio.run(export_remote(from_url, out, bar))
        else:
            namespaces, memories = asyncio.run(export_local(settings, out, bar))
    finally:
        bar.close()
        if out is not sys.stdout.buffer:
            out.close()
        else:
            out.flush()
    seconds = time.perf_counter() - started
    where = "stdout" if out_path == "-" else out_path
    echo(
        f"export: {namespaces} namespaces, {memories} memories to {where} in {seconds:.1f} s"
        f" ({rate(memories, seconds)})"
    )
    return 0


# -- import --------------------------------------------------------------------------


async def _import(
    settings: Settings, stream: IO[bytes], bar: ProgressBar, echo: Print
) -> tuple[int, int]:
    """Import an opened export; (exit status, memories read)."""
    lines = jsonl.parse_lines(iter(stream))
    header = next(lines)
    assert isinstance(header, jsonl.Header)  # parse_lines yields the header first
    target = configured_fingerprint(settings)
    reuse = same_vector_space(header.fingerprint, target)  # torch and onnx agree
    embed: EmbedMany | None = None
    if reuse:
        dimension = header.dimension
        echo(f"import: vectors made by {target}: reused, nothing is embedded")
    else:
        echo(f"import: vectors made by {header.fingerprint}, not {target}: content is re-embedded")
        encoder = await asyncio.to_thread(load_encoder, settings)
        dimension, embed = encoder.dimension, embedder(encoder)
    keywords = KeywordEncoder()
    async with opened_backend(settings, dimension) as backend:
        await check_store(backend, target)  # never mix vector spaces in the target
        writer = StoreWriter(backend, utc_now(), embed, keywords, progress=bar.update)
        await import_lines(lines, writer, reuse_vectors=reuse)
        await vector_fill.fill_store(backend, vector_fill.keywords(keywords))
    report = writer.report
    echo(
        f"import: namespaces {report.namespaces_written} written,"
        f" {report.namespaces_unchanged} unchanged,"
        f" {report.namespaces_skipped_expired} skipped (expired); memories {report.written}"
        f" written ({report.embedded} embedded), {report.unchanged} unchanged,"
        f" {report.skipped_expired} skipped (expired), {report.skipped_invalid} invalid;"
        f" {report.reused} stored vectors reused"
    )
    for problem in report.problems:
        echo(f"import: invalid: {problem}")
    return (1 if report.skipped_invalid else 0), report.memories_seen


def run_import(settings: Settings, in_path: str, echo: Print) -> int:
    started = time.perf_counter()
    stream = jsonl.open_in(in_path)
    bar = ProgressBar("import")
    try:
        status, memories = asyncio.run(_import(settings, stream, bar, echo))
    finally:
        bar.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    seconds = time.perf_counter() - started
    echo(f"import: {memories} memories read in {seconds:.1f} s ({rate(memories, seconds)})")
    return status
