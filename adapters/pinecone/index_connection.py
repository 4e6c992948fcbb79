"""The Pinecone index: opened, checked at start-up, and every SDK call made within a budget.

Every part of the backend calls it through `Shared`. `call` retries only while the request's
deadline allows (the SDK's own retries are off), and `translate` makes SDK exceptions
`adapters.errors` types. A failed check at start-up ends the process with one line; an
unreachable Pinecone is checked again on the next request. See docs/backends.md, "Pinecone"
("Start-up checks").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace
from typing import Any
from typing import TypeVar

from pinecone import AsyncIndex
from pinecone import AsyncPinecone
from pinecone._internal.config import RetryConfig
from pinecone.errors.exceptions import ApiError
from pinecone.errors.exceptions import ForbiddenError
from pinecone.errors.exceptions import NotFoundError
from pinecone.errors.exceptions import PineconeConnectionError
from pinecone.errors.exceptions import PineconeError
from pinecone.errors.exceptions import PineconeTimeoutError
from pinecone.errors.exceptions import UnauthorizedError
from pinecone.models.vectors.vector import Vector

from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured
from adapters.errors import BackendRejected
from adapters.errors import BackendUnavailable
from adapters.pinecone.overlay import FreshnessOverlay

T = TypeVar("T")
FIRST_BACKOFF_S = 0.05
_RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# Below this, an attempt has no realistic chance of an answer: fail instead.
_MIN_ATTEMPT_S = 0.05


class PineconeMissing(BackendError):
    """Pinecone answered 404 (a namespace or index that does not exist)."""


class PineconeAuthFailed(BackendUnavailable):
    """Pinecone refused the API key (401/403): an operator problem, so 503 at run time."""


def open_index(host: str, api_key: str, timeout_s: float) -> AsyncIndex:
    """An `AsyncIndex` without SDK retries (`call` retries): it takes no retry configuration,
    so its `_http._config` is replaced before the first request builds the HTTP client."""
    index = AsyncIndex(host=host, api_key=api_key, timeout=timeout_s)
    http = index._http
    http._config = replace(http._config, retry_config=RetryConfig(max_retries=0))
    return index


def _retry_after(error: ApiError) -> float | None:
    headers = error.headers or {}
    text = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return max(0.0, float(text)) if text is not None else None
    except ValueError:
        return None


def translate(error: PineconeError, operation: str) -> BackendError:
    """The one mapping from SDK errors to ours."""
    if isinstance(error, UnauthorizedError | ForbiddenError):
        return PineconeAuthFailed(f"pinecone refused the API key ({operation}): {error.message}")
    if isinstance(error, NotFoundError):
        return PineconeMissing(f"pinecone {operation}: {error.message}")
    if isinstance(error, ApiError):
        status = error.status_code
        if status in _RETRIED_STATUSES or status >= 500:
            return BackendUnavailable(f"pinecone {operation} answered {status}: {error.message}")
        if status in (400, 413):
            return BackendRejected(f"pinecone refused {operation}: {error.message}")
        return BackendError(f"pinecone {operation} answered {status}: {error.message}")
    if isinstance(error, PineconeTimeoutError | PineconeConnectionError):
        return BackendUnavailable(f"pinecone {operation}: {error}")
    return BackendError(f"pinecone {operation}: {error}")


def _is_retried(error: PineconeError) -> bool:
    if isinstance(error, PineconeTimeoutError | PineconeConnectionError):
        return True
    return isinstance(error, ApiError) and error.status_code in _RETRIED_STATUSES


async def call(
    operation: str,
    attempt: Callable[[float], Awaitable[T]],
    budget_s: float,
) -> T:
    """Run `attempt(time left)` until it succeeds or `budget_s` is spent; the time left is the
    SDK request's timeout, so a hanging connection cannot outlive the budget."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget_s
    backoff = FIRST_BACKOFF_S
    while True:
        left = deadline - loop.time()
        try:
            return await attempt(max(left, _MIN_ATTEMPT_S))
        except PineconeError as error:
            failure = translate(error, operation)
            if not _is_retried(error):
                raise failure from None
            wait = backoff * random.uniform(0.5, 1.5)
            if isinstance(error, ApiError):
                wait = max(wait, _retry_after(error) or 0.0)
            if loop.time() + wait + _MIN_ATTEMPT_S >= deadline:
                raise failure from None
            await asyncio.sleep(wait)
            backoff *= 2


log = logging.getLogger("memory_plugin.pinecone")
REVERIFY_S = 1.0


class PineconeConnection:
    def __init__(
        self,
        dimension: int,
        *,
        api_key: str,
        index_name: str | None,
        host: str | None,
        budget_s: float,
        clock: Callable[[], float],
        hybrid: bool = False,
    ) -> None:
        if index_name is None and host is None:
            raise ValueError("a Pinecone index name or host is required")
        self.dimension = dimension
        self.host = host
        self.hybrid = hybrid  # hybrid search asked for: the index must be dotproduct
        self.metric: str | None = None  # the index's, once verified
        self._api_key = api_key
        self._index_name = index_name
        self._budget_s = budget_s
        self._clock = clock
        self._index: AsyncIndex | None = None
        self._verified = False
        self._last_attempt = float("-inf")

    async def start(self) -> None:
        try:
            await self._verify()
        except BackendMisconfigured:
            raise
        except BackendUnavailable as error:
            log.warning("pinecone not reachable at start-up; will retry: %s", error)

    async def close(self) -> None:
        if self._index is not None:
            await self._index.close()
            self._index = None
        self._verified = False

    async def index(self) -> AsyncIndex:
        """The verified index; `BackendUnavailable` while it cannot be checked."""
        if not self._verified or self._index is None:
            if self._clock() - self._last_attempt < REVERIFY_S:
                raise BackendUnavailable("pinecone not reachable (start-up checks pending)")
            try:
                await self._verify()
            except BackendMisconfigured as error:
                raise BackendUnavailable(str(error)) from None
        assert self._index is not None
        return self._index

    async def _verify(self) -> None:
        self._last_attempt = self._clock()
        metric: str | None = None
        if self.host is None:
            assert self._index_name is not None
            self.host, metric = await self._describe(self._index_name)
        if self._index is None:
            self._index = open_index(self.host, self._api_key, self._budget_s)
        index = self._index
        with _refused(f"no Pinecone index answers at {self.host} (check PINECONE_HOST)"):
            stats = await call(
                "describe_index_stats",
                lambda t: index.describe_index_stats(timeout=t),
                self._budget_s,
            )
        metric = stats.metric or metric
        if stats.dimension is not None and stats.dimension != self.dimension:
            raise BackendMisconfigured(
                f"Pinecone index has dimension {stats.dimension} but the embedding model"
                f" produces {self.dimension}; create the index with dimension {self.dimension}"
            )
        if metric is not None and metric not in ("cosine", "dotproduct"):
            raise BackendMisconfigured(
                f"Pinecone index uses metric {metric!r}; the plugin needs 'cosine' or 'dotproduct'"
            )
        if self.hybrid and metric != "dotproduct":
            raise BackendMisconfigured(
                f"MEMORY_PLUGIN_SEARCH=hybrid needs a Pinecone index with metric 'dotproduct',"
                f" not {metric!r}: create one and copy the memories into it with"
                " `memory-plugin-vector export` and `import`, or unset MEMORY_PLUGIN_SEARCH"
            )
        self.metric = metric
        self._verified = True

    async def _describe(self, name: str) -> tuple[str, str | None]:
        """Resolve the index name to its host (control plane), with its metric if reported."""
        client = AsyncPinecone(
            api_key=self._api_key, timeout=self._budget_s, retry_config=RetryConfig(max_retries=0)
        )
        try:
            with _refused(f"Pinecone index {name!r} does not exist (check PINECONE_INDEX)"):
                model = await call(
                    "describe_index", lambda t: client.indexes.describe(name), self._budget_s
                )
        finally:
            await client.close()
        if not model.host or not model.status.ready:
            raise BackendUnavailable(f"Pinecone index {name!r} is not ready yet")
        dense = [f for f in model.schema.fields.values() if hasattr(f, "metric")]
        return model.host, (dense[0].metric if len(dense) == 1 else None)


@contextlib.contextmanager
def _refused(missing: str) -> Iterator[None]:
    """A wrong key, or no such index (`missing` says what to check), ends start-up."""
    try:
        yield
    except PineconeAuthFailed as error:
        raise BackendMisconfigured(f"{error} (check PINECONE_API_KEY)") from None
    except PineconeMissing:
        raise BackendMisconfigured(missing) from None


@dataclass(frozen=True, slots=True)
class Shared:
    """What every part of `PineconeBackend` (backend.py) is handed, and the requests they all
    make: the namespace prefix, the placeholder vector of records, the overlay, the index
    once connected, and the time budget of one call."""

    prefix: str
    unit_vector: list[float]  # stored with records and metadata, which have no embedding
    overlay: FreshnessOverlay
    ready: Callable[[], Awaitable[AsyncIndex]]  # the index, connected on first use
    budget_s: float  # one call's time, retries included (index_connection.py)

    def pinecone_namespace(self, name: str) -> str:
        return self.prefix + name

    async def call(self, operation: str, op: Callable[[AsyncIndex, float], Awaitable[T]]) -> T:
        """`op(index, timeout_s)` on the connected index, within one call's budget."""
        index = await self.ready()
        return await call(operation, lambda t: op(index, t), self.budget_s)

    async def fetch(self, operation: str, ids: list[str], namespace: str) -> dict[str, Vector]:
        """The vectors of `ids` in the Pinecone namespace `namespace`, by id: one request."""
        found = await self.call(
            operation, lambda i, t: i.fetch(ids=ids, namespace=namespace, timeout=t)
        )
        return found.vectors

    async def list_page(
        self, operation: str, namespace: str, size: int, token: str | None
    ) -> tuple[list[str], str | None]:
        """One page of the ids in the Pinecone namespace `namespace`, and the next's token."""
        page = await self.call(
            operation,
            lambda i, t: i.list_paginated(
                namespace=namespace, limit=size, pagination_token=token, timeout=t
            ),
        )
        ids = [item.id for item in page.vectors if item.id]
        return ids, page.pagination.next if page.pagination else None

    async def upsert(self, operation: str, items: list[dict[str, Any]], namespace: str) -> None:
        await self.call(
            operation, lambda i, t: i.upsert(vectors=items, namespace=namespace, timeout=t)
        )
