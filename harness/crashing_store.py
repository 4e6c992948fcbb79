"""A fault hook for the engine worker's tests: the embedded store, except that a lookup of
`CRASH_ID` kills the worker process where it stands (as a panic in the engine would)."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from pathlib import Path

from adapters.engine.edge_backend import QdrantEdgeBackend
from adapters.pool.embedded_store import edge_worker
from adapters.pool.engine_process import EngineProcess
from adapters.values import StoredMemory

CRASH_ID = "dead0000-0000-4000-8000-000000000000"
REPO_ROOT = Path(__file__).resolve().parent.parent  # where `harness` is found


class CrashingStore(QdrantEdgeBackend):
    async def get_stored_memory(self, namespace: str, memory_id: str) -> StoredMemory | None:
        if memory_id == CRASH_ID:
            os.kill(os.getpid(), signal.SIGKILL)
        return await super().get_stored_memory(namespace, memory_id)


def crashing_worker(dimension: int, data_dir: Path) -> EngineProcess:
    """An engine worker over `data_dir` that builds `CrashingStore` (named by its module)."""
    spec = edge_worker(dimension, data_dir).spec
    target = f"{__name__}:{CrashingStore.__name__}"
    return EngineProcess(replace(spec, backend=target, path=(str(REPO_ROOT),)))
