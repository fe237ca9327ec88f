"""A model's predictions for a benchmark: what it answered for each item in each language.

Read from JSON Lines or CSV (gzipped or not; detected from content), in either of two shapes,
decided by the columns present:

- **long**: one row per (item, language): `item_id`, `lang`, `prediction`, optionally
  `correct` and `source_lang`;
- **pair**: one row per (item, target language) carrying both answers: `item_id`,
  `target_lang`, `source_prediction`, `target_prediction`, optionally `source_correct`,
  `target_correct` and `source_lang`. The source answer repeats on every pair of an item and
  must agree wherever it does.

Common spellings are accepted (`q_id`, `language`, `original_lang`, `response`, ...; see
`_ALIASES`). Every bad row raises `PredictionsError` naming file, line and field; a target
answer whose item has no source-language answer is not an error but is reported in
`PredictionSet.problems`, and its pair is left out rather than guessed.
"""
from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from audit.errors import LocatedError, json_problem, text_lines
from audit.items import Item
from audit.langcodes import normalise_lang
from audit.records import Json, JsonObject

LONG, PAIR = "long", "pair"

_ALIASES: dict[str, tuple[str, ...]] = {
    "item_id": ("item_id", "q_id", "id"),
    "lang": ("lang", "language", "target_language", "target_lang"),
    "target_lang": ("target_lang", "target_language", "lang", "language"),
    "source_lang": ("source_lang", "original_lang", "original_language", "source_language"),
    "prediction": ("prediction", "response", "model_answer", "output", "generation"),
    "correct": ("correct", "is_correct"),
    "source_prediction": ("source_prediction", "source_response"),
    "target_prediction": ("target_prediction", "target_response"),
    "source_correct": ("source_correct",),
    "target_correct": ("target_correct",),
}
_PAIR_MARKERS = ("source_prediction", "source_response", "target_prediction", "target_response")
_TRUE = frozenset({"true", "yes", "1", "correct", "y", "t"})
_FALSE = frozenset({"false", "no", "0", "incorrect", "n", "f"})
_EXAMPLES = 3


class PredictionsError(LocatedError):
    """A bad predictions input, located by file, line and field."""


@dataclass(frozen=True)
class Prediction:
    """One answer: `text` is what the model said (None if only a judgment was given)."""

    item_id: str
    lang: str
    text: str | None
    correct: bool | None
    line: int


@dataclass
class PredictionSet:
    """Every answer of one file, keyed by (item id, language)."""

    path: str
    shape: str
    predictions: dict[tuple[str, str], Prediction]
    source_langs: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    bound: bool = False

    def get(self, item_id: str, lang: str) -> Prediction | None:
        return self.predictions.get((item_id, lang))

    @property
    def item_ids(self) -> list[str]:
        return list(dict.fromkeys(item_id for item_id, _ in self.predictions))

    def bind(self, items: Sequence[Item]) -> PredictionSet:
        """Check every answer against the benchmark and list what is missing.

        Raises for an unknown item, a language the item does not have, or a source language
        that disagrees with the benchmark; reports (in `problems`) target answers without a
        source answer, and benchmark variants nobody answered.
        """
        by_id = {item.item_id: item for item in items}
        for (item_id, lang), prediction in self.predictions.items():
            item = by_id.get(item_id)
            if item is None:
                raise PredictionsError(self.path, prediction.line, "item_id", f"'{item_id}' is not in the benchmark ({len(by_id)} items)")
            if lang not in item.variants:
                have = ", ".join(item.variants)
                raise PredictionsError(self.path, prediction.line, "lang", f"item '{item_id}' has no '{lang}' variant in the benchmark (it has {have})")
            declared = self.source_langs.get(item_id)
            if declared is not None and declared != item.source_lang:
                raise PredictionsError(self.path, prediction.line, "source_lang", (
                    f"item '{item_id}' has source language '{item.source_lang}' in the benchmark, '{declared}' here"
                ))
        sources = {item.item_id: item.source_lang for item in items}
        bound = replace(self, source_langs=sources, problems=[], bound=True)
        bound.problems = _missing_sources(bound) + _unanswered(bound, items)
        return bound


def load_predictions(path: str | os.PathLike[str], items: Sequence[Item] | None = None) -> PredictionSet:
    """Read a predictions file; with `items`, also check it against the benchmark (see `bind`)."""
    source = Path(path)
    if not source.is_file():
        raise PredictionsError(source, message="no such file" if not source.exists() else "not a regular file")
    lines = _numbered_lines(source)
    first = next(((n, text) for n, text in lines if text.strip()), None)
    if first is None:
        raise PredictionsError(source, message="empty file: no predictions")
    records = _json_records(source, first, lines) if first[1].lstrip().startswith(("{", "[")) else _csv_records(source, first, lines)
    known = {item.item_id: item.source_lang for item in items} if items is not None else {}
    predictions = _read(source, records, known)
    return predictions.bind(items) if items is not None else predictions


# Reading --------------------------------------------------------------------------------


def _numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    return enumerate(text_lines(path, PredictionsError), 1)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_records(path: Path, first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, JsonObject]]:
    if first[1].lstrip().startswith("["):
        raise PredictionsError(path, first[0], None, "expected JSON Lines (one object per line), got a JSON array")
    for number, text in _chain(first, rest):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise PredictionsError(path, number, None, json_problem(exc)) from None
        if not isinstance(value, dict):
            raise PredictionsError(path, number, None, f"expected a JSON object, got {_type_name(value)}")
        for key, text in value.items():
            if _SURROGATE.search(key) or (isinstance(text, str) and _SURROGATE.search(text)):
                shown = key.encode("utf-8", "backslashreplace").decode()
                raise PredictionsError(path, number, shown, "a lone surrogate (an unpaired \\ud800-\\udfff escape), not text")
        yield number, value


def _csv_records(path: Path, first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, JsonObject]]:
    if path.name.lower().removesuffix(".gz").endswith((".jsonl", ".json", ".ndjson")):
        raise PredictionsError(path, first[0], None, "expected a JSON object on each line")
    starts: list[int] = []

    def text_lines() -> Iterator[str]:
        for number, text in _chain(first, rest):
            starts.append(number)
            yield text

    reader = csv.reader(text_lines())
    try:
        header = [name.strip() for name in next(reader)]
        header_line = starts[0]
        if len(header) == 1 and "\t" in header[0]:
            raise PredictionsError(path, header_line, None, "a tab-separated header; predictions are JSON Lines or CSV (comma-separated)")
        twice = next((name for name in header if header.count(name) > 1), None)
        if twice is not None:
            raise PredictionsError(path, header_line, twice, "appears twice in the header")
        consumed = reader.line_num
        for row in reader:
            line = starts[consumed]
            consumed = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise PredictionsError(path, line, None, f"expected {len(header)} columns, found {len(row)}")
            yield line, dict(zip(header, row, strict=True))
    except csv.Error as exc:
        raise PredictionsError(path, reader.line_num, None, f"malformed CSV: {exc}") from exc


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def _type_name(value: Json) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# Fields ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    path: Path
    line: int
    record: JsonObject

    def key(self, name: str) -> str | None:
        """The one column spelling `name` in this row, if any; two spellings are an error."""
        present = [alias for alias in _ALIASES[name] if alias in self.record]
        if len(present) > 1:
            raise PredictionsError(self.path, self.line, present[1], f"given together with '{present[0]}'; keep one")
        return present[0] if present else None

    def raw(self, name: str) -> tuple[str, Json]:
        """The column's spelling and value; a missing column reads as None under its main name."""
        key = self.key(name)
        return (_ALIASES[name][0], None) if key is None else (key, self.record[key])

    def required(self, name: str) -> tuple[str, Json]:
        key, value = self.raw(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if self.key(name) is None:
                spellings = " or ".join(f"'{alias}'" for alias in _ALIASES[name])
                raise PredictionsError(self.path, self.line, key, f"required but missing (give {spellings})")
            raise PredictionsError(self.path, self.line, key, "required but empty")
        return key, value

    def item_id(self) -> str:
        key, value = self.required("item_id")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise PredictionsError(self.path, self.line, key, f"expected a string or integer, got {_type_name(value)}")
        return str(value).strip()

    def lang(self, name: str) -> str:
        return self._language(*self.required(name))

    def optional_lang(self, name: str) -> str | None:
        key, value = self.raw(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return self._language(key, value)

    def _language(self, key: str, value: Json) -> str:
        if not isinstance(value, str):
            raise PredictionsError(self.path, self.line, key, f"expected a language code string, got {_type_name(value)}")
        try:
            return normalise_lang(value.strip())
        except ValueError as exc:
            raise PredictionsError(self.path, self.line, key, str(exc)) from None

    def text(self, name: str) -> str | None:
        """The model's answer; an empty string is an (empty) answer, null or no column is none."""
        key, value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise PredictionsError(self.path, self.line, key, f"expected the model's answer as a string, got {_type_name(value)}")
        return str(value).strip()

    def correct(self, name: str) -> bool | None:
        key, value = self.raw(name)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            word = value.strip().lower()
            if not word:
                return None
            if word in _TRUE | _FALSE:
                return word in _TRUE
        raise PredictionsError(self.path, self.line, key, f"expected true/false (or 1/0, yes/no), got {value!r}")


def _read(path: Path, records: Iterable[tuple[int, JsonObject]], known: dict[str, str]) -> PredictionSet:
    """Rows into predictions; `known` gives source languages from the benchmark, if there is one."""
    predictions: dict[tuple[str, str], Prediction] = {}
    sources: dict[str, tuple[str, int]] = {}
    shape: str | None = None
    for line, record in records:
        row = _Row(path, line, record)
        row_shape = PAIR if any(marker in record for marker in _PAIR_MARKERS) else LONG
        if shape is None:
            shape = row_shape
        elif row_shape != shape:
            expected = "source_prediction/target_prediction" if shape == PAIR else "prediction"
            raise PredictionsError(path, line, None, f"row shape differs from the first row's: expected {expected} columns")
        item_id = row.item_id()
        declared = row.optional_lang("source_lang")
        if declared is not None:
            first = sources.setdefault(item_id, (declared, line))
            if first[0] != declared:
                raise PredictionsError(path, line, row.key("source_lang"), (
                    f"item '{item_id}' has source language '{first[0]}' on line {first[1]} but '{declared}' here"
                ))
        if shape == LONG:
            _add(path, predictions, _long(row, item_id), allow_same=False)
        else:
            source, target = _pair(row, item_id, declared or known.get(item_id))
            if source is not None:
                _add(path, predictions, source, allow_same=True)
            _add(path, predictions, target, allow_same=False)
    if not predictions:
        raise PredictionsError(path, message="no predictions found")
    return PredictionSet(str(path), shape or LONG, predictions, {k: v for k, (v, _) in sources.items()})


def _long(row: _Row, item_id: str) -> Prediction:
    text, correct = row.text("prediction"), row.correct("correct")
    if text is None and correct is None:
        raise PredictionsError(row.path, row.line, "prediction", "required: give the model's answer, a 'correct' judgment, or both")
    return Prediction(item_id, row.lang("lang"), text, correct, row.line)


def _pair(row: _Row, item_id: str, source_lang: str | None) -> tuple[Prediction | None, Prediction]:
    target_lang = row.lang("target_lang")
    target = Prediction(item_id, target_lang, row.text("target_prediction"), row.correct("target_correct"), row.line)
    if target.text is None and target.correct is None:
        raise PredictionsError(row.path, row.line, "target_prediction", "required: give the target answer, 'target_correct', or both")
    if source_lang == target_lang:
        raise PredictionsError(row.path, row.line, row.key("target_lang"), f"target language '{target_lang}' is the source language")
    source_text, source_correct = row.text("source_prediction"), row.correct("source_correct")
    if source_text is None and source_correct is None:
        return None, target
    if source_lang is None:
        raise PredictionsError(row.path, row.line, "source_lang", "required on pair rows with a source answer when no benchmark is given")
    return Prediction(item_id, source_lang, source_text, source_correct, row.line), target


def _add(path: Path, predictions: dict[tuple[str, str], Prediction], new: Prediction, *, allow_same: bool) -> None:
    key = (new.item_id, new.lang)
    old = predictions.get(key)
    if old is None:
        predictions[key] = new
        return
    if allow_same and (old.text, old.correct) == (new.text, new.correct):
        return
    what = "a different source answer" if allow_same else "a second answer"
    raise PredictionsError(path, new.line, "item_id", (
        f"{what} for item '{new.item_id}' in '{new.lang}' (first on line {old.line})"
    ))


# Coverage -------------------------------------------------------------------------------


def _examples(ids: list[str]) -> str:
    shown = ", ".join(f"'{i}'" for i in ids[:_EXAMPLES])
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def _missing_sources(predictions: PredictionSet) -> list[str]:
    """One line per item that has target answers but no source-language answer."""
    problems = []
    targets: dict[str, list[Prediction]] = {}
    for (item_id, lang), prediction in predictions.predictions.items():
        source = predictions.source_langs.get(item_id)
        if source is not None and lang != source and predictions.get(item_id, source) is None:
            targets.setdefault(item_id, []).append(prediction)
    for item_id, rows in targets.items():
        langs = ", ".join(p.lang for p in rows)
        source = predictions.source_langs[item_id]
        problems.append(
            f"{predictions.path}:{rows[0].line}: field 'lang': item '{item_id}' has answers in {langs}"
            f" but none in its source language '{source}'; its {len(rows)} pair(s) are left out"
        )
    return problems


def _unanswered(predictions: PredictionSet, items: Sequence[Item]) -> list[str]:
    """Benchmark items nobody answered, and per language the items with no answer in it."""
    answered = set(predictions.item_ids)
    silent = [item.item_id for item in items if item.item_id not in answered]
    problems = []
    if silent:
        problems.append(f"{predictions.path}: {len(silent)} of {len(items)} benchmark items have no prediction ({_examples(silent)})")
    missing: dict[str, list[str]] = {}
    for item in items:
        if item.item_id in answered:
            for lang in item.variants:
                if predictions.get(item.item_id, lang) is None:
                    missing.setdefault(lang, []).append(item.item_id)
    for lang, ids in missing.items():
        problems.append(f"{predictions.path}: no '{lang}' answer for {len(ids)} answered item(s) ({_examples(ids)})")
    return problems
