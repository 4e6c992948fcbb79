"""An HTTP-level fake of Pinecone for respx: the control plane plus ONE serverless dense index.

It answers exactly what the pinecone 10.2.0 SDK sends (`AsyncPinecone.indexes.describe`, and
`AsyncIndex` upsert/query/fetch/delete/list_paginated/describe_index_stats/delete_namespace) with
the JSON its decoders parse, so an adapter tested against it is tested against the SDK's real
request building, error mapping, retries and timeouts. It behaves like Pinecone rather than like
a dict: reads are eventually consistent, bad requests get Pinecone's 400s, numbers in metadata
come back as floats and vector values as float32.

This module is the transport, the faults, the eventual consistency and the control
plane; the data plane is harness/pinecone_index.py, the request rules
harness/pinecone_requests.py, the filter rules harness/pinecone_filters.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections import defaultdict
from collections import deque
from collections.abc import Callable
from collections.abc import Coroutine
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx
import respx

from harness.pinecone_index import IndexData
from harness.pinecone_requests import DEFAULT_NAMESPACE
from harness.pinecone_requests import Namespaces
from harness.pinecone_requests import Record
from harness.pinecone_requests import Rejected
from harness.pinecone_requests import raw_path

CONTROL_HOST = "api.pinecone.io"
DEFAULT_HOST = "https://memories-abc1234.svc.aped-4627-b74a.pinecone.io"
REQUEST_MAX_BYTES = 2 * 1024 * 1024
_GRPC_CODES = {400: 3, 401: 16, 404: 5, 413: 3, 429: 8, 500: 13, 503: 14}

Reply = httpx.Response | Coroutine[Any, Any, httpx.Response]


@dataclass
class _Write:
    lsn: int
    visible_at: float
    apply: Callable[[Namespaces], None]


def reset_sdk_retry_state() -> None:
    """Forget the SDK's process-global retry budgets and throttle gates.

    Every AsyncIndex shares a per-host token bucket (-1 per retryable failure, +0.1 per success,
    retries stop at half), so fault-injection tests would otherwise change each other's retries.
    """
    from pinecone._internal.bulk import get_registry
    from pinecone._internal.http_client import get_budget_registry

    get_budget_registry()._reset()
    get_registry()._reset()


class FakePinecone(IndexData):
    """One Pinecone project holding one serverless dense index, served over respx.

    Every constructor argument is also a public attribute the test may change at any time
    (`index_state` too: "Ready" unless set). Observations: `calls` counts requests per route
    key, `bodies` keeps each one's parsed JSON (None when bodiless), `requests` keeps the
    httpx.Request objects (headers), `committed_lsn`/`reconciled_lsn` track the write log.
    Route keys: "GET /indexes/{name}", "POST /vectors/upsert", "POST /query",
    "GET /vectors/fetch", "POST /vectors/delete", "POST /vectors/update", "GET /vectors/list",
    "POST /describe_index_stats", "DELETE /namespaces/{namespace}".
    Scores: cosine, dotproduct, or squared euclidean distance (ascending); ties go by id.
    Sparse values are refused unless the metric is dotproduct; there a query's score is
    the dense dot product plus the sparse one (Pinecone's sparse-dense scoring).
    """

    def __init__(
        self,
        *,
        name: str = "memories",
        host: str = DEFAULT_HOST,
        dimension: int = 384,
        metric: str = "cosine",
        api_key: str = "test-api-key",
        index_exists: bool = True,
        clock: Callable[[], float] = time.monotonic,
        visibility_delay_s: float = 0.0,
        strip_null_metadata: bool = False,
        missing_namespace_delete_status: int = 404,
    ) -> None:
        self.name, self.dimension, self.metric, self.api_key = name, dimension, metric, api_key
        self.host = host if host.startswith(("http://", "https://")) else f"https://{host}"
        self.index_exists, self.index_state = index_exists, "Ready"
        self.clock, self.visibility_delay_s = clock, visibility_delay_s
        # Pinecone's docs say null values are refused; the SDK's comments say the server strips.
        self.strip_null_metadata = strip_null_metadata
        self.missing_namespace_delete_status = missing_namespace_delete_status
        self.calls: Counter[str] = Counter()
        self.bodies: defaultdict[str, list[Any]] = defaultdict(list)
        self.requests: list[httpx.Request] = []
        self._committed: Namespaces = {}  # every acknowledged write applied
        self._reconciled: Namespaces = {}  # what reads see
        self._log: deque[_Write] = deque()
        self.committed_lsn = self.reconciled_lsn = 0
        self._queued: defaultdict[str, deque[tuple[int, float | None]]] = defaultdict(deque)
        self._hangs: dict[str, float] = {}
        self._refused: set[str] = set()
        self._seq = 0

    # --- wiring -------------------------------------------------------------------------

    @property
    def data_host(self) -> str:
        """The bare data-plane hostname (what describe returns and respx matches on)."""
        return httpx.URL(self.host).host

    def install(self, router: respx.MockRouter) -> None:
        """Route the control plane and this index's data plane to the fake."""
        router.route(host=CONTROL_HOST).mock(side_effect=self._handle)
        router.route(host=self.data_host).mock(side_effect=self._handle)

    @contextmanager
    def mocked(self) -> Iterator[FakePinecone]:
        """respx active for both hosts (anything else raises), with fresh SDK retry state."""
        reset_sdk_retry_state()
        with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
            self.install(router)
            yield self

    # --- faults ---------------------------------------------------------------------------

    def fail_next(self, route: str, *statuses: int, retry_after: float | None = None) -> None:
        """Answer the next requests on `route` ("POST /query", or "*" for any data-plane
        route) with these statuses, one each, before behaving normally again. A status below
        400 is a spacer: that request is answered normally."""
        self._queued[route].extend((status, retry_after) for status in statuses)

    def hang(self, route: str, seconds: float) -> None:
        """Delay answers on `route` by `seconds` until heal(); past the client's read timeout
        the request fails with httpx.ReadTimeout after that timeout, as a real socket would."""
        self._hangs[route] = seconds

    def refuse(self, route: str) -> None:
        """Fail every request on `route` with httpx.ConnectError until heal()."""
        self._refused.add(route)

    def heal(self, route: str | None = None) -> None:
        """Drop queued failures, hangs and refusals for `route`, or for all routes."""
        for route_key in [route] if route else [*self._queued, *self._hangs, *self._refused]:
            self._queued.pop(route_key, None)
            self._hangs.pop(route_key, None)
            self._refused.discard(route_key)

    # --- consistency ----------------------------------------------------------------------

    def reconcile_all(self) -> None:
        """Make every acknowledged write visible to reads now."""
        self._reconcile(float("inf"))

    def records(self, namespace: str = "", *, committed: bool = False) -> dict[str, Record]:
        """What a read would see now (or, with committed=True, every acknowledged write)."""
        state = self._committed if committed else self._visible()
        return dict(state.get(namespace or DEFAULT_NAMESPACE, {}))

    def _reconcile(self, now: float) -> None:
        while self._log and self._log[0].visible_at <= now:
            write = self._log.popleft()
            write.apply(self._reconciled)
            self.reconciled_lsn = write.lsn

    def _visible(self) -> Namespaces:
        self._reconcile(self.clock())
        return self._reconciled

    def _commit(self, apply: Callable[[Namespaces], None]) -> dict[str, str]:
        self.committed_lsn += 1
        apply(self._committed)
        visible_at = self.clock() + self.visibility_delay_s
        self._log.append(_Write(self.committed_lsn, visible_at, apply))
        return {"x-pinecone-request-lsn": str(self.committed_lsn)}

    # --- dispatch -------------------------------------------------------------------------

    def _route_key(self, request: httpx.Request) -> str:
        path = request.url.path
        if request.url.host == CONTROL_HOST and path.startswith("/indexes/"):
            return f"{request.method} /indexes/{{name}}"
        if path.startswith("/namespaces/"):
            return f"{request.method} /namespaces/{{namespace}}"
        return f"{request.method} {path}"

    def _handle(self, request: httpx.Request) -> Reply:
        key = self._route_key(request)
        data_plane = request.url.host != CONTROL_HOST
        self.requests.append(request)
        self.calls[key] += 1
        try:
            self.bodies[key].append(json.loads(request.content) if request.content else None)
        except ValueError:
            self.bodies[key].append(request.content.decode(errors="replace"))
        routes = (key, "*") if data_plane else (key,)
        if any(r in self._refused for r in routes):
            raise httpx.ConnectError("[Errno 111] Connection refused (injected)", request=request)
        queue = next((self._queued[r] for r in routes if self._queued.get(r)), None)
        status, retry_after = queue.popleft() if queue else (0, None)
        if status >= 400:  # a queued 2xx is a spacer: that request is answered normally
            headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
            message = httpx.codes.get_reason_phrase(status) or "Error"
            return self._error(status, f"{message} (injected)", data_plane, headers)
        hang = next((self._hangs[r] for r in routes if r in self._hangs), None)
        if hang is not None:
            return self._answer_late(request, key, data_plane, hang)
        return self._answer(request, key, data_plane)

    async def _answer_late(
        self, request: httpx.Request, key: str, data_plane: bool, seconds: float
    ) -> httpx.Response:
        read_timeout = request.extensions.get("timeout", {}).get("read")
        if read_timeout is not None and seconds > read_timeout:
            await asyncio.sleep(read_timeout)
            raise httpx.ReadTimeout("timed out (injected hang)", request=request)
        await asyncio.sleep(seconds)
        return self._answer(request, key, data_plane)

    def _answer(self, request: httpx.Request, key: str, data_plane: bool) -> httpx.Response:
        if request.headers.get("Api-Key") != self.api_key:
            return self._error(401, "Invalid API Key", data_plane)
        if not data_plane:
            return self._control(request)
        handlers: dict[str, Callable[[httpx.Request], tuple[Any, dict[str, str]]]] = {
            "POST /vectors/upsert": self._upsert,
            "POST /query": self._query,
            "GET /vectors/fetch": self._fetch,
            "POST /vectors/delete": self._delete,
            "POST /vectors/update": self._update,
            "GET /vectors/list": self._list,
            "POST /describe_index_stats": self._stats,
            "DELETE /namespaces/{namespace}": self._delete_namespace,
        }
        if key not in handlers:
            return self._error(404, f"No route for {key}", data_plane)
        if len(request.content) > REQUEST_MAX_BYTES:
            size = len(request.content)
            return self._error(
                413, f"Request size {size} bytes exceeds the limit of {REQUEST_MAX_BYTES}", True
            )
        try:
            body, headers = handlers[key](request)
        except Rejected as exc:
            return self._error(exc.status, exc.message, data_plane)
        return self._reply(200, body, headers)

    def _reply(
        self, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        self._seq += 1
        return httpx.Response(
            status,
            json=body,
            headers={"x-pinecone-request-id": f"fake-{self._seq}", **(headers or {})},
        )

    def _error(
        self, status: int, message: str, data_plane: bool, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """Data plane: gRPC-gateway style body; control plane: {"error": {...}, "status": n}."""
        if data_plane:
            body: dict[str, Any] = {
                "code": _GRPC_CODES.get(status, 2),
                "message": message,
                "details": [],
            }
        else:
            code = httpx.codes.get_reason_phrase(status).upper().replace(" ", "_")
            body = {"error": {"code": code, "message": message}, "status": status}
        return self._reply(status, body, headers)

    # --- control plane --------------------------------------------------------------------

    def index_model(self) -> dict[str, Any]:
        """The 2026-07 describe body for the index: one dense field carries dimension/metric."""
        return {
            "name": self.name,
            "host": self.data_host,
            "status": {"ready": self.index_state == "Ready", "state": self.index_state},
            "schema": {
                "fields": {
                    "_values": {
                        "type": "dense_vector",
                        "dimension": self.dimension,
                        "metric": self.metric,
                    }
                }
            },
            "deployment": {"deployment_type": "managed", "cloud": "aws", "region": "us-east-1"},
            "deletion_protection": "disabled",
            "read_capacity": {"mode": "OnDemand", "status": {"state": "Ready"}},
            "tags": None,
        }

    def _control(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == "/indexes":
            return self._reply(200, {"indexes": [self.index_model()] if self.index_exists else []})
        wanted = unquote(raw_path(request).removeprefix("/indexes/"))
        if request.method != "GET" or not path.startswith("/indexes/"):
            return self._error(404, f"No route for {request.method} {path}", False)
        if wanted != self.name or not self.index_exists:
            return self._error(404, f"Resource {wanted} not found", False)
        return self._reply(200, self.index_model())
