"""The container files, read without a Docker engine: the Dockerfile's instructions, paths.

Helpers of tests/deploy/test_container_files.py and tests/deploy/test_compose.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def stage_named(instructions: list[Instruction], name: str) -> list[Instruction]:
    """The stage `FROM ... AS name`."""
    found = [s for s in stages(instructions) if s[0].args.split()[-1] == name]
    assert len(found) == 1, f"no one stage named {name}"
    return found[0]


def env_of(stage: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in stage:
        if instruction.keyword == "ENV":
            for pair in instruction.args.split():
                key, sep, value = pair.partition("=")
                assert sep, f"ENV without '=' on line {instruction.line}"
                env[key] = value
    return env
