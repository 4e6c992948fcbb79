"""`memory-plugin-vector serve`: run the HTTP server until SIGTERM or SIGINT.

A failure while starting prints one line and exits 1; a signal stops it cleanly, as
docs/observability.md, "Shutdown", describes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time

from aiohttp import web

from plugin.commands import PROG
from plugin.http.keys import STOP
from plugin.settings import Settings

# Drain time for in-flight requests after SIGTERM: past the backend deadline (1.5 s) and the
# platform client's 2 s a later answer helps nobody; with the store's flush, well inside 10 s.
SHUTDOWN_GRACE_S = 3.0
log = logging.getLogger("memory_plugin")


async def run_app(app: web.Application, host: str, port: int) -> int:
    """Serve `app` until SIGTERM or SIGINT (status 0) or until the app asks to stop
    (status 1), then shut down in order."""
    from plugin.http.connections import make_runner

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []
    failed: list[str] = []

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum.name)
        stop.set()

    def stop_for(reason: str) -> None:
        """What the app asks for (a late fingerprint mismatch): one line, then as SIGTERM."""
        log.error("stopping: %s", reason)
        print(f"{PROG}: stopping: {reason}", file=sys.stderr, flush=True)
        failed.append(reason)
        on_signal(signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    app[STOP] = stop_for
    runner = make_runner(app, shutdown_timeout=SHUTDOWN_GRACE_S)
    await runner.setup()  # loads the model, opens the backend, starts the janitor
    try:
        if not stop.is_set():  # a signal during start-up: do not start serving
            await web.TCPSite(runner, host, port).start()
            log.info("listening", extra={"host": host, "port": port})
            await stop.wait()
        log.info(
            "stopping: closed to new connections, finishing in-flight requests",
            extra={"signal": received[0], "grace_s": SHUTDOWN_GRACE_S},
        )
    finally:  # in-flight handlers get the grace, then janitor, store and model close
        await runner.cleanup()
    return 1 if failed else 0


def serve(settings: Settings) -> int:
    from plugin.http.app import create_app
    from plugin.observability import logs

    logs.configure(settings.log_level)
    host, port = settings.listen
    started = time.monotonic()
    log.info(
        "starting",
        extra={
            "listen": settings.listen_addr,
            "backend": settings.backend,
            "qdrant_url": settings.qdrant_url,
            "data_dir": str(settings.data_dir),
        },
    )
    try:
        status = asyncio.run(run_app(create_app(settings), host, port))
    except Exception as error:  # model missing, port taken, ...
        print(f"{PROG}: cannot start: {error}", file=sys.stderr)
        return 1
    log.info("stopped", extra={"uptime_s": round(time.monotonic() - started, 1)})
    return status
