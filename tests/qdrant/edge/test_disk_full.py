"""A full disk (scenario case 1): writes fail fast with 503, reads go on, nothing dies.

The real thing needs a real full filesystem: a small tmpfs, which only root can
mount (skipped otherwise, with the reason). The server runs as a child process,
because what this guards against is the process being killed by SIGBUS.
The guard's arithmetic is tested everywhere on a sparse file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.disk import MIB
from adapters.disk import DiskGuard
from adapters.disk import free_bytes
from adapters.disk import sparse_bytes
from adapters.errors import StorageFull
from harness.server_process import ServerProcess

NAMESPACE = "workspace:full"


def test_sparse_files_count_as_space_still_to_claim(tmp_path: Path) -> None:
    sparse = tmp_path / "preallocated"
    with open(sparse, "wb") as f:
        f.truncate(64 * MIB)
        f.write(b"x" * 4096)
    assert 63 * MIB < sparse_bytes(tmp_path) <= 64 * MIB


def test_opening_needs_room_for_the_holes_and_a_write_only_the_headroom(tmp_path: Path) -> None:
    with open(tmp_path / "preallocated", "wb") as f:
        f.truncate(64 * MIB)
    free = free_bytes(tmp_path)
    if free < 256 * MIB:
        pytest.skip("this volume has under 256 MiB free")
    guard = DiskGuard(tmp_path, headroom_bytes=free - 32 * MIB)  # a write fits, 64 MiB not
    guard.check()
    assert guard.problem is None
    with pytest.raises(StorageFull, match="the data volume is full"):
        guard.check_open(tmp_path)
    assert guard.refused == 0  # opening is not a write refused
    cramped = DiskGuard(tmp_path, headroom_bytes=free + 1024 * MIB)
    with pytest.raises(StorageFull, match="the data volume is full"):
        cramped.check()
    with pytest.raises(StorageFull, match="the data volume is full"):
        cramped.admit()
    assert cramped.refused == 1  # a write refused, for the metrics
    assert cramped.problem is not None
    assert str(tmp_path) not in cramped.problem


def _call(server: ServerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _commit(server: ServerProcess, content: str) -> tuple[int, Any]:
    body = {"content": content, "kind": "fact", "source": "agent"}
    return _call(server, "POST", f"/v1/namespaces/{NAMESPACE}/memories", body)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (this test fills a real filesystem)")
    mount = tmp_path / "volume"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_full_disk_refuses_writes_keeps_reads_and_recovers(tmpfs: Path, tmp_path: Path) -> None:
    with ServerProcess(tmpfs / "data", tmp_path / "server.log") as server:
        server.start()
        server.wait_healthy()
        assert _call(server, "PUT", f"/v1/namespaces/{NAMESPACE}", {"kind": "workspace"})[0] == 200
        assert _commit(server, "written before the disk filled")[0] == 201

        filler = tmpfs / "filler"
        with open(filler, "wb") as f:  # fill the volume to the last block
            chunk = b"\0" * MIB
            try:
                while True:
                    f.write(chunk)
                    f.flush()
            except OSError:
                pass

        refused = [_commit(server, f"memory {i} " * 40) for i in range(20)]
        assert server.running, server.log_tail()
        assert {status for status, _ in refused} == {503}
        assert all(body["code"] == "unavailable" for _, body in refused)
        message = refused[0][1]["message"]
        assert message.startswith("backend unavailable: the data volume is full: ")
        assert str(tmpfs) not in message
        status, health = _call(server, "GET", "/v1/health")
        assert (status, health["status"]) == (200, "degraded")
        assert health["message"].startswith("the data volume is full")
        status, listed = _call(server, "POST", "/v1/search", {"namespaces": [NAMESPACE]})
        assert status == 200
        assert [m["content"] for m in listed["memories"]] == ["written before the disk filled"]
        with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        full = 'memory_plugin_store_writes_refused_total{reason="volume_full"} '
        counted = next(line for line in metrics.splitlines() if line.startswith(full))
        assert float(counted.split()[-1]) >= len(refused), counted

        filler.unlink()
        assert _commit(server, "written after space returned")[0] == 201
        assert _call(server, "GET", "/v1/health")[1]["status"] == "ok"
        status, listed = _call(server, "POST", "/v1/search", {"namespaces": [NAMESPACE]})
        assert sorted(m["content"] for m in listed["memories"]) == [
            "written after space returned",
            "written before the disk filled",
        ]
        assert server.terminate() == 0


@pytest.mark.slow
def test_a_restart_on_a_nearly_full_volume_serves_degraded_and_recovers(
    tmpfs: Path, tmp_path: Path
) -> None:
    """Before: the process died of SIGBUS while opening the store, every time."""
    with ServerProcess(tmpfs / "data", tmp_path / "server.log") as server:
        server.start()
        server.wait_healthy()
        assert _call(server, "PUT", f"/v1/namespaces/{NAMESPACE}", {"kind": "workspace"})[0] == 200
        for i in range(20):
            assert _commit(server, f"memory {i}")[0] == 201
        assert server.terminate() == 0
        filler = tmpfs / "filler"
        filler.write_bytes(b"\0" * (free_bytes(tmpfs) - 5 * MIB))
        server.start()
        server.wait_healthy()
        status, health = _call(server, "GET", "/v1/health")
        assert (status, health["status"]) == (200, "degraded")
        assert health["message"].startswith("the data volume is full: ")
        status, body = _call(server, "POST", "/v1/search", {"namespaces": [NAMESPACE]})
        assert status == 503
        assert body["message"].startswith("backend unavailable: the data volume is full: ")
        filler.unlink()
        assert _call(server, "GET", "/v1/health")[1]["status"] == "ok"  # opened, no restart
        status, listed = _call(server, "POST", "/v1/search", {"namespaces": [NAMESPACE]})
        assert (status, len(listed["memories"])) == (200, 20)
        assert server.terminate() == 0
