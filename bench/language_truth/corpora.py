"""Corpora whose contents are known: the bundled demo corpus, and real indexes built from its
files with one language's files left out, or with only one file.  A document's language is
the `lang` its file records for it (every demo row has one), never what the tool says."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .runner import Measured, audit, environment, measured

DEMO = Path(str(resources.files("audit").joinpath("data/demo/corpus")))


@dataclass(frozen=True)
class Corpus:
    """A corpus to check against: `location` is what `--corpus` takes; `languages` those its
    documents are in; `build` the cost of building it (None for the cached demo)."""

    name: str
    location: str
    languages: frozenset[str]
    files: tuple[str, ...] = ()
    build: Measured | None = field(default=None, compare=False)


def file_language(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.loads(handle.readline())["lang"]


def demo_files() -> dict[str, str]:
    """{file name: language} of the demo corpus (each file holds one language)."""
    return {path.name: file_language(path) for path in sorted(DEMO.glob("*.jsonl.gz"))}


def demo() -> Corpus:
    files = demo_files()
    return Corpus("demo", "demo", frozenset(files.values()), tuple(files))


def build(name: str, files: list[str], work: Path, cache: Path) -> Corpus:
    """A real index (suffix array and near-duplicate index) of some demo files, built by `audit index build`."""
    languages = demo_files()
    out = work / "indexes" / name
    run = measured(audit("index", "build", *(str(DEMO / f) for f in files), "--out", str(out), "--force"), environment(cache))
    if run.returncode != 0:
        raise SystemExit(f"building {name} failed:\n{run.output}")
    return Corpus(name, str(out), frozenset(languages[f] for f in files), tuple(files), run)


def without(lang: str, work: Path, cache: Path) -> Corpus:
    """The demo corpus less every file of one language."""
    files = [f for f, language in demo_files().items() if language != lang]
    return build(f"demo-no-{lang}", files, work, cache)


def only(file_name: str, work: Path, cache: Path) -> Corpus:
    return build(file_name.split(".")[0], [file_name], work, cache)


def language_of_document(entry: dict, by_file: dict[str, str]) -> str | None:
    """The true language of a provenance entry's document: its row's `lang`, else its file's."""
    meta = entry.get("metadata") or {}
    inner = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else meta
    if isinstance(inner, dict) and isinstance(inner.get("lang"), str):
        return inner["lang"]
    path = meta.get("path")
    return by_file.get(Path(path).name) if isinstance(path, str) else None
