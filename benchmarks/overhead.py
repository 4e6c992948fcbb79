"""The plugin's own cost per commit, with the model taken out.

Under 8 closed-loop callers the model idles while the plugin handles the 8
requests of the last batch (their upsert, replies, log lines, the next 8
requests): that serial gap is what keeps `latency.py`'s ratio under 1. Its size
is the plugin's CPU per request, which this measures without the model's noise:
the real server (aiohttp, middleware, service, the embedded qdrant-edge store,
metrics, the JSON log line at INFO) runs in a child process with a stand-in
encoder that returns a fixed unit vector at once, and wrk (8 connections, one
thread) commits with ids, as the backfill does, in ROUNDS windows. The event
loop is then the bottleneck, so 1 / (commits/s) is the plugin's time per commit.

Needs Debian's `wrk`. Run: python benchmarks/overhead.py   (about 1 minute)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import REPO_ROOT, machine, use_repo_root

ROUNDS = 5
WINDOW_S = 6
CALLERS = 8
NAMESPACE = "workspace:overhead"
DIMENSION = 384
WRK_SCRIPT = """
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  n = n + 1
  local body = string.format(
    '{"content":"memory %d: the deploy window moved to thursday","kind":"fact",'
    .. '"source":"agent","id":"7f3e2a10-0000-4000-8000-%012d"}', n, n)
  return wrk.format(nil, nil, nil, body)
end
"""


class InstantEncoder:
    """An `Encoder` that costs nothing: one fixed unit vector for every text."""

    dimension = DIMENSION
    fingerprint = "all-MiniLM-L6-v2/onnx"  # what a default store records

    def __init__(self) -> None:
        self._vector = [1.0 / DIMENSION**0.5] * DIMENSION

    def encode(self, texts: list[str]) -> list[list[float]]:
        return [list(self._vector) for _ in texts]


def serve() -> None:
    """The child: `memory-plugin-vector serve`, with the instant encoder handed in."""
    use_repo_root()
    from plugin import cli, logs
    from plugin.app import create_app
    from plugin.settings import Settings

    settings = Settings.from_env(os.environ)
    logs.configure(settings.log_level)
    host, port = settings.listen
    asyncio.run(cli._run(create_app(settings, encoder=InstantEncoder()), host, port))


def request(method: str, url: str, body: bytes | None = None) -> int:
    call = urllib.request.Request(url, data=body, method=method)
    call.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(call, timeout=5) as reply:
        return int(reply.status)


def wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if request("GET", f"{base}/v1/health") == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not become healthy within 60 s")


def wrk(url: str, script: str, seconds: int) -> float:
    command = ["wrk", "-t1", f"-c{CALLERS}", f"-d{seconds}s", "-s", script, url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError("wrk saw answers other than 2xx:\n" + out)
    found = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    if found is None:
        raise RuntimeError("no Requests/sec in wrk's output:\n" + out)
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default="INFO", help="the server's (default: INFO)")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if shutil.which("wrk") is None:
        sys.exit("overhead.py needs wrk (apt-get install wrk)")
    use_repo_root()
    from tests.server_process import free_port

    print(f"overhead.py: real server, instant encoder, embedded store ({machine()})")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_PLUGIN_")},
            "MEMORY_PLUGIN_DATA_DIR": str(Path(tmp) / "data"),
            "MEMORY_PLUGIN_LISTEN_ADDR": f"127.0.0.1:{port}",
            "MEMORY_PLUGIN_LOG_LEVEL": args.log_level,
        }
        script = Path(tmp) / "commit.lua"
        script.write_text(WRK_SCRIPT)
        with open(Path(tmp) / "server.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--serve"], env=env, stderr=log, cwd=REPO_ROOT
            )
            try:
                wait_healthy(base, proc)
                body = b'{"kind": "workspace"}'
                if request("PUT", f"{base}/v1/namespaces/{NAMESPACE}", body) != 200:
                    raise RuntimeError("PUT namespace failed")
                url = f"{base}/v1/namespaces/{NAMESPACE}/memories"
                wrk(url, str(script), 2)  # warm-up, not counted
                rates = [wrk(url, str(script), WINDOW_S) for _ in range(ROUNDS)]
            finally:
                proc.terminate()
                proc.wait(30)
    print(f"  {CALLERS} wrk callers committing with ids, log level {args.log_level},")
    print(f"  {ROUNDS} windows of {WINDOW_S} s: " + ", ".join(f"{r:.0f}" for r in rates) + "/s")
    median = statistics.median(rates)
    print(f"  median {median:.0f} commits/s = {1e6 / median:.0f} us of plugin per commit")


if __name__ == "__main__":
    main()
