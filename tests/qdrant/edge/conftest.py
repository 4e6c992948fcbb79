"""Fixtures of the embedded store's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.backends import copy_of
from tests.support.backends import in_own_loop
from tests.support.faults import seed


@pytest.fixture(scope="session")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded store, written once a session: each test damages a copy of its own."""
    data = tmp_path_factory.mktemp("seeded") / "data"
    in_own_loop(seed(data))
    return data


@pytest.fixture
def seeded_store(tmp_path: Path, seeded_template: Path) -> Path:
    """24 namespaces of 4 memories in a closed embedded store (tests/support/faults.py)."""
    return copy_of(seeded_template, tmp_path / "seeded")
