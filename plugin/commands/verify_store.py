"""`memory-plugin-vector verify-store`: is every stored memory still findable?

It compares the embedded store's namespace records with its memories, through a running plugin
(`--url`) or straight from a stopped store; exit statuses: docs/repair.md.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

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


def verify_offline(settings: Settings, out: Print, *, accept: bool = False) -> int:
    """The stopped store's problems. `accept`: first vouch for it as it is: rebuilt records
    lost their memory counts, and a namespace short of memories answers 503, until an
    operator, having restored (import, backfill) or given up what was lost, accepts them."""
    dimension = configured_dimension(settings)

    async def verify() -> list[str]:
        backend = build_backend(settings, dimension, configured_token_dimension(settings))
        await backend.start()
        try:
            if accept:
                accepted = await backend.accept()
                out(f"verify-store: accepted {len(accepted)} namespace(s) as they are now")
            return list(await backend.verify())
        finally:
            await backend.close()

    return _said(asyncio.run(verify()), out)


def _said(problems: list[str], out: Print) -> int:
    for problem in problems:
        out(f"verify-store: {problem}")
    if not problems:
        out("verify-store: ok: every namespace record agrees with the memories stored")
        return 0
    return 1
