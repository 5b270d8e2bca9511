"""The README is a front door to the manual: short, and every manual page is one link away.

The site itself (`mkdocs build --strict`: broken links and anchors fail) is built by ``make lint``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted(path.relative_to(REPO / "docs").as_posix() for path in (REPO / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _nav_pages(entries) -> list[str]:
    found = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found += _nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_readme_is_short_and_links_every_manual_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200, "README.md is a front door: at most 200 lines, the rest goes to docs/"
    linked = {target for target, _ in LINK.findall(readme)}
    missing = [page for page in PAGES if page != "index.md" and f"docs/{page}" not in linked]
    assert not missing, f"manual pages the README does not link: {missing}"
    for command in ("make demo", "make test"):
        assert command in readme, command


def test_readme_links_lead_to_files():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    broken = [target for target, _ in LINK.findall(readme) if "://" not in target and not (REPO / target).exists()]
    assert not broken, f"README.md links to missing files: {broken}"


def test_every_page_is_in_the_site_navigation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    assert sorted(set(nav)) == PAGES, f"mkdocs.yml's nav and docs/*.md differ: {sorted(set(nav) ^ set(PAGES))}"
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False  # no fonts fetched


def test_the_tests_map_names_only_tests_that_exist():
    text = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    files = {path.stem for path in REPO.glob("tests/test_*.py")} | {
        path.stem for path in REPO.glob("*/*/tests/test_*.py")
    }
    named = set(re.findall(r"`(test_\w+)`", text))
    assert named, "tests/README.md names no tests"
    assert not named - files, f"tests/README.md names tests that do not exist: {sorted(named - files)}"
