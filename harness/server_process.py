"""The real server as a child process, for durability tests and benchmarks.

`ServerProcess` runs `python -m plugin.cli serve` on a free loopback port with
its own data directory and a clean environment (no MEMORY_PLUGIN_* or QDRANT_*
from the caller), sends its stdout and stderr to a log file, and is always
safe to `close()`: tests get it from a fixture whose finalizer closes every
process it started, benchmarks use it as a context manager.

A port is free when chosen, but another process may take it before the server binds it.
So a health answer counts only from a listener the server's own process holds, and a
server that could not bind its chosen port is started again on another.

Only 127.0.0.1 is ever used. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
HEALTH_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0
PORT_MOVES = 3  # new ports tried when another process took the one chosen


# Shares no race or burst of a test or benchmark reaches: for the servers that measure
# something else than admission (benchmarks/fairness.py measures the shares).
WIDE_SHARES = {"MEMORY_PLUGIN_ADMISSION_BUDGET": "60"}


def clean_env(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ without the plugin's own settings, plus `overrides`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MEMORY_PLUGIN_", "QDRANT_"))
    }
    env.update(overrides or {})
    return env


def free_port() -> int:
    """A loopback port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses every connection while the block runs: bound and never
    listened on, so no other process can take it meanwhile (a `free_port` may be taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((HOST, 0))
        yield int(held.getsockname()[1])


def listening_sockets(port: int) -> set[str]:
    """The sockets listening on TCP `port` over IPv4, as /proc names them (`socket:[inode]`)."""
    with open("/proc/net/tcp", encoding="ascii") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return {
        f"socket:[{row[9]}]"
        for row in rows
        if row[3] == "0A" and int(row[1].rsplit(":", 1)[1], 16) == port  # 0A: LISTEN
    }


def holds_any(pid: int, sockets: set[str]) -> bool:
    """Whether process `pid` has one of `sockets` open (False once it is gone)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd) in sockets:
                return True
    return False


class ServerError(RuntimeError):
    """The server did not start, or died; the message carries its log's tail."""


class ServerProcess:
    """One `memory-plugin-vector serve` child on 127.0.0.1:<port>."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        log_level: str = "WARNING",
        command: Sequence[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        # What to run; a benchmark may serve the app its own way (benchmarks/overhead.py).
        self.command = list(command or [sys.executable, "-m", "plugin.cli", "serve"])
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self._port_chosen = port is None  # ours to change if another process takes it
        self.extra_env = dict(env or {})
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def workers(self) -> list[int]:
        """The engine workers serving: the children holding their store's lock file (a
        spare standing by holds none until it replaces one)."""
        return [pid for pid in self.children() if _holds_store(pid)]

    def children(self) -> list[int]:
        """The server's child processes (its engine workers and their spares), from /proc;
        none before `start`. Raises OSError once the server is gone."""
        if self.proc is None:
            return []
        pid = self.proc.pid
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> ServerProcess:
        """Spawn the process (does not wait for it; see `wait_healthy`)."""
        if self.running:
            raise ServerError("already running")
        self._close_log()
        env = clean_env(
            {
                "MEMORY_PLUGIN_LISTEN_ADDR": f"{HOST}:{self.port}",
                "MEMORY_PLUGIN_DATA_DIR": str(self.data_dir),
                "MEMORY_PLUGIN_LOG_LEVEL": self.log_level,
                **self.extra_env,
            }
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in close())
        self._log.write(f"--- start {time.strftime('%H:%M:%S')} port {self.port}\n".encode())
        self._log.flush()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.command,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal is not sent to it
        )
        return self

    def wait_healthy(self, timeout_s: float = HEALTH_TIMEOUT_S) -> float:
        """Poll GET /v1/health until 200; return seconds since `start()`."""
        return self._wait_health(timeout_s, lambda _: True, "no healthy answer")

    def wait_weighed(self, timeout_s: float = HEALTH_TIMEOUT_S) -> float:
        """Poll GET /v1/health until 200 from a server that weighs query tokens (health's
        `rerank_weights` is `idf`: its token fill has given every memory its wordpieces),
        or one that does not rerank. Seconds since `start()`."""
        return self._wait_health(
            timeout_s,
            lambda body: json.loads(body).get("rerank_weights", "idf") == "idf",
            "rerank weights not ready",
        )

    def _wait_health(self, timeout_s: float, ready: Callable[[bytes], bool], missed: str) -> float:
        """Poll GET /v1/health until a 200 whose body is `ready`; seconds since `start()`."""
        if self.proc is None or self.started_at is None:
            raise ServerError("not started")
        deadline = time.monotonic() + timeout_s
        moves = 0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if self._lost_its_port() and moves < PORT_MOVES:
                    moves += 1
                    self.port = free_port()
                    self.start()
                    continue
                raise ServerError(
                    f"server exited with {self.proc.returncode} before it was healthy:\n"
                    + self.log_tail()
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/v1/health", timeout=2.0) as answer:
                    if answer.status == 200 and self._answers() and ready(answer.read()):
                        return time.monotonic() - self.started_at
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.05)
        raise ServerError(f"{missed} within {timeout_s:g} s:\n" + self.log_tail())

    def _answers(self) -> bool:
        """Whether the listener on our port is this server's (or one of its children's), not
        another process's that took the port between `free_port` and the server's bind."""
        if self.proc is None:
            return False
        sockets = listening_sockets(self.port)
        try:
            pids = [self.proc.pid, *self.children()]
        except OSError:  # it is gone
            return False
        return any(holds_any(pid, sockets) for pid in pids)

    def _lost_its_port(self) -> bool:
        """Whether the server exited because another process took the port it was given
        (only a port this object chose is moved: a caller's stays the caller's)."""
        this_start = self.log_text().rsplit("--- start ", 1)[-1]
        return self._port_chosen and "address already in use" in this_start.lower()

    def kill(self) -> int:
        """SIGKILL, no chance to flush or clean up; return the exit status."""
        return self._signal(signal.SIGKILL)

    def terminate(self, timeout_s: float = EXIT_TIMEOUT_S) -> int:
        """SIGTERM (graceful shutdown); SIGKILL if still alive after `timeout_s`."""
        return self._signal(signal.SIGTERM, timeout_s)

    def close(self) -> None:
        """Kill if still running and release the log file. Idempotent."""
        if self.running:
            self.kill()
        self._close_log()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- output ----------------------------------------------------------------------

    def log_text(self) -> str:
        if self._log is not None:
            self._log.flush()
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_text()[-chars:]

    # -- internals -------------------------------------------------------------------

    def _signal(self, signum: signal.Signals, timeout_s: float = EXIT_TIMEOUT_S) -> int:
        if self.proc is None:
            raise ServerError("not started")
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait(timeout=EXIT_TIMEOUT_S)
        return int(self.proc.returncode)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _holds_store(pid: int) -> bool:
    """Whether process `pid` has an engine worker's lock file open; False once it is gone."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd).endswith("/engine.lock"):
                return True
        except OSError:
            continue
    return False
