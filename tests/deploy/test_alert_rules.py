"""The chart's alert rules, checked by Prometheus' own `promtool`.

The rendered `PrometheusRule`'s groups pass `promtool check rules`, and a unit
test per alert (`promtool test rules`) feeds it series that must fire it and
series that must not. Every alert has a case here and a section in
docs/runbook.md. promtool comes from Debian's `prometheus` package (scripts/test).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.helm import FULLNAME
from tests.support.helm import NAMESPACE
from tests.support.helm import one
from tests.support.helm import render
from tests.support.tools import require_tool

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"
SELECTOR = f'job="{FULLNAME}",namespace="{NAMESPACE}"'
SERIES_LABELS = {"job": FULLNAME, "namespace": NAMESPACE}
EVAL_AT = "40m"  # past every alert's `for`
STEPS = 45


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    extra = "".join(f',{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{SELECTOR}{extra}}}", "values": values}


def counter(per_minute: int) -> str:
    return f"0+{per_minute}x{STEPS}"


def flat(value: float) -> str:
    return f"{value:g}x{STEPS}"


def buckets(per_minute: dict[str, int]) -> list[dict[str, str]]:
    name = "memory_plugin_http_request_duration_seconds_bucket"
    route = {"route": "/v1/search", "method": "POST"}
    return [series(name, counter(n), le=le, **route) for le, n in per_minute.items()]


def requests(status: str, per_minute: int) -> dict[str, str]:
    name = "memory_plugin_http_requests_total"
    return series(name, counter(per_minute), route="/v1/search", method="POST", status=status)


# Per alert: series that fire it, the value its description shows (or None), the
# labels the alert carries beyond its own, and series that must leave it silent.
CASES: dict[str, tuple[list[dict[str, str]], str | None, dict[str, str], list[dict[str, str]]]] = {
    "MemoryPluginDown": (
        [series("up", flat(0))],
        None,
        SERIES_LABELS,
        [series("up", flat(1))],
    ),
    "MemoryPluginServerErrors": (
        [requests("503", 60), requests("200", 60)],
        "50%",
        {},
        [requests("503", 0), requests("200", 60)],
    ),
    "MemoryPluginSlow": (
        buckets({"0.5": 0, "2.0": 10, "+Inf": 10}),
        "1.985s",
        {},
        buckets({"0.5": 10, "2.0": 10, "+Inf": 10}),
    ),
    "MemoryPluginStoreDegraded": (
        [series("memory_plugin_store_problems", flat(1))],
        None,
        {},
        [
            series("memory_plugin_store_problems", flat(0)),
            series("memory_plugin_unreadable_namespaces", flat(0)),
        ],
    ),
    "MemoryPluginDiskStalled": (
        [series("memory_plugin_store_sync_waiting_seconds", flat(30))],
        "30s",
        {},
        [series("memory_plugin_store_sync_waiting_seconds", flat(0.002))],
    ),
    "MemoryPluginVolumeNearlyFull": (
        [series("memory_plugin_store_free_bytes", flat(1024**3))],
        "1024Mi",
        {},
        [series("memory_plugin_store_free_bytes", flat(4 * 1024**3))],
    ),
    "MemoryPluginTenantRefused": (
        [series("memory_plugin_requests_refused_total", counter(5), reason="fair_share")],
        None,
        {},
        [series("memory_plugin_requests_refused_total", counter(0), reason="fair_share")],
    ),
    "MemoryPluginRerankDimmed": (
        [series("memory_plugin_rerank_share", flat(0.2))],
        "20%",
        {},
        [series("memory_plugin_rerank_share", "1x30 0.2x14")],  # under a half, not for long
    ),
    "MemoryPluginJanitorFailing": (
        [series("memory_plugin_janitor_sweeps_total", counter(1), outcome="failed")],
        None,
        {},
        [series("memory_plugin_janitor_sweeps_total", counter(0), outcome="failed")],
    ),
}


@pytest.fixture(scope="module")
def promtool() -> str:
    return require_tool(
        shutil.which("promtool"), "promtool", "apt-get install prometheus (scripts/test does)"
    )


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    """The alert rules as rendered with `prometheusRule.enabled`."""
    rule = one(render(None, "prometheusRule.enabled=true"), "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def rule_file(tmp_path: Path) -> Path:
    rule = one(render(None, "prometheusRule.enabled=true"), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def test_the_rendered_rules_pass_promtool_check(promtool: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [promtool, "check", "rules", str(rule_file(tmp_path))], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(CASES)} rules found" in result.stdout


def test_every_alert_has_a_case_and_a_runbook_section(rules: list[dict[str, Any]]) -> None:
    assert {rule["alert"] for rule in rules} == set(CASES)
    headings = {line[4:].strip() for line in RUNBOOK.read_text().splitlines() if line[:4] == "### "}
    for rule in rules:
        assert rule["alert"] in headings
        assert rule["annotations"]["runbook"] == f"docs/runbook.md#{rule['alert'].lower()}"


def expected_alert(rule: dict[str, Any], value: str | None, labels: dict[str, str]) -> Any:
    annotations = dict(rule["annotations"])
    if value is not None:
        annotations["description"] = re.sub(
            r"\{\{ \$value[^}]*\}\}", value, rule["annotations"]["description"]
        )
    return {"exp_labels": {**rule.get("labels", {}), **labels}, "exp_annotations": annotations}


@pytest.mark.parametrize("alert", sorted(CASES))
def test_each_alert_fires_on_its_series_and_only_then(
    alert: str, promtool: str, rules: list[dict[str, Any]], tmp_path: Path
) -> None:
    firing, value, labels, quiet = CASES[alert]
    rule = next(r for r in rules if r["alert"] == alert)
    tests = [
        {
            "interval": "1m",
            "input_series": firing,
            "alert_rule_test": [
                {
                    "eval_time": EVAL_AT,
                    "alertname": alert,
                    "exp_alerts": [expected_alert(rule, value, labels)],
                }
            ],
        },
        {
            "interval": "1m",
            "input_series": quiet,
            "alert_rule_test": [{"eval_time": EVAL_AT, "alertname": alert, "exp_alerts": []}],
        },
    ]
    unit = tmp_path / "unit.yaml"
    unit.write_text(yaml.safe_dump({"rule_files": [rule_file(tmp_path).name], "tests": tests}))
    result = subprocess.run(
        [promtool, "test", "rules", unit.name], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rule_takes_its_labels_thresholds_and_runbook_base_from_values() -> None:
    rule = one(render("all-optional"), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert rules["MemoryPluginTenantRefused"]["for"] == "30m"
    base = "https://git.example.com/platform/memory-plugin-vector/-/blob/main/docs/runbook.md"
    assert rules["MemoryPluginDown"]["annotations"]["runbook"] == f"{base}#memoryplugindown"
