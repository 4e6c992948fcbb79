"""`memory-plugin-vector verify-store`: is every stored memory still findable?

It compares the embedded store's namespace records with its memories, through a running plugin
(`--url`) or straight from a stopped store; exit statuses: docs/repair.md.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from adapters.base import VectorBackend
from plugin.backends import build_backend
from plugin.commands import Print
from plugin.embedding.encoders import configured_dimension
from plugin.embedding.encoders import configured_token_dimension
from plugin.settings import Settings


def verify_url(url: str, timeout_s: float, out: Print) -> int:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/admin/verify", timeout=timeout_s) as reply:
            found = json.loads(reply.read())
    except (OSError, ValueError) as error:  # unreachable, an error status, not JSON
        out(f"verify-store: could not check {url}: {error}")
        return 2
    return _said(found.get("problems", []), out)


async def verify_settings(
    settings: Settings, dimension: int, out: Print, *, accept: bool = False
) -> int:
    backend = build_backend(settings, dimension, configured_token_dimension(settings))
    await backend.start()
    try:
        if accept:
            await _accept(backend, out)
        problems = await backend.verify()
    finally:
        await backend.close()
    return _said(list(problems), out)


async def _accept(backend: VectorBackend, out: Print) -> None:
    """Rebuilt records lost their memory counts, and a namespace short of memories answers
    503: both stay so until an operator, having restored (import, backfill) or given up
    what was lost, vouches for the store as it is."""
    accepted = await backend.accept()
    out(f"verify-store: accepted {len(accepted)} namespace(s) as they are now")


def verify_offline(settings: Settings, out: Print, *, accept: bool = False) -> int:
    dimension = configured_dimension(settings)
    return asyncio.run(verify_settings(settings, dimension, out, accept=accept))


def _said(problems: list[str], out: Print) -> int:
    for problem in problems:
        out(f"verify-store: {problem}")
    if not problems:
        out("verify-store: ok: every namespace record agrees with the memories stored")
        return 0
    return 1
