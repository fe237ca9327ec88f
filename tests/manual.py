"""The manual's pages (docs/) and the README, read for the tests that compare what they show
with what the code does or prints."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def page(name: str) -> str:
    """The Markdown of one page of the manual, by its path under docs/."""
    return (DOCS / name).read_text(encoding="utf-8")


def manual() -> str:
    """Every page of the manual, one after the other."""
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(DOCS.rglob("*.md")))


def section(text: str, heading: str) -> str:
    """The text under `heading` (a whole heading line), up to the next heading of the same or a
    higher level outside code blocks (where `#` starts a shell comment)."""
    level = len(heading.split(" ", 1)[0])
    lines = text.splitlines()
    start = lines.index(heading) + 1
    fenced = False
    for end in range(start, len(lines)):
        fenced ^= lines[end].startswith("```")
        hashes = lines[end].split(" ", 1)[0]
        if not fenced and hashes and set(hashes) == {"#"} and len(hashes) <= level:
            break
    else:
        end = len(lines)
    return "\n" + "\n".join(lines[start:end]) + "\n"
