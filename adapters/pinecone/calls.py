"""Every Pinecone SDK call goes through `call`: a time budget, retries, and our errors.

`call` retries only while the request's deadline allows (the SDK's own retries are off), and
`translate` makes SDK exceptions `adapters.errors` types. See docs/backends.md, "Pinecone".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from pinecone import AsyncIndex
from pinecone._internal.config import RetryConfig
from pinecone.errors.exceptions import ApiError
from pinecone.errors.exceptions import ForbiddenError
from pinecone.errors.exceptions import NotFoundError
from pinecone.errors.exceptions import PineconeConnectionError
from pinecone.errors.exceptions import PineconeError
from pinecone.errors.exceptions import PineconeTimeoutError
from pinecone.errors.exceptions import UnauthorizedError

from adapters.errors import BackendError
from adapters.errors import BackendRejected
from adapters.errors import BackendUnavailable

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
