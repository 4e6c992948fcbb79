"""The Qdrant server connection both layouts share: the client, its errors, collection setup.

`QdrantConnection` builds the client without I/O, so the plugin boots while Qdrant is down;
`call` is the one place SDK and httpx errors become `adapters.errors` types.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Mapping
from typing import Protocol
from typing import TypeVar

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client.common.client_exceptions import QdrantException
from qdrant_client.http import models
from qdrant_client.http.exceptions import ResponseHandlingException
from qdrant_client.http.exceptions import UnexpectedResponse

from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendUnavailable
from adapters.qdrant.layout import IndexKind
from adapters.qdrant.server.client_requests import DENSE
from adapters.qdrant.server.client_requests import INDEX_PARAMS
from adapters.qdrant.server.client_requests import IndexParams

T = TypeVar("T")
Page = tuple[list[models.Record], models.ExtendedPointId | None]
Caller = Callable[[Callable[[AsyncQdrantClient], Awaitable[Page]]], Awaitable[Page]]

_UNAVAILABLE_STATUSES = frozenset({408, 429})
NO_VECTOR = "Not existing vector name"  # Qdrant's 400 for a vector the collection lacks
# A scroll with vectors reads the embedding only: token vectors are a hundred times its size.
_DENSE_ONLY = [DENSE]


class Call(Protocol):
    """A backend's SDK call: its first-use setup and error mapping included."""

    def __call__(self, op: Callable[[AsyncQdrantClient], Awaitable[T]]) -> Awaitable[T]: ...


class CollectionMissing(BackendError):
    """The collection does not exist (HTTP 404, or local mode's 'not found')."""


class CollectionExists(BackendError):
    """A create lost a race: another replica created the collection first."""


def _from_response(exc: UnexpectedResponse) -> BackendError:
    status = exc.status_code or 0
    body = exc.content.decode("utf-8", "replace")
    detail = body[:200]
    if status >= 500 or status in _UNAVAILABLE_STATUSES:
        return BackendUnavailable(f"qdrant answered {status}: {detail}")
    if status == 404:
        return CollectionMissing(detail)
    if status == 409 or (status == 400 and "already exists" in body):
        return CollectionExists(detail)
    return BackendError(f"qdrant rejected the request ({status}): {detail}")


def _from_value_error(exc: ValueError) -> BackendError:
    """Local mode raises ValueError where a server answers 404 / 409 / 400."""
    text = str(exc)
    if text.startswith("Collection ") and text.endswith(" not found"):
        return CollectionMissing(text)
    if text.startswith("Collection ") and text.endswith(" already exists"):
        return CollectionExists(text)
    return BackendError(f"qdrant client refused the request: {text}")


class QdrantConnection:
    """One `AsyncQdrantClient`, built on `open()` without I/O; shareable between backends."""

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        timeout_s: float = 1.0,
    ) -> None:
        if (url is None) == (location is None):
            raise ValueError("give exactly one of url and location")
        self._url = url
        self._api_key = api_key
        self._location = location
        # The SDK takes whole seconds; round up so a 0.2 s budget is not "no timeout".
        self._timeout = max(1, math.ceil(timeout_s))
        # Local mode ignores payload indexes and warns on each one: skip them there.
        self.local = url is None and not str(location).startswith(("http://", "https://"))
        self._client: AsyncQdrantClient | None = None

    def open(self) -> None:
        if self._client is not None:
            return
        if self._url is not None:
            self._client = AsyncQdrantClient(
                url=self._url,
                api_key=self._api_key,
                timeout=self._timeout,
                check_compatibility=False,
            )
        else:
            self._client = AsyncQdrantClient(location=self._location)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await self.call(lambda c: c.close(), client)

    async def call(
        self,
        op: Callable[[AsyncQdrantClient], Awaitable[T]],
        client: AsyncQdrantClient | None = None,
    ) -> T:
        """Run one SDK call, letting out only `adapters.errors` types."""
        client = self._client if client is None else client
        if client is None:
            raise BackendUnavailable("qdrant backend is not started")
        try:
            return await op(client)
        except UnexpectedResponse as exc:
            raise _from_response(exc) from exc
        except (ResponseHandlingException, QdrantException, httpx.HTTPError) as exc:
            # QdrantException: 429 with Retry-After (ResourceExhaustedResponse) or a bad one.
            raise BackendUnavailable(f"qdrant unreachable: {exc!r}") from exc
        except ValueError as exc:
            raise _from_value_error(exc) from exc
        except Exception as exc:
            raise BackendError(f"qdrant client failed: {exc!r}") from exc

    async def ping(self) -> None:
        """BackendUnavailable unless Qdrant answers now, whatever the failure."""
        try:
            await self.call(lambda c: c.get_collections())
        except BackendUnavailable:
            raise
        except BackendError as exc:
            raise BackendUnavailable(f"qdrant did not answer ping: {exc}") from exc

    async def create_collection(
        self,
        name: str,
        vectors: models.VectorParams | Mapping[str, models.VectorParams],
        *,
        sparse: Mapping[str, models.SparseVectorParams] | None = None,
        hnsw: models.HnswConfigDiff | None = None,
        metadata: dict[str, object] | None = None,
    ) -> bool:
        """Create `name`; False when another replica created it first."""
        try:
            await self.call(
                lambda c: c.create_collection(
                    name,
                    vectors_config=vectors,
                    sparse_vectors_config=sparse,
                    hnsw_config=hnsw,
                    metadata=metadata,
                )
            )
        except CollectionExists:
            return False
        return True

    async def ensure_indexes(
        self, collection: str, wanted: Mapping[str, IndexKind], present: Mapping[str, object]
    ) -> None:
        """Create the payload indexes missing from `present` (heals a create cut short)."""
        if self.local:
            return
        for field, kind in wanted.items():
            if field not in present:
                await self.call(_index_creator(collection, field, INDEX_PARAMS[kind]))

    async def ensure_collection(
        self,
        name: str,
        present: Collection[str],
        vectors: models.VectorParams | dict[str, models.VectorParams],
        indexes: Mapping[str, IndexKind],
        *,
        sparse: Mapping[str, models.SparseVectorParams] | None = None,
        hnsw: models.HnswConfigDiff | None = None,
    ) -> models.CollectionInfo | None:
        """Create `name` unless `present` (a lost race is fine), check its vectors, heal
        indexes; the existing collection's info (None when this call created it)."""
        if name not in present and await self.create_collection(
            name, vectors, sparse=sparse, hnsw=hnsw
        ):
            await self.ensure_indexes(name, indexes, {})
            return None
        info = await self.call(lambda c: c.get_collection(name))
        wanted, configured = _dense(vectors), _dense(info.config.params.vectors)
        if wanted is not None and (
            configured is None
            or (configured.size, configured.distance) != (wanted.size, wanted.distance)
        ):
            raise BackendMisconfigured(
                f"qdrant collection {name} holds vectors {configured}, not {wanted}"
            )
        await self.ensure_indexes(name, indexes, info.payload_schema)
        return info

    async def pages(
        self,
        collection: str,
        scroll_filter: models.Filter | None = None,
        *,
        with_vectors: bool = False,
        size: int = 256,
        call: Caller | None = None,
    ) -> AsyncIterator[list[models.Record]]:
        """Every point matching `scroll_filter`, a page at a time (through `call`, if given)."""
        run: Caller = self.call if call is None else call
        offset: models.ExtendedPointId | None = None
        while True:
            points, offset = await run(
                _scroller(collection, scroll_filter, size, offset, with_vectors)
            )
            yield points
            if offset is None:
                return


def _dense(
    vectors: models.VectorParams | Mapping[str, models.VectorParams] | None,
) -> models.VectorParams | None:
    """The unnamed dense vector's params, alone or among named vectors (None: none)."""
    if isinstance(vectors, models.VectorParams):
        return vectors
    return None if vectors is None else vectors.get(DENSE)


def _index_creator(
    collection: str, field: str, schema: IndexParams
) -> Callable[[AsyncQdrantClient], Awaitable[models.UpdateResult]]:
    return lambda c: c.create_payload_index(collection, field, field_schema=schema, wait=True)


def _scroller(
    collection: str,
    scroll_filter: models.Filter | None,
    size: int,
    offset: models.ExtendedPointId | None,
    with_vectors: bool,
) -> Callable[[AsyncQdrantClient], Awaitable[Page]]:
    wanted: list[str] | bool = _DENSE_ONLY if with_vectors else False
    return lambda c: c.scroll(collection, scroll_filter, size, offset=offset, with_vectors=wanted)
