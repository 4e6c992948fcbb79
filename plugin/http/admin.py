"""`GET /admin/export` and `GET /admin/verify`: export and verify-store through the server.

Outside the v1 contract, like `/metrics`: the embedded store has one process per data
directory, so a running pod's store is exported and checked by the server that holds it.
"""

from __future__ import annotations

import logging

from aiohttp import web

from plugin.http.keys import BACKEND
from plugin.http.keys import ENCODER
from plugin.http.keys import SERVICE
from plugin.transfer import jsonl
from plugin.transfer.bulk import stream_export

log = logging.getLogger(__name__)
admin_routes = web.RouteTableDef()


@admin_routes.get("/admin/export")
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


@admin_routes.get("/admin/verify")
async def verify(request: web.Request) -> web.Response:
    """200 with the problems found (none: `ok`); the running server's data, checked now."""
    problems = await request.app[BACKEND].verify()
    status = "problems" if problems else "ok"
    return web.json_response({"status": status, "problems": list(problems)})
