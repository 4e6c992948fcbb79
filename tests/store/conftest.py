"""Fixtures of the embedded store's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.faults import seed
from tests.support.keyword_store import write_previous_version


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    write_previous_version(tmp_path)
    return tmp_path


@pytest.fixture
async def seeded_store(tmp_path: Path) -> Path:
    """24 namespaces of 4 memories in a closed embedded store (tests/store/faults.py)."""
    await seed(tmp_path)
    return tmp_path
