"""Time on the wire and in stores: the RFC 3339 string the API returns, and integer
microseconds since the epoch for range filters and ordering (floats lose microseconds)."""

from __future__ import annotations

from datetime import UTC
from datetime import datetime
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """Exact integer microseconds since the epoch of an aware datetime."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a `Z`: what the platform's Go client decodes."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def format_optional_time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def parse_optional_time(text: Any) -> datetime | None:
    return parse_time(text) if isinstance(text, str) else None
