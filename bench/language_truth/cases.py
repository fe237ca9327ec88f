"""The real benchmarks, in their published formats, and the corpora each is checked against.

Defaults are the committed fixtures (tests/fixtures/SOURCES.md).  `--xquad` (a checkout of
google-deepmind/xquad) gives the Romanian cases the published files whole (1,190 questions;
the all-language XQuAD case stays on the fixtures, 35 questions in six languages, as 14,280
variants would take most of the run); `--xcopa` takes a glob of XCOPA files, one per language."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .corpora import DEMO

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
ECLEKTIC = DEMO.parent / "eclektic_sample.csv.gz"


@dataclass(frozen=True)
class Case:
    """One benchmark as published (`bench` is what `audit check` is given) and the corpora it is
    checked against; `extra` are the options a user would need to pass."""

    name: str
    bench: str
    corpora: tuple[str, ...]
    extra: tuple[str, ...] = ()


def base_language(code: str) -> str:
    """`zh-CN` and `zh` are one language for whether a corpus holds it."""
    return code.split("-")[0].lower()


def source_and_target(xquad: Path, target: str, work: Path) -> str:
    """A folder holding XQuAD's English source file and one target file, as a user would make it."""
    folder = work / "benchmarks" / f"xquad-en-{target}"
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", target):
        shutil.copyfile(xquad / f"xquad.{lang}.json", folder / f"xquad.{lang}.json")
    return str(folder)


def real_cases(work: Path, xquad: Path | None = None, xcopa: str | None = None) -> list[Case]:
    """Every benchmark with the corpora that hold none of some of its languages: `demo` (no
    fi, sw, ru, ar, ta, ro, ...), `demo-no-ja` and `demo-no-id` (the demo less its Japanese or
    Indonesian files), `xquad-en` (XQuAD's English paragraphs only) and `demo-text` (the demo
    corpus as ids and text alone: every language identified by the tool)."""
    xquad = xquad or FIXTURES / "xquad"
    xcopa = xcopa or str(FIXTURES / "xcopa" / "data" / "*" / "test.*.jsonl")
    return [
        Case("tydiqa", str(FIXTURES / "tydiqa" / "tiny_dev.jsonl.gz"), ("demo", "demo-no-ja", "demo-no-id", "demo-text")),
        Case("xquad", str(FIXTURES / "xquad"), ("demo",)),
        Case("xquad.ro.json", str(xquad / "xquad.ro.json"), ("xquad-en", "demo", "demo-text")),
        Case("xquad en+ro", source_and_target(xquad, "ro", work), ("xquad-en",)),
        Case("xcopa", xcopa, ("demo", "demo-no-id", "demo-text")),
        Case("mkqa", str(FIXTURES / "mkqa" / "test_mkqa.jsonl.gz"), ("demo", "demo-no-ja", "demo-text")),
        Case("bmlama17", str(FIXTURES / "bmlama17"), ("demo", "demo-no-ja")),
        Case("eclektic", str(ECLEKTIC), ("demo", "demo-no-ja", "demo-no-id", "demo-text")),
    ]
