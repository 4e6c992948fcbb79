"""The service's own failures, in domain terms; plugin/http/middleware.py maps them to
statuses (`NotFound` 404, `InvalidRequest` 400, `BackendUnavailable` 503)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from adapters.callers import Waiting
from adapters.errors import BackendUnavailable


class ServiceError(Exception):
    """A request the service cannot carry out, for a reason the caller can act on."""


class NotFound(ServiceError):
    """The namespace or memory does not exist (or has expired)."""


class InvalidRequest(ServiceError):
    """Well-formed input that the operation cannot accept (e.g. a PATCH with no field)."""


class DeadlinePassed(BackendUnavailable):
    """No answer within the request's deadline (503, unless admission finds that the
    request was still waiting its turn behind others' work: plugin/scheduling/admission.py)."""


@asynccontextmanager
async def within(seconds: float, waiting: Waiting | None = None) -> AsyncIterator[None]:
    """What runs inside finishes within `seconds`, or fails as `DeadlinePassed`. `waiting`,
    the request's place in the plugin's queues, is told when that is (`Waiting.deadline`)."""
    if waiting is not None:
        waiting.deadline = asyncio.get_running_loop().time() + seconds
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise DeadlinePassed(f"no answer within {seconds:g} s") from None
