"""The contract's error envelope, `{"code", "message"}` (plus `details` for validation), and
the exceptions that produce it; the platform's breaker counts 5xx, so a caller's mistake must
never become one."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from typing import Literal

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod
from aiohttp.http_exceptions import BadStatusLine
from aiohttp.http_exceptions import InvalidHeader
from aiohttp.http_exceptions import InvalidURLError
from aiohttp.http_exceptions import LineTooLong
from pydantic import ValidationError

ErrorCode = Literal["bad_request", "not_found", "forbidden", "internal", "unavailable"]


class ApiError(Exception):
    """An error with its HTTP status and contract code."""

    def __init__(
        self,
        status: int,
        code: ErrorCode,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body

    def response(self, close: bool = False) -> web.Response:
        """The answer; `close`: the connection is closed after it."""
        response = web.json_response(self.body(), status=self.status, headers=self.headers)
        if close:
            response.force_close()
        return response


def bad_request(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(400, "bad_request", message, details)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def unavailable(message: str) -> ApiError:
    return ApiError(503, "unavailable", message)


def from_validation(error: ValidationError, where: str = "body") -> ApiError:
    """One readable message naming the first bad field; every problem in details."""
    problems = [
        {"field": ".".join(str(part) for part in item["loc"]) or where, "problem": item["msg"]}
        for item in error.errors(include_url=False, include_context=False, include_input=False)
    ]
    first = problems[0]
    return bad_request(
        f"invalid {where}: {first['field']}: {first['problem']}", {"errors": problems}
    )


def from_protocol(status: int, error: BaseException | None, line_limit: int) -> ApiError:
    """An error aiohttp answers itself, before any middleware (a request it cannot parse, an
    `Expect` it does not know, a failure outside the middleware), named by its kind only:
    aiohttp's own text quotes the offending bytes, which the answer must never echo."""
    if status >= 500:
        code: ErrorCode = "unavailable" if status in (503, 504) else "internal"
        return ApiError(status, code, f"internal error ({_phrase(status)})")
    if isinstance(error, LineTooLong):
        message = f"request line or header longer than {line_limit} bytes"
    elif isinstance(error, BadHttpMethod):
        message = "malformed HTTP request: unknown method, or not HTTP at all"
    elif isinstance(error, BadStatusLine):
        message = "malformed request line"
    elif isinstance(error, InvalidURLError):
        message = "malformed request target"
    elif isinstance(error, InvalidHeader):
        message = "malformed header"
    elif status == 417:
        message = "unsupported Expect header (only 100-continue is understood)"
    elif error is None and status != 400:
        message = _phrase(status).lower()
    else:
        message = "malformed HTTP request"
    return ApiError(status, "bad_request", message)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"
