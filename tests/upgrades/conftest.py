"""Fixtures of the store upgrades' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.keyword_store import write_previous_version


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    write_previous_version(tmp_path)
    return tmp_path
