"""Request and response bodies of the v1 contract (memory-plugin-v1.yaml and NOTES.md),
validated strictly; docs/behaviour.md, "Validation", "Times", "Numbers in opaque JSON"."""

from __future__ import annotations

import math
import re
from datetime import UTC
from datetime import datetime
from typing import Annotated
from typing import Any
from typing import Literal

from pydantic import AfterValidator
from pydantic import AwareDatetime
from pydantic import BaseModel
from pydantic import BeforeValidator
from pydantic import ConfigDict
from pydantic import Field

from adapters.times import format_optional_time
from adapters.times import format_time
from adapters.values import MemoryRecord
from plugin.core.contract_names import canonical_uuid
from plugin.core.contract_names import check_namespace_name

RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})"
)
DEFAULT_LIMIT = 20
MAX_LIMIT = 100

NamespaceKind = Literal["workspace", "team", "org", "custom"]
MemoryKind = Literal["fact", "summary", "checkpoint"]
MemorySource = Literal["agent", "runtime", "user"]


def _rfc3339(value: Any) -> Any:
    """RFC 3339 text to an aware datetime; other types go on to fail strict validation."""
    if not isinstance(value, str):
        return value
    match = RFC3339.fullmatch(value)
    if match is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2026-01-02T03:04:05Z")
    day, clock, fraction, offset = match.groups()
    micros = (fraction or "")[:6].ljust(6, "0")
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        moment = datetime.fromisoformat(f"{day}T{clock}.{micros}{offset}")
    except ValueError as error:
        raise ValueError(f"not a valid date-time: {error}") from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # within a day of year 1 or 9999: clamp
        edge = datetime.max if moment.year == datetime.max.year else datetime.min
        return edge.replace(tzinfo=UTC)


def _finite_json(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse non-finite numbers anywhere inside (iteratively: nesting may be deep)."""
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError("numbers must be finite: 1e400 overflows a double, NaN is not JSON")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


NamespaceName = Annotated[str, AfterValidator(check_namespace_name)]
MemoryId = Annotated[str, AfterValidator(canonical_uuid)]
Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]
JsonObject = dict[str, Any]
OpaqueJson = Annotated[JsonObject, AfterValidator(_finite_json)]


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class NamespaceUpsert(_Request):
    kind: NamespaceKind
    expires_at: Timestamp | None = None
    metadata: OpaqueJson | None = None


class NamespacePatch(_Request):
    expires_at: Timestamp | None = None
    metadata: OpaqueJson | None = None


class MemoryWrite(_Request):
    id: MemoryId | None = None
    content: Annotated[str, AfterValidator(_not_blank)]
    kind: MemoryKind
    source: MemorySource
    expires_at: Timestamp | None = None
    propagation: OpaqueJson | None = None
    pin: bool = False
    # Accepted and ignored: this plugin computes every vector itself (docs/behaviour.md).
    embedding: list[float] | None = None


class SearchRequest(_Request):
    namespaces: Annotated[list[NamespaceName], Field(min_length=1)]
    query: str | None = None
    kinds: list[MemoryKind] | None = None
    limit: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = 0
    # Accepted and ignored, as on writes.
    embedding: list[float] | None = None

    @property
    def effective_limit(self) -> int:
        """0 or absent means the default, as the platform's client sends it."""
        return self.limit or DEFAULT_LIMIT

    @property
    def query_text(self) -> str | None:
        """A blank query lists instead of ranking."""
        return self.query if self.query and self.query.strip() else None


class ForgetRequest(_Request):
    requested_by_namespace: NamespaceName


def memory_body(memory: MemoryRecord, score: float | None) -> JsonObject:
    """The contract's `Memory` object; `score` only when relevance ordered it."""
    return {
        "id": memory.id,
        "namespace": memory.namespace,
        "content": memory.content,
        "kind": memory.kind,
        "source": memory.source,
        "expires_at": format_optional_time(memory.expires_at),
        "propagation": memory.propagation,
        "pin": memory.pin,
        "created_at": format_time(memory.created_at),
        "score": score,
    }
