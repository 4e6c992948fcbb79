"""`memory-plugin-vector serve` runs the server; `check URL` verifies any plugin.

serve: a bad setting prints one line on stderr and exits 2 before anything is
loaded or bound; a failure while starting (model, port) prints one line and
exits 1. SIGTERM or SIGINT stops it cleanly: the listener closes, in-flight
requests finish (up to `SHUTDOWN_GRACE_S`), the store is flushed and closed,
"stopped" is logged and the exit status is 0.

check: see `plugin/commands/check.py`; exit 0 only when every step passed.

migrate-layout: see `plugin/commands/migrate_layout.py`; a Qdrant server from one
collection per namespace to the shared layout.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence

from aiohttp import web

from plugin.settings import Settings, SettingsError

PROG = "memory-plugin-vector"
# Drain time for in-flight requests after SIGTERM. A request needs at most the
# backend deadline (1.5 s by default), and the platform's client gives up after
# 2 s, so a later answer helps nobody. 3 s of drain, the store's flush and the
# interpreter's exit (about 2 s, mostly torch) stay well inside 10 s.
SHUTDOWN_GRACE_S = 3.0
log = logging.getLogger("memory_plugin")


async def _run(app: web.Application, host: str, port: int) -> None:
    """Serve `app` until SIGTERM or SIGINT, then shut down in order."""
    from plugin.http.connections import make_runner

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum.name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    # Read deadlines, a connection cap, the envelope for aiohttp's own errors.
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
    finally:
        # Stops the listener, waits for in-flight handlers (cancelling any still
        # running after the grace), then runs cleanup_ctx: janitor, store, model.
        await runner.cleanup()


def _serve(settings: Settings) -> int:
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
        asyncio.run(_run(create_app(settings), host, port))
    except Exception as error:  # model missing, port taken, ...
        print(f"{PROG}: cannot start: {error}", file=sys.stderr)
        return 1
    log.info("stopped", extra={"uptime_s": round(time.monotonic() - started, 1)})
    return 0


def _check(args: argparse.Namespace) -> int:
    from plugin.commands.check import DEFAULT_CAPABILITIES, CheckOptions, run_check

    required = DEFAULT_CAPABILITIES
    if args.require_capability is not None:
        required = tuple(
            cap for value in args.require_capability for cap in value.split(",") if cap.strip()
        )
    options = CheckOptions(
        url=args.url, timeout_s=args.timeout, ttl_s=args.ttl, required=tuple(required)
    )
    return asyncio.run(run_check(options, print))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Memory plugin on a vector database.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP server (settings from the environment)")
    check = commands.add_parser(
        "check",
        help="verify a running plugin over the v1 contract (health, then a scratch namespace)",
    )
    check.add_argument("url", help="the plugin's base URL, e.g. http://127.0.0.1:9100")
    check.add_argument(
        "--timeout", type=float, default=5.0, help="seconds per request (default: 5)"
    )
    check.add_argument(
        "--ttl", type=float, default=2.0, help="seconds until the TTL probe expires (default: 2)"
    )
    check.add_argument(
        "--require-capability",
        action="append",
        metavar="CAP[,CAP...]",
        help="capabilities health must advertise (repeatable; default: embedding,ttl,pin; "
        "an empty value requires none)",
    )
    verify = commands.add_parser(
        "verify-store",
        help="check that every namespace record agrees with the memories stored "
        "(a running plugin with --url, else the stopped store the settings name)",
    )
    verify.add_argument("--url", help="a running plugin's base URL (GET /admin/verify)")
    verify.add_argument("--timeout", type=float, default=60.0, help="seconds (default: 60)")
    migrate = commands.add_parser(
        "migrate-layout",
        help="copy a Qdrant server's per-namespace collections into the shared layout "
        "(settings from the environment; vectors copied, idempotent)",
    )
    migrate.add_argument(
        "--drop-source",
        action="store_true",
        help="delete the per-namespace collections once everything was copied",
    )
    _transfer_commands(commands)
    return parser


def _transfer_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """export, import, import-postgres: see plugin/transfer/bulk.py and docs/export-format.md."""
    export = commands.add_parser(
        "export",
        help="write every namespace and live memory, with its vector, as JSON Lines "
        "(gzip for *.gz; settings from the environment, or --from-url a running plugin)",
    )
    export.add_argument("--out", required=True, help="file to write; '-' is stdout")
    export.add_argument(
        "--from-url",
        metavar="URL",
        help="export through a running plugin (GET URL/admin/export): the way to back up "
        "an embedded store while its server runs",
    )
    restore = commands.add_parser(
        "import",
        help="upsert an export into the store the settings name (idempotent; re-embeds "
        "only when the vectors came from another model or runtime)",
    )
    restore.add_argument("--in", dest="in_path", required=True, help="export file; '-' is stdin")
    postgres = commands.add_parser(
        "import-postgres",
        help="copy the built-in postgres plugin's memory_namespaces/memory_records here, "
        "then verify parity (exit 1 on any mismatch)",
    )
    postgres.add_argument("dsn", help="libpq connection string or postgres:// URL")
    postgres.add_argument(
        "--dry-run", action="store_true", help="print counts per namespace kind; write nothing"
    )
    postgres.add_argument(
        "--verify-sample",
        type=int,
        default=200,
        metavar="N",
        help="namespaces to compare after the copy (default: 200; 0 skips the check)",
    )
    postgres.add_argument("--seed", type=int, help="seed of the namespace sample (default: random)")
    postgres.add_argument(
        "--batch", type=int, default=256, help="memories per embedding and write (default: 256)"
    )


def _transfer(args: argparse.Namespace) -> int:
    """Run export, import or import-postgres; one line on stderr and 1 on failure."""
    from plugin.commands import export_import, import_postgres

    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    try:
        if args.command == "export":
            return export_import.run_export(settings, args.out, args.from_url, print)
        if args.command == "import":
            return export_import.run_import(settings, args.in_path, print)
        if args.dry_run:
            return asyncio.run(import_postgres.dry_run(args.dsn, print))
        return asyncio.run(
            import_postgres.run(
                settings,
                args.dsn,
                sample=args.verify_sample,
                batch=args.batch,
                seed=args.seed,
                echo=print,
            )
        )
    except Exception as error:  # a bad file, an unreachable store or database, ...
        print(f"{PROG} {args.command}: failed: {error}", file=sys.stderr)
        return 1


def _migrate_layout(args: argparse.Namespace) -> int:
    from plugin.commands.migrate_layout import migrate_from_settings

    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    return asyncio.run(migrate_from_settings(settings, drop_source=args.drop_source, out=print))


def _verify_store(args: argparse.Namespace) -> int:
    from plugin.commands.export_import import model_dimension
    from plugin.commands.verify_store import verify_offline, verify_url

    if args.url is not None:
        return verify_url(args.url, args.timeout, print)
    try:
        settings = Settings.from_env(os.environ)
    except SettingsError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    return verify_offline(settings, model_dimension(settings), print)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "check":
        if not args.url.startswith(("http://", "https://")):
            parser.error(f"URL must start with http:// or https://, got {args.url!r}")
        if args.timeout <= 0 or args.ttl <= 0:
            parser.error("--timeout and --ttl must be positive")
        return _check(args)
    if args.command == "migrate-layout":
        return _migrate_layout(args)
    if args.command == "verify-store":
        return _verify_store(args)
    if args.command in ("export", "import", "import-postgres"):
        return _transfer(args)
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
