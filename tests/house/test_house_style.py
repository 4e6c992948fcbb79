"""The house style a reader relies on, checked: no history in the code's text, and
benchmarks that stand apart from the tests.

No docstring or comment of the product, its tests, benchmarks, scenarios or harness
names an issue or a work slice (that story lives in git); `benchmarks/`, `harness/` and
`scenarios/` never import `tests`: measuring does not depend on checking. Modules follow
seams, not a line count: no test caps a module's or a docstring's lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# This module is left out: its own test of HISTORY holds strings the pattern must find.
DESCRIBED = sorted(
    path
    for part in ("plugin", "adapters", "benchmarks", "tests", "scenarios", "harness")
    for path in (ROOT / part).rglob("*.py")
    if path != Path(__file__).resolve()
)
APART = sorted(
    path for part in ("benchmarks", "harness", "scenarios") for path in (ROOT / part).glob("*.py")
)
HISTORY = re.compile(
    r"\b(issue|slice)\s*#?\d+|\b(first|second|third|fourth|fifth|sixth|seventh|eighth) slice\b",
    re.IGNORECASE,
)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", DESCRIBED, ids=_name)
def test_no_docstring_or_comment_names_an_issue_or_a_slice(path: Path) -> None:
    text = path.read_text()
    found = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type in (tokenize.COMMENT, tokenize.STRING) and HISTORY.search(token.string)
    ]
    assert found == []


@pytest.mark.parametrize("path", APART, ids=_name)
def test_benchmarks_scenarios_and_the_harness_never_import_tests(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = [
        alias.name if isinstance(node, ast.Import) else (node.module or "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else node.names[:1])
    ]
    assert [name for name in imported if name == "tests" or name.startswith("tests.")] == []


def test_the_history_pattern_finds_what_it_is_for() -> None:
    assert HISTORY.search("measured in issue 44")
    assert HISTORY.search("the Sixth slice of the work")
    assert not HISTORY.search("the kernel time-slices the event loop")
