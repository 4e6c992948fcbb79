"""The model's own figures in this process, the floor every latency ratio is taken against.

Used by benchmarks/latency.py and benchmarks/backfill.py.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.sentences import sentences

MODEL_TEXTS = 480  # per model measurement: about 1.5 s on 2 cores
SAMPLES = 200  # one-text timings per median
CALLERS = 8  # the closed loop's callers (benchmarks/closed_loop.py), as the pool sees them


def load_model(backend: str, onnx_dir: str, sessions: int | None = 1) -> Any:
    """The model in this process: one session (the floor every ratio is taken against), or
    with `sessions=None` the pool the server runs (one session per usable core)."""
    from plugin.embedding.encoders import load_encoder
    from plugin.settings import Settings

    encoder = load_encoder(
        Settings.model_validate(
            {
                "MEMORY_PLUGIN_EMBEDDING_BACKEND": backend,
                "MEMORY_PLUGIN_ONNX_DIR": onnx_dir,
                "MEMORY_PLUGIN_EMBEDDING_SESSIONS": "" if sessions is None else str(sessions),
            }
        )
    )
    for text in sentences(20, seed=5):
        encoder.encode([text])
    return encoder


def pool_rate(encoder: Any) -> float:
    """The pool alone, as 8 callers load it: texts/s with 8 texts in flight, shared among
    its sessions (batches of 8 / sessions, side by side)."""
    from concurrent.futures import ThreadPoolExecutor

    texts = sentences(MODEL_TEXTS, seed=5)
    share = max(1, CALLERS // encoder.parallelism)
    with ThreadPoolExecutor(encoder.parallelism) as threads:
        started = time.perf_counter()
        for start in range(0, len(texts), CALLERS):
            batch = texts[start : start + CALLERS]
            parts = [batch[i : i + share] for i in range(0, len(batch), share)]
            list(threads.map(encoder.encode, parts))
    return len(texts) / (time.perf_counter() - started)


def one_text_times_s(encoder: Any, texts: list[str]) -> list[float]:
    """The model alone, one text at a time: seconds for each of `texts`."""
    took = []
    for text in texts:
        started = time.perf_counter()
        encoder.encode([text])
        took.append(time.perf_counter() - started)
    return took


def single_text_s(encoder: Any) -> float:
    """The model alone: median seconds to embed one text."""
    return statistics.median(one_text_times_s(encoder, sentences(SAMPLES, seed=5)))


def batch8_rate(encoder: Any) -> float:
    """The model alone: texts/s in batches of 8, one batch after another."""
    texts = sentences(MODEL_TEXTS, seed=5)
    started = time.perf_counter()
    for start in range(0, len(texts), 8):
        encoder.encode(texts[start : start + 8])
    return len(texts) / (time.perf_counter() - started)
