"""A flood of connection errors is a few log lines a second and a count.

With file descriptors exhausted, asyncio's accept loop reported `EMFILE` for every
pending connection on every turn of the loop, each with a traceback.
`LogThrottle` (plugin/observability/logs.py) lets a few lines of a kind through per second
and reports how many it left out.
"""

from __future__ import annotations

import logging
import resource
import socket
import sys
import time
from pathlib import Path

import pytest

from harness.raw_http import HEALTH
from harness.raw_http import connect
from harness.raw_http import half_open
from harness.raw_http import log_lines
from harness.raw_http import one_response
from harness.raw_http import serve

CONNECTIONS = 1000
SERVER_OPEN_FILES = 256
BURST = 3  # lines of a kind per second (plugin/observability/logs.py)


def test_descriptors_running_out_log_a_few_lines_and_a_count(tmp_path: Path) -> None:
    """Many more connections at once than the server has file descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = CONNECTIONS + 100
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    serve_cmd = f"{sys.executable} -m plugin.cli serve"
    command = ["sh", "-c", f"ulimit -n {SERVER_OPEN_FILES} && exec {serve_cmd}"]
    server = serve(tmp_path, {"MEMORY_PLUGIN_HEADER_TIMEOUT": "3"}, command)
    socks: list[socket.socket] = []
    try:
        started = time.monotonic()
        socks = half_open(server.port, CONNECTIONS)
        time.sleep(4)
        for sock in socks:
            sock.close()
        time.sleep(2)  # the last window's count is reported after it ends
        seconds = time.monotonic() - started
        lines = log_lines(server)
        accept = [line for line in lines if line["msg"].startswith("socket.accept() out of")]
        counts = [line for line in lines if line["msg"] == "similar log lines suppressed"]
        assert 0 < len(accept) <= BURST * (seconds + 2)
        assert any(line["kind"].startswith("socket.accept() out of") for line in counts)
        assert sum(line["suppressed"] for line in counts) > len(accept)
        assert len(lines) < 200
        with connect(server) as sock:  # and it serves again
            sock.sendall(HEALTH)
            assert one_response(sock)[0] == 200
    finally:
        for sock in socks:
            sock.close()
        server.close()


def test_the_throttle_passes_a_few_per_kind_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from plugin.observability.logs import LogThrottle

    now = [100.0]
    throttle = LogThrottle(burst=BURST, window_s=1.0, clock=lambda: now[0])
    logger = logging.getLogger("tests.throttled")
    logger.addFilter(throttle)
    try:
        with caplog.at_level(logging.INFO, logger="tests.throttled"):
            for n in range(100):
                error = OSError(24, "Too many open files")
                logger.error("accept failed\nsocket: <fd=%d>", n, exc_info=error)
            logger.error("another kind")
            now[0] += 1.5
            throttle.flush()
            logger.error("accept failed\nsocket: <fd=%d>", 1, exc_info=OSError(24, "x"))
        messages = [(r.levelname, r.getMessage().split("\n")[0]) for r in caplog.records]
        assert messages == [
            *[("ERROR", "accept failed")] * BURST,
            ("ERROR", "another kind"),
            ("WARNING", "similar log lines suppressed"),
            ("ERROR", "accept failed"),
        ]
        summary = caplog.records[BURST + 1].__dict__
        assert (summary["suppressed"], summary["kind"], summary["errno"]) == (
            100 - BURST,
            "accept failed",
            24,
        )
    finally:
        logger.removeFilter(throttle)
