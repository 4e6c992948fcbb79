"""Records and vectors for tests that talk to a `VectorBackend` directly.

Vectors are small synthetic ones (DIM dimensions): adapters take vectors, and the
real model is exercised by the API tests.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import UTC
from datetime import datetime

from adapters.values import MemoryFilter
from adapters.values import MemoryRecord
from adapters.values import SearchQuery

DIM = 8
T0 = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)


def unit(*components: float) -> list[float]:
    """A unit vector of DIM dimensions starting with `components`."""
    padded = list(components) + [0.0] * (DIM - len(components))
    norm = math.sqrt(sum(c * c for c in padded))
    return [c / norm for c in padded]


def dense(*components: float) -> SearchQuery:
    """A dense-only search for the unit vector `unit(*components)`."""
    return SearchQuery(dense=unit(*components))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def new_id() -> str:
    return str(uuid.uuid4())


def memory(namespace: str, **overrides: object) -> MemoryRecord:
    fields: dict[str, object] = {
        "id": new_id(),
        "namespace": namespace,
        "content": "user prefers tabs over spaces",
        "kind": "fact",
        "source": "agent",
        "created_at": T0,
    }
    fields.update(overrides)
    return MemoryRecord(**fields)  # type: ignore[arg-type]


def everything(now: datetime = T0) -> MemoryFilter:
    return MemoryFilter(now=now)
