"""Fixtures of the embedded store's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faults import seed


@pytest.fixture
async def seeded_store(tmp_path: Path) -> Path:
    """24 namespaces of 4 memories in a closed embedded store (tests/support/faults.py)."""
    await seed(tmp_path)
    return tmp_path
