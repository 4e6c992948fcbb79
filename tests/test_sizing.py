"""The plugin sizes itself from the CPUs it may use (its cgroup's limit and its affinity), or
fewer where they are declared.

Fake cgroup filesystems (v2 `cpu.max`, v1 CFS quota) stand for a container's limit on a
many-core node; the app started under a 1-CPU limit loads one encoder session and one
engine worker, and health says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from aiohttp.test_utils import TestServer

from adapters.pool.embedded_store import default_workers
from plugin.embedding.encoders import embedding_sessions
from plugin.http.app import create_app
from plugin.http.keys import ENCODER
from plugin.settings import Settings
from plugin.sizing import cgroup_cpu_limit
from plugin.sizing import plugin_cpus
from plugin.sizing import usable_cpus

MANY = 64


def fake_cgroup(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup root holding `files` (path: content) and a /proc/self/cgroup of one line."""
    root = tmp_path / "cgroup"
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content + "\n")
    proc = tmp_path / "self-cgroup"
    proc.write_text(self_cgroup + "\n")
    return root, proc


@pytest.mark.parametrize(
    ("self_cgroup", "files", "limit", "cpus"),
    [
        ("0::/", {"cpu.max": "100000 100000"}, 1.0, 1),  # a container's own namespace
        ("0::/", {"cpu.max": "max 100000"}, None, MANY),  # no limit: the affinity
        ("0::/", {}, None, MANY),  # no cgroup files at all
        ("0::/", {"cpu.max": "50000 100000"}, 0.5, 1),  # half a CPU still runs one
        (  # nested: the tightest ancestor counts, rounded up
            "0::/kubepods/pod1/ctr",
            {"kubepods/pod1/ctr/cpu.max": "max 100000", "kubepods/pod1/cpu.max": "250000 100000"},
            2.5,
            3,
        ),
        (  # v1, the container's cgroup mounted under the host's path name
            "4:cpu,cpuacct:/docker/abc\n0::/",
            {"cpu,cpuacct/cpu.cfs_quota_us": "200000", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
            2.0,
            2,
        ),
        (  # v1 without a quota
            "4:cpu,cpuacct:/",
            {"cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
            None,
            MANY,
        ),
    ],
)
def test_usable_cpus_are_the_affinity_capped_by_the_cgroup_limit(
    tmp_path: Path, self_cgroup: str, files: dict[str, str], limit: float | None, cpus: int
) -> None:
    root, proc = fake_cgroup(tmp_path, self_cgroup, files)
    assert cgroup_cpu_limit(root, proc) == limit
    assert usable_cpus(root, proc, affinity=MANY) == cpus
    assert usable_cpus(root, proc, affinity=2) == min(2, cpus)


def test_this_machine_counts_at_most_its_affinity() -> None:
    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))


def test_declared_cpus_cap_the_usable_ones() -> None:
    usable = usable_cpus()
    assert plugin_cpus(Settings()) == usable
    assert plugin_cpus(Settings(MEMORY_PLUGIN_CPUS=1)) == 1
    assert plugin_cpus(Settings(MEMORY_PLUGIN_CPUS=usable + 1)) == usable  # never more


def test_sessions_and_workers_follow_the_cpus_unless_set() -> None:
    settings = Settings()
    assert [embedding_sessions(settings, cpus) for cpus in (1, 2, 3, MANY)] == [1, 2, 3, 4]
    assert [default_workers(cpus) for cpus in (1, 2, 4, MANY)] == [1, 1, 2, 4]
    set_to_two = Settings(MEMORY_PLUGIN_EMBEDDING_SESSIONS=2)
    assert embedding_sessions(set_to_two, 1) == 2


async def test_a_one_cpu_limit_on_many_cores_starts_one_session_and_one_worker(
    tmp_path: Path,
) -> None:
    root, proc = fake_cgroup(tmp_path, "0::/", {"cpu.max": "100000 100000"})
    cpus = usable_cpus(root, proc, affinity=MANY)
    settings = Settings(MEMORY_PLUGIN_DATA_DIR=str(tmp_path / "data"))
    app = create_app(settings, cpus=cpus)
    async with TestClient(TestServer(app)) as client, client.get("/v1/health") as reply:
        body = await reply.json()
    assert reply.status == 200
    assert body["sizes"] == {"cpus": 1, "embedding_sessions": 1, "engine_workers": 1}
    assert app[ENCODER].parallelism == 1
    assert [path.name for path in (tmp_path / "data").iterdir() if path.name == "store"] == [
        "store"
    ]  # one engine worker's layout (several: workers/<k>-of-<n>/)
