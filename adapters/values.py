"""The values backends take and return: plain dataclasses, never SDK objects; the
interface is `adapters.base`, its optional parts `adapters.parts`."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from typing import Literal
from typing import overload

import numpy as np

from adapters.times import format_optional_time
from adapters.times import format_time
from adapters.times import parse_optional_time
from adapters.times import parse_time

JsonObject = dict[str, Any]
# What a 201 promises of the embedded store: synced to disk (`sync`), or written to the
# kernel's page cache, surviving a killed process but not a power cut (`async`).
Durability = Literal["sync", "async"]

# A memory with the vector the store keeps for it (export, import; normalised on Qdrant).
StoredMemory = tuple["MemoryRecord", list[float]]
# A text's token vectors, one unit-length row per token (plugin/embedding/embedding_tokens.py).
TokenVectors = Sequence[Sequence[float]]


class PackedTokens(Sequence[list[float]]):
    """Token vectors as the model computed them: one float32 array, and the vocabulary id
    of each row's wordpiece where the tokenizer said it (adapters/qdrant/wordpieces.py).

    Why: a memory's are about ten thousand numbers; as Python floats they cost a commit
    more to make, pickle to the engine worker and read there than the engine's own write.
    Indexing and iterating give rows as lists, as any `TokenVectors`.
    """

    __slots__ = ("_array", "_ids")

    def __init__(self, array: np.ndarray, ids: np.ndarray | None = None) -> None:
        self._array = np.ascontiguousarray(array, dtype=np.float32)
        self._ids = None if ids is None else np.ascontiguousarray(ids, dtype=np.int64)
        if self._ids is not None and self._ids.shape != (len(self._array),):
            raise ValueError("one wordpiece id per token vector")

    @classmethod
    def from_bytes(cls, data: bytes, dimension: int, ids: bytes | None = None) -> PackedTokens:
        array = np.frombuffer(data, dtype=np.float32).reshape(-1, dimension)
        return cls(array, None if ids is None else np.frombuffer(ids, dtype=np.int64))

    def __reduce__(self) -> tuple[Any, ...]:
        ids = None if self._ids is None else self._ids.tobytes()
        return (PackedTokens.from_bytes, (self._array.tobytes(), self._array.shape[1], ids))

    def __len__(self) -> int:
        return len(self._array)

    @overload
    def __getitem__(self, index: int) -> list[float]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[float]]: ...

    def __getitem__(self, index: int | slice) -> list[float] | list[list[float]]:
        found: list[float] | list[list[float]] = self._array[index].tolist()
        return found

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedTokens):
            return NotImplemented
        mine, theirs = self._ids, other._ids
        same_ids = (
            mine is theirs if mine is None or theirs is None else np.array_equal(mine, theirs)
        )
        return same_ids and np.array_equal(self._array, other._array)

    __hash__ = None  # type: ignore[assignment]

    def rows(self) -> list[list[float]]:
        found: list[list[float]] = self._array.tolist()
        return found

    def array(self) -> np.ndarray:
        """The float32 array itself (rows by dimension); not to be changed."""
        return self._array

    @property
    def ids(self) -> np.ndarray | None:
        """Each row's wordpiece id (int64), or None where nobody said."""
        return self._ids


def wordpiece_ids(tokens: TokenVectors) -> np.ndarray | None:
    """The wordpiece id of each of `tokens`' rows, or None where they carry none."""
    return tokens.ids if isinstance(tokens, PackedTokens) else None


def float_rows(tokens: TokenVectors) -> list[list[float]]:
    """`tokens` as lists of floats, as the engines take them (`PackedTokens` at once)."""
    if isinstance(tokens, PackedTokens):
        return tokens.rows()
    return [[float(x) for x in row] for row in tokens]


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    """A namespace as stored: the contract's `Namespace` object."""

    name: str
    kind: str
    created_at: datetime
    expires_at: datetime | None = None
    metadata: JsonObject | None = None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def to_json_object(self) -> JsonObject:
        """The contract's `Namespace` object: on the wire, in Qdrant records and export files."""
        return {
            "name": self.name,
            "kind": self.kind,
            "expires_at": format_optional_time(self.expires_at),
            "metadata": self.metadata,
            "created_at": format_time(self.created_at),
        }

    @classmethod
    def from_json_object(cls, data: JsonObject) -> NamespaceRecord:
        return cls(
            name=data["name"],
            kind=data["kind"],
            created_at=parse_time(data["created_at"]),
            expires_at=parse_optional_time(data.get("expires_at")),
            metadata=data.get("metadata"),
        )


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory as stored: the contract's `Memory` object without a score."""

    id: str
    namespace: str
    content: str
    kind: str
    source: str
    created_at: datetime
    pin: bool = False
    expires_at: datetime | None = None
    propagation: JsonObject | None = None
    # Its place in its namespace's write order (plugin/core/write_order.py); None: none yet.
    position: int | None = None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class ScoredMemory:
    """A memory with its ranking score, higher better within one answer: cosine, BM25, or
    the fused score of a hybrid query (docs/backends.md "Hybrid search"); None where no
    query ranked it (a listing, newest first)."""

    memory: MemoryRecord
    score: float | None


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A keyword vector: token ids (32-bit hashes) with their weights, ids unique."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            raise ValueError("a sparse vector needs one value per index")


@dataclass(frozen=True, slots=True)
class MemoryVectors:
    """What a store keeps to find one memory: its sentence vector (`dense`), and where the
    store keeps them its keyword vector (BM25) and its token vectors (rerank mode)."""

    dense: Sequence[float]
    keywords: SparseVector | None = None
    tokens: TokenVectors | None = None
    # No `keywords`: a store that `makes_keywords` makes them; else none until filled in.
    make_keywords: bool = False


class SearchMode(enum.StrEnum):
    """How a search with a query ranks: MEMORY_PLUGIN_SEARCH."""

    RERANK = "rerank"  # candidates reranked by token vectors (MaxSim): after feedback where kept
    FEEDBACK = "feedback"  # hybrid, again with the keyword query widened by its top results
    HYBRID = "hybrid"  # dense and keyword candidates, fused by the store
    DENSE = "dense"  # cosine over the embeddings only
    KEYWORD = "keyword"  # BM25 over the keyword vectors only


class VectorKind(enum.StrEnum):
    """The vectors a store fills in place for memories written without them (`VectorFill`)."""

    KEYWORDS = "keywords"  # BM25 term weights: a `SparseVector`
    TOKENS = "tokens"  # the model's token vectors (`TokenVectors`), their wordpieces beside


# What the fill gives a memory: its keyword vector, or its token vectors.
FillVector = SparseVector | TokenVectors


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a search with a query sends the store: a dense vector, a keyword vector, or both
    (hybrid). With `feedback`, the keyword vector is first widened by the top results' words
    (adapters/qdrant/feedback.py); with `tokens`, the candidates are reranked by them
    (MaxSim), each token weighed by its wordpiece's rarity with `weigh_tokens`, else all
    alike. `text`, in place of the keyword vector: the store makes it (`makes_keywords`).
    """

    dense: Sequence[float] | None = None
    keywords: SparseVector | None = None
    tokens: TokenVectors | None = None
    feedback: bool = False
    weigh_tokens: bool = False
    text: str | None = None

    def __post_init__(self) -> None:
        keyed = self.keywords is not None or self.text is not None
        if self.dense is None and not keyed:
            raise ValueError("a search query needs a dense vector, a keyword vector or both")
        if (self.feedback or self.tokens) and (self.dense is None or not keyed):
            raise ValueError("keyword feedback and token vectors rerank a hybrid search")


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a query or listing may return."""

    now: datetime  # those with `expires_at <= now` are excluded
    pinned: bool | None = None  # None: both sides (pinned first); else that side only
    kinds: frozenset[str] | None = None  # None: all kinds


# Upper bounds, in seconds, of the buckets `DiskWrites` counts syncs in (and +Inf).
SYNC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0)
# Why the disk refused a write: the volume full (the disk guard), the write's deadline passed
# as it waited for its sync, that sync failed, a sync under way had waited too long to let
# the write in (the disk stalled).
DISK_REFUSALS = ("volume_full", "sync_timeout", "sync_failed", "disk_stalled")


@dataclass(frozen=True, slots=True)
class DiskWrites:
    """How a store's writes reach its own disk (the embedded store), for the metrics; the counts
    grow for as long as the store's process lives."""

    sync_waiting_s: float = 0.0  # how long the oldest pending sync has waited (0: none)
    # Syncs done, cumulative per bound of `SYNC_BUCKETS` and last +Inf; then their time.
    sync_buckets: tuple[int, ...] = (0,) * (len(SYNC_BUCKETS) + 1)
    sync_seconds: float = 0.0
    refused: tuple[int, ...] = (0,) * len(DISK_REFUSALS)  # per reason of `DISK_REFUSALS`

    @staticmethod
    def merged(parts: Sequence[DiskWrites]) -> DiskWrites:
        """Several stores' (engine workers') as one: the longest wait, the counts summed."""
        return DiskWrites(
            max(part.sync_waiting_s for part in parts),
            tuple(map(sum, zip(*(part.sync_buckets for part in parts), strict=True))),
            sum(part.sync_seconds for part in parts),
            tuple(map(sum, zip(*(part.refused for part in parts), strict=True))),
        )


@dataclass(frozen=True, slots=True)
class StoreCondition:
    """What a backend that still serves wants an operator to know (health, metrics)."""

    # Names whose stored data cannot be read: they answer 503 while the rest are served.
    unreadable_namespaces: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # one line each, naming no file path
    disk: DiskWrites | None = None  # how writes reach a disk of the backend's own

    @property
    def degraded(self) -> bool:
        return bool(self.unreadable_namespaces or self.problems)


def with_keywords(
    memories: Sequence[StoredMemory], keywords: Sequence[SparseVector] | None
) -> Iterator[tuple[StoredMemory, SparseVector | None]]:
    """`upsert_memories`' arguments as pairs: each memory with its keyword vector or None."""
    if keywords is None:
        return ((stored, None) for stored in memories)
    return zip(memories, keywords, strict=True)


@dataclass(frozen=True, slots=True)
class StoreSize:
    """How big a store is (`StoreSizes`), expired memories included until the janitor deletes
    them; bytes are None where the store has no volume of the plugin's."""

    namespaces: int
    memories: int
    bytes_used: int | None = None
    bytes_free: int | None = None
