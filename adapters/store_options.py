"""The embedded store's options: one record, built once in the server
(adapters/pool/embedded_store.py) and carried to each engine worker as plain values."""

from __future__ import annotations

from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.disk import DEFAULT_HEADROOM_BYTES
from adapters.values import Durability

# The writes' deadline (MEMORY_PLUGIN_BACKEND_TIMEOUT's default): a sync waiting longer
# means writes cannot reach the disk, and health says so.
WRITE_DEADLINE_S = 1.5
# The name the engine worker builds the store by (adapters/registry.py).
ENGINE_BACKEND = "qdrant-edge"


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """What one engine worker's part of the store is opened with: `data_dir` is the part's
    directory, `partitions` how many parts the store is split into."""

    dimension: int
    data_dir: Path
    token_dimension: int
    durability: Durability = "sync"
    disk_headroom_bytes: int = DEFAULT_HEADROOM_BYTES
    write_deadline_s: float = WRITE_DEADLINE_S
    partitions: int = 1

    def sent(self) -> dict[str, Any]:
        """As the worker's keyword arguments, in plain values (JSON on its command line)."""
        return asdict(self) | {"data_dir": str(self.data_dir.absolute())}
