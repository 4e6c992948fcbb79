"""The chart's default sizes against the figures they come from in benchmarks/README.md.

Each default request and limit names its measured source in values.yaml; the memory the
plugin was measured to use at the runbook's scale fits its request and limit with a
quarter to spare; the encoder's sessions and the engine workers follow the CPU request by
the plugin's own rule, as values.yaml and docs/settings.md state it; torch's threads match it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from adapters.pool.embedded_store import default_workers
from plugin.embedding.encoders import embedding_sessions
from plugin.settings import Settings
from plugin.sizing import plugin_cpus
from tests.support.helm import CHART
from tests.support.helm import RUNTIME_ENV
from tests.support.helm import config_map
from tests.support.helm import one
from tests.support.helm import render
from tests.support.helm import server_container

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = (ROOT / "benchmarks" / "README.md").read_text()
VALUES_TEXT = (CHART / "values.yaml").read_text()
VALUES = yaml.safe_load(VALUES_TEXT)
SPARE = 0.75  # what is measured may use at most three quarters of a default


def groups(pattern: str, text: str) -> tuple[str, ...]:
    found = re.search(pattern, text)
    assert found is not None, (pattern, text)
    return found.groups()


def mib(quantity: str) -> float:
    number, unit = groups(r"^([0-9.]+)(Mi|Gi)$", quantity)
    return float(number) * (1024 if unit == "Gi" else 1)


def scale_row(label: str) -> str:
    rows = [line for line in BENCHMARKS.splitlines() if line.startswith(f"| {label}")]
    assert len(rows) == 1, label
    return rows[0]


def measured_cgroup_mib() -> tuple[float, float, float]:
    """The chart's pod at 200,000 memories with token vectors, its cgroup's memory.current:
    after start, peak under mixed load, peak during the backup export (benchmarks/README.md,
    "Namespaces at scale")."""
    row = scale_row("the chart's pod (its defaults, 1 engine worker) on that store")
    start, peak = groups(r"\| ([\d,]+) / ([\d,]+) MiB", row)
    assert "memory.current" in row
    assert "benchmarks.kube_memory" in row
    export_row = scale_row("the same pod: the runbook's backup")
    [export] = groups(r"; ([\d,]+) MiB \(", export_row)
    figures = [float(n.replace(",", "")) for n in (start, peak, export)]
    return figures[0], figures[1], figures[2]


def comment_above(key: str) -> str:
    """The comment block right above a top-level key of values.yaml."""
    before = VALUES_TEXT.split(f"\n{key}:", 1)[0].splitlines()
    block = []
    for line in reversed(before):
        if not line.startswith("#"):
            break
        block.append(line)
    return "\n".join(reversed(block))


def test_memory_fits_the_measured_cgroup_usage_with_a_quarter_to_spare() -> None:
    resources = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]
    after_start, peak, export = measured_cgroup_mib()
    assert after_start <= SPARE * mib(resources["requests"]["memory"])
    assert max(peak, export) <= SPARE * mib(resources["limits"]["memory"])
    limit_row = scale_row("the same peak ÷ the chart's default memory limit")
    assert f"({resources['limits']['memory'].replace('Gi', ' GiB')})" in limit_row
    # values.yaml quotes the same figures, as memory.current.
    comment = comment_above("resources")
    assert "memory.current" in comment
    for figure in (after_start, peak, export):
        assert f"{figure:,.0f} MiB" in comment


def test_every_default_size_names_its_measured_source() -> None:
    comment = comment_above("resources")
    for source in (
        "benchmarks.kube_memory",  # memory request and limit
        "benchmarks.latency",  # the model's time a text: the CPU request
        "benchmarks.commit_cpu",  # a saturated plugin's CPU
        "docs/runbook.md",  # the scale
    ):
        assert source in comment
    assert "benchmarks.token_cost" in VALUES_TEXT.split("size: ")[0]  # the volume's size
    assert "200,000 memories" in (ROOT / "docs" / "runbook.md").read_text()


def test_sessions_and_workers_follow_the_cpu_request_and_threads_match_it() -> None:
    """The chart leaves sessions and workers to the plugin's rule (from the request, which
    the pod passes as MEMORY_PLUGIN_CPUS); torch's threads are set to the request."""
    cpu = float(VALUES["resources"]["requests"]["cpu"])
    assert VALUES["config"]["embeddingSessions"] is None
    assert VALUES["config"]["engineWorkers"] is None
    assert VALUES["config"]["torchThreads"] == cpu
    assert "cpu" not in VALUES["resources"].get("limits", {})  # bursts where the node has room


def cpus_of(quantity: str) -> int:
    """A CPU quantity as the downward API gives it with divisor 1: rounded up."""
    number = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    return math.ceil(number)


@pytest.mark.parametrize(
    ("request_cpu", "sessions", "workers"),
    [("500m", 1, 1), ("1", 1, 1), ("1500m", 2, 1), ("2", 2, 1), ("4", 4, 2), ("12", 4, 4)],
)
def test_the_plugin_sizes_the_pod_from_its_cpu_request(
    request_cpu: str, sessions: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What values.yaml and docs/settings.md say: one session per CPU of the request, at most
    4; one engine worker per two, at most 4; on a node of many more cores."""
    monkeypatch.setattr("plugin.sizing.usable_cpus", lambda: 64)
    objects = render("embedded", f"resources.requests.cpu={request_cpu}")
    data = dict(config_map(objects)["data"])
    assert "MEMORY_PLUGIN_EMBEDDING_SESSIONS" not in data
    assert "MEMORY_PLUGIN_ENGINE_WORKERS" not in data
    [cpus] = [e for e in server_container(objects)["env"] if e["name"] == "MEMORY_PLUGIN_CPUS"]
    assert cpus["valueFrom"]["resourceFieldRef"]["resource"] == "requests.cpu"
    env = {k: v for k, v in data.items() if k not in RUNTIME_ENV}
    settings = Settings.from_env(env | {"MEMORY_PLUGIN_CPUS": str(cpus_of(request_cpu))})
    assert embedding_sessions(settings) == sessions
    assert default_workers(plugin_cpus(settings)) == workers
