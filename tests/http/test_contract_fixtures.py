"""The contract's own fixtures parse with our models and validate against the spec."""

from __future__ import annotations

import json

import pytest

from plugin.http.wire import MemoryWrite
from plugin.http.wire import NamespaceUpsert
from plugin.http.wire import SearchRequest
from tests.support.contract import TESTDATA
from tests.support.contract import component
from tests.support.contract import validate


def load(name: str) -> bytes:
    return (TESTDATA / name).read_bytes()


def test_memory_write_minimal() -> None:
    body = MemoryWrite.model_validate_json(load("memory_write_minimal.json"))
    assert (body.content, body.kind, body.source, body.id, body.pin) == (
        "user prefers tabs over spaces",
        "fact",
        "agent",
        None,
        False,
    )


def test_namespace_upsert_workspace() -> None:
    body = NamespaceUpsert.model_validate_json(load("namespace_upsert_workspace.json"))
    assert (body.kind, body.expires_at, body.metadata) == ("workspace", None, None)


def test_search_request_multi_namespace() -> None:
    body = SearchRequest.model_validate_json(load("search_request_multi_namespace.json"))
    assert body.namespaces == [
        "workspace:550e8400-e29b-41d4-a716-446655440000",
        "team:660e8400-e29b-41d4-a716-446655440001",
        "org:acme-corp",
    ]
    assert (body.query, body.effective_limit) == ("indentation preferences", 20)


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("health_ok.json", "HealthResponse"),
        ("error_not_found.json", "Error"),
        ("memory_write_minimal.json", "MemoryWrite"),
        ("namespace_upsert_workspace.json", "NamespaceUpsert"),
        ("search_request_multi_namespace.json", "SearchRequest"),
    ],
)
def test_fixture_matches_spec(name: str, schema: str) -> None:
    validate(component(schema), json.loads(load(name)))


def test_validator_rejects_off_contract_bodies() -> None:
    with pytest.raises(Exception, match="'maybe' is not one of"):
        validate(
            component("HealthResponse"), {"status": "maybe", "version": "1.0.0", "capabilities": []}
        )
    with pytest.raises(Exception, match="is not a 'date-time'"):
        validate(component("Namespace"), {"name": "a:b", "kind": "org", "created_at": "yesterday"})
