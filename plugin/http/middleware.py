"""Request ids, one log line and metrics per request, and the error envelope for whatever goes
wrong: 503 for the plugin's own trouble, 429 for a tenant over its share, 500 only for a bug."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from aiohttp import web
from aiohttp.typedefs import Handler

from adapters.errors import BackendError
from adapters.errors import BackendRejected
from adapters.errors import BackendUnavailable
from adapters.errors import NamespaceGone
from adapters.errors import StorageDamaged
from plugin.core.service_errors import NotFound
from plugin.core.service_errors import ServiceError
from plugin.http.connections import BodyTimeout
from plugin.http.envelope import ApiError
from plugin.http.envelope import bad_request
from plugin.http.envelope import not_found
from plugin.http.envelope import unavailable
from plugin.http.keys import METRICS
from plugin.scheduling.admission import OverShare

log = logging.getLogger("memory_plugin.access")
refusals = logging.getLogger("memory_plugin.admission")
REQUEST_ID = "X-Request-ID"
REQUEST_ID_KEY = web.RequestKey("request_id", str)
MEMORY_ID_KEY = web.RequestKey("memory_id", str)
# The namespace a request acts in when its path does not name one (forget).
NAMESPACE_KEY = web.RequestKey("namespace", str)
# The namespaces a search covered (deduplicated); names only, never the query.
SEARCHED_KEY = web.RequestKey("searched", list[str])
# What ranked a search's answer: a search mode, or `newest` (plugin/core/search.py, `Found`).
RANKING_KEY = web.RequestKey("ranking", str)
MAX_REQUEST_ID = 128
MAX_LOGGED_NAMESPACES = 50
CLIENT_CLOSED = 499
# The kubelet's probes say so (kube-probe/<version>): counted apart from the callers' requests.
PROBE_AGENT = "kube-probe/"
# Set on a request refused for its namespace's share: counted, but no access line.
REFUSED_KEY = web.RequestKey("refused", bool)
# The message of a 5xx answer, for its access line: the plugin's own words, never the
# caller's input (a 4xx message may quote it), so an operator sees why without a trace.
FAILURE_KEY = web.RequestKey("failure", str)
# How long the connection of a refused request is not read.
REFUSED_PAUSE_S = 0.2


def _from_http(error: web.HTTPException) -> ApiError:
    if error.status == 404:
        return not_found("no such route")
    if isinstance(error, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(error.allowed_methods))
        message = f"method {error.method} not allowed on this route; allowed: {allowed}"
        return ApiError(405, "bad_request", message, headers={"Allow": allowed})
    if error.status == 413:
        return ApiError(413, "bad_request", "request body too large")
    if error.status < 500:
        return ApiError(error.status, "bad_request", error.reason or "bad request")
    return ApiError(error.status, "internal", error.reason or "internal error")


def _from_backend(error: BackendError, request_id: str) -> ApiError:
    """The answer; logged where an operator must look into it (no outage, no caller mistake)."""
    if isinstance(error, StorageDamaged):
        if error.__cause__ is not None:  # an engine failure, not a record known bad
            log.error("backend error", exc_info=error, extra={"request_id": request_id})
        return unavailable(str(error))
    if isinstance(error, BackendUnavailable):
        return unavailable(f"backend unavailable: {error}")
    if isinstance(error, BackendRejected):
        return bad_request(str(error))
    if isinstance(error, NamespaceGone):
        return not_found(str(error))
    # The adapter's own trouble, whatever it is: 503, details only in the log.
    log.error("backend error", exc_info=error, extra={"request_id": request_id})
    return unavailable(f"backend error; see the plugin log for request {request_id}")


def _from_refusal(refusal: OverShare, request: web.Request) -> ApiError:
    """Logged apart (no access line); the connection rests a moment."""
    request[REFUSED_KEY] = True
    rest_connection(request.transport)
    refusals.warning(
        "refused: namespace over its share of requests in flight",
        extra={
            "request_id": request[REQUEST_ID_KEY],
            "namespace": refusal.tenant,
            "reason": refusal.reason,
            "in_flight": refusal.in_flight,
            "share": refusal.share,
        },
    )
    retry = {"Retry-After": str(refusal.retry_after_s)}
    return ApiError(429, "unavailable", str(refusal), headers=retry)


def rest_connection(transport: asyncio.BaseTransport | None) -> None:
    """Read nothing more from `transport` for `REFUSED_PAUSE_S`."""
    if not isinstance(transport, asyncio.ReadTransport) or not transport.is_reading():
        return
    transport.pause_reading()
    asyncio.get_running_loop().call_later(REFUSED_PAUSE_S, _resume_reading_of, transport)


def _resume_reading_of(transport: asyncio.ReadTransport) -> None:
    if not transport.is_closing() and not transport.is_reading():
        transport.resume_reading()


@web.middleware
async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into the contract's error envelope."""
    request_id = request[REQUEST_ID_KEY]
    try:
        return await handler(request)
    except ApiError as error:
        failure = error
    except ServiceError as error:  # NotFound 404, any other (InvalidRequest) the caller's 400
        failure = not_found(str(error)) if isinstance(error, NotFound) else bad_request(str(error))
    except OverShare as refusal:
        failure = _from_refusal(refusal, request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        failure = _from_http(error)
    except BackendError as error:
        failure = _from_backend(error, request_id)
    except BodyTimeout as error:  # logged where the deadline passed
        failure = ApiError(408, "bad_request", str(error))
    except ConnectionResetError:  # the client hung up mid-body: nobody to answer
        log.info("client closed the connection", extra={"request_id": request_id})
        failure = ApiError(CLIENT_CLOSED, "bad_request", "client closed the connection")
    except Exception as error:
        log.error("unhandled error", exc_info=error, extra={"request_id": request_id})
        message = f"internal error; see the plugin log for request {request_id}"
        failure = ApiError(500, "internal", message)
    if failure.status >= 500:
        request[FAILURE_KEY] = failure.message
    return failure.response(close=failure.status == 408)  # 408: the connection layer closes it


def _route(request: web.Request) -> str | None:
    """The route template (`/v1/namespaces/{name}`), never the raw path."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


def _log_fields(request: web.Request, status: int | None, seconds: float) -> dict[str, object]:
    fields: dict[str, object] = {
        "request_id": request[REQUEST_ID_KEY],
        "method": request.method,
        "route": _route(request),
        "namespace": request.match_info.get("name") or request.get(NAMESPACE_KEY),
        "memory_id": request.get(MEMORY_ID_KEY),
        "status": status,
        "latency_ms": round(seconds * 1000, 2),
    }
    searched = request.get(SEARCHED_KEY)
    if searched is not None:
        fields["namespaces"] = searched[:MAX_LOGGED_NAMESPACES]
        fields["namespaces_count"] = len(searched)
    if (ranking := request.get(RANKING_KEY)) is not None:
        fields["ranking"] = ranking
    if (failure := request.get(FAILURE_KEY)) is not None:
        fields["error"] = failure
    return fields


def _finish(request: web.Request, status: int, started: float) -> None:
    seconds = time.perf_counter() - started
    if request.headers.get("User-Agent", "").startswith(PROBE_AGENT):
        request.app[METRICS].observe_probe(_route(request), status)
    else:
        request.app[METRICS].observe_request(_route(request), request.method, status, seconds)
    if not request.get(REFUSED_KEY):
        log.info("request", extra=_log_fields(request, status, seconds))


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Honour or mint `X-Request-ID`, echo it; log and count the request once it is done
    (outside `envelope`: the final status). One cancelled at shutdown is logged, not counted."""
    given = request.headers.get(REQUEST_ID, "")
    request_id = given if 0 < len(given) <= MAX_REQUEST_ID and given.isprintable() else ""
    request[REQUEST_ID_KEY] = request_id or uuid.uuid4().hex
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as error:  # only non-errors (< 400) get past the envelope
        error.headers[REQUEST_ID] = request[REQUEST_ID_KEY]
        _finish(request, error.status, started)
        raise
    except BaseException:
        seconds = time.perf_counter() - started
        log.warning("request aborted", extra=_log_fields(request, None, seconds))
        raise
    response.headers[REQUEST_ID] = request[REQUEST_ID_KEY]
    _finish(request, response.status, started)
    return response
