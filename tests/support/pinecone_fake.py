"""An HTTP-level fake of Pinecone for respx: the control plane plus ONE serverless dense index.

It answers exactly what the pinecone 10.2.0 SDK sends (`AsyncPinecone.indexes.describe`, and
`AsyncIndex` upsert/query/fetch/delete/list_paginated/describe_index_stats/delete_namespace) with
the JSON its decoders parse, so an adapter tested against it is tested against the SDK's real
request building, error mapping, retries and timeouts. It behaves like Pinecone rather than like
a dict: reads are eventually consistent, bad requests get Pinecone's 400s, numbers in metadata
come back as floats and vector values as float32. Filter rules live in
tests/support/pinecone_filters.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx
import numpy as np
import respx

from tests.support.pinecone_filters import FilterError, matches, validate_filter

CONTROL_HOST = "api.pinecone.io"
DEFAULT_HOST = "https://memories-abc1234.svc.aped-4627-b74a.pinecone.io"
DEFAULT_NAMESPACE = "__default__"  # what "" (the default namespace) is called in stats
METADATA_MAX_BYTES = 40_960
REQUEST_MAX_BYTES = 2 * 1024 * 1024
BATCH_MAX = 1000  # vectors per upsert, ids per fetch/delete
TOP_K_MAX, TOP_K_MAX_WITH_DATA = 10_000, 1000
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 100, 100  # the SDK's own LIST_LIMIT_MAX
NAME_MAX = 512  # ids and namespace names
_VECTOR_KEYS = frozenset({"id", "values", "metadata", "sparseValues"})
_GRPC_CODES = {400: 3, 401: 16, 404: 5, 413: 3, 429: 8, 500: 13, 503: 14}

# Dense values, metadata, and sparse values as {index: value} (dotproduct indexes only).
Record = tuple[list[float], dict[str, Any] | None, dict[int, float] | None]
Namespaces = dict[str, dict[str, Record]]
Reply = httpx.Response | Coroutine[Any, Any, httpx.Response]


class Rejected(Exception):
    """A request Pinecone refuses; turned into its error body by the dispatcher."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.status = message, status


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


def _f32(values: Any) -> list[float]:
    """Round to float32 and back by shortest repr, as Pinecone stores and prints values."""
    return [float(str(v)) for v in np.asarray(values, dtype=np.float32)]


def _ascii_name(value: Any, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise Rejected(f"{what} must be a non-empty string")
    if len(value) > NAME_MAX or not value.isascii() or "\x00" in value:
        raise Rejected(f"{what} must be 1-{NAME_MAX} ASCII characters without NUL: {value!r}")
    return value


def _raw_path(request: httpx.Request) -> str:
    """The path as sent, still percent-encoded, so a name holding "/" or "%" survives."""
    return request.url.raw_path.decode("ascii").split("?", 1)[0]


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise Rejected(f"{key} must be a boolean")
    return value


class FakePinecone:
    """One Pinecone project holding one serverless dense index, served over respx.

    Every constructor argument is also a public attribute the test may change at any time
    (`index_state` too: "Ready" unless set). Observations: `calls` counts requests per route
    key, `bodies` keeps each one's parsed JSON (None when bodiless), `requests` keeps the
    httpx.Request objects (headers), `committed_lsn`/`reconciled_lsn` track the write log.
    Route keys: "GET /indexes/{name}", "POST /vectors/upsert", "POST /query",
    "GET /vectors/fetch", "POST /vectors/delete", "GET /vectors/list",
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
        wanted = unquote(_raw_path(request).removeprefix("/indexes/"))
        if request.method != "GET" or not path.startswith("/indexes/"):
            return self._error(404, f"No route for {request.method} {path}", False)
        if wanted != self.name or not self.index_exists:
            return self._error(404, f"Resource {wanted} not found", False)
        return self._reply(200, self.index_model())

    # --- validation -----------------------------------------------------------------------

    @staticmethod
    def _json_object(request: httpx.Request) -> dict[str, Any]:
        try:
            body = json.loads(request.content or b"{}")
        except ValueError as exc:
            raise Rejected(f"Invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise Rejected("Request body must be a JSON object")
        return body

    @staticmethod
    def _namespace(raw: Any) -> str:
        if raw is None or raw == "":
            return DEFAULT_NAMESPACE
        return _ascii_name(raw, "namespace")

    def _dense(self, values: Any, what: str) -> list[float]:
        if not isinstance(values, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values
        ):
            raise Rejected(f"{what} values must be an array of numbers")
        if len(values) != self.dimension:
            raise Rejected(
                f"{what} dimension {len(values)} does not match the dimension of the index "
                f"{self.dimension}"
            )
        if self.metric == "cosine" and not any(values):
            raise Rejected("Dense vectors must contain at least one non-zero value")
        return _f32(values)

    def _metadata(self, raw: Any, vector_id: str) -> dict[str, Any] | None:
        """Pinecone's metadata rules; numbers are stored (and returned) as float64."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise Rejected(f"metadata for vector {vector_id} must be an object")
        clean: dict[str, Any] = {}
        for field, value in raw.items():
            if value is None and self.strip_null_metadata:
                continue
            if isinstance(value, str | bool):
                clean[field] = value
            elif isinstance(value, int | float):
                clean[field] = float(value)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                clean[field] = list(value)
            else:
                shown = json.dumps(value, separators=(",", ":"))
                raise Rejected(
                    "Metadata value must be a string, number, boolean or list of strings, "
                    f"got '{shown}' for field '{field}'"
                )
        size = len(json.dumps(clean, separators=(",", ":"), ensure_ascii=False).encode())
        if size > METADATA_MAX_BYTES:
            raise Rejected(
                f"metadata size is {size} bytes, which exceeds the limit of "
                f"{METADATA_MAX_BYTES} bytes per vector"
            )
        return clean or None

    @staticmethod
    def _filter(raw: Any, empty_message: str | None = None) -> dict[str, Any] | None:
        if raw is None or (raw == {} and empty_message is None):
            return None
        if raw == {}:
            raise Rejected(str(empty_message))
        try:
            validate_filter(raw)
        except FilterError as exc:
            raise Rejected(str(exc)) from exc
        return dict(raw)

    @staticmethod
    def _ids(raw: Any) -> list[str]:
        if not isinstance(raw, list) or not raw:
            raise Rejected("ids must be a non-empty array")
        if len(raw) > BATCH_MAX:
            raise Rejected(f"Too many ids: {len(raw)}, the limit is {BATCH_MAX}")
        return [_ascii_name(i, "Vector ID") for i in raw]

    # --- data plane -----------------------------------------------------------------------

    def _upsert(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        ns, vectors = self._namespace(body.get("namespace")), body.get("vectors")
        if not isinstance(vectors, list):
            raise Rejected("vectors must be an array")
        if len(vectors) > BATCH_MAX:
            raise Rejected(f"Upsert of {len(vectors)} vectors exceeds the limit of {BATCH_MAX}")
        rows: list[tuple[str, Record]] = []
        for item in vectors:
            if not isinstance(item, dict) or not item.keys() <= _VECTOR_KEYS:
                raise Rejected(f"Invalid vector: {str(item)[:80]}")
            vid = _ascii_name(item.get("id"), "Vector ID")
            if "sparseValues" in item and self.metric != "dotproduct":
                raise Rejected("Sparse vector values are only supported for the dotproduct metric")
            values = self._dense(item.get("values"), "Vector")
            sparse = (
                self._sparse(item["sparseValues"], "Sparse values")
                if "sparseValues" in item
                else None
            )
            rows.append((vid, (values, self._metadata(item.get("metadata"), vid), sparse)))

        def apply(state: Namespaces) -> None:
            state.setdefault(ns, {}).update(rows)

        return {"upsertedCount": len(rows)}, self._commit(apply)

    @staticmethod
    def _sparse(raw: Any, what: str) -> dict[int, float]:
        """Pinecone's rules: indices unique uint32, as many values, at least one pair."""
        if not isinstance(raw, dict) or set(raw) != {"indices", "values"}:
            raise Rejected(f"{what} must have indices and values")
        indices, values = raw["indices"], raw["values"]
        if not isinstance(indices, list) or not isinstance(values, list):
            raise Rejected(f"{what}: indices and values must be arrays")
        if len(indices) != len(values) or not indices:
            raise Rejected(f"{what}: indices and values must be non-empty and of equal length")
        if any(
            not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 2**32 for i in indices
        ):
            raise Rejected(f"{what}: indices must be unsigned 32-bit integers")
        if len(set(indices)) != len(indices):
            raise Rejected(f"{what}: indices must be unique")
        return dict(zip(indices, _f32(values), strict=True))

    def _score(self, a: list[float], b: list[float]) -> float:
        x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if self.metric == "euclidean":  # squared distance; lower is closer
            return float(np.sum((x - y) ** 2))
        dot = float(x @ y)
        return (
            dot / float(np.linalg.norm(x) * np.linalg.norm(y)) if self.metric == "cosine" else dot
        )

    def _query(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        top_k, with_values = body.get("topK"), _flag(body, "includeValues")
        with_meta = _flag(body, "includeMetadata")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= TOP_K_MAX:
            raise Rejected(f"topK must be an integer between 1 and {TOP_K_MAX}, got {top_k!r}")
        if (with_values or with_meta) and top_k > TOP_K_MAX_WITH_DATA:
            raise Rejected(
                f"top_k must be at most {TOP_K_MAX_WITH_DATA} when include_values or "
                f"include_metadata is true, got {top_k}"
            )
        ns, flt = self._namespace(body.get("namespace")), self._filter(body.get("filter"))
        if "vector" in body and "id" in body:
            raise Rejected("Cannot provide both 'ID' and 'vector' at the same time")
        if "sparseVector" in body and self.metric != "dotproduct":
            raise Rejected("Sparse vector queries are only supported for the dotproduct metric")
        records = self._visible().get(ns, {})
        if "id" in body:
            found = records.get(_ascii_name(body["id"], "id"))
            target = found[0] if found else None
        elif "vector" in body:
            target = self._dense(body["vector"], "Query vector")
        else:
            raise Rejected("No query provided: pass vector or id")
        query_sparse = (
            self._sparse(body["sparseVector"], "Sparse query") if "sparseVector" in body else {}
        )

        def score(values: list[float], sparse: dict[int, float] | None) -> float:
            assert target is not None
            keyword = sum(w * (sparse or {}).get(i, 0.0) for i, w in query_sparse.items())
            return self._score(target, values) + keyword

        scored = [
            (score(values, sparse), vid, values, meta)
            for vid, (values, meta, sparse) in records.items()
            if target is not None and (flt is None or matches(flt, meta))
        ]
        sign = 1.0 if self.metric == "euclidean" else -1.0
        scored.sort(key=lambda s: (sign * s[0], s[1]))
        found_matches = []
        for score, vid, values, meta in scored[:top_k]:
            match: dict[str, Any] = {"id": vid, "score": _f32([score])[0]}
            match["values"] = values if with_values else []
            if with_meta and meta:
                match["metadata"] = meta
            found_matches.append(match)
        reply = {
            "matches": found_matches,
            "namespace": body.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        return reply, {"x-pinecone-max-indexed-lsn": str(self.reconciled_lsn)}

    def _fetch(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        params = request.url.params
        ids = self._ids(params.get_list("ids") or None)
        records = self._visible().get(self._namespace(params.get("namespace")), {})
        vectors: dict[str, Any] = {}
        for vid in ids:
            if vid in records:
                values, meta, _ = records[vid]
                vectors[vid] = {"id": vid, "values": values, **({"metadata": meta} if meta else {})}
        reply = {
            "vectors": vectors,
            "namespace": params.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        return reply, {}

    def _delete(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        body = self._json_object(request)
        ns, delete_all = self._namespace(body.get("namespace")), _flag(body, "deleteAll")
        if delete_all and ("ids" in body or "filter" in body):
            raise Rejected("No explicit IDs or filter allowed when deleteAll is true")
        flt = self._filter(body.get("filter"), "Delete with empty metadata filter is not allowed")
        ids = self._ids(body["ids"]) if "ids" in body and flt is None else None
        if not (delete_all or flt or ids):
            raise Rejected("Must specify one of ids, deleteAll or filter")

        def apply(state: Namespaces) -> None:  # filters are evaluated when the write applies
            records = state.get(ns)
            if records is None:
                return
            doomed = (
                list(records)
                if delete_all
                else ids
                or [vid for vid, (_, meta, _) in records.items() if flt and matches(flt, meta)]
            )
            for vid in doomed:
                records.pop(vid, None)

        return {}, self._commit(apply)

    def _list(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        params = request.url.params
        prefix = _ascii_name(params.get("prefix", ""), "prefix", allow_empty=True)
        raw_limit = params.get("limit", str(LIST_LIMIT_DEFAULT))
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= LIST_LIMIT_MAX:
            raise Rejected(f"limit must be between 1 and {LIST_LIMIT_MAX}, got {raw_limit!r}")
        after = ""
        if "paginationToken" in params:
            try:
                after = json.loads(base64.urlsafe_b64decode(params["paginationToken"]))["after"]
            except (ValueError, KeyError, TypeError) as exc:
                raise Rejected("Invalid pagination token") from exc
        records = self._visible().get(self._namespace(params.get("namespace")), {})
        ids = sorted(v for v in records if v.startswith(prefix) and v > after)
        page = ids[: int(raw_limit)]
        reply: dict[str, Any] = {
            "vectors": [{"id": vid} for vid in page],
            "namespace": params.get("namespace", ""),
            "usage": {"readUnits": 1},
        }
        if len(ids) > len(page):
            token = base64.urlsafe_b64encode(json.dumps({"after": page[-1]}).encode()).decode()
            reply["pagination"] = {"next": token}
        return reply, {}

    def _stats(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        if self._json_object(request).get("filter"):
            raise Rejected("Serverless indexes do not support describing index stats with a filter")
        counts = {ns: len(recs) for ns, recs in self._visible().items() if recs}
        reply = {
            "namespaces": {ns: {"vectorCount": n} for ns, n in sorted(counts.items())},
            "dimension": self.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(counts.values()),
            "metric": self.metric,
            "vectorType": "dense",
        }
        return reply, {}

    def _delete_namespace(self, request: httpx.Request) -> tuple[Any, dict[str, str]]:
        ns = _ascii_name(unquote(_raw_path(request).removeprefix("/namespaces/")), "namespace")
        if ns not in self._committed and ns != DEFAULT_NAMESPACE:
            raise Rejected(f"Namespace {ns} not found", self.missing_namespace_delete_status)

        def apply(state: Namespaces) -> None:
            state.pop(ns, None)

        return {}, self._commit(apply)
