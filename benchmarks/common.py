"""Small helpers shared by the benchmark scripts (not a benchmark itself)."""

from __future__ import annotations

import asyncio
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
_SEARCHES = re.compile(r'^memory_plugin_searches_total\{ranking="(\w+)"\} (\S+)$', re.M)


def searches_by_ranking(metrics_text: str) -> dict[str, float]:
    """A server's searches so far, by what ranked them, from its `/metrics` text."""
    return {ranking: float(count) for ranking, count in _SEARCHES.findall(metrics_text)}


def reranked_share(before: Mapping[str, float], after: Mapping[str, float]) -> float:
    """The share of the searches with a query between two counts that were reranked."""
    rerank = after.get("rerank", 0) - before.get("rerank", 0)
    queried = sum(after.get(r, 0) - before.get(r, 0) for r in after if r != "newest")
    return rerank / queried if queried else float("nan")


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(values_s: Sequence[float]) -> dict[str, float]:
    """min/median/p95/p99/max of durations in seconds, as milliseconds."""
    ms = [v * 1000 for v in values_s]
    return {
        "min": min(ms),
        "median": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "max": max(ms),
    }


def print_table(title: str, rows: list[tuple[str, int, dict[str, float]]]) -> None:
    """One line per operation: name, count, and its `summary_ms` columns."""
    columns = ["min", "median", "p95", "p99", "max"]
    print(title)
    print(f"  {'operation':<34} {'n':>5} " + " ".join(f"{c + ' ms':>10}" for c in columns))
    for name, count, stats in rows:
        print(f"  {name:<34} {count:>5} " + " ".join(f"{stats[c]:>10.1f}" for c in columns))


def chart_note() -> str:
    """A chart's note: today's date and how this process was started (`python -m ...`)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    command = " ".join(["python -m", spec.name if spec else sys.argv[0], *sys.argv[1:]])
    return f"{date.today()}, {command}"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def run_against_server(
    title: str,
    measure: Callable[[Any], Awaitable[None]],
    env: Mapping[str, str] | None = None,
    command: Sequence[str] | None = None,
) -> None:
    """Start a fresh server process on a temporary data dir, measure, stop it with SIGTERM.

    `command` replaces `memory-plugin-vector serve` (see `ServerProcess`).
    """
    from harness.server_process import ServerProcess

    print(f"{title} ({machine()})")
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        ServerProcess(
            Path(tmp) / "data", Path(tmp) / "server.log", env=env, command=command
        ) as server,
    ):
        server.start()
        print(f"cold start (spawn -> first 200 on /v1/health): {server.wait_healthy():.2f} s")
        try:
            asyncio.run(measure(server))
        except BaseException:
            print("server log tail:\n" + server.log_tail())
            raise
        print(f"server stopped with SIGTERM: exit code {server.terminate()}")


def run_wrk(
    url: str, lua: str, connections: int, seconds: float
) -> tuple[float | None, str | None]:
    """Drive `url` with wrk (one thread) and the request script `lua`.

    Returns wrk's requests/s (None if it printed none) and its line about answers
    other than 2xx (None when there were none); each caller decides what those mean.
    """
    out = wrk_output(url, lua, connections, seconds)
    non_2xx = out.split("Non-2xx", 1)[1].splitlines()[0] if "Non-2xx" in out else None
    found = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    return (float(found.group(1)) if found else None), non_2xx


WRK_POST = """
{setup}local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  n = n + 1
  local body = {body}
  return wrk.format(nil, nil, nil, body)
end
"""


def wrk_post_script(body: str, setup: str = "") -> str:
    """wrk's request script for POSTs of JSON: `body` is a Lua expression of `n`, the
    request's number from 1; `setup` is Lua run once before (each line ending in a newline)."""
    return WRK_POST.format(setup=setup, body=body)


def wrk_output(url: str, lua: str, connections: int, seconds: float, *options: str) -> str:
    """What wrk (one thread, the request script `lua`, and `options` such as
    `--latency`) prints for `url`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(lua)
        script.flush()
        command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", *options]
        command += ["-s", script.name, url]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout
