"""The Pinecone adapter tests' `backend`: started on `fake` with `ticks`, holding namespace NS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.pinecone import PineconeBackend
from adapters.values import NamespaceRecord
from harness.clocks import ManualClock
from harness.pinecone_backend import NS
from harness.pinecone_backend import adapter_backend
from harness.pinecone_fake import FakePinecone
from tests.support.records import T0


@pytest.fixture
async def backend(fake: FakePinecone, ticks: ManualClock) -> AsyncIterator[PineconeBackend]:
    store = adapter_backend(fake, ticks, freshness_window_s=30.0)
    await store.start()
    await store.save_namespace(NamespaceRecord(name=NS, kind="workspace", created_at=T0))
    yield store
    await store.close()
