"""The contract's rules for names and ids, shared by the HTTP layer and bulk import."""

from __future__ import annotations

import re
import uuid

NAMESPACE_PATTERN = re.compile(r"[a-z]+:[A-Za-z0-9_:.\-]+")
NAMESPACE_MAX = 256
UUID_PATTERN = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def check_namespace_name(value: str) -> str:
    """The contract's namespace name rule (`fullmatch`: `$` would admit a newline)."""
    if len(value) > NAMESPACE_MAX:
        raise ValueError(f"namespace name is longer than {NAMESPACE_MAX} characters")
    if not NAMESPACE_PATTERN.fullmatch(value):
        raise ValueError("namespace name must match ^[a-z]+:[A-Za-z0-9_:.\\-]+$")
    return value


def canonical_uuid(value: str) -> str:
    """A hyphenated UUID in any case, returned in canonical lower-case form."""
    if not UUID_PATTERN.fullmatch(value):
        raise ValueError("must be a UUID like 550e8400-e29b-41d4-a716-446655440000")
    return str(uuid.UUID(value))
