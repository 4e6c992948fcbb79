"""What every group of the backend suite shares: the `ns` namespace fixture."""

from __future__ import annotations

import pytest

from adapters.base import VectorBackend
from adapters.values import NamespaceRecord
from tests.support.records import T0


class BackendCase:
    """Subclasses (and the test classes that inherit them) provide `backend`."""

    @pytest.fixture
    async def ns(self, backend: VectorBackend) -> str:
        name = "workspace:550e8400-e29b-41d4-a716-446655440000"
        await backend.save_namespace(NamespaceRecord(name=name, kind="workspace", created_at=T0))
        return name
