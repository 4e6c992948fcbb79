"""A model of the platform's memory client, as ../shared/contract/NOTES.md describes it.

Used where a test or a benchmark must say what the platform would have done with the
plugin's answers: every call gets 2 s; a non-2xx is decoded as the contract's
envelope (`{"code","message"}`) and returned to that caller as its error; one
breaker per client, shared by every workspace, opens after 3 consecutive failures
(a timeout, a transport error or any 5xx) and keeps memory off for everybody for
60 s; a 4xx is "the plugin answered": it resets the count, as a 2xx does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 2.0
FAILURES_TO_OPEN = 3


@dataclass(frozen=True)
class CallError:
    """What the caller gets for a non-2xx: the envelope's code and message, or the status."""

    status: int
    code: str
    message: str


def surfaced(status: int, body: Any) -> CallError | None:
    """What the client hands its caller for an answer: None on 2xx, else the error."""
    if 200 <= status < 300:
        return None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        return CallError(status, body["code"], str(body.get("message", "")))
    return CallError(status, "", f"HTTP {status}")


@dataclass
class Breaker:
    """The client's one breaker: `record` every answer in the order it came."""

    failures: int = 0
    opened: int = 0
    longest_run: int = 0

    def record(self, status: int, seconds: float = 0.0) -> None:
        """`status` 0 stands for a transport error; a slow answer counts as a timeout."""
        failed = status == 0 or status >= 500 or seconds > TIMEOUT_S
        self.failures = self.failures + 1 if failed else 0
        self.longest_run = max(self.longest_run, self.failures)
        if self.failures == FAILURES_TO_OPEN:
            self.opened += 1

    @property
    def is_open(self) -> bool:
        return self.failures >= FAILURES_TO_OPEN
