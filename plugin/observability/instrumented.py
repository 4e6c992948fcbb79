"""A `VectorBackend` that times every call of the one it wraps, and of its parts.

One proxy over method names, not a method per operation, so the interface and its parts
(adapters/parts.py) grow without a wrapper to keep in step; the adapters stay free of metrics.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from types import TracebackType
from typing import Any
from typing import cast

from adapters.base import VectorBackend
from adapters.errors import BackendRejected
from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceConflict
from adapters.errors import NamespaceGone
from adapters.errors import StorageDamaged
from adapters.errors import StorageFull
from adapters.parts import PARTS

OperationObserver = Callable[[str, str, float], None]

# Outcome labels; the set is closed, whatever an adapter raises.
_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (asyncio.CancelledError, "cancelled"),  # the request's deadline, or shutdown
    (StorageFull, "storage_full"),
    (StorageDamaged, "storage_damaged"),
    (BackendUnavailable, "unavailable"),
    (BackendRejected, "rejected"),
    (NamespaceGone, "namespace_gone"),
    (NamespaceConflict, "conflict"),
)


def outcome_of(error: BaseException) -> str:
    for kind, label in _OUTCOMES:
        if isinstance(error, kind):
            return label
    return "error"


class _Timing:
    """Times the block it wraps and reports its outcome: a plain context manager, as it runs
    around every backend call (a generator-based async one cost four times as much)."""

    __slots__ = ("_observe", "_operation", "_started")

    def __init__(self, observe: OperationObserver, operation: str) -> None:
        self._observe = observe
        self._operation = operation
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        outcome = "ok" if error is None else outcome_of(error)
        self._observe(self._operation, outcome, time.perf_counter() - self._started)


class _Timed:
    """Times every coroutine method of `inner` by its name; anything else passes through.
    A timed method is made on first use and kept, and looks its target up at each call (a
    method replaced on `inner` later, a test's fault, is the one timed)."""

    def __init__(self, inner: object, observe: OperationObserver) -> None:
        self._inner = inner
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name in PARTS:
            return None if found is None else _Timed(found, self._observe)
        if inspect.iscoroutinefunction(found):
            timed: Callable[..., Any] = self._coroutine(name)
        elif inspect.isasyncgenfunction(found):
            timed = self._pages(name)
        else:
            return found
        setattr(self, name, timed)
        return timed

    def _coroutine(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            with _Timing(self._observe, name):
                return await getattr(self._inner, name)(*args, **kwargs)

        return timed

    def _pages(self, name: str) -> Callable[..., AsyncIterator[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            """Pages as the inner part gives them; each page's read is timed."""
            pages = getattr(self._inner, name)(*args, **kwargs).__aiter__()
            while True:
                with _Timing(self._observe, name):
                    try:
                        page = await pages.__anext__()
                    except StopAsyncIteration:
                        return
                yield page

        return timed


def instrumented(backend: VectorBackend, observe: OperationObserver) -> VectorBackend:
    """`backend`, each of its calls (and of its parts' calls) timed and reported to `observe`."""
    return cast(VectorBackend, _Timed(backend, observe))
