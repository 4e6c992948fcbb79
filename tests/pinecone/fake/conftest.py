"""Fixtures of the Pinecone fake's tests: a 4-dimension fake, the SDK's index client, no sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pinecone import AsyncIndex
from pinecone._internal import http_client

from harness.pinecone_fake import FakePinecone
from tests.support.pinecone_sdk import KEY


@pytest.fixture
def pinecone_options() -> dict[str, Any]:
    return {"dimension": 4}


@pytest.fixture(autouse=True)
def retry_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The SDK's retry backoff, recorded instead of slept (its documented test seam)."""
    sleeps: list[float] = []

    async def record(delay: float) -> None:
        sleeps.append(delay)

    monkeypatch.setattr(http_client, "_async_retry_sleep", record)
    return sleeps


@pytest.fixture
async def idx(fake: FakePinecone) -> AsyncIterator[AsyncIndex]:
    async with AsyncIndex(host=fake.host, api_key=KEY) as index:
        yield index
