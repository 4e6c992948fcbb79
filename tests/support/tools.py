"""External command-line tools the tests drive (helm, hadolint)."""

from __future__ import annotations

import os

import pytest


def require_tool(path: str | None, name: str, how_to_get_it: str) -> str:
    """The tool's path; without it, skip locally but fail under CI (`CI` set)."""
    if path is not None:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{name} is missing under CI: {how_to_get_it}")
    pytest.skip(f"{name} not found ({how_to_get_it}); under CI this fails")
