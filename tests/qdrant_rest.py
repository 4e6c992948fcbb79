"""Qdrant REST responses as a Qdrant 1.16+ server sends them, for respx routes.

Bodies are built from `qdrant_client.http.models`, so their shapes are the SDK's own.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel
from qdrant_client.http import models


def ok(result: Any) -> httpx.Response:
    """A Qdrant success envelope around `result` (a model, or plain JSON)."""
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json", exclude_unset=True)
    elif isinstance(result, list):
        result = [r.model_dump(mode="json", exclude_unset=True) for r in result]
    return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.001})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"status": {"error": message}, "time": 0.001}, headers=headers
    )


def not_found(collection: str) -> httpx.Response:
    return error(404, f"Not found: Collection `{collection}` doesn't exist!")


def completed() -> httpx.Response:
    return ok(models.UpdateResult(operation_id=7, status=models.UpdateStatus.COMPLETED))
