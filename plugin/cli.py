"""`memory-plugin-vector serve`: settings from the environment, then the server.

A bad setting prints one line on stderr and exits 2 before anything is loaded
or bound; a failure while starting (model, port) prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from aiohttp import web

from plugin.settings import Settings, SettingsError

PROG = "memory-plugin-vector"
log = logging.getLogger("memory_plugin")


def _serve(settings: Settings) -> int:
    from plugin import logs
    from plugin.app import create_app

    logs.configure(settings.log_level)
    host, port = settings.listen
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
        web.run_app(
            create_app(settings),
            host=host,
            port=port,
            print=None,
            access_log=None,
            shutdown_timeout=10.0,
            handle_signals=True,
        )
    except Exception as error:  # model missing, port taken, ...
        print(f"{PROG}: cannot start: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Memory plugin on a vector database.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP server (settings from the environment)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            settings = Settings.from_env(os.environ)
        except SettingsError as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return 2
        return _serve(settings)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
