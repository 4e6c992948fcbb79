"""Fixtures the API tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from collections.abc import Callable

import pytest

from harness.clocks import WallClock
from tests.support.app import AppFactory
from tests.support.app import ContractClient
from tests.support.app import served


@pytest.fixture
async def swept(
    make_app: AppFactory, clock: WallClock, from_empty_store: Callable[[], None]
) -> AsyncIterator[ContractClient]:
    """The app with its janitor sweeping every 50 ms."""
    from_empty_store()
    async for api in served(make_app, clock, janitor_interval_s=0.05):
        yield api
