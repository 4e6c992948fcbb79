"""One handler per contract operation: parse (any failure a 400), admit for the namespace it
works for (but health), call the service, serialise.

Outside the contract: `/metrics`, `/admin/export` and `/admin/verify` (the embedded store has
one process per data directory: a pod's store is exported and checked by its server).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel
from pydantic import ValidationError

from adapters.callers import Caller
from adapters.errors import BackendError
from plugin import CAPABILITIES
from plugin import CONTRACT_VERSION
from plugin.core.contract_names import canonical_uuid
from plugin.core.contract_names import check_namespace_name
from plugin.http.envelope import bad_request
from plugin.http.envelope import from_validation
from plugin.http.keys import ADMISSION
from plugin.http.keys import BACKEND
from plugin.http.keys import ENCODER
from plugin.http.keys import METRICS
from plugin.http.keys import RANKING
from plugin.http.keys import SERVICE
from plugin.http.keys import SIZES
from plugin.http.keys import TOKENS_WEIGHED
from plugin.http.middleware import MEMORY_ID_KEY
from plugin.http.middleware import NAMESPACE_KEY
from plugin.http.middleware import RANKING_KEY
from plugin.http.middleware import SEARCHED_KEY
from plugin.http.wire import ForgetRequest
from plugin.http.wire import MemoryWrite
from plugin.http.wire import NamespacePatch
from plugin.http.wire import NamespaceUpsert
from plugin.http.wire import SearchRequest
from plugin.http.wire import memory_body
from plugin.observability.metrics import CONTENT_TYPE
from plugin.scheduling.work import search_tenant
from plugin.transfer import jsonl
from plugin.transfer.bulk import stream_export

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("plugin.http.admin")
routes = web.RouteTableDef()


async def _body(request: web.Request, model: type[M]) -> M:
    raw = await request.read()
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        raise from_validation(error) from None


def _path_part(request: web.Request, key: str, check: Callable[[str], str], what: str) -> str:
    try:
        return check(request.match_info[key])
    except ValueError as error:
        raise bad_request(f"invalid {what}: {error}") from None


@asynccontextmanager
async def _admitted_body(
    request: web.Request, model: type[M]
) -> AsyncIterator[tuple[str, M, Caller]]:
    """The path's namespace, admitted before the body is read, the body as `model`, and
    whom the request's calls are for; the admission is held until the block ends."""
    name = _path_part(request, "name", check_namespace_name, "namespace name")
    with request.app[ADMISSION].hold(name) as caller:
        yield name, await _body(request, model), caller


def health_body(request: web.Request, status: str) -> dict[str, object]:
    """The contract's fields; the sizes start-up chose; where searches rerank, how they weigh
    query tokens: `idf` once every memory has its wordpieces, `uniform` until then."""
    body: dict[str, object] = {
        "status": status,
        "version": CONTRACT_VERSION,
        "capabilities": list(CAPABILITIES),
    }
    if SIZES in request.app:
        body["sizes"] = request.app[SIZES]
    if RANKING in request.app and request.app[RANKING].reranks:
        body["rerank_weights"] = "idf" if request.app[TOKENS_WEIGHED].is_set() else "uniform"
    return body


@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    """503 when the store cannot serve; 200 `degraded` when it serves with a problem (a full
    disk, failing syncs, some namespaces unreadable), so a readiness probe keeps the pod."""
    try:
        condition = await request.app[SERVICE].ping()
    except BackendError as error:
        # Both the spec's Error and the reference plugin's degraded health shape.
        body = health_body(request, "degraded") | {"code": "unavailable", "message": str(error)}
        return web.json_response(body, status=503)
    if not condition.degraded:
        return web.json_response(health_body(request, "ok"))
    problems = list(condition.problems)
    if unreadable := condition.unreadable_namespaces:
        problems.append(
            f"{len(unreadable)} namespace(s) unreadable and left out of searches "
            "(named in the log; docs/repair.md#unreadable-namespace)"
        )
    fields = {"message": "; ".join(problems), "unreadable_namespaces": len(unreadable)}
    return web.json_response(health_body(request, "degraded") | fields)


@routes.put("/v1/namespaces/{name}")
async def upsert_namespace(request: web.Request) -> web.Response:
    async with _admitted_body(request, NamespaceUpsert) as (name, body, _):
        record = await request.app[SERVICE].upsert_namespace(name, body)
    return web.json_response(record.to_json_object())


@routes.patch("/v1/namespaces/{name}")
async def patch_namespace(request: web.Request) -> web.Response:
    async with _admitted_body(request, NamespacePatch) as (name, body, _):
        record = await request.app[SERVICE].patch_namespace(name, body, body.model_fields_set)
    return web.json_response(record.to_json_object())


@routes.delete("/v1/namespaces/{name}")
async def delete_namespace(request: web.Request) -> web.Response:
    name = _path_part(request, "name", check_namespace_name, "namespace name")
    with request.app[ADMISSION].hold(name):
        await request.app[SERVICE].delete_namespace(name)
    return web.Response(status=204)


@routes.post("/v1/namespaces/{name}/memories")
async def commit_memory(request: web.Request) -> web.Response:
    async with _admitted_body(request, MemoryWrite) as (name, body, caller):
        memory = await request.app[SERVICE].commit(name, body, caller)
    request[MEMORY_ID_KEY] = memory.id
    return web.json_response({"id": memory.id, "namespace": memory.namespace}, status=201)


@routes.post("/v1/search")
async def search(request: web.Request) -> web.Response:
    body = await _body(request, SearchRequest)
    request[SEARCHED_KEY] = list(dict.fromkeys(body.namespaces))
    with request.app[ADMISSION].hold(search_tenant(body.namespaces)) as caller:
        found = await request.app[SERVICE].searches.search(body, caller)
    request[RANKING_KEY] = found.ranking_name
    request.app[METRICS].observe_search(found.ranking_name)
    memories = [memory_body(hit.memory, hit.score) for hit in found.hits]
    return web.json_response({"memories": memories})


@routes.delete("/v1/memories/{id}")
async def forget_memory(request: web.Request) -> web.Response:
    memory_id = request[MEMORY_ID_KEY] = _path_part(request, "id", canonical_uuid, "memory id")
    body = await _body(request, ForgetRequest)
    request[NAMESPACE_KEY] = body.requested_by_namespace
    with request.app[ADMISSION].hold(body.requested_by_namespace) as caller:
        await request.app[SERVICE].forget(memory_id, body.requested_by_namespace, caller)
    return web.Response(status=204)


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus text, outside the contract: no JSON, no error envelope on success."""
    body = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


@routes.get("/admin/export")
async def export(request: web.Request) -> web.StreamResponse:
    backend, encoder = request.app[BACKEND], request.app[ENCODER]
    clock = request.app[SERVICE].clock
    await backend.ping()  # an outage answers 503 (the envelope) before any byte is sent
    header = jsonl.Header(encoder.fingerprint, encoder.dimension, clock(), backend.name)
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    try:
        counts = await stream_export(backend, header, response.write, clock)
    except Exception as error:  # too late for a status: the missing end line says it
        log.error("export failed half-way; the body ends without its end line", exc_info=error)
    else:
        log.info("export", extra={"namespaces": counts.namespaces, "memories": counts.memories})
    await response.write_eof()
    return response


@routes.get("/admin/verify")
async def verify(request: web.Request) -> web.Response:
    """200 with the problems found (none: `ok`); the running server's data, checked now."""
    problems = await request.app[BACKEND].verify()
    status = "problems" if problems else "ok"
    return web.json_response({"status": status, "problems": list(problems)})
