"""Connections: read deadlines, a cap on open connections, and aiohttp's own errors, on top
of aiohttp's connection protocol, which alone waits for a request forever and accepts
connections until file descriptors run out (docs/behaviour.md, "Connections")."""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Awaitable
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from plugin.http.envelope import from_protocol
from plugin.http.keys import SETTINGS
from plugin.settings import Settings

log = logging.getLogger("memory_plugin.connections")
# File descriptors the process needs besides connections: the store, the model, logs.
FD_RESERVE = 256
_Handler = Callable[[BaseRequest], Awaitable[web.StreamResponse]]


class BodyTimeout(TimeoutError):
    """The request body did not arrive in time: a `TimeoutError`, so that aiohttp's lingering
    read after the answer stops on it quietly instead of logging an unhandled exception."""


class PluginRequestHandler(RequestHandler):
    """aiohttp's connection protocol with read deadlines and the contract's error envelope.
    It relies on `RequestHandler`'s `_messages`, `_request_count`, `_waiter` (aiohttp 3.14);
    tests/http/test_connections.py drives every path over real sockets."""

    __slots__ = ("_body", "_deadline", "_limits")

    def __init__(self, manager: PluginServer, *, limits: Settings, **kwargs: Any):
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None  # a body still arriving

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        manager = self._manager
        if isinstance(manager, PluginServer) and not manager.admit(transport):
            self._manager = None  # never registered: connection_lost has nothing to undo
            transport.close()
            return
        super().connection_made(transport)
        self._arm(self._limits.header_timeout_s, self._head_late)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        self._body = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        idle = self._waiter is not None and not self._waiter.done()
        heads = self._request_count
        super().data_received(data)
        if self._request_count != heads:  # a head (or a parse error) came in whole
            self._disarm()
            payload = self._messages[-1][1] if self._messages else None
            if isinstance(payload, StreamReader) and not payload.is_eof():
                self._body = payload
                self._arm(self._limits.body_timeout_s, self._body_late)
        elif self._body is not None:
            if self._body.is_eof():
                self._disarm()
                self._body = None
        elif idle and data and self._deadline is None:  # the next request has begun
            self._arm(self._limits.header_timeout_s, self._head_late)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The envelope instead of aiohttp's plain text, which quotes the request."""
        failure = from_protocol(status, exc, self.max_line_size)
        if status >= 500:
            log.error("error outside the middleware", exc_info=exc)
        else:
            log.info(
                "malformed HTTP request refused",
                extra={"status": status, "problem": failure.message, "peer": self._peer()},
            )
        if request.writer.output_size > 0:  # as aiohttp: too late for another answer
            raise ConnectionError("response already started; cannot answer the error")
        return failure.response(close=True)

    def _arm(self, delay_s: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self._loop.call_later(delay_s, callback)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        if self.transport is None:
            return
        log.info(
            "closed a slow client: no complete request head in time",
            extra={"timeout_s": self._limits.header_timeout_s, "peer": self._peer()},
        )
        self.force_close()

    def _body_late(self) -> None:
        self._deadline = None
        body, self._body = self._body, None
        if self.transport is None or body is None or body.is_eof():
            return
        log.info(
            "closed a slow client: request body not received in time",
            extra={"timeout_s": self._limits.body_timeout_s, "peer": self._peer()},
        )
        # The handler reading it answers 408; then the connection is closed, not kept.
        seconds = self._limits.body_timeout_s
        body.set_exception(BodyTimeout(f"request body not received within {seconds:g} s"))
        self.close()

    def _peer(self) -> str | None:
        return _address(self.peername)


def _address(peer: object) -> str | None:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else None


def _enveloped(handler: _Handler) -> _Handler:
    """The app's handler, with the errors raised before its middleware (417) in the envelope."""

    async def guarded(request: BaseRequest) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            return from_protocol(error.status, None, 0).response(close=True)

    return guarded


class PluginServer(Server):
    """aiohttp's `Server` that builds `PluginRequestHandler`s and counts open connections."""

    def __init__(self, plain: Server, limits: Settings) -> None:
        super().__init__(
            _enveloped(plain.request_handler),
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            **plain._kwargs,  # what the runner and the app chose (access log, keep-alive)
        )
        self.limits = limits
        self.open_connections = 0

    def __call__(self) -> RequestHandler:
        return PluginRequestHandler(self, loop=self._loop, limits=self.limits, **self._kwargs)

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        if self.open_connections < self.limits.max_connections:
            return True
        log.warning(
            "refused a connection: too many open connections",
            extra={
                "max_connections": self.limits.max_connections,
                "peer": _address(transport.get_extra_info("peername")),
            },
        )
        return False

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.open_connections += 1

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self.open_connections -= 1


class PluginAppRunner(web.AppRunner):
    """`web.AppRunner` serving through `PluginServer`, limited by the app's settings."""

    async def _make_server(self) -> Server:
        return PluginServer(await super()._make_server(), self.app[SETTINGS])


def make_runner(app: web.Application, shutdown_timeout: float) -> PluginAppRunner:
    """The runner `serve` uses: the limits and keep-alive from the app's settings."""
    settings = app[SETTINGS]
    warn_if_few_descriptors(settings.max_connections)
    return PluginAppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=settings.keepalive_timeout_s,
    )


def warn_if_few_descriptors(max_connections: int) -> None:
    """The cap only protects when it is reached before the open-file limit is."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < max_connections + FD_RESERVE:
        log.warning(
            "the open-file limit is below MEMORY_PLUGIN_MAX_CONNECTIONS plus a reserve: "
            "raise the limit (ulimit -n) or lower the setting",
            extra={"open_file_limit": soft, "max_connections": max_connections},
        )
