"""The store's embedding fingerprint: adopted, assumed for old stores, and enforced at start."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC
from datetime import datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.values import NamespaceRecord
from harness.server_process import free_port
from plugin.core.fingerprint import LEGACY_FINGERPRINT
from plugin.core.fingerprint import META_KEY
from plugin.core.fingerprint import FingerprintMismatch
from plugin.core.fingerprint import check_store
from plugin.core.fingerprint import same_vector_space
from plugin.embedding.encoders import SentenceTransformerEncoder
from tests.support.app import AppFactory
from tests.support.cli import PROG
from tests.support.cli import one_line
from tests.support.cli import run_cli
from tests.support.cli import serve_env

TORCH, ONNX, INT8 = (f"all-MiniLM-L6-v2/{b}" for b in ("torch", "onnx", "onnx-int8"))


def test_vector_spaces() -> None:
    assert same_vector_space(TORCH, ONNX)
    assert same_vector_space(INT8, INT8)
    assert not same_vector_space(TORCH, INT8)
    assert not same_vector_space(ONNX, INT8)
    assert not same_vector_space(TORCH, "paraphrase-MiniLM-L3-v2/torch")


async def store_with(data_dir: Path, *, namespace: bool, recorded: str | None) -> None:
    store = QdrantEdgeBackend(384, data_dir)
    await store.start()
    try:
        if namespace:
            now = datetime.now(UTC)
            await store.save_namespace(NamespaceRecord("workspace:old", "workspace", now))
        if recorded is not None:
            await store.store_meta.write_store_meta(META_KEY, recorded)
    finally:
        await store.close()


async def recorded_in(data_dir: Path) -> str | None:
    store = QdrantEdgeBackend(384, data_dir)
    await store.start()
    try:
        return (await store.store_meta.read_store_meta()).get(META_KEY)
    finally:
        await store.close()


async def check(data_dir: Path, fingerprint: str) -> str:
    store = QdrantEdgeBackend(384, data_dir)
    await store.start()
    try:
        return await check_store(store, fingerprint)
    finally:
        await store.close()


async def test_an_empty_store_adopts_the_configured_fingerprint(tmp_path: Path) -> None:
    assert await check(tmp_path, INT8) == INT8
    assert await recorded_in(tmp_path) == INT8  # durable: read back after reopening
    with pytest.raises(FingerprintMismatch):
        await check(tmp_path, ONNX)


async def test_an_old_store_without_a_record_is_taken_as_torch(tmp_path: Path) -> None:
    await store_with(tmp_path, namespace=True, recorded=None)
    assert await check(tmp_path, ONNX) == LEGACY_FINGERPRINT  # same space: accepted
    assert await recorded_in(tmp_path) == LEGACY_FINGERPRINT
    with pytest.raises(FingerprintMismatch):
        await check(tmp_path, INT8)


async def test_the_mismatch_says_what_and_what_to_do(tmp_path: Path) -> None:
    await store_with(tmp_path, namespace=True, recorded=INT8)
    with pytest.raises(FingerprintMismatch) as raised:
        await check(tmp_path, ONNX)
    message = str(raised.value)
    assert f"vectors of {INT8}" in message
    assert f"configured encoder is {ONNX}" in message
    assert "MEMORY_PLUGIN_EMBEDDING_BACKEND=onnx-int8" in message
    assert "`memory-plugin-vector export` then `import`" in message
    assert "\n" not in message


async def test_the_app_refuses_to_start_on_a_mismatch(
    make_app: AppFactory, encoder: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"  # the `settings` fixture's
    await store_with(data_dir, namespace=False, recorded=INT8)
    with pytest.raises(FingerprintMismatch, match="onnx-int8"):
        async with TestClient(TestServer(make_app())):
            pass
    assert await recorded_in(data_dir) == INT8  # nothing was overwritten


async def test_the_app_records_on_first_start(make_app: AppFactory, tmp_path: Path) -> None:
    async with TestClient(TestServer(make_app())) as client, client.get("/v1/health") as reply:
        assert reply.status == 200
    assert await recorded_in(tmp_path / "data") == TORCH  # the fixture's encoder


@pytest.mark.slow
async def test_serve_stops_with_one_line_and_exit_1(tmp_path: Path) -> None:
    await store_with(tmp_path / "data", namespace=True, recorded=INT8)
    env = serve_env(f"127.0.0.1:{free_port()}", tmp_path / "data")
    result, _ = run_cli(["serve"], env, timeout_s=120.0)
    assert result.returncode == 1, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"{PROG}: cannot start: the store holds vectors of {INT8}"), line
    assert f"configured encoder is {ONNX}" in line


async def test_a_mismatch_found_when_a_late_store_answers_stops_serve_with_status_1(
    encoder: SentenceTransformerEncoder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store down at start is checked once it answers; another space then stops `serve`."""
    from adapters.errors import BackendUnavailable
    from plugin.commands.serve import run_app
    from plugin.core import fingerprint
    from plugin.http.app import create_app
    from plugin.settings import Settings

    data_dir = tmp_path / "data"
    await store_with(data_dir, namespace=True, recorded=INT8)
    monkeypatch.setattr(fingerprint, "RETRY_S", 0.05)
    backend = QdrantEdgeBackend(
        encoder.dimension, data_dir, token_dimension=encoder.token_dimension
    )
    read_store_meta, reads = backend.store_meta.read_store_meta, []

    async def late_store() -> Mapping[str, str]:
        reads.append(1)
        if len(reads) == 1:
            raise BackendUnavailable("not answering yet")
        return await read_store_meta()

    monkeypatch.setattr(backend.store_meta, "read_store_meta", late_store)
    settings = Settings(data_dir=data_dir, listen_addr=f"127.0.0.1:{free_port()}")
    app = create_app(settings, encoder=encoder, backend=backend)
    status = await asyncio.wait_for(run_app(app, "127.0.0.1", free_port()), timeout=30)
    assert status == 1
    assert len(reads) >= 2  # the first read failed; the mismatch came from a later one
    stderr = capsys.readouterr().err
    printed = [line for line in stderr.splitlines() if line.startswith(f"{PROG}: ")]
    assert len(printed) == 1, stderr
    assert printed[0].startswith(f"{PROG}: stopping: the store holds vectors of {INT8}")
    assert await recorded_in(data_dir) == INT8  # nothing was overwritten
