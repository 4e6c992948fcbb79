"""Driving the Pinecone fake through the real pinecone SDK: the rows, pages and headers it sees."""

from __future__ import annotations

from typing import Any

from pinecone import AsyncIndex
from pinecone.models.response_info import ResponseInfo
from pinecone.models.vectors.responses import ListResponse

KEY = "test-api-key"
NS = "people"
ROWS: list[tuple[str, list[float], dict[str, Any]]] = [
    ("a", [1, 0, 0, 0], {"kind": "note", "n": 1, "tags": ["red", "blue"], "pin": True}),
    ("b", [1, 0.1, 0, 0], {"kind": "todo", "n": 2.5, "tags": ["green"], "pin": False}),
    ("c", [1, 0.2, 0, 0], {"kind": "note", "n": 10}),
    ("d", [1, 0.3, 0, 0], {"other": "x"}),
]


async def upsert(idx: AsyncIndex, *rows: Any) -> None:
    await idx.upsert(vectors=list(rows), namespace=NS)


def ids_of(page: ListResponse) -> list[str]:
    return [str(item.id) for item in page.vectors]


def info(response: Any) -> ResponseInfo:
    """The response's headers as the SDK read them (always set on data-plane results)."""
    assert isinstance(response.response_info, ResponseInfo)
    return response.response_info
