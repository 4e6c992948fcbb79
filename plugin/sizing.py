"""The CPUs this process may use (its affinity capped by its cgroup's CPU limit, or fewer
where MEMORY_PLUGIN_CPUS says so), that the sessions and workers are sized from."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

from adapters.base import VectorBackend
from plugin.settings import Settings

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
V1_PERIOD_DEFAULT_US = 100_000


def plugin_cpus(settings: Settings) -> int:
    """The CPUs the plugin sizes itself for: those it may use, at most the ones declared."""
    usable = usable_cpus()
    return usable if settings.cpus is None else min(usable, settings.cpus)


def usable_cpus(
    root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP, affinity: int | None = None
) -> int:
    """The CPUs this process may run on (`affinity`, else its own), at most its CPU limit."""
    cores = len(os.sched_getaffinity(0)) if affinity is None else affinity
    limit = cgroup_cpu_limit(root, self_cgroup)
    return cores if limit is None else max(1, min(cores, math.ceil(limit)))


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> float | None:
    """The tightest CPU quota over this process's cgroups and their ancestors, in CPUs;
    None where there is none (no limit, or no cgroup filesystem)."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if not controllers:
            limits += _v2_limits(root, path)
        elif "cpu" in controllers.split(","):
            limits += _v1_limits(root / controllers, path)
    return min(limits, default=None)


def _ancestors(base: Path, path: str) -> Iterator[Path]:
    """`path` under `base`, then each parent up to `base` itself (a container's own cgroup
    is mounted at `base`, under a path named as the host sees it)."""
    parts = [part for part in path.split("/") if part]
    for depth in range(len(parts), -1, -1):
        yield base.joinpath(*parts[:depth])


def _v2_limits(root: Path, path: str) -> Iterator[float]:
    for directory in _ancestors(root, path):
        quota, _, period = _read(directory / "cpu.max").partition(" ")
        if quota and quota != "max":
            yield int(quota) / int(period or V1_PERIOD_DEFAULT_US)


def _v1_limits(base: Path, path: str) -> Iterator[float]:
    for directory in _ancestors(base, path):
        quota = _read(directory / "cpu.cfs_quota_us")
        if quota and int(quota) > 0:
            period = _read(directory / "cpu.cfs_period_us")
            yield int(quota) / int(period or V1_PERIOD_DEFAULT_US)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def engine_workers_of(backend: VectorBackend) -> int | None:
    """How many engine worker processes hold `backend`; None for a store of another kind."""
    from adapters.pool.engine_pool import EnginePool

    return len(backend.workers) if isinstance(backend, EnginePool) else None
