"""Shared fixtures: the real model (loaded once), the clocks, a plugin app per test, and
the Pinecone fake.

`api` is an aiohttp test client wrapped so that every exchange is checked
against the contract before the test sees it (tests/support/app.py).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from aiohttp import ClientSession
from aiohttp import web

from adapters.base import VectorBackend
from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.pool.embedded_store import embedded_store
from harness.clocks import ManualClock
from harness.clocks import WallClock
from harness.pinecone_backend import pinecone_backend
from harness.pinecone_fake import FakePinecone
from plugin.embedding.encoders import SentenceTransformerEncoder
from plugin.http.app import create_app
from plugin.settings import Settings
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import app_settings
from tests.support.app import served
from tests.support.backends import TEST_POOL_WORKERS
from tests.support.backends import copy_of
from tests.support.backends import made_once
from tests.support.records import DIM
from tests.support.shared_server import SharedServer


@pytest.fixture(scope="session")
def encoder() -> SentenceTransformerEncoder:
    """The real model, on this process's part of the cores: in a parallel run
    (scripts/test) each test process gets an equal part, as torch would otherwise give
    every process a thread per core and their threads would wait on one another."""
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))
    return SentenceTransformerEncoder.load()


@pytest.fixture(scope="session")
def empty_store(
    tmp_path_factory: pytest.TempPathFactory, encoder: SentenceTransformerEncoder
) -> Path:
    """A new embedded store of the session encoder's sizes, made once: an `api` test on the
    embedded store starts from a copy (`from_empty_store`). A new store's creation is
    tested where tests make their own (tests/qdrant/edge/, and the backends' own tests)."""
    return made_once(
        tmp_path_factory,
        "empty-store",
        lambda data: QdrantEdgeBackend(
            encoder.dimension, data, token_dimension=encoder.token_dimension
        ),
    )


@pytest.fixture(scope="session")
def empty_test_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new embedded store of the test records' size (`DIM`), in-process, made once."""
    return made_once(
        tmp_path_factory, "empty-test-store", lambda data: QdrantEdgeBackend(DIM, data)
    )


@pytest.fixture(scope="session")
def empty_test_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new embedded store of `DIM` over `TEST_POOL_WORKERS` engine workers, made once."""
    return made_once(
        tmp_path_factory,
        "empty-test-pool",
        lambda data: embedded_store(DIM, data, TEST_POOL_WORKERS),
    )


@pytest.fixture
def from_empty_store(settings: Settings, empty_store: Path) -> Callable[[], None]:
    """Copy `empty_store` to the test's data directory, where the app will make a store of
    one engine worker there (and nothing is there yet)."""

    def copy() -> None:
        one = settings.engine_workers == 1 and settings.backend == "embedded"
        if one and not settings.data_dir.exists():
            copy_of(empty_store, settings.data_dir)

    return copy


@pytest.fixture
def clock() -> WallClock:
    """The app's clock (expiry): wall time the test can move forward."""
    return WallClock()


@pytest.fixture
def ticks() -> ManualClock:
    """An adapter's clock (seconds): moves only when the test moves it."""
    return ManualClock(1000.0)


@pytest.fixture
def pinecone_options() -> dict[str, Any]:
    """How `fake` is made: FakePinecone's keyword arguments. Override it where they differ."""
    return {"dimension": DIM}


@pytest.fixture
def fake(ticks: ManualClock, pinecone_options: dict[str, Any]) -> Iterator[FakePinecone]:
    """The HTTP-level fake of Pinecone, on `ticks`, mocked for the test's duration."""
    with FakePinecone(clock=ticks, **pinecone_options).mocked() as pinecone:
        yield pinecone


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    """An admission budget no test of races reaches (150 requests at once in one namespace,
    on however slow a machine): admission has tests of its own (tests/http/test_admission.py)
    with budgets they choose.

    `@pytest.mark.settings(name=value)` overrides fields for one test, e.g. a deadline
    that a test of something else must not race on a slow machine."""
    marker = request.node.get_closest_marker("settings")
    overrides: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    return app_settings(tmp_path / "data", **overrides)


@pytest.fixture(scope="session")
def shared_server(
    tmp_path_factory: pytest.TempPathFactory,
    encoder: SentenceTransformerEncoder,
    empty_store: Path,
) -> Iterator[SharedServer]:
    """The app the `shares_server` modules' embedded `api` tests share, on `app_settings`
    alone, started at its first use (tests/support/shared_server.py)."""
    data = copy_of(empty_store, tmp_path_factory.mktemp("shared-server") / "data")
    server = SharedServer(app_settings(data), encoder)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def make_app(
    encoder: SentenceTransformerEncoder, settings: Settings, clock: WallClock
) -> AppFactory:
    def build(backend: VectorBackend | None = None, **overrides: Any) -> web.Application:
        chosen = settings.model_copy(update=overrides) if overrides else settings
        return create_app(chosen, encoder=encoder, backend=backend, clock=clock)

    return build


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `long` first, in their order, then the rest: a parallel run
    (scripts/test) starts the longest while the others fill the other processes."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


BACKEND_KINDS = ("embedded", "pinecone", "pinecone-lagging")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`pytestmark = pytest.mark.every_backend` runs a module's `api` tests on each backend."""
    if "backend_kind" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "every_backend"
    ):
        metafunc.parametrize("backend_kind", BACKEND_KINDS)


@pytest.fixture
def backend_kind() -> str:
    """Which store `api` runs on; modules marked `every_backend` get all of BACKEND_KINDS.

    - embedded: the real qdrant-edge store on disk (the default backend).
    - pinecone: PineconeBackend against the HTTP-level fake, every write visible at once.
    - pinecone-lagging: the same, but Pinecone shows no write made during the test, so
      every fresh read is served by the read-your-writes overlay.
    """
    return "embedded"


def shares_server(request: pytest.FixtureRequest) -> bool:
    """Whether the test's embedded `api` is the shared server: its module is marked
    `shares_server`, and the test asks no settings of its own and is not marked `own_app`
    (it awaits the app's objects, which live on the shared server's loop)."""
    node = request.node
    return node.get_closest_marker("shares_server") is not None and not any(
        node.get_closest_marker(name) for name in ("settings", "own_app")
    )


@pytest.fixture
async def api(
    make_app: AppFactory,
    clock: WallClock,
    backend_kind: str,
    settings: Settings,
    from_empty_store: Callable[[], None],
    request: pytest.FixtureRequest,
) -> AsyncIterator[ContractClient]:
    if backend_kind == "embedded":
        if shares_server(request):
            shared: SharedServer = request.getfixturevalue("shared_server")
            shared.reset()
            async with ClientSession(shared.url) as session:
                yield ContractClient(session, shared.app, shared.clock)
            return
        from_empty_store()
        async for client in served(make_app, clock):
            yield client
        return
    lag = 3600.0 if backend_kind == "pinecone-lagging" else 0.0
    with FakePinecone(dimension=384, visibility_delay_s=lag).mocked() as fake:
        backend = pinecone_backend(fake, timeout_s=settings.backend_timeout_s)
        async for client in served(make_app, clock, backend=backend):
            yield client
