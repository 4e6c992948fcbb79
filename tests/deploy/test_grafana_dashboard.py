"""The chart's Grafana dashboard: valid JSON, every panel on the data source variable.

Its queries are evaluated against a real Prometheus scraping a live plugin in
tests/deploy/test_prometheus_live.py.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.helm import FULLNAME
from tests.support.helm import render

VARIABLE = {"type": "prometheus", "uid": "${datasource}"}


def dashboard_map(*sets: str) -> dict[str, Any]:
    objects = render(None, "grafanaDashboard.enabled=true", *sets)
    [found] = [o for o in objects if o["metadata"]["name"] == f"{FULLNAME}-dashboard"]
    return found


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(dashboard_map()["data"]["memory-plugin-vector.json"])
    return data


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_the_dashboard_is_a_config_map_the_sidecar_picks_up() -> None:
    found = dashboard_map("grafanaDashboard.folder=Platform")
    assert found["kind"] == "ConfigMap"
    assert found["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert found["metadata"]["annotations"] == {"grafana_folder": "Platform"}
    assert "annotations" not in dashboard_map()["metadata"]


def test_every_panel_and_query_uses_the_data_source_variable() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["datasource"] == VARIABLE
    for panel in panels(board):
        assert panel["datasource"] == VARIABLE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == VARIABLE, panel["title"]
            assert 'job=~"$job"' in target["expr"], panel["title"]
    text = json.dumps(board)
    assert text.count('"uid"') == text.count('"uid": "${datasource}"') + 1  # its own uid


def test_the_rows_cover_what_an_operator_needs() -> None:
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert rows == ["Health", "Traffic", "Fair sharing", "Model", "Store"]
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
