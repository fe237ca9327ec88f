"""Corpora whose contents are known: the bundled demo corpus, and real indexes built from its
files with one language's files left out, with only one file, or with nothing but each
document's id and text (so the tool must identify every language itself).  A document's
language is the `lang` the demo corpus records for it (every row has one), never what the
tool says."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from functools import lru_cache
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


@dataclass(frozen=True)
class Known:
    """Every demo document's language, by its file's name and by its id."""

    by_file: dict[str, str]
    by_id: dict[str, str]


@lru_cache(maxsize=1)
def known() -> Known:
    by_id = {}
    for path in sorted(DEMO.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            by_id.update((row["id"], row["lang"]) for row in map(json.loads, handle))
    return Known(demo_files(), by_id)


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


def text_only(name: str, work: Path, cache: Path) -> Corpus:
    """The whole demo corpus with nothing but `id` and `text`, in files named `part-NN.jsonl`,
    so neither metadata nor a file name gives a language away."""
    folder = work / "text-only" / name
    folder.mkdir(parents=True, exist_ok=True)
    for number, path in enumerate(sorted(DEMO.glob("*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as source, open(folder / f"part-{number:02}.jsonl", "w", encoding="utf-8") as out:
            out.writelines(json.dumps({"id": row["id"], "text": row["text"]}, ensure_ascii=False) + "\n" for row in map(json.loads, source))
    out_dir = work / "indexes" / name
    run = measured(audit("index", "build", *(str(p) for p in sorted(folder.glob("*.jsonl"))), "--out", str(out_dir), "--force"), environment(cache))
    if run.returncode != 0:
        raise SystemExit(f"building {name} failed:\n{run.output}")
    return Corpus(name, str(out_dir), frozenset(demo_files().values()), tuple(p.name for p in sorted(folder.glob("*.jsonl"))), run)


def language_of_document(entry: dict, truth: Known) -> str | None:
    """The true language of a provenance entry's document: its row's `lang`, else the demo
    corpus's for its id, else its file's."""
    meta = entry.get("metadata") or {}
    inner = meta.get("metadata") if isinstance(meta.get("metadata"), dict) else meta
    if isinstance(inner, dict) and isinstance(inner.get("lang"), str):
        return inner["lang"]
    if isinstance(inner, dict) and inner.get("id") in truth.by_id:
        return truth.by_id[inner["id"]]
    path = meta.get("path")
    return truth.by_file.get(Path(path).name) if isinstance(path, str) else None
