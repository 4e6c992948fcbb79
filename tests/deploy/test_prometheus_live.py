"""Every query of the dashboard and of the alert rules returns data from a live plugin.

A real Prometheus (Debian's `prometheus`) scrapes the real server every second,
under the job and namespace labels the chart's ServiceMonitor gives it, while a
short mixed load runs: commits, searches, a listing, refusals (429: one request
in flight per namespace), a 404. Then each dashboard expression (its variables
filled in) and each alert expression (its comparison taken off, each side of an
`or` on its own, `absent()` aside) goes through Prometheus' HTTP API: it must
parse and return data, so no panel or alert watches a metric that does not exist.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from harness.server_process import ServerProcess
from harness.server_process import free_port
from harness.server_process import holds_any
from harness.server_process import listening_sockets
from tests.deploy.test_alert_rules import SCRAPED
from tests.deploy.test_grafana_dashboard import dashboard
from tests.deploy.test_grafana_dashboard import panels
from tests.support.helm import FULLNAME
from tests.support.helm import NAMESPACE
from tests.support.helm import one
from tests.support.helm import render
from tests.support.tools import require_tool

pytestmark = pytest.mark.slow

LOAD_S = 8.0
PORT_TRIES = 3
NS = "workspace:live-metrics"


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[ServerProcess]:
    env = {"MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT": "1"}  # concurrent writes: some 429
    with ServerProcess(tmp_path / "data", tmp_path / "server.log", env=env) as server:
        server.start()
        server.wait_healthy()
        yield server


@pytest.fixture
def prometheus(plugin: ServerProcess, tmp_path: Path) -> Iterator[str]:
    binary = require_tool(
        shutil.which("prometheus"), "prometheus", "apt-get install prometheus (scripts/test does)"
    )
    target = {"targets": [f"127.0.0.1:{plugin.port}"], "labels": {"namespace": NAMESPACE}}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": FULLNAME, "static_configs": [target]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    process, url = _started(binary, tmp_path)
    try:
        yield url
    finally:
        process.kill()
        process.wait()


def _started(binary: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on `tmp_path`'s configuration, ready, on a port that it holds: a port
    chosen free may be taken before Prometheus binds it, and then another is tried."""
    for _ in range(PORT_TRIES):
        port = free_port()
        log_path = tmp_path / f"prometheus-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        _wait(partial(_ready_or_gone, process, port), "Prometheus ready")
        if process.poll() is None:
            return process, url
        assert "address already in use" in log_path.read_text(), log_path.read_text()
    raise AssertionError(f"no free port for Prometheus in {PORT_TRIES} tries")


def _ready_or_gone(process: subprocess.Popen[bytes], port: int) -> bool:
    """Whether Prometheus exited, or answers ready on a port that it holds (not another's)."""
    if process.poll() is not None:
        return True
    if _get(f"http://127.0.0.1:{port}/-/ready") is None:
        return False
    return holds_any(process.pid, listening_sockets(port))


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read()
    except OSError:
        return None
    return json.loads(body) if body.startswith(b"{") else body


def _wait(done: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:g} s"
        time.sleep(0.2)


def query(url: str, expr: str) -> list[Any]:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(expr)}") as r:
            found = json.loads(r.read())
    except urllib.error.HTTPError as error:  # a 400 carries Prometheus' parse error
        raise AssertionError(f"{expr}: {error.read().decode()}") from error
    assert found["status"] == "success", (expr, found)
    result: list[Any] = found["data"]["result"]
    return result


def top_level_sides(expr: str) -> list[str]:
    """`expr` split at each `or` outside parentheses."""
    sides, depth, start = [], 0, 0
    for i, char in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and expr.startswith(" or ", i):
            sides.append(expr[start:i].strip())
            start = i + 4
    return [*sides, expr[start:].strip()]


async def mixed_load(base: str) -> dict[int, int]:
    """Commits, searches, listings, a 404 and refusals for LOAD_S seconds; statuses seen."""
    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession() as session:

        async def call(method: str, path: str, body: Any) -> None:
            async with session.request(method, base + path, json=body) as response:
                await response.read()
                statuses[response.status] = statuses.get(response.status, 0) + 1

        await call("PUT", f"/v1/namespaces/{NS}", {"kind": "workspace"})
        deadline = time.monotonic() + LOAD_S
        n = 0
        while time.monotonic() < deadline:
            n += 1
            commit = {"content": f"memory {n} about the build", "kind": "fact", "source": "agent"}
            await asyncio.gather(
                *(call("POST", f"/v1/namespaces/{NS}/memories", commit) for _ in range(3))
            )
            await call("POST", "/v1/search", {"namespaces": [NS], "query": "the build"})
            await call("POST", "/v1/search", {"namespaces": [NS], "limit": 100})
            await call("PATCH", "/v1/namespaces/workspace:missing", {"metadata": {}})
            await asyncio.sleep(0.1)
    return statuses


def dashboard_expressions() -> list[str]:
    found = []
    for panel in panels(dashboard()):
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "30s")
            found.append(expr.replace('job=~"$job"', f'job=~"{FULLNAME}"'))
    return found


def alert_expressions() -> list[str]:
    rule = one(render(None, *SCRAPED), "PrometheusRule")
    found = []
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            for side in top_level_sides(" ".join(alert["expr"].split())):
                if side.startswith("absent("):
                    continue  # data only when the plugin is not scraped
                found.append(re.sub(r"\s*(==|<|>)\s*[0-9.e+]+\s*$", "", side))
    return found


def test_every_dashboard_and_alert_query_returns_data(
    plugin: ServerProcess, prometheus: str
) -> None:
    statuses = asyncio.run(mixed_load(plugin.base_url))
    assert {201, 200, 404, 429} <= set(statuses), statuses
    _wait(lambda: len(query(prometheus, "up[30s]")[0]["values"]) >= 5, "five scrapes")
    expressions = dashboard_expressions() + alert_expressions()
    empty = [expr for expr in expressions if not query(prometheus, expr)]
    assert not empty, "\n".join(empty)
    assert len(expressions) > 30
