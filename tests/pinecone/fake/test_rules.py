"""The Pinecone fake's rules, through the real SDK: filters, and the 400s and 413s Pinecone sends.

A few server-side rules the SDK pre-empts client-side are reached through the SDK's own
HTTP client (`idx._http`), which still sends the SDK's headers and maps errors with its
`_raise_for_status`.
"""

from __future__ import annotations

from typing import Any

import pytest
from pinecone import ApiError
from pinecone import AsyncIndex
from pinecone import PayloadTooLargeError

from harness.pinecone_fake import FakePinecone
from tests.support.pinecone_sdk import NS
from tests.support.pinecone_sdk import ROWS
from tests.support.pinecone_sdk import upsert

# --- filters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"kind": "note"}, "ac"),
        ({"kind": {"$eq": "todo"}}, "b"),
        ({"n": 1.0}, "a"),  # numbers compare as floats
        ({"pin": {"$eq": 1}}, ""),  # booleans are not numbers
        ({"kind": {"$ne": "note"}}, "bd"),  # a missing field matches a negation
        ({"n": {"$gt": 1}}, "bc"),
        ({"n": {"$gte": 2.5}}, "bc"),
        ({"n": {"$lt": 10}}, "ab"),
        ({"n": {"$lte": 2.5}}, "ab"),
        ({"n": {"$gt": 1, "$lt": 10}}, "b"),
        ({"kind": {"$in": ["todo", "none"]}}, "b"),
        ({"kind": {"$nin": ["note"]}}, "bd"),
        ({"tags": "blue"}, "a"),  # a list matches when any element does
        ({"tags": {"$in": ["green", "red"]}}, "ab"),
        ({"tags": {"$ne": "red"}}, "bcd"),
        ({"tags": {"$nin": ["red", "green"]}}, "cd"),
        ({"tags": {"$exists": True}}, "ab"),
        ({"n": {"$exists": False}}, "d"),
        ({"$and": [{"kind": "note"}, {"n": {"$gt": 5}}]}, "c"),
        ({"$or": [{"kind": "todo"}, {"other": "x"}]}, "bd"),
        ({"kind": "note", "pin": True}, "a"),
    ],
)
async def test_filter_operators(idx: AsyncIndex, flt: dict[str, Any], expected: str) -> None:
    await upsert(idx, *ROWS)
    found = await idx.query(vector=[1, 0, 0, 0], top_k=10, namespace=NS, filter=flt)
    assert "".join(sorted(m.id for m in found.matches)) == expected


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ({"kind": {"$regex": "no.*"}}, "unsupported operator '\\$regex'"),
        ({"$not": {"kind": "note"}}, "unsupported operator '\\$not'"),
        ({"n": {"$gt": "5"}}, "\\$gt requires a number"),
        ({"$or": []}, "\\$or requires a non-empty array"),
        ({"kind": None}, "unsupported value None"),
    ],
)
async def test_bad_filters_are_400s(idx: AsyncIndex, flt: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx.query(vector=[1, 0, 0, 0], top_k=1, namespace=NS, filter=flt)
    assert caught.value.status_code == 400


# --- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "namespace", "message"),
    [
        ([("a", [1, 0, 0])], NS, "Vector dimension 3 does not match the dimension of the index 4"),
        ([("a", [0, 0, 0, 0])], NS, "Dense vectors must contain at least one non-zero value"),
        ([("a", [1, 0, 0, 0], {"gone": None})], NS, "got 'null' for field 'gone'"),
        (
            [("a", [1, 0, 0, 0], {"text": "x" * 41_000})],
            NS,
            "metadata size is 41011 bytes, which exceeds the limit of 40960 bytes per vector",
        ),
        ([("", [1, 0, 0, 0])], NS, "Vector ID must be a non-empty string"),
        ([("i" * 513, [1, 0, 0, 0])], NS, "Vector ID must be 1-512 ASCII characters"),
        ([("a", [1, 0, 0, 0])], "espaço", "namespace must be 1-512 ASCII characters"),
        ([(str(i), [1, 0, 0, 0]) for i in range(1001)], NS, "exceeds the limit of 1000"),
    ],
)
async def test_invalid_upserts_are_400s_and_write_nothing(
    fake: FakePinecone, idx: AsyncIndex, rows: list[Any], namespace: str, message: str
) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx.upsert(vectors=[*rows, ("ok", [1, 0, 0, 0])], namespace=namespace)
    assert caught.value.status_code == 400
    assert (caught.value.body or {})["code"] == 3
    assert fake.records(namespace, committed=True) == {}


async def test_null_metadata_can_be_stripped_instead(fake: FakePinecone, idx: AsyncIndex) -> None:
    fake.strip_null_metadata = True
    await upsert(idx, ("a", [1, 0, 0, 0], {"gone": None, "kept": 1}))
    assert fake.records(NS)["a"][1] == {"kept": 1.0}


async def test_query_validation(idx: AsyncIndex) -> None:
    with pytest.raises(ApiError, match="Query vector dimension 2 does not match"):
        await idx.query(vector=[1, 0], top_k=1, namespace=NS)
    with pytest.raises(ApiError, match="at least one non-zero value"):
        await idx.query(vector=[0, 0, 0, 0], top_k=1, namespace=NS)
    await idx.query(vector=[1, 0, 0, 0], top_k=10_000, namespace=NS)
    with pytest.raises(ApiError, match="top_k must be at most 1000 when include_values"):
        await idx.query(vector=[1, 0, 0, 0], top_k=1001, include_metadata=True, namespace=NS)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/query", {"topK": 10_001, "vector": [1, 0, 0, 0]}, "between 1 and 10000"),
        ("/query", {"topK": 1}, "No query provided"),
        ("/query", {"topK": 1, "id": "a", "vector": [1, 0, 0, 0]}, "both 'ID' and 'vector'"),
        (
            "/vectors/upsert",
            {"vectors": [{"id": "a", "values": [1, 0, 0, 0], "metadata": {"o": {}}}]},
            "got '\\{\\}' for field 'o'",
        ),
        (
            "/vectors/upsert",
            {"vectors": [{"id": "a", "values": [1, 0, 0, 0], "metadata": {"l": [1]}}]},
            "got '\\[1\\]' for field 'l'",
        ),
        ("/vectors/upsert", [1], "must be a JSON object"),
        ("/vectors/delete", {"deleteAll": True, "ids": ["a"]}, "No explicit IDs or filter"),
        ("/vectors/delete", {"filter": {}}, "Delete with empty metadata filter is not allowed"),
    ],
)
async def test_rules_the_sdk_checks_first_are_also_enforced(
    fake: FakePinecone, idx: AsyncIndex, path: str, body: Any, message: str
) -> None:
    with pytest.raises(ApiError, match=message) as caught:
        await idx._http.post(path, json=body)
    assert caught.value.status_code == 400
    assert fake.calls[f"POST {path}"] == 1


async def test_oversized_request_is_413(idx: AsyncIndex) -> None:
    rows = [(f"v{i}", [1, 0, 0, 0], {"text": "x" * 40_000}) for i in range(60)]
    with pytest.raises(PayloadTooLargeError):
        await idx.upsert(vectors=rows, namespace=NS)
