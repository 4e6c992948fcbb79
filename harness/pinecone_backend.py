"""One way to build `PineconeBackend` on the HTTP-level fake (harness/pinecone_fake.py)."""

from __future__ import annotations

from typing import Any

from adapters.pinecone import PineconeBackend
from harness.clocks import ManualClock
from harness.pinecone_fake import FakePinecone

# Route keys of the fake's requests, and the namespace the adapter keeps its records in.
UPSERT = "POST /vectors/upsert"
QUERY = "POST /query"
FETCH = "GET /vectors/fetch"
DELETE = "POST /vectors/delete"
RECORDS = "memory-~namespaces"
NS = "workspace:w1"


def pinecone_backend(fake: FakePinecone, **options: Any) -> PineconeBackend:
    """A backend of the fake's dimension and api key, on its index by name unless `host` is given.

    `options` are PineconeBackend's own (timeout_s, clock, hybrid, freshness_window_s, ...).
    """
    settings: dict[str, Any] = {"api_key": fake.api_key}
    if "host" not in options:
        settings["index_name"] = fake.name
    settings.update(options)
    return PineconeBackend(fake.dimension, **settings)


def adapter_backend(fake: FakePinecone, ticks: ManualClock, **options: object) -> PineconeBackend:
    """The adapter tests' backend: a 1 s timeout and `ticks` for its clock, unless overridden."""
    return pinecone_backend(fake, **{"timeout_s": 1.0, "clock": ticks, **options})
