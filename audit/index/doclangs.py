"""The per-document language table beside an index: which language each document is in, and
how that was known.

A corpus query counts a match for a language only where the document holding it is in that
language, so the table is written once, at index build (or by `audit index languages` for an
index built before it), and read at query time with no identification left to do.

Two files in the index directory, both recorded in its manifest:
- `doclangs.bin`: one 3-byte record per document in global document order, a little-endian
  `uint16` index into the language list and a `uint8` for how it was known (`How`);
- `doclangs.json`: the language list (`und` first: not known), the identifier that filled the
  table, and the documents per language.

`document_language` reads the language a document's metadata records, the first source a build
trusts when it fills the table (`audit.index.langtable`).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from audit.errors import AuditError
from audit.langcodes import normalise_lang

if TYPE_CHECKING:
    from audit.index.documents import JsonValue

TABLE = "doclangs.bin"
HEADER = "doclangs.json"
FORMAT = 1
UNKNOWN = "und"
RECORD = np.dtype([("code", "<u2"), ("how", "u1")])


class How(IntEnum):
    """How a document's language was known: `NONE` (not known), `METADATA` (the corpus records
    it: `lang`, `language`, Dolma's nested `metadata`), `SOURCE` (the input names it: a wiki
    dump's name), `IDENTIFIED` (a language-identification model read its text)."""

    NONE = 0
    METADATA = 1
    SOURCE = 2
    IDENTIFIED = 3


class LanguageTableError(AuditError):
    """The table is missing a file, damaged, or does not fit the index; the message names the file."""


# `How` by value, without the enum's call, asked for every document a match is in.
_HOWS = tuple(How)


@dataclass
class DocumentLanguages:
    """The table in memory: `codes[d]` indexes `languages`, `how[d]` is a `How`."""

    languages: list[str]
    codes: np.ndarray
    how: np.ndarray
    identifier: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {name: code for code, name in enumerate(self.languages)}
        self._flags: dict[Hashable, np.ndarray] = {}

    def flags(self, key: Hashable, wanted: Callable[[str], bool]) -> np.ndarray:
        """Per code, whether `wanted` holds for its language: worked out once per `key` (which
        must name what `wanted` decides), since a run asks it of every match's documents."""
        found = self._flags.get(key)
        if found is None:
            found = self._flags[key] = np.array([wanted(name) for name in self.languages], dtype=bool)
            found.setflags(write=False)
        return found

    @property
    def documents(self) -> int:
        return len(self.codes)

    def language(self, document: int) -> str:
        return self.languages[int(self.codes[document])]

    def known_by(self, document: int) -> How:
        return _HOWS[self.how[document]]

    def code(self, language: str) -> int | None:
        """The code of a language in this table; None when no document is in it."""
        return self._index.get(language)

    def codes_for(self, languages: set[str]) -> np.ndarray:
        """The codes of those of `languages` the table has (a language absent from the corpus
        has none, so nothing can match it)."""
        return np.array(sorted(c for name in languages if (c := self._index.get(name)) is not None), dtype=np.uint16)

    def counts(self) -> dict[str, int]:
        found = np.bincount(self.codes, minlength=len(self.languages))
        return {name: int(n) for name, n in zip(self.languages, found, strict=True) if n}


def summary(table: DocumentLanguages) -> dict[str, JsonValue]:
    """What a manifest and `audit index info` say of a table: documents per language, how their
    languages were known, and the identifier."""
    known = np.bincount(table.how, minlength=len(How))
    return {
        "identifier": table.identifier,
        "documents": table.documents,
        "counts": dict(sorted(table.counts().items(), key=lambda item: (-item[1], item[0]))),
        "known_by": {how.name.lower(): int(known[how]) for how in How},
    }


def write_table(directory: Path, table: DocumentLanguages) -> list[Path]:
    """Write both files into `directory` (the caller stages and renames); returns their paths."""
    records = np.empty(table.documents, dtype=RECORD)
    records["code"], records["how"] = table.codes, table.how
    body, header = directory / TABLE, directory / HEADER
    with open(body, "wb") as out:
        out.write(records.tobytes())
    meta = {"format": FORMAT, "documents": table.documents, "languages": table.languages, "identifier": table.identifier, "counts": table.counts()}
    header.write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return [body, header]


def has_table(directory: Path) -> bool:
    return (directory / TABLE).exists() or (directory / HEADER).exists()


def read_table(directory: Path, documents: int) -> DocumentLanguages | None:
    """The table of an index of `documents` documents; None for an index built before tables
    were written (its documents' languages are unknown).  A table present but damaged, or of
    another size, is an error naming the file."""
    if not has_table(directory):
        return None
    header_path, body_path = directory / HEADER, directory / TABLE
    try:
        meta = json.loads(header_path.read_text(encoding="utf-8"))
        languages, identifier = meta["languages"], meta.get("identifier", {})
        if meta.get("format") != FORMAT or not isinstance(languages, list) or not languages or languages[0] != UNKNOWN:
            raise ValueError("not a document-language header this version reads")
        # Two codes of one name would split its documents; a query asks for the name's code.
        if not all(isinstance(name, str) and name for name in languages) or len(set(languages)) != len(languages):
            raise ValueError("its languages are not distinct names")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise LanguageTableError(f"{header_path}: {error}") from None
    try:
        raw = np.fromfile(body_path, dtype=RECORD)
    except (OSError, ValueError) as error:
        raise LanguageTableError(f"{body_path}: {error}") from None
    if body_path.stat().st_size != documents * RECORD.itemsize:
        raise LanguageTableError(f"{body_path}: {body_path.stat().st_size} bytes, where {documents} documents take {documents * RECORD.itemsize}")
    codes, how = np.ascontiguousarray(raw["code"]), np.ascontiguousarray(raw["how"])
    if len(codes) and (int(codes.max()) >= len(languages) or int(how.max()) > max(How)):
        raise LanguageTableError(f"{body_path}: a record names a language or a source the header does not have")
    return DocumentLanguages(list(languages), codes, how, dict(identifier))


_LANGUAGE_KEYS = ("lang", "language")


def document_language(metadata: Mapping[str, object]) -> str | None:
    """The language a document's metadata records (`lang` or `language`, at the top or in a
    nested `metadata`, as Dolma and Wikipedia dumps write it), normalised; None when it records
    none or one that is no language code."""
    for key in _LANGUAGE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            try:
                return normalise_lang(value.strip())
            except ValueError:
                return None
    nested = metadata.get("metadata")
    return document_language(nested) if isinstance(nested, dict) else None
