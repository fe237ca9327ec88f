"""The manual builds from the repository with warnings as errors, as `scripts/docs` builds it;
every page of its navigation exists and every page is in it; no page links to a page or an
anchor that is not there; and no page holds raw HTML, so what it quotes (a benchmark's text, a
tool's output) is shown as text."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from manual import DOCS, README, ROOT


class Anchors(HTMLParser):
    """The ids a built page defines and the links it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        if tag == "a" and found.get("href"):
            self.links.append(found["href"])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The manual, built as `scripts/docs` builds it, into a temporary directory."""
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)]
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return out


def nav_pages(entries: list) -> list[str]:
    pages = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def parsed(page: Path) -> Anchors:
    anchors = Anchors()
    anchors.feed(page.read_text(encoding="utf-8"))
    return anchors


def test_every_page_of_the_nav_exists_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = nav_pages(config["nav"])
    assert len(listed) == len(set(listed))
    assert [page for page in listed if not (DOCS / page).is_file()] == []
    assert {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")} == set(listed)
    assert {"python-api.md", "architecture.md"} <= set(listed)


def test_the_manual_builds_and_every_nav_page_is_built(site: Path):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for page in nav_pages(config["nav"]):
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), page


def test_no_page_links_to_a_missing_page_or_anchor(site: Path):
    pages = {path: parsed(path) for path in site.rglob("*.html")}
    broken = []
    for path, anchors in pages.items():
        if path.name == "404.html":  # served at any address, so its links start at the site's root
            continue
        for link in anchors.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in pages[target].ids:
                broken.append(f"{path.relative_to(site)}: {link} (no such anchor)")
    assert broken == []
    assert sum(len(anchors.links) for anchors in pages.values()) > 100


def prose(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown text outside code blocks, with code spans removed."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "", line)))
    return lines


def test_no_page_holds_raw_html():
    sources = [*DOCS.rglob("*.md"), ROOT / "bench" / "README.md", ROOT / "README.md"]
    markup = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for path in sources for number, line in prose(path.read_text(encoding="utf-8")) if re.search(r"<[A-Za-z/!?]|&#?\w+;", line)]
    assert markup == []


def test_the_readme_is_short_and_its_links_resolve():
    assert len(README.splitlines()) <= 250
    targets = [link for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README) if "://" not in link]
    assert targets and [link for link in targets if not (ROOT / link).exists()] == []
    assert "scripts/docs" in README and os.access(ROOT / "scripts" / "docs", os.X_OK)
