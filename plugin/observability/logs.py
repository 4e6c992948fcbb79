"""JSON log lines on stderr: one object per line, for log shippers.

Fields passed in `extra` are kept; memory content is never logged. The loggers that report
connection trouble let at most a few lines of a kind through per second, and count the ones
left out, so a flood of one error cannot fill disks (docs/behaviour.md, "Connections").
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime

from aiohttp.http_exceptions import BadHttpMessage

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# Client libraries that log every HTTP call at INFO; the plugin logs each request
# once itself, and backend failures reach the log through its own error lines.
CHATTY_LIBRARIES = ("pinecone", "httpx", "httpcore")
# Loggers that report connection trouble, which comes in floods (file descriptors
# exhausted, a swarm of slow clients): each kind at most a few lines a second
# (`LogThrottle`). Never the access log: one line per request is its point.
THROTTLED_LOGGERS = (
    "asyncio",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.internal",
    "memory_plugin.connections",
    "memory_plugin.admission",  # a namespace over its share: a line per refusal otherwise
)

# The field that marks a summary line, so the filter lets it through.
SUPPRESSED_FIELD = "suppressed"
MAX_KINDS = 256
Kind = tuple[str, str, str, int | None]


@dataclass
class _Window:
    started: float
    passed: int = 0
    suppressed: int = 0
    report_pending: bool = False


def kind_of(record: logging.LogRecord) -> Kind:
    """The record's kind: what stays the same when one problem repeats."""
    text = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    # asyncio appends the socket or the callback (with addresses) to its message.
    fixed = text.split("\n", 1)[0].split("<", 1)[0][:120]
    error = record.exc_info[1] if record.exc_info else None
    errno = getattr(error, "errno", None)
    return record.name, fixed, type(error).__name__ if error else "", errno


class LogThrottle(logging.Filter):
    """Lets `burst` records of a kind through per `window_s`; reports the rest later."""

    def __init__(
        self,
        burst: int = 3,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self._clock = clock
        self._windows: dict[Kind, _Window] = {}
        self._lock = threading.RLock()  # a summary is logged while it is held

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, SUPPRESSED_FIELD):  # the summary of an earlier window
            return True
        kind = kind_of(record)
        now = self._clock()
        with self._lock:
            window = self._windows.get(kind)
            if window is None or now - window.started >= self.window_s:
                if window is not None and window.suppressed:
                    self._report(kind, window)  # its timer has not run yet
                if len(self._windows) >= MAX_KINDS:
                    self._forget_quiet(now)
                self._windows[kind] = _Window(started=now, passed=1)
                return True
            if window.passed < self.burst:
                window.passed += 1
                return True
            window.suppressed += 1
            if not window.report_pending:
                window.report_pending = True
                self._schedule(window.started + self.window_s - now)
            return False

    def flush(self) -> None:
        """Report every window that has ended with records left out."""
        now = self._clock()
        with self._lock:
            for kind, window in list(self._windows.items()):
                if window.suppressed and now - window.started >= self.window_s:
                    self._report(kind, window)

    def _report(self, kind: Kind, window: _Window) -> None:
        count, window.suppressed, window.report_pending = window.suppressed, 0, False
        logging.getLogger(kind[0]).warning(
            "similar log lines suppressed",
            extra={
                SUPPRESSED_FIELD: count,
                "kind": kind[1],
                "error_type": kind[2] or None,
                "errno": kind[3],
                "window_s": self.window_s,
            },
        )

    def _forget_quiet(self, now: float) -> None:
        for kind, window in list(self._windows.items()):
            if not window.suppressed and now - window.started >= self.window_s:
                del self._windows[kind]
        if len(self._windows) >= MAX_KINDS:  # all busy: report and drop the oldest
            kind = min(self._windows, key=lambda k: self._windows[k].started)
            if self._windows[kind].suppressed:
                self._report(kind, self._windows[kind])
            del self._windows[kind]

    def _schedule(self, delay_s: float) -> None:
        """Run `flush` once the window has ended: on the event loop when there is one."""
        delay_s = max(delay_s, 0.0) + 0.01
        try:
            asyncio.get_running_loop().call_later(delay_s, self.flush)
        except RuntimeError:  # a thread without a loop
            timer = threading.Timer(delay_s, self.flush)
            timer.daemon = True
            timer.start()


class MalformedRequestFilter(logging.Filter):
    """A request aiohttp cannot parse (a NUL in a header), which it answers 400 itself, is
    one info line without a traceback: a caller's mistake, not an error to alert on."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, BadHttpMessage):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = f"malformed HTTP request refused: {error.message}", ()
            record.exc_info = record.exc_text = None
            return logging.getLogger().isEnabledFor(logging.INFO)
        return True


# One encoder for every line: json.dumps(default=...) would build a new one per call.
_ENCODER = json.JSONEncoder(default=str)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, then the `extra` fields; it runs
    once per request (the access line), so it does the least it can."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return _ENCODER.encode(line)


def configure(level: str) -> None:
    """JSON lines on stderr at `level`. A line never shows the caller's source position,
    thread or process, so logging is told not to look them up per record (the Python logging
    HOWTO's "Optimization"): with the shared encoder, the access line took half the time."""
    logging._srcfile = None  # no sys._getframe() walk per record
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    throttle = LogThrottle()
    for name in THROTTLED_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LogThrottle)]:
            logger.removeFilter(old)
        logger.addFilter(throttle)  # first: it keys on the message before it is reworded
    logging.getLogger("aiohttp.server").addFilter(MalformedRequestFilter())
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
