"""The two clocks tests move by hand: monotonic seconds for adapters, wall time for the app.

Adapters (the Pinecone connection, overlay and record cache; the Pinecone fake's
visibility) read a `Callable[[], float]` of seconds; the app reads a
`Callable[[], datetime]` for expiry. Each test owns its clock and moves it itself.
"""

from __future__ import annotations

from datetime import UTC
from datetime import datetime
from datetime import timedelta


class ManualClock:
    """Seconds that pass only when the test says so (the `ticks` fixture)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class WallClock:
    """Wall-clock time plus an offset the test can move forward (the `clock` fixture)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **kwargs: float) -> None:
        self.offset += timedelta(**kwargs)
