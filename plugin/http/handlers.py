"""One handler per contract operation: parse, call the service, serialise.

Bodies are validated with the strict wire models (any failure is a 400); every operation but
health is admitted for the namespace it works for (plugin/scheduling/admission.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from plugin.http.wire import namespace_body
from plugin.observability.metrics import CONTENT_TYPE
from plugin.scheduling.work import search_tenant

M = TypeVar("M", bound=BaseModel)
routes = web.RouteTableDef()


async def _body(request: web.Request, model: type[M]) -> M:
    raw = await request.read()
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        raise from_validation(error) from None


def _namespace(request: web.Request) -> str:
    name = request.match_info["name"]
    try:
        return check_namespace_name(name)
    except ValueError as error:
        raise bad_request(f"invalid namespace name: {error}") from None


@asynccontextmanager
async def _admitted_body(
    request: web.Request, model: type[M]
) -> AsyncIterator[tuple[str, M, Caller]]:
    """The path's namespace, admitted before the body is read, the body as `model`, and
    whom the request's calls are for; the admission is held until the block ends."""
    name = _namespace(request)
    with request.app[ADMISSION].hold(name) as caller:
        yield name, await _body(request, model), caller


def health_body(request: web.Request, status: str) -> dict[str, object]:
    """The contract's fields; the sizes start-up chose (CPUs, sessions, engine workers); and
    where searches rerank, how they weigh query tokens: `idf` once every memory has its
    wordpieces, `uniform` until then (plugin/upgrades/vector_fill.py)."""
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
    """503 when the store cannot serve; 200 `degraded` when it serves with a problem.

    Degraded but serving (a full disk, or one whose syncs hang or fail: reads
    work; some namespaces unreadable: the rest work) stays 200, so a readiness
    probe keeps the pod in service.
    """
    try:
        condition = await request.app[SERVICE].ping()
    except BackendError as error:
        # Both the spec's Error and the reference plugin's degraded health shape.
        body = health_body(request, "degraded") | {"code": "unavailable", "message": str(error)}
        return web.json_response(body, status=503)
    if not condition.degraded:
        return web.json_response(health_body(request, "ok"))
    unreadable = condition.unreadable_namespaces
    problems = list(condition.problems)
    if unreadable:
        problems.append(
            f"{len(unreadable)} namespace(s) unreadable and left out of searches "
            "(named in the log; docs/repair.md#unreadable-namespace)"
        )
    body = health_body(request, "degraded") | {
        "message": "; ".join(problems),
        "unreadable_namespaces": len(unreadable),
    }
    return web.json_response(body)


@routes.put("/v1/namespaces/{name}")
async def upsert_namespace(request: web.Request) -> web.Response:
    async with _admitted_body(request, NamespaceUpsert) as (name, body, _):
        record = await request.app[SERVICE].upsert_namespace(name, body)
    return web.json_response(namespace_body(record))


@routes.patch("/v1/namespaces/{name}")
async def patch_namespace(request: web.Request) -> web.Response:
    async with _admitted_body(request, NamespacePatch) as (name, body, _):
        record = await request.app[SERVICE].patch_namespace(name, body, body.model_fields_set)
    return web.json_response(namespace_body(record))


@routes.delete("/v1/namespaces/{name}")
async def delete_namespace(request: web.Request) -> web.Response:
    name = _namespace(request)
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
    try:
        memory_id = canonical_uuid(request.match_info["id"])
    except ValueError as error:
        raise bad_request(f"invalid memory id: {error}") from None
    request[MEMORY_ID_KEY] = memory_id
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
