"""Every link in README.md and docs/ resolves, and so does every docs/ anchor the code cites.

Operator-facing messages point at docs/repair.md#<anchor>; renaming a heading
would silently break them, so the anchors are checked against the headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"docs/([a-z-]+\.md)#([a-z0-9-]+)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            found.add(slug)
    return found


def _target(page: Path, link: str) -> tuple[Path, str]:
    path, _, anchor = link.partition("#")
    return (page.parent / path).resolve() if path else page, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in LINK.findall(page.read_text(encoding="utf-8")):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, anchor = _target(page, link)
        if not target.exists() or (
            anchor and target.suffix == ".md" and anchor not in anchors(target)
        ):
            broken.append(link)
    assert broken == []


def test_anchors_cited_by_the_code_exist() -> None:
    cited = {
        (name, anchor)
        for source in [*ROOT.glob("plugin/**/*.py"), *ROOT.glob("adapters/**/*.py")]
        for name, anchor in CITED.findall(source.read_text(encoding="utf-8"))
    }
    assert cited  # the messages do cite them
    missing = [f"{n}#{a}" for n, a in sorted(cited) if a not in anchors(ROOT / "docs" / n)]
    assert missing == []
