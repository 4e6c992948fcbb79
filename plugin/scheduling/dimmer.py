"""The rerank dimmer: a rerank is optional work, so the share of searches reranked is turned
down when reranking would make callers wait (docs/backends.md, "The rerank dimmer")."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

WINDOW_S = 0.5
WINDOW_SEARCHES = 32
DOWN = 0.5
MOST_DOWN = 0.5  # the most the share falls in one window
UP = 0.25
MOST_UP = 0.25  # the most it rises: from none to all in four windows
SPIKE = 2.0
CATCH_UP_WINDOWS = 8  # the most idle windows counted at once (more change nothing)
log = logging.getLogger(__name__)


class RerankDimmer:
    """Says, per search, whether it is reranked; `share` is the part of searches that are.

    - A window closes after `WINDOW_S`, or once `WINDOW_SEARCHES` searches arrived in it.
      Each moves the share by its mean queue's distance from `target`, relative to it:
      `DOWN` times it (at most `MOST_DOWN`) when over, `UP` times it (at most `MOST_UP`)
      when under, so it settles without flapping. A time window in which no search
      arrived counts with the queue seen now.
    - Which searches are reranked follows the share evenly (error diffusion, not a coin).
    - A search that arrives to a queue over `SPIKE` times the target is not reranked
      whatever the share: a sudden burst is not reranked while the windows catch up.
    """

    def __init__(
        self,
        target: float,
        queue: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self._queue = queue
        self._clock = clock
        self._share = 1.0
        self._credit = 0.0  # the share's reranks owed but not yet given
        self._window_start = clock()
        self._window_queues = 0.0
        self._window_searches = 0

    @property
    def share(self) -> float:
        """The share now: windows that passed without a search are counted first."""
        self._advance(self._queue())
        return self._share

    @property
    def level(self) -> float:
        """The share as the last window closed left it (reads nothing)."""
        return self._share

    def rerank(self) -> bool:
        """Whether the search asking now is reranked (at once; see the module docstring)."""
        queued = self._queue()
        self._window_queues += queued
        self._window_searches += 1
        if self._window_searches >= WINDOW_SEARCHES:
            self._close_window(self._clock())
        else:
            self._advance(queued)
        if queued > SPIKE * self.target:
            return False
        self._credit += self._share
        if self._credit >= 1.0:
            self._credit -= 1.0
            return True
        return False

    def _advance(self, queue_now: float) -> None:
        """Close the windows that have ended: the first by its searches' queue, others by now's."""
        now = self._clock()
        windows = int((now - self._window_start) / WINDOW_S)
        if windows < 1:
            return
        if self._window_searches:
            self._close_window(now)
            windows -= 1
        for _ in range(min(windows, CATCH_UP_WINDOWS)):
            self._step(queue_now)
        self._window_start = now

    def _close_window(self, now: float) -> None:
        self._step(self._window_queues / self._window_searches)
        self._window_start = now
        self._window_queues, self._window_searches = 0.0, 0

    def _step(self, mean_queue: float) -> None:
        distance = (self.target - mean_queue) / self.target
        over = distance < 0
        change = max(-MOST_DOWN, DOWN * distance) if over else min(MOST_UP, UP * distance)
        self._share = max(0.0, min(1.0, self._share + change))
        log.debug("rerank share %.3f, mean queue %.2f", self._share, mean_queue)
        if self._share == 0.0:
            self._credit = 0.0
