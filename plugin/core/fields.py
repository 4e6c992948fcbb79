"""What the service reads of a request: the fields, which the wire models (plugin/http/wire.py)
carry as they are, so that the service never imports them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from adapters.values import JsonObject


class NamespaceChanges(Protocol):
    """A PATCH: which fields it sets is passed beside it (a field set to null is a change)."""

    @property
    def expires_at(self) -> datetime | None: ...
    @property
    def metadata(self) -> JsonObject | None: ...


class NamespaceFields(NamespaceChanges, Protocol):
    """A namespace as PUT: `kind` and the optional fields."""

    @property
    def kind(self) -> str: ...


class MemoryFields(Protocol):
    """A memory to commit; `id` only when the caller chose it."""

    @property
    def id(self) -> str | None: ...
    @property
    def content(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def expires_at(self) -> datetime | None: ...
    @property
    def propagation(self) -> JsonObject | None: ...
    @property
    def pin(self) -> bool: ...


class SearchFields(Protocol):
    """A search: the namespaces, the kinds (None: all), the query and the limit to apply."""

    @property
    def namespaces(self) -> Sequence[str]: ...
    @property
    def kinds(self) -> Sequence[str] | None: ...
    @property
    def effective_limit(self) -> int: ...
    @property
    def query_text(self) -> str | None: ...
