"""Wire-model rules that the API tests do not spell out one by one."""

from __future__ import annotations

from datetime import UTC
from datetime import datetime

import pytest
from pydantic import ValidationError

from plugin.core.contract_names import canonical_uuid
from plugin.core.contract_names import check_namespace_name
from plugin.http.wire import MemoryWrite
from plugin.http.wire import SearchRequest

BASE = '{"content":"c","kind":"fact","source":"agent"'


def write(extra: str) -> MemoryWrite:
    return MemoryWrite.model_validate_json(BASE + extra + "}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T10:00:00.123456789Z", datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-22T12:00:00.1+02:00", datetime(2026, 11, 22, 10, 0, 0, 100000, tzinfo=UTC)),
        ("2026-11-22t10:00:00z", datetime(2026, 11, 22, 10, 0, tzinfo=UTC)),
        ("2026-11-22 10:00:00-00:30", datetime(2026, 11, 22, 10, 30, tzinfo=UTC)),
    ],
)
def test_rfc3339_accepted(text: str, expected: datetime) -> None:
    assert write(f',"expires_at":"{text}"').expires_at == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22T10:00:00",
        "2026-11-22",
        "2026-11-22T10:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-22T10:00:00+0200",
        "2026-11-22_10:00:00Z",
        " 2026-11-22T10:00:00Z",
        "yesterday",
    ],
)
def test_rfc3339_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        write(f',"expires_at":"{text}"')


def test_null_is_absent_for_optional_fields() -> None:
    body = write(',"id":null,"expires_at":null,"propagation":null,"embedding":null')
    assert (body.id, body.expires_at, body.propagation, body.embedding) == (None, None, None, None)


def test_unknown_fields_are_ignored() -> None:
    assert write(',"future_field":{"x":1}').content == "c"


def test_uuid_canonical_form() -> None:
    assert canonical_uuid("550E8400-E29B-41D4-A716-446655440000") == (
        "550e8400-e29b-41d4-a716-446655440000"
    )
    for bad in [
        "550e8400e29b41d4a716446655440000",
        "{550e8400-e29b-41d4-a716-446655440000}",
        "550e8400-e29b-41d4-a716-44665544000",
        "550e8400-e29b-41d4-a716-446655440000\n",
    ]:
        with pytest.raises(ValueError, match="must be a UUID"):
            canonical_uuid(bad)


def test_namespace_name_uses_fullmatch() -> None:
    assert check_namespace_name("org:a.b-c_d:e") == "org:a.b-c_d:e"
    for bad in ["org:abc\n", "org:abc\r", "ORG:abc", "org:" + "x" * 253]:
        with pytest.raises(ValueError, match="namespace name"):
            check_namespace_name(bad)


def test_search_defaults() -> None:
    body = SearchRequest.model_validate_json('{"namespaces":["org:a"]}')
    assert (body.effective_limit, body.query_text, body.kinds) == (20, None, None)
    body = SearchRequest.model_validate_json('{"namespaces":["org:a"],"limit":7,"query":" q "}')
    assert (body.effective_limit, body.query_text) == (7, " q ")
