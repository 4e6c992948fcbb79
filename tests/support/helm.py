"""Rendering the Helm chart (deploy/helm/memory-plugin-vector) offline, for the helm tests.

Needs helm (scripts/install-tools puts it in .tools/bin); `require_tool` skips
without it, except under CI. `python -m tests.support.helm` prints the objects
each scenario renders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "memory-plugin-vector"
RELEASE = "mem"
NAMESPACE = "agents"
FULLNAME = f"{RELEASE}-memory-plugin-vector"
KUBE_VERSION = "1.33.0"
# Kinds kubernetes-validate has no schema for (CRDs): checked in tests below.
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
SCENARIOS = ["qdrant-server", "embedded", "pinecone", "all-optional"]
# Environment the pod gets besides the plugin's own settings.
RUNTIME_ENV = {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HOME", "OMP_NUM_THREADS"}

Manifest = dict[str, Any]
JSON_SET = "json:"  # a `render` argument passed as --set-json (set_json)


def find_helm() -> str | None:
    local = ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("helm")


@cache
def _helm_path() -> str:
    return require_tool(find_helm(), "helm", "scripts/test runs scripts/install-tools")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_helm_path(), *args], capture_output=True, text=True, timeout=60, check=False
    )


def values_file(scenario: str) -> str:
    return str(CHART / "ci" / f"{scenario}-values.yaml")


def template_args(scenario: str | None, *sets: str) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += ["--kube-version", KUBE_VERSION]
    if scenario is not None:
        args += ["--values", values_file(scenario)]
    for item in sets:
        if item.startswith(JSON_SET):
            args += ["--set-json", item.removeprefix(JSON_SET)]
        else:
            args += ["--set", item]
    return args


def set_json(key: str, value: Any) -> str:
    """A `render` argument setting `key` to `value` (lists and maps too) by `--set-json`."""
    return f"{JSON_SET}{key}={json.dumps(value)}"


@cache
def _render(scenario: str | None, sets: tuple[str, ...]) -> tuple[Manifest, ...]:
    result = helm(*template_args(scenario, *sets))
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render(scenario: str | None = None, *sets: str) -> list[Manifest]:
    return list(_render(scenario, sets))


def render_fails(scenario: str | None, *sets: str) -> str:
    result = helm(*template_args(scenario, *sets))
    assert result.returncode != 0, f"helm template succeeded with {sets}"
    return result.stderr


def config_map(objects: list[Manifest]) -> Manifest:
    """The plugin's settings ConfigMap (beside it there may be the dashboard's)."""
    return one([o for o in objects if o["metadata"]["name"] == FULLNAME], "ConfigMap")


def one(objects: list[Manifest], kind: str) -> Manifest:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def server_container(objects: list[Manifest]) -> Manifest:
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["plugin"]
    return containers[0]


def helm_test_pod(objects: list[Manifest]) -> Manifest:
    return one(objects, "Pod")


def selects(selector: Manifest, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector matches `labels` (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, op, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[op]
        if not ok:
            return False
    return True


def chart_values(scenario: str) -> Manifest:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    override = yaml.safe_load(Path(values_file(scenario)).read_text())

    def merge(base: Manifest, top: Manifest) -> Manifest:
        out = dict(base)
        for key, value in top.items():
            both_maps = isinstance(value, dict) and isinstance(base.get(key), dict)
            out[key] = merge(base[key], value) if both_maps else value
        return out

    return merge(defaults, override)


def main() -> None:
    if find_helm() is None:
        raise SystemExit("helm not found: run scripts/install-tools")
    for scenario in SCENARIOS:
        print(f"{scenario} (ci/{scenario}-values.yaml):")
        for obj in render(scenario):
            print(f"  {obj['kind']}/{obj['metadata']['name']}")


if __name__ == "__main__":
    main()
