"""The Pinecone fake's request rules: body parsing, names, vectors, metadata and filters.

What Pinecone answers 400 (or 413) to, with its messages: `RequestRules` is the
validating half of `IndexData` (harness/pinecone_index.py).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np

from harness.pinecone_filters import FilterError
from harness.pinecone_filters import validate_filter

DEFAULT_NAMESPACE = "__default__"  # what "" (the default namespace) is called in stats
METADATA_MAX_BYTES = 40_960
BATCH_MAX = 1000  # vectors per upsert, ids per fetch/delete
TOP_K_MAX, TOP_K_MAX_WITH_DATA = 10_000, 1000
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 100, 100  # the SDK's own LIST_LIMIT_MAX
NAME_MAX = 512  # ids and namespace names
VECTOR_KEYS = frozenset({"id", "values", "metadata", "sparseValues"})


# Dense values, metadata, and sparse values as {index: value} (dotproduct indexes only).
Record = tuple[list[float], dict[str, Any] | None, dict[int, float] | None]
Namespaces = dict[str, dict[str, Record]]


class Rejected(Exception):
    """A request Pinecone refuses; turned into its error body by the dispatcher."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


def f32(values: Any) -> list[float]:
    """Round to float32 and back by shortest repr, as Pinecone stores and prints values."""
    return [float(str(v)) for v in np.asarray(values, dtype=np.float32)]


def ascii_name(value: Any, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise Rejected(f"{what} must be a non-empty string")
    if len(value) > NAME_MAX or not value.isascii() or "\x00" in value:
        raise Rejected(f"{what} must be 1-{NAME_MAX} ASCII characters without NUL: {value!r}")
    return value


def raw_path(request: httpx.Request) -> str:
    """The path as sent, still percent-encoded, so a name holding "/" or "%" survives."""
    return request.url.raw_path.decode("ascii").split("?", 1)[0]


def flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise Rejected(f"{key} must be a boolean")
    return value


class RequestRules:
    """Parsers of request fields; each raises `Rejected` with Pinecone's message."""

    dimension: int
    metric: str
    strip_null_metadata: bool

    @staticmethod
    def _json_object(request: httpx.Request) -> dict[str, Any]:
        try:
            body = json.loads(request.content or b"{}")
        except ValueError as exc:
            raise Rejected(f"Invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise Rejected("Request body must be a JSON object")
        return body

    @staticmethod
    def _namespace(raw: Any) -> str:
        if raw is None or raw == "":
            return DEFAULT_NAMESPACE
        return ascii_name(raw, "namespace")

    def _dense(self, values: Any, what: str) -> list[float]:
        if not isinstance(values, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values
        ):
            raise Rejected(f"{what} values must be an array of numbers")
        if len(values) != self.dimension:
            raise Rejected(
                f"{what} dimension {len(values)} does not match the dimension of the index "
                f"{self.dimension}"
            )
        if self.metric == "cosine" and not any(values):
            raise Rejected("Dense vectors must contain at least one non-zero value")
        return f32(values)

    def _metadata(self, raw: Any, vector_id: str) -> dict[str, Any] | None:
        """Pinecone's metadata rules; numbers are stored (and returned) as float64."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise Rejected(f"metadata for vector {vector_id} must be an object")
        clean: dict[str, Any] = {}
        for field, value in raw.items():
            if value is None and self.strip_null_metadata:
                continue
            if isinstance(value, str | bool):
                clean[field] = value
            elif isinstance(value, int | float):
                clean[field] = float(value)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                clean[field] = list(value)
            else:
                shown = json.dumps(value, separators=(",", ":"))
                raise Rejected(
                    "Metadata value must be a string, number, boolean or list of strings, "
                    f"got '{shown}' for field '{field}'"
                )
        size = len(json.dumps(clean, separators=(",", ":"), ensure_ascii=False).encode())
        if size > METADATA_MAX_BYTES:
            raise Rejected(
                f"metadata size is {size} bytes, which exceeds the limit of "
                f"{METADATA_MAX_BYTES} bytes per vector"
            )
        return clean or None

    @staticmethod
    def _filter(raw: Any, empty_message: str | None = None) -> dict[str, Any] | None:
        if raw is None or (raw == {} and empty_message is None):
            return None
        if raw == {}:
            raise Rejected(str(empty_message))
        try:
            validate_filter(raw)
        except FilterError as exc:
            raise Rejected(str(exc)) from exc
        return dict(raw)

    @staticmethod
    def _ids(raw: Any) -> list[str]:
        if not isinstance(raw, list) or not raw:
            raise Rejected("ids must be a non-empty array")
        if len(raw) > BATCH_MAX:
            raise Rejected(f"Too many ids: {len(raw)}, the limit is {BATCH_MAX}")
        return [ascii_name(i, "Vector ID") for i in raw]

    @staticmethod
    def _sparse(raw: Any, what: str) -> dict[int, float]:
        """Pinecone's rules: indices unique uint32, as many values, at least one pair."""
        if not isinstance(raw, dict) or set(raw) != {"indices", "values"}:
            raise Rejected(f"{what} must have indices and values")
        indices, values = raw["indices"], raw["values"]
        if not isinstance(indices, list) or not isinstance(values, list):
            raise Rejected(f"{what}: indices and values must be arrays")
        if len(indices) != len(values) or not indices:
            raise Rejected(f"{what}: indices and values must be non-empty and of equal length")
        if any(
            not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 2**32 for i in indices
        ):
            raise Rejected(f"{what}: indices must be unsigned 32-bit integers")
        if len(set(indices)) != len(indices):
            raise Rejected(f"{what}: indices must be unique")
        return dict(zip(indices, f32(values), strict=True))
