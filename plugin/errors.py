"""The contract's error envelope and the exceptions that produce it.

Every non-2xx answer is `{"code", "message"}` (plus `details` for validation),
with `code` from the contract's enum. The platform's breaker counts 5xx, so a
caller's mistake must never become one.
"""

from __future__ import annotations

from typing import Any, Literal

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
