"""The chart's default sizes against the figures they come from in benchmarks/README.md.

Each default request and limit names its measured source in values.yaml; the memory the
plugin was measured to use at the runbook's scale fits its request and limit with a
quarter to spare; the encoder's sessions and torch's threads match the CPU request.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.support.helm import CHART
from tests.support.helm import one
from tests.support.helm import render

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


def measured_rss_mib() -> tuple[float, float]:
    """Server and engine worker at 200,000 memories with token vectors: after start,
    after mixed load (benchmarks/README.md, "Namespaces at scale")."""
    row = scale_row("the same: RSS of the server and its engine worker")
    start, load = groups(r"with token vectors[^|]*?([\d,]+) / ([\d,]+) MiB", row)
    assert "benchmarks.namespaces" in row
    assert "--search rerank" in row
    return float(start.replace(",", "")), float(load.replace(",", ""))


def comment_above(key: str) -> str:
    """The comment block right above a top-level key of values.yaml."""
    before = VALUES_TEXT.split(f"\n{key}:", 1)[0].splitlines()
    block = []
    for line in reversed(before):
        if not line.startswith("#"):
            break
        block.append(line)
    return "\n".join(reversed(block))


def test_memory_fits_the_measured_rss_with_a_quarter_to_spare() -> None:
    resources = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]
    after_start, after_load = measured_rss_mib()
    assert after_start <= SPARE * mib(resources["requests"]["memory"])
    assert after_load <= SPARE * mib(resources["limits"]["memory"])
    limit_row = scale_row("the same after load ÷ the chart's default memory limit")
    assert f"({resources['limits']['memory'].replace('Gi', ' GiB')})" in limit_row


def test_every_default_size_names_its_measured_source() -> None:
    comment = comment_above("resources")
    for source in (
        "benchmarks.namespaces",  # memory request and limit
        "benchmarks.latency",  # the model's time a text: the CPU request
        "benchmarks.commit_cpu",  # a saturated plugin's CPU
        "docs/runbook.md",  # the scale
    ):
        assert source in comment
    assert "benchmarks.token_cost" in VALUES_TEXT.split("size: ")[0]  # the volume's size
    assert "200,000 memories" in (ROOT / "docs" / "runbook.md").read_text()


def test_sessions_and_threads_match_the_cpu_request() -> None:
    cpu = float(VALUES["resources"]["requests"]["cpu"])
    assert VALUES["config"]["embeddingSessions"] == cpu
    assert VALUES["config"]["torchThreads"] == cpu
    assert "cpu" not in VALUES["resources"].get("limits", {})  # bursts where the node has room
