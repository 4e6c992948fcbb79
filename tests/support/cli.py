"""The plugin's command line run as a child process, and its one-line errors."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.server_process import REPO_ROOT
from harness.server_process import clean_env

PROG = "memory-plugin-vector"


def run_cli(
    args: list[str], env: dict[str, str], timeout_s: float = 60.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "plugin.cli", *args],
        cwd=REPO_ROOT,
        env=clean_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return result, time.monotonic() - started


def serve_env(listen_addr: str, data_dir: Path) -> dict[str, str]:
    """What `serve` is started with in a test: an address, a data directory, warnings only."""
    return {
        "MEMORY_PLUGIN_LISTEN_ADDR": listen_addr,
        "MEMORY_PLUGIN_DATA_DIR": str(data_dir),
        "MEMORY_PLUGIN_LOG_LEVEL": "WARNING",
    }


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line, got {stderr!r}"
    assert stderr.endswith("\n"), f"expected one line, got {stderr!r}"
    return lines[0]
