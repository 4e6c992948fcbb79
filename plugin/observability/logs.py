"""JSON log lines on stderr: one object per line, for log shippers.

Fields passed in `extra` are kept; memory content is never logged.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC
from datetime import datetime

from aiohttp.http_exceptions import BadHttpMessage

from plugin.observability.log_throttle import LogThrottle

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# Client libraries that log every HTTP call at INFO; the plugin logs each request
# once itself, and backend failures reach the log through its own error lines.
CHATTY_LIBRARIES = ("pinecone", "httpx", "httpcore")
# Loggers that report connection trouble, which comes in floods (file descriptors
# exhausted, a swarm of slow clients): each kind at most a few lines a second
# (plugin/observability/log_throttle.py). Never the access log: one line per request is its point.
THROTTLED_LOGGERS = (
    "asyncio",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.internal",
    "memory_plugin.connections",
    "memory_plugin.admission",  # a namespace over its share: a line per refusal otherwise
)


class MalformedRequestFilter(logging.Filter):
    """aiohttp logs a request it cannot even parse (a NUL in a header) as an error with a
    traceback, though it answers 400 itself: a caller's mistake, not the plugin's.
    Such records become one info line without the traceback, so error alerts stay quiet.
    """

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
    """One JSON object per record: ts, level, logger, msg, then the `extra` fields.

    It runs once per request (the access line), so it does the least it can.
    """

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
    """JSON lines on stderr at `level`.

    The line never shows the caller's source position, thread or process, so the
    logging module is told not to look them up for every record: the switches the
    Python logging HOWTO lists under "Optimization". With the shared encoder above,
    the access line went from 34 to 16 microseconds (timed in-process).
    """
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
