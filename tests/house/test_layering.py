"""The layers' imports: plugin/core knows no HTTP, and adapters/ knows no plugin.

`plugin/core` holds the contract's rules: no aiohttp, no pydantic, and nothing from
`plugin.http` (whose wire models the service reads only through the protocols of
`plugin/core/fields.py`) or `plugin.commands`. `adapters/` never imports aiohttp
(backends are reached through their SDKs) nor anything of the plugin's. The `check`
command (plugin/commands/check.py) verifies any plugin over HTTP, so it imports
nothing from `adapters/`. The engine worker's code (`adapters/engine/`) is reached only
by the name the worker is started with: the server's side of the embedded store
(`adapters/pool/`), the shared modules and the plugin import none of it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = sorted((ROOT / "plugin" / "core").glob("*.py"))
ADAPTERS = sorted((ROOT / "adapters").rglob("*.py"))
NOT_IN_CORE = ("aiohttp", "pydantic", "plugin.http", "plugin.commands")
NOT_IN_ADAPTERS = ("aiohttp", "plugin")
ENGINE = ROOT / "adapters" / "engine"
SERVER_SIDE = sorted(
    path
    for path in [*ROOT.joinpath("plugin").rglob("*.py"), *ADAPTERS]
    if not path.is_relative_to(ENGINE)
)
POOL = sorted((ROOT / "adapters" / "pool").glob("*.py"))
THE_ENGINE = ("adapters.engine", "qdrant_edge")
CHECK = ROOT / "plugin" / "commands" / "check.py"


def imported(source: Path) -> Iterator[str]:
    """Every module `source` imports, at any depth (lazy and TYPE_CHECKING imports too)."""
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{source}: relative import; the tree uses absolute ones")


def offending(source: Path, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        {
            name
            for name in imported(source)
            for banned in forbidden
            if name == banned or name.startswith(f"{banned}.")
        }
    )


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    """What the checks below rely on: lazy, aliased and `from` imports are all found."""
    source = tmp_path / "sample.py"
    source.write_text(
        "import aiohttp.web as web\n"
        "from plugin import http\n"
        "def later() -> None:\n"
        "    from plugin.http.wire import SearchRequest\n",
        encoding="utf-8",
    )
    assert offending(source, NOT_IN_CORE) == [
        "aiohttp.web",
        "plugin.http",
        "plugin.http.wire",
        "plugin.http.wire.SearchRequest",
    ]


def test_core_has_modules() -> None:
    assert {path.stem for path in CORE} >= {"service", "search", "service_errors", "fields"}


@pytest.mark.parametrize("source", CORE, ids=lambda path: path.name)
def test_core_imports_neither_aiohttp_nor_the_wire_models(source: Path) -> None:
    assert offending(source, NOT_IN_CORE) == []


@pytest.mark.parametrize("source", ADAPTERS, ids=lambda path: str(path.relative_to(ROOT)))
def test_adapters_import_neither_aiohttp_nor_the_plugin(source: Path) -> None:
    assert offending(source, NOT_IN_ADAPTERS) == []


def test_check_imports_nothing_from_adapters() -> None:
    assert offending(CHECK, ("adapters",)) == []


def test_the_server_side_has_modules() -> None:
    assert {path.stem for path in POOL} >= {"engine_pool", "engine_process", "embedded_store"}
    assert len(SERVER_SIDE) > len(POOL)


@pytest.mark.parametrize("source", SERVER_SIDE, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_server_side_imports_no_engine(source: Path) -> None:
    # the BM25 encoder loads the library at its first vector, which an embedded store's
    # server never asks for (tests/http/test_engine_apart.py)
    allowed = ("qdrant_edge",) if source.name == "keyword_encoder.py" else ()
    assert [name for name in offending(source, THE_ENGINE) if name not in allowed] == []
