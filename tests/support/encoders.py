"""Stand-in encoders for tests of what sits in front of the model (the batcher, the service)."""

from __future__ import annotations

import threading
import time

from plugin.embedding.embedding_tokens import Embedding


class GatedEncoder:
    """Records every batch; blocks inside `encode` until the test opens the gate."""

    dimension = 3
    token_dimension = 3  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "gated/test"
    inline_lone_text = False  # it blocks: never on the event loop

    def __init__(self, parallelism: int = 1) -> None:
        self.parallelism = parallelism
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.inside = 0  # encodes running now
        self.most_inside = 0
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.batches.append(list(texts))
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.entered.set()
        self.gate.wait(5)
        with self._lock:
            self.inside -= 1
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        return [Embedding(vector) for vector in self.encode(texts)]

    embed_lone = embed


class PacedEncoder:
    """Takes `batch_s` seconds over every batch, whatever it holds: a model slower than
    the load in front of it, without a machine busy enough to make the real one so."""

    dimension = 3
    token_dimension = 3  # Encoder.token_dimension: no projection
    projection = None
    fingerprint = "paced/test"
    inline_lone_text = False
    parallelism = 1

    def __init__(self, batch_s: float) -> None:
        self.batch_s = batch_s

    def encode(self, texts: list[str]) -> list[list[float]]:
        time.sleep(self.batch_s)
        return [[1.0, 0.0, 0.0] for _ in texts]

    def embed(self, texts: list[str], *, tokens: bool = False) -> list[Embedding]:
        return [Embedding(vector) for vector in self.encode(texts)]

    embed_lone = embed
