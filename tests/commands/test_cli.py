"""`memory-plugin-vector`: bad settings fail fast, in one line, before anything starts.

A bad setting exits 2 with exactly one line on stderr, before the model is
loaded (so in well under the ~5 s a model load takes) and before the port is
bound or the data directory is touched. A failure while starting (the port is
taken) exits 1 with one line.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server_process import HOST
from harness.server_process import clean_env
from tests.support.cli import PROG
from tests.support.cli import one_line
from tests.support.cli import run_cli
from tests.support.cli import serve_env

FAST_S = 5.0
SECRET = "s3cr3t-api-key-value-4f1c"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port we hold open: a server that tried to bind it would fail."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen(1)
        yield int(holder.getsockname()[1])


BAD_SETTINGS = [
    pytest.param({"MEMORY_PLUGIN_LISTEN_ADDR": "nope"}, id="listen-addr"),
    pytest.param({"MEMORY_PLUGIN_LISTEN_ADDR": "127.0.0.1:70000"}, id="listen-port-range"),
    pytest.param({"MEMORY_PLUGIN_JANITOR_INTERVAL": "-1"}, id="janitor-negative"),
    pytest.param({"MEMORY_PLUGIN_JANITOR_INTERVAL": "soon"}, id="janitor-not-a-number"),
    pytest.param({"QDRANT_URL": "qdrant:6333"}, id="qdrant-url-scheme"),
    pytest.param({"MEMORY_PLUGIN_EMBEDDING_MODEL": "/nonexistent"}, id="model-dir"),
    pytest.param({"MEMORY_PLUGIN_BACKEND": "postgres"}, id="backend"),
    pytest.param({"MEMORY_PLUGIN_LOG_LEVEL": "LOUD"}, id="log-level"),
    pytest.param({"MEMORY_PLUGIN_MAX_BODY_BYTES": "10"}, id="max-body"),
    pytest.param({"MEMORY_PLUGIN_BACKEND_TIMEOUT": "0"}, id="backend-timeout"),
    pytest.param({"MEMORY_PLUGIN_COLLECTION_PREFIX": "bad prefix!"}, id="prefix"),
]


@pytest.mark.parametrize("bad", BAD_SETTINGS)
def test_bad_setting_exits_2_with_one_line_before_starting(
    bad: dict[str, str], held_port: int, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    env = {
        "MEMORY_PLUGIN_LISTEN_ADDR": f"{HOST}:{held_port}",
        "MEMORY_PLUGIN_DATA_DIR": str(data_dir),
        **bad,
    }
    (variable,) = bad
    result, elapsed = run_cli(["serve"], env)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"{PROG}: invalid setting {variable}"), line
    assert result.stdout == ""
    # No model load (that alone takes ~5 s), no bind (the held port would have
    # made it exit 1 with "cannot start"), no data directory.
    assert elapsed < FAST_S, f"took {elapsed:.1f} s: was the model loaded?"
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("companion", "shown"),
    [
        pytest.param({"QDRANT_URL": "qdrant:6333"}, "qdrant:6333", id="url"),
        pytest.param({"MEMORY_PLUGIN_BACKEND_TIMEOUT": "99"}, "99", id="timeout"),
        pytest.param({"MEMORY_PLUGIN_JANITOR_INTERVAL": "-1"}, "-1", id="janitor"),
    ],
)
def test_api_key_is_never_echoed(companion: dict[str, str], shown: str, tmp_path: Path) -> None:
    env = {
        "QDRANT_API_KEY": SECRET,
        "QDRANT_URL": "http://127.0.0.1:6333",
        "MEMORY_PLUGIN_DATA_DIR": str(tmp_path / "data"),
        **companion,
    }
    (variable,) = companion
    result, elapsed = run_cli(["serve"], env)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"{PROG}: invalid setting {variable}"), line
    assert shown in line  # the bad value is shown, the key is not
    assert SECRET not in result.stderr + result.stdout
    assert elapsed < FAST_S


def test_no_arguments_is_a_usage_error() -> None:
    result, elapsed = run_cli([], {})
    assert result.returncode == 2
    assert "usage:" in result.stderr
    assert elapsed < FAST_S


def test_unknown_command_is_a_usage_error() -> None:
    result, _ = run_cli(["bogus"], {})
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_console_script_without_arguments_exits_2() -> None:
    script = Path(sys.executable).with_name(PROG)
    if not script.exists():
        pytest.skip(f"{script} is not installed")
    result = subprocess.run(
        [str(script)], env=clean_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert "usage:" in result.stderr


@pytest.mark.slow
def test_port_in_use_exits_1_with_one_line(held_port: int, tmp_path: Path) -> None:
    env = serve_env(f"{HOST}:{held_port}", tmp_path / "data")
    result, _ = run_cli(["serve"], env, timeout_s=120.0)
    assert result.returncode == 1, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"{PROG}: cannot start: "), line
    assert str(held_port) in line
