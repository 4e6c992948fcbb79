"""The chart's alert rules, checked by Prometheus' own `promtool`.

The rendered `PrometheusRule`'s groups pass `promtool check rules`, and a unit
test per alert (`promtool test rules`) feeds it series that must fire it and
series that must not: `MemoryPluginDown` only for a scrape target the chart
configured, the 5xx and latency alerts (and the dashboard's 5xx share) firing for
each of the platform's seven operations and blind to probes, /metrics and exports.
Every alert has a case here and a section in docs/runbook.md. promtool comes
from Debian's `prometheus` package (scripts/test).
"""

from __future__ import annotations

import json
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


def buckets(
    per_minute: dict[str, int], route: str = "/v1/search", method: str = "POST"
) -> list[dict[str, str]]:
    name = "memory_plugin_http_request_duration_seconds_bucket"
    labels = {"route": route, "method": method}
    return [series(name, counter(n), le=le, **labels) for le, n in per_minute.items()]


def requests(
    status: str, per_minute: int, route: str = "/v1/search", method: str = "POST"
) -> dict[str, str]:
    name = "memory_plugin_http_requests_total"
    return series(name, counter(per_minute), route=route, method=method, status=status)


# The platform's seven operations, as the plugin labels them (plugin/http/handlers.py).
PLATFORM_CALLS = [
    ("GET", "/v1/health"),
    ("PUT", "/v1/namespaces/{name}"),
    ("PATCH", "/v1/namespaces/{name}"),
    ("DELETE", "/v1/namespaces/{name}"),
    ("POST", "/v1/namespaces/{name}/memories"),
    ("POST", "/v1/search"),
    ("DELETE", "/v1/memories/{id}"),
]


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


SCRAPED = ("prometheusRule.enabled=true", "serviceMonitor.enabled=true")


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    """The alert rules as rendered with `prometheusRule.enabled` and the ServiceMonitor."""
    rule = one(render(None, *SCRAPED), "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def rule_file(tmp_path: Path, *sets: str) -> Path:
    rule = one(render(None, *(sets or SCRAPED)), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def run_unit(promtool: str, tmp_path: Path, rules: Path, tests: list[dict[str, Any]]) -> None:
    unit = tmp_path / "unit.yaml"
    unit.write_text(yaml.safe_dump({"rule_files": [rules.name], "tests": tests}))
    result = subprocess.run(
        [promtool, "test", "rules", unit.name], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def silent(alert: str, input_series: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [{"eval_time": EVAL_AT, "alertname": alert, "exp_alerts": []}],
    }


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
        silent(alert, quiet),
    ]
    run_unit(promtool, tmp_path, rule_file(tmp_path), tests)


def test_down_is_silent_without_a_scrape_target_the_chart_configured(
    promtool: str, tmp_path: Path
) -> None:
    """Without the ServiceMonitor or a named job there is no target to miss: no rule. With
    one, another job's target down, or none scraped at all, is not this plugin down."""
    for sets in (
        ("prometheusRule.enabled=true",),
        ("prometheusRule.enabled=true", "networkPolicy.enabled=false"),
    ):
        rule = one(render(None, *sets), "PrometheusRule")
        alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
        assert alerts == set(CASES) - {"MemoryPluginDown"}
    other_job = {"series": f'up{{job="other",namespace="{NAMESPACE}"}}', "values": flat(0)}
    unrelated = series("memory_plugin_rerank_share", flat(1))
    tests = [silent("MemoryPluginDown", [other_job]), silent("MemoryPluginDown", [unrelated])]
    run_unit(promtool, tmp_path, rule_file(tmp_path), tests)


def test_down_fires_for_a_scrape_job_of_the_operators_own(promtool: str, tmp_path: Path) -> None:
    sets = ("prometheusRule.enabled=true", "prometheusRule.job=memory-plugin")
    rule = next(
        r
        for group in one(render(None, *sets), "PrometheusRule")["spec"]["groups"]
        for r in group["rules"]
        if r["alert"] == "MemoryPluginDown"
    )
    labels = {"job": "memory-plugin", "namespace": NAMESPACE}
    down = {"series": f'up{{job="memory-plugin",namespace="{NAMESPACE}"}}', "values": flat(0)}
    firing = {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": rule["annotations"]}
    test = {
        "interval": "1m",
        "input_series": [down],
        "alert_rule_test": [
            {"eval_time": EVAL_AT, "alertname": "MemoryPluginDown", "exp_alerts": [firing]}
        ],
    }
    run_unit(promtool, tmp_path, rule_file(tmp_path, *sets), [test])


def probe(status: str, route: str) -> dict[str, str]:
    """The kubelet's probes, which the plugin counts apart (memory_plugin_probe_requests_total)."""
    name = "memory_plugin_probe_requests_total"
    return series(name, counter(60), route=route, status=status)


def test_errors_and_latency_are_blind_to_probes_metrics_and_exports(
    promtool: str, tmp_path: Path
) -> None:
    """Readiness during an outage, a failing scrape, a slow export: none is the platform's
    call."""
    served = requests("200", 60)
    others = [probe("503", "/v1/health"), requests("500", 60, "/metrics", "GET")]
    others += [requests("500", 60, "/admin/export", "GET"), served]
    slow = buckets({"0.5": 0, "2.0": 10, "+Inf": 10}, "/admin/export", "GET")
    slow += buckets({"0.5": 0, "2.0": 10, "+Inf": 10}, "/metrics", "GET")
    fast = buckets({"0.5": 60, "2.0": 60, "+Inf": 60})
    tests = [silent("MemoryPluginServerErrors", others), silent("MemoryPluginSlow", slow + fast)]
    run_unit(promtool, tmp_path, rule_file(tmp_path), tests)


@pytest.mark.parametrize(("method", "route"), PLATFORM_CALLS)
def test_errors_and_latency_count_every_platform_call(
    method: str, route: str, promtool: str, rules: list[dict[str, Any]], tmp_path: Path
) -> None:
    errors = next(r for r in rules if r["alert"] == "MemoryPluginServerErrors")
    slow = next(r for r in rules if r["alert"] == "MemoryPluginSlow")
    failing = [requests("503", 60, route, method), requests("200", 60, route, method)]
    late = buckets({"0.5": 0, "2.0": 10, "+Inf": 10}, route, method)
    tests = [
        {
            "interval": "1m",
            "input_series": failing + late,
            "alert_rule_test": [
                {
                    "eval_time": EVAL_AT,
                    "alertname": "MemoryPluginServerErrors",
                    "exp_alerts": [expected_alert(errors, "50%", {})],
                },
                {
                    "eval_time": EVAL_AT,
                    "alertname": "MemoryPluginSlow",
                    "exp_alerts": [expected_alert(slow, "1.985s", {})],
                },
            ],
        }
    ]
    run_unit(promtool, tmp_path, rule_file(tmp_path), tests)


def dashboard_5xx_rule(tmp_path: Path) -> Path:
    """The dashboard's 5xx share panel as an alert over 1% (its job variable this job's)."""
    objects = render(None, "grafanaDashboard.enabled=true")
    board_map = next(o for o in objects if o["metadata"]["name"] == f"{FULLNAME}-dashboard")
    board = json.loads(board_map["data"]["memory-plugin-vector.json"])
    [panel] = [p for p in board["panels"] if p["title"] == "5xx share"]
    [target] = panel["targets"]
    expr = target["expr"].replace("$job", FULLNAME).replace("$__rate_interval", "5m")
    group = {"name": "dashboard", "rules": [{"alert": "Dashboard5xx", "expr": f"{expr} > 0.01"}]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [group]}))
    return path


def test_the_dashboards_5xx_share_counts_the_platforms_calls_only(
    promtool: str, tmp_path: Path
) -> None:
    rules = dashboard_5xx_rule(tmp_path)
    tests = []
    for method, route in PLATFORM_CALLS:
        failing = [requests("503", 60, route, method), requests("200", 60, route, method)]
        test = silent("Dashboard5xx", failing)
        test["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": {}}]
        tests.append(test)
    served = requests("200", 60)
    others = [probe("503", "/v1/health"), requests("500", 60, "/metrics", "GET")]
    tests.append(silent("Dashboard5xx", [*others, requests("500", 60, "/admin/export", "GET")]))
    tests.append(silent("Dashboard5xx", [*others, served]))
    run_unit(promtool, tmp_path, rules, tests)


def test_the_rule_takes_its_labels_thresholds_and_runbook_base_from_values() -> None:
    rule = one(render("all-optional"), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    assert rules["MemoryPluginTenantRefused"]["for"] == "30m"
    base = "https://git.example.com/platform/memory-plugin-vector/-/blob/main/docs/runbook.md"
    assert rules["MemoryPluginDown"]["annotations"]["runbook"] == f"{base}#memoryplugindown"
