"""`memory-plugin-vector COMMAND`: the parser, and dispatch to plugin/commands/.

Settings are read here, once, for every command that needs them (a bad one: one line, exit 2);
each command's module is imported only when that command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from plugin.commands import PROG
from plugin.commands import failing_in_one_line
from plugin.settings import Settings
from plugin.settings import SettingsError

if TYPE_CHECKING:
    Subcommands = argparse._SubParsersAction[argparse.ArgumentParser]


def _settings() -> Settings:
    """The settings from the environment; `main` turns a bad one into exit 2."""
    return Settings.from_env(os.environ)


def _serve(args: argparse.Namespace) -> int:
    settings = _settings()  # before the server's imports: a bad setting exits at once
    from plugin.commands.serve import serve

    return serve(settings)


def _check(args: argparse.Namespace) -> int:
    from plugin.commands.check import CheckOptions
    from plugin.commands.check import required_capabilities
    from plugin.commands.check import run_check

    required = required_capabilities(args.require_capability)
    options = CheckOptions(args.url, args.timeout, args.ttl, required)
    return asyncio.run(run_check(options, print))


def _verify_store(args: argparse.Namespace) -> int:
    from plugin.commands.verify_store import verify_offline
    from plugin.commands.verify_store import verify_url

    if args.url is not None and args.accept:
        print("verify-store: --accept works on the stopped store only (no --url)")
        return 2
    if args.url is not None:
        return verify_url(args.url, args.timeout, print)
    return verify_offline(_settings(), print, accept=args.accept)


def _migrate_layout(args: argparse.Namespace) -> int:
    from plugin.commands.migrate_layout import migrate_from_settings

    settings = _settings()
    return asyncio.run(migrate_from_settings(settings, drop_source=args.drop_source, out=print))


def _export(args: argparse.Namespace) -> int:
    from plugin.commands.export_import import run_export

    settings = _settings()
    # To stdout the file is the output: the summary goes to stderr.
    echo = partial(print, file=sys.stderr) if args.out == "-" else print
    return failing_in_one_line(
        "export", lambda: run_export(settings, args.out, args.from_url, echo)
    )


def _import(args: argparse.Namespace) -> int:
    from plugin.commands.export_import import run_import

    settings = _settings()
    return failing_in_one_line("import", lambda: run_import(settings, args.in_path, print))


def _import_postgres(args: argparse.Namespace) -> int:
    from plugin.commands import import_postgres

    settings = _settings()
    if args.dry_run:
        work = import_postgres.dry_run(args.dsn, print)
    else:
        work = import_postgres.run(
            settings,
            args.dsn,
            sample=args.verify_sample,
            batch=args.batch,
            seed=args.seed,
            echo=print,
        )
    return failing_in_one_line("import-postgres", lambda: asyncio.run(work))


def _export_onnx(args: argparse.Namespace) -> int:
    from plugin.commands.export_onnx import export_configured

    settings = _settings()
    return failing_in_one_line("export-onnx", lambda: export_configured(settings, print))


def _command(
    commands: Subcommands, name: str, run: Callable[[argparse.Namespace], int], help: str
) -> argparse.ArgumentParser:
    """Add the command `name`, which `main` runs by calling `run(args)`."""
    parser = commands.add_parser(name, help=help)
    parser.set_defaults(run=run)
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Memory plugin on a vector database.")
    commands = parser.add_subparsers(dest="command", required=True)
    _command(commands, "serve", _serve, help="run the HTTP server (settings from the environment)")
    check = _command(
        commands,
        "check",
        _check,
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
    verify = _command(
        commands,
        "verify-store",
        _verify_store,
        help="check that every namespace record agrees with the memories stored "
        "(a running plugin with --url, else the stopped store the settings name)",
    )
    verify.add_argument("--url", help="a running plugin's base URL (GET /admin/verify)")
    verify.add_argument("--timeout", type=float, default=60.0, help="seconds (default: 60)")
    verify.add_argument(
        "--accept",
        action="store_true",
        help="a stopped store: vouch for it as it is (rebuilt records, memories found now)",
    )
    migrate = _command(
        commands,
        "migrate-layout",
        _migrate_layout,
        help="copy a Qdrant server's per-namespace collections into the shared layout "
        "(settings from the environment; vectors copied, idempotent)",
    )
    migrate.add_argument(
        "--drop-source",
        action="store_true",
        help="delete the per-namespace collections once everything was copied",
    )
    # export, import, import-postgres: plugin/transfer/bulk.py and docs/export-format.md
    export = _command(
        commands,
        "export",
        _export,
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
    restore = _command(
        commands,
        "import",
        _import,
        help="upsert an export into the store the settings name (idempotent; re-embeds "
        "only when the vectors came from another model or runtime)",
    )
    restore.add_argument("--in", dest="in_path", required=True, help="export file; '-' is stdin")
    postgres = _command(
        commands,
        "import-postgres",
        _import_postgres,
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
    _command(
        commands,
        "export-onnx",
        _export_onnx,
        help="export the configured model to ONNX where the server looks for it "
        "(MEMORY_PLUGIN_ONNX_DIR, else beside the model; needs torch; skips files there)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "check":
        if not args.url.startswith(("http://", "https://")):
            parser.error(f"URL must start with http:// or https://, got {args.url!r}")
        if args.timeout <= 0 or args.ttl <= 0:
            parser.error("--timeout and --ttl must be positive")
    try:
        status: int = args.run(args)
    except SettingsError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
