"""One way to build `PineconeBackend` on the HTTP-level fake (tests/support/pinecone_fake.py)."""

from __future__ import annotations

from typing import Any

from adapters.pinecone import PineconeBackend
from tests.support.pinecone_fake import FakePinecone


def pinecone_backend(fake: FakePinecone, **options: Any) -> PineconeBackend:
    """A backend of the fake's dimension and api key, on its index by name unless `host` is given.

    `options` are PineconeBackend's own (timeout_s, clock, hybrid, freshness_window_s, ...).
    """
    settings: dict[str, Any] = {"api_key": fake.api_key}
    if "host" not in options:
        settings["index_name"] = fake.name
    settings.update(options)
    return PineconeBackend(fake.dimension, **settings)
