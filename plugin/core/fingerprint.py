"""The store's embedding fingerprint: recorded once, checked at every start, so that an
encoder of another vector space is refused (docs/embedding.md, "The fingerprint rule")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from adapters.base import VectorBackend
from adapters.errors import BackendError
from adapters.errors import BackendMisconfigured

META_KEY = "embedding_fingerprint"
LEGACY_FINGERPRINT = "all-MiniLM-L6-v2/torch"  # the only encoder before fingerprints
# Runtimes that compute the same vectors as another one from the same weights.
_SAME_SPACE = {"onnx": "torch"}
RETRY_S = 2.0
log = logging.getLogger(__name__)


class FingerprintMismatch(BackendMisconfigured):
    """The store's vectors come from another vector space than the configured encoder's."""


def vector_space(fingerprint: str) -> str:
    """The space a fingerprint's vectors live in: "m/onnx" and "m/torch" are one."""
    model, _, runtime = fingerprint.rpartition("/")
    return f"{model}/{_SAME_SPACE.get(runtime, runtime)}"


def same_vector_space(a: str, b: str) -> bool:
    """Whether vectors tagged `a` and `b` may be compared (and mixed in one store)."""
    return vector_space(a) == vector_space(b)


async def check_store(backend: VectorBackend, fingerprint: str) -> str:
    """Record the fingerprint in a store without one; raise `FingerprintMismatch` on another.
    Returns what the store records (which may be a fingerprint of the same space)."""
    meta = backend.store_meta
    if meta is None:
        raise NotImplementedError(f"the {backend.name} backend keeps no store metadata")
    recorded = (await meta.read_store_meta()).get(META_KEY)
    if recorded is None:
        recorded = LEGACY_FINGERPRINT if await backend.list_namespaces() else fingerprint
        await meta.write_store_meta(META_KEY, recorded)
        log.info("embedding fingerprint recorded", extra={"fingerprint": recorded})
    if not same_vector_space(recorded, fingerprint):
        raise FingerprintMismatch(
            f"the store holds vectors of {recorded}, but the configured encoder is {fingerprint}: "
            f"set MEMORY_PLUGIN_EMBEDDING_BACKEND={recorded.rpartition('/')[2]} (and the same "
            "MEMORY_PLUGIN_EMBEDDING_MODEL) back, or re-embed into a new store with "
            "`memory-plugin-vector export` then `import` (import re-embeds when fingerprints "
            "differ)"
        )
    return recorded


async def check_at_start(
    backend: VectorBackend, fingerprint: str, timeout_s: float, verified: Callable[[], None]
) -> asyncio.Task[None] | None:
    """Check now; when the store does not answer, a task that checks once it does (and raises
    `FingerprintMismatch` when it finds one). `verified` is called once the store is known to
    hold vectors of the configured space: only then may a stored vector stand for a new one."""
    try:
        await _check(backend, fingerprint, timeout_s, verified)
        return None
    except NotImplementedError:
        log.warning("this backend keeps no embedding fingerprint: not checked")
        return None
    except FingerprintMismatch:  # a BackendError too, but no retry mends it
        raise
    except (BackendError, TimeoutError) as error:
        log.warning("embedding fingerprint not checked yet, store unavailable: %s", error)
    checking = _check_later(backend, fingerprint, timeout_s, verified)
    return asyncio.create_task(checking, name="fingerprint")


async def _check(
    backend: VectorBackend, fingerprint: str, timeout_s: float, verified: Callable[[], None]
) -> None:
    async with asyncio.timeout(timeout_s):
        await check_store(backend, fingerprint)
    verified()


async def _check_later(
    backend: VectorBackend, fingerprint: str, timeout_s: float, verified: Callable[[], None]
) -> None:
    while True:
        await asyncio.sleep(RETRY_S)
        try:
            return await _check(backend, fingerprint, timeout_s, verified)
        except FingerprintMismatch:
            raise
        except (BackendError, TimeoutError):
            continue
