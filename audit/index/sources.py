"""Which files a build reads: corpus files named one by one (read by their suffix), `datasets`
directories (their Arrow files in row order) and other directories (every `*.json*` file below,
as infini-gram's indexer takes them), never a directory this tool wrote."""
from __future__ import annotations

import json
import os
from pathlib import Path

from audit.index.corpusread import CorpusFile
from audit.index.documents import JsonValue
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST
from audit.outputs import MARKER, STAGING_TAG

TEXT_SUFFIXES = (".txt", ".txt.gz", ".txt.zst", ".md")
DATASETS_MARKERS = ("state.json", "dataset_info.json", "dataset_dict.json")
# Files that mark a directory as one this tool wrote (an index, a langlinks lookup, a report) or
# is writing (a build's staging directory).
OUTPUT_MARKERS = (MANIFEST, "audit-langlinks.json", MARKER, STAGING_TAG)


def file_format(path: Path) -> str:
    """The reader a file gets, by its suffix.  A name with none of the known suffixes is read as
    JSONL, as every file was before other formats were read."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):
        return "arrow"
    return "text" if name.endswith(TEXT_SUFFIXES) else "jsonl"


def is_datasets_directory(path: Path) -> bool:
    """A directory `datasets`' `save_to_disk` wrote (a `Dataset` or a `DatasetDict`)."""
    return any((path / marker).is_file() for marker in DATASETS_MARKERS)


def _read_json(path: Path) -> JsonValue:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise IndexBuildError(f"{path}: not readable JSON ({error})") from None


def datasets_files(directory: Path) -> list[CorpusFile]:
    """The Arrow files of a `save_to_disk` directory in row order (as `state.json` lists them),
    each split of a `DatasetDict` in the order `dataset_dict.json` lists the splits, named
    relative to `directory`."""
    parts = [directory]
    if (directory / "dataset_dict.json").is_file():
        splits = _read_json(directory / "dataset_dict.json")
        splits = splits.get("splits") if isinstance(splits, dict) else None
        if not isinstance(splits, list) or not all(isinstance(split, str) for split in splits):
            raise IndexBuildError(f"{directory / 'dataset_dict.json'}: no list of split names under 'splits'")
        parts = [directory / split for split in splits]
    found: list[CorpusFile] = []
    for part in parts:
        state = part / "state.json"
        if state.is_file():
            entries = _read_json(state)
            entries = entries.get("_data_files") if isinstance(entries, dict) else None
            if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("filename"), str) for e in entries):
                raise IndexBuildError(f"{state}: no list of {{'filename': ...}} under '_data_files'")
            files = [part / entry["filename"] for entry in entries]
        else:
            files = sorted(part.glob("data-*.arrow"))
        if not files:
            raise IndexBuildError(f"{part}: a datasets directory without data-*.arrow files")
        for file in files:
            if not file.is_file():
                raise IndexBuildError(f"{file}: no such file (the datasets directory lists it)")
            found.append(CorpusFile(file, str(file.relative_to(directory)), "datasets"))
    return found


def is_tool_output(directory: Path) -> bool:
    return any((directory / marker).is_file() for marker in OUTPUT_MARKERS)


def nested_outputs(paths: list[Path]) -> list[Path]:
    """Directories below the source directories that this tool wrote (an index built inside
    its own sources, a report): their files are never documents, and a build skips them."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir() or is_datasets_directory(path):
            continue
        for folder, directories, files in os.walk(path):
            if folder != str(path) and not set(OUTPUT_MARKERS).isdisjoint(files):
                found.append(Path(folder))
                directories.clear()
    return sorted(found)


def _directory_files(path: Path) -> list[Path]:
    """Every `*.json*` file below a source directory, but none inside a directory this tool wrote."""
    if is_tool_output(path):
        raise IndexBuildError(f"{path}: a directory audit wrote (an index, a lookup or a report), not a corpus; name the corpus files instead")
    skipped = {directory.relative_to(path) for directory in nested_outputs([path])}
    files = (p for p in path.glob("**/*.json*") if p.is_file())
    return sorted(p for p in files if not any(parent in skipped for parent in p.relative_to(path).parents))


def discover_sources(paths: list[Path]) -> list[CorpusFile]:
    """Each file of documents with the name its documents' metadata records.

    A file is read by its suffix (`file_format`); a `datasets` directory contributes its Arrow
    files.  Any other directory contributes every `*.json*` file below it in sorted order,
    named relative to the directory, which is how infini-gram's indexer orders and names them;
    other formats in it are left alone, so a README or a notes file never becomes a document,
    and so are directories this tool wrote (`nested_outputs`).
    """
    found: list[CorpusFile] = []
    for path in paths:
        if path.is_dir() and is_datasets_directory(path):
            found.extend(datasets_files(path))
        elif path.is_dir():
            files = _directory_files(path)
            if not files:
                raise IndexBuildError(f"{path}: no *.json, *.jsonl or *.jsonl.gz files below it (Parquet, Arrow and text files are read when named one by one)")
            nested = next((p for p in sorted({f.parent for f in files}) if is_datasets_directory(p)), None)
            if nested:
                raise IndexBuildError(f"{nested}: a datasets directory inside {path}, whose JSON files are not documents; name it as a source of its own")
            found.extend(CorpusFile(f, str(f.relative_to(path)), "jsonl") for f in files)
        elif path.is_file():
            found.append(CorpusFile(path, path.name, file_format(path)))
        elif path.exists():
            raise IndexBuildError(f"{path}: not a regular file or a directory (a pipe, a socket or a device); name corpus files")
        else:
            raise IndexBuildError(f"{path}: no such file or directory")
    return found
