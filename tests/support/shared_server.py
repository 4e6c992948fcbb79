"""One plugin app on the embedded store, served from a thread of its own for a whole test
process: the API tests that need no app of their own share it (`pytest.mark.shares_server`).

Its event loop runs in that thread, so a test on any loop reaches it over real HTTP. Before
each test it is reset to what a new app over an empty store shows: no namespace (each
deleted through the backend, memories and all), no unreadable namespace, the clock at wall
time. A test that awaits the app's own objects, or asks other settings, keeps its own app.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any
from typing import TypeVar

from aiohttp import web

from harness.clocks import WallClock
from plugin.embedding.encoders import Encoder
from plugin.http.app import create_app
from plugin.http.keys import BACKEND
from plugin.http.keys import SERVICE
from plugin.settings import Settings

T = TypeVar("T")
WAIT_S = 60.0  # start-up, a reset, or the close: each is bounded


class SharedServer:
    """`create_app(settings)` on 127.0.0.1, on a loop in a thread of its own."""

    def __init__(self, settings: Settings, encoder: Encoder) -> None:
        self.clock = WallClock()
        self.app = create_app(settings, encoder=encoder, clock=self.clock)
        self.url = ""
        self._runner = web.AppRunner(self.app)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="shared plugin server", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        self._run(self._start())

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    def reset(self) -> None:
        """As a new app over an empty store: no namespace, the clock at wall time."""
        self.clock.offset = timedelta()
        self._run(self._wipe())

    async def _wipe(self) -> None:
        backend = self.app[BACKEND]
        for record in await backend.list_namespaces():
            await backend.delete_namespace(record.name)
        self.app[SERVICE].searches.unreadable.clear()

    def close(self) -> None:
        if self._thread.is_alive():
            self._run(self._runner.cleanup())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(WAIT_S)
        self._loop.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(WAIT_S)
