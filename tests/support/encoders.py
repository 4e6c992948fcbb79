"""Stand-in encoders for tests of what sits in front of the model (the batcher, the service)."""

from __future__ import annotations

import threading


class GatedEncoder:
    """Records every batch; blocks inside `encode` until the test opens the gate."""

    dimension = 3
    fingerprint = "gated/test"
    inline_lone_text = False  # it blocks: never on the event loop
    keep_tokens = False

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

    encode_lone = encode
