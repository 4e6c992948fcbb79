"""How long the plugin takes per request when it is busy: what admission weighs a queue by.

The larger of two measurements: busy time per answer, and the model's time per text over its
sessions (docs/behaviour.md, "Fair sharing"); times come from `clock`, so tests move it by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# A request's cost before anything was measured: a short text's model time on one core.
INITIAL_S = 0.005
# The least a request is taken to cost, whatever was measured (a clock too coarse for
# a window's busy time reads zero).
LEAST_S = 0.0001
WINDOW_REQUESTS = 32
WINDOW_S = 0.1
LEAST_WINDOW_REQUESTS = 8
MODEL_WINDOW_TEXTS = 16
SMOOTHING = 0.3  # weight of the newest window's sample


class ServiceTime:
    """Seconds of the plugin's time per request, learnt from the requests in flight."""

    def __init__(self, parallelism: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self.parallelism = max(1, parallelism)
        self._clock = clock
        self._busy_s: float | None = None  # busy time per answer, smoothed
        self._model_s: float | None = None  # the model's time per text, smoothed
        self._in_flight = 0
        self._since = clock()
        self._window_busy = 0.0
        self._window_answered = 0
        self._answering = False  # this busy spell has had its first answer
        self._model_window_s = 0.0
        self._model_window_texts = 0

    @property
    def seconds(self) -> float:
        """The estimate: what one more request in the queue adds to everybody's wait."""
        found = (self._busy_s, self.model_seconds)
        measured = [s for s in found if s is not None]
        return max(LEAST_S, *measured) if measured else INITIAL_S

    @property
    def model_seconds(self) -> float | None:
        """The model's time per text divided by its sessions, once a window was timed."""
        return None if self._model_s is None else self._model_s / self.parallelism

    def started(self) -> None:
        """A request was admitted."""
        self._account()
        self._in_flight += 1

    def finished(self) -> None:
        """A request admitted earlier was answered (or failed)."""
        self._account()
        self._in_flight -= 1
        first, self._answering = not self._answering, self._in_flight > 0
        if first:  # what came before it was latency, not cost (module docstring)
            return
        self._window_answered += 1
        answered = self._window_answered
        if answered >= WINDOW_REQUESTS or (
            answered >= LEAST_WINDOW_REQUESTS and self._window_busy >= WINDOW_S
        ):
            self._busy_s = _smoothed(self._busy_s, self._window_busy / self._window_answered)
            self._window_busy, self._window_answered = 0.0, 0

    def observe_model(self, texts: int, seconds: float) -> None:
        """The model embedded `texts` texts in one batch, in `seconds`."""
        self._model_window_s += seconds
        self._model_window_texts += texts
        if self._model_window_texts >= MODEL_WINDOW_TEXTS:
            sample = self._model_window_s / self._model_window_texts
            self._model_s = _smoothed(self._model_s, sample)
            self._model_window_s, self._model_window_texts = 0.0, 0

    def _account(self) -> None:
        now = self._clock()
        if self._in_flight and self._answering:
            share = min(self._in_flight, self.parallelism) / self.parallelism
            self._window_busy += (now - self._since) * share
        self._since = now


def _smoothed(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + SMOOTHING * (sample - previous)
