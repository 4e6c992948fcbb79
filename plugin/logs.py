"""JSON log lines on stderr: one object per line, for log shippers.

Fields passed in `extra` are kept; memory content is never logged.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from aiohttp.http_exceptions import BadHttpMessage

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# Client libraries that log every HTTP call at INFO; the plugin logs each request
# once itself, and backend failures reach the log through its own error lines.
CHATTY_LIBRARIES = ("pinecone", "httpx", "httpcore")


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


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.server").addFilter(MalformedRequestFilter())
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
