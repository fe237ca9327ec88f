"""Filling the per-document language table (`audit.index.doclangs`) while an index is built.

Each document's language is known, in this order of trust:
1. from its metadata (`lang`, `language`, Dolma's nested `metadata`: `document_language`): METADATA;
2. from the name of the file it came from (`source_language`): SOURCE;
3. from its text, identified by `audit.langid` as `identify_document` does: IDENTIFIED;
4. else unknown (`und`, NONE): a document with too few letters to identify.

The work is done where a chunk of documents is parsed (a build's worker process, a sharded
build's shard process), once per document, so a query pays nothing for it.
"""
from __future__ import annotations

import base64
import functools
import json
import re
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from audit.index.doclangs import UNKNOWN, DocumentLanguages, How, document_language, write_table
from audit.index.documents import ParsedChunk
from audit.index.format import FileInfo, hash_file
from audit.langcodes import ISO_639_1, normalise_lang
from audit.langid import BLOCK, BLOCKS, identifier, line_language, model_line

# A Wikimedia dump's file name starts with its wiki's language: `jawiki-latest-pages-articles`,
# `enwiki-20240601-...`, `zh_yuewiki-...`.
WIKI_DUMP = re.compile(r"([a-z]{2,3}(?:_[a-z]{2,8})?)wiki(?![a-z])")
# Two-letter codes that are also common English words, so never read from a file name.
NAME_WORDS = frozenset({"am", "an", "as", "be", "is", "my", "no", "or", "so", "to"})
# The start of a stored metadata line (`audit.index.documents`): the input's name as a JSON string.
PATH_FIELD = re.compile(rb'\{"path": ("(?:[^"\\]|\\.)*")')
# Bytes of a document read per block: enough for BLOCK characters of any script (4 bytes each).
BLOCK_BYTES = 4 * BLOCK


def _code_in_name(part: str) -> str | None:
    """`part` as a language when it is an ISO 639-1 code, optionally with a region or script
    (`pt_BR`, `zh-Hant`), and not a common word; else None."""
    primary = re.split(r"[-_]", part, maxsplit=1)[0]
    if not re.fullmatch(r"[a-z]{2}(?:[-_][A-Za-z]{2,4})?", part, re.IGNORECASE) or primary.lower() in NAME_WORDS:
        return None
    if primary.lower() not in ISO_639_1:
        return None
    try:
        return normalise_lang(part)
    except ValueError:
        return None


def _wiki_dump(stem: str) -> str | None:
    found = WIKI_DUMP.match(stem.lower())
    if not found:
        return None
    try:
        return normalise_lang(found[1])
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def source_language(name: str) -> str | None:
    """The language an input's name gives, or None.  Deliberately conservative: a Wikimedia dump
    (`jawiki-latest-pages-articles.jsonl`); a file whose name before its first dot is a code or
    starts or ends with one between `-` (`ja.jsonl`, `wiki-ja.jsonl.gz`, `en-news.jsonl`, `pud-pt_BR`);
    a directory of the input named exactly by a code (`ja/part-0001.jsonl`).  Codes that are also
    English words (`an`, `is`, `no`, `to`...) are never taken, and names that give two different
    languages give none."""
    path = PurePosixPath(name)
    stem = path.name.split(".", 1)[0]
    parts = stem.split("-")
    candidates = [_wiki_dump(stem), *(_code_in_name(part) for part in {parts[0], parts[-1]})]
    candidates += [_code_in_name(folder) for folder in path.parts[:-1] if len(folder) == 2]
    found = {lang for lang in candidates if lang}
    return found.pop() if len(found) == 1 else None


def _text_blocks(text: bytes) -> list[str]:
    """The blocks `audit.langid.document_blocks` would take, cut from the stored bytes without
    decoding a long document whole."""
    if len(text) <= BLOCK_BYTES * BLOCKS:
        whole = text.decode("utf-8", errors="ignore")
        if len(whole) <= BLOCK * BLOCKS:
            return [whole]
    middle = (len(text) - BLOCK_BYTES) // 2
    head = text[:BLOCK_BYTES].decode("utf-8", errors="ignore")[:BLOCK]
    centre = text[middle : middle + BLOCK_BYTES].decode("utf-8", errors="ignore")[1:BLOCK + 1]
    tail = text[-BLOCK_BYTES:].decode("utf-8", errors="ignore")[-BLOCK:]
    return [head, centre, tail]


@functools.lru_cache(maxsize=256)
def _path(encoded: bytes) -> str | None:
    try:
        path = json.loads(encoded)
    except ValueError:
        return None
    return path if isinstance(path, str) else None


def _metadata_language(metadata_line: bytes) -> str | None:
    """The language the document's metadata records.  Only a line naming a `lang` key can
    record one, so most lines of a corpus without languages are never parsed (parsing was a
    fifth of the cost of identifying their documents)."""
    if b'"lang' not in metadata_line:
        return None
    try:
        record = json.loads(metadata_line)
    except ValueError:
        return None
    metadata = record.get("metadata") if isinstance(record, dict) else None
    return document_language(metadata) if isinstance(metadata, dict) else None


def document_entry(text: bytes, metadata_line: bytes) -> tuple[str, int]:
    """(language, How) of one stored document (its text without the separator, its metadata
    line, which starts with the `path` of its input)."""
    if lang := _metadata_language(metadata_line):
        return lang, How.METADATA
    named = PATH_FIELD.match(metadata_line)
    if named and (path := _path(named[1])) and (lang := source_language(path)):
        return lang, How.SOURCE
    line = model_line(" ".join(_text_blocks(text)))
    lang = line_language(line) if line is not None else None
    return (lang, How.IDENTIFIED) if lang else (UNKNOWN, How.NONE)


def chunk_languages(chunk: ParsedChunk) -> list[tuple[str, int]]:
    """(language, How) of each document of a parsed chunk, in order."""
    entries = []
    text_at = meta_at = 0
    for size, meta_size in zip(chunk.text_sizes, chunk.metadata_sizes, strict=True):
        text = chunk.texts[text_at + 1 : text_at + size]
        entries.append(document_entry(text, chunk.metadata[meta_at : meta_at + meta_size]))
        text_at, meta_at = text_at + size, meta_at + meta_size
    return entries


def parse_and_identify(function: Callable[..., ParsedChunk], arguments: tuple) -> ParsedChunk:
    """A build's parsing task, then its documents' languages: runs in the worker process."""
    chunk = function(*arguments)
    chunk.languages = chunk_languages(chunk)
    return chunk


@dataclass(frozen=True)
class LanguagePart:
    """Part of a table in JSON-safe form: its language names, and its documents' codes and ways
    known as the base64 of their arrays."""

    names: list[str]
    codes: str
    how: str


@dataclass
class TableBuilder:
    """The table, document by document in global order, as chunks arrive."""

    names: list[str] = field(default_factory=lambda: [UNKNOWN])
    codes: array = field(default_factory=lambda: array("H"))
    how: array = field(default_factory=lambda: array("B"))

    def __post_init__(self) -> None:
        self._index = {name: code for code, name in enumerate(self.names)}

    def _code(self, lang: str) -> int:
        if lang not in self._index:
            self._index[lang] = len(self.names)
            self.names.append(lang)
        return self._index[lang]

    def add(self, entries: Iterable[tuple[str, int]]) -> None:
        for lang, how in entries:
            self.codes.append(self._code(lang))
            self.how.append(int(how))

    def add_chunk(self, chunk: ParsedChunk) -> None:
        """A parsed chunk's documents; unknown when its languages were not found (None)."""
        self.add(chunk.languages if chunk.languages is not None else [(UNKNOWN, How.NONE)] * len(chunk.text_sizes))

    def table(self) -> DocumentLanguages:
        codes = np.frombuffer(self.codes, dtype=np.uint16).copy() if self.codes else np.zeros(0, dtype=np.uint16)
        how = np.frombuffer(self.how, dtype=np.uint8).copy() if self.how else np.zeros(0, dtype=np.uint8)
        return DocumentLanguages(list(self.names), codes, how, identifier())

    def part(self) -> LanguagePart:
        """A compact, JSON-safe copy (a sharded build's record carries its shard's part)."""
        return LanguagePart(self.names, base64.b64encode(self.codes.tobytes()).decode(), base64.b64encode(self.how.tobytes()).decode())

    @classmethod
    def from_part(cls, part: LanguagePart) -> TableBuilder:
        codes, how = array("H"), array("B")
        codes.frombytes(base64.b64decode(part.codes))
        how.frombytes(base64.b64decode(part.how))
        return cls(list(part.names), codes, how)

    def extend(self, other: TableBuilder) -> None:
        """Append another part's documents (the next shard), mapping its codes into this table's."""
        self.add((other.names[code], how) for code, how in zip(other.codes, other.how, strict=True))


def write_languages(directory: Path, table: DocumentLanguages) -> list[FileInfo]:
    """The language table's two files written into `directory` (a build's staging), recorded."""
    return [FileInfo(name=path.name, bytes=path.stat().st_size, blake2b=hash_file(path)) for path in write_table(directory, table)]
