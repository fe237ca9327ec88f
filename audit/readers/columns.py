"""Column mapping: how a benchmark the tool has no reader for says which column holds what.

Given on the command line as `--map question=Question,answer=Answer,options=A|B|C|D` or as a
small TOML file of the same keys, and recorded in the audit manifest so that `filter` and
`report` read the benchmark exactly as `check` did.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from audit.errors import AuditError, UnreadableFile, read_toml_file


class MappingError(AuditError, ValueError):
    """A column mapping that cannot be used; the message names the key."""


@dataclass(frozen=True)
class ColumnMap:
    """Which column holds each part of an item; `None` where the benchmark has no such column.

    `options` lists one column per option, or one column holding a list; `answer_index` holds
    the correct option (0-based number, 1-based number or letter, as `answer_base` says);
    `exclude` marks rows the benchmark itself excludes (true/1/yes/x); `mask` is the literal
    token that marks the blank of a cloze prompt; `subject` names what a fact is about, for the
    subject-answer co-occurrence check.
    """

    id: str | None = None
    lang: str | None = None
    source_lang: str | None = None
    question: str | None = None
    answer: str | None = None
    context: str | None = None
    title: str | None = None
    url: str | None = None
    aliases: str | None = None
    subject: str | None = None
    subject_aliases: str | None = None
    options: tuple[str, ...] = ()
    answer_index: str | None = None
    answer_base: str = "0"
    exclude: str | None = None
    mask: str | None = None
    # `none` for a CSV/TSV without a header row (MGSM's `mgsm_{lang}.tsv`): its columns are then
    # named by position from 0 (`--map question=0,answer=1 --header none`).
    header: str = "first"

    def columns(self) -> list[str]:
        """Every column the mapping reads, so the rest are known to be unused."""
        named = [getattr(self, f.name) for f in fields(self) if f.name not in ("options", "answer_base", "mask", "header")]
        return [c for c in (*named, *self.options) if c]

    @property
    def headerless(self) -> bool:
        return self.header == "none"

    def to_dict(self) -> dict[str, object]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items() if value not in (None, ()) and (key, value) != ("header", "first")}


_KEYS = {f.name for f in fields(ColumnMap)}
_BASES = ("0", "1", "letter")
HEADERS = ("first", "none")


def parse_mapping(spec: str) -> ColumnMap:
    """`key=column,...` (options as `A|B|C`), or the path of a TOML file with the same keys."""
    if spec.endswith(".toml") or Path(spec).is_file():
        return _from_toml(Path(spec))
    return parse_inline(spec, "--map")


def parse_inline(spec: str, where: str) -> ColumnMap:
    """`key=column,...` only, never a path: what a server accepts from a client."""
    values: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, column = part.partition("=")
        key, column = key.strip(), column.strip()
        if not sep or not column:
            raise MappingError(f"{where}: {part!r} is not key=column")
        if key in values:
            raise MappingError(f"{where}: {key} given twice")
        values[key] = tuple(c.strip() for c in column.split("|") if c.strip()) if key == "options" else column
    return _build(values, where)


def _from_toml(path: Path) -> ColumnMap:
    try:
        data = read_toml_file(path, "column mapping")
    except UnreadableFile as error:
        raise MappingError(str(error)) from None
    values: dict[str, object] = {}
    for key, value in data.items():
        if key == "options" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            values[key] = tuple(value)
        elif isinstance(value, str):
            values[key] = value
        else:
            raise MappingError(f"{path}: key '{key}': expected a column name{' or a list of them' if key == 'options' else ''}")
    return _build(values, str(path))


def _build(values: dict[str, object], where: str) -> ColumnMap:
    unknown = sorted(set(values) - _KEYS)
    if unknown:
        raise MappingError(f"{where}: unknown key(s) {', '.join(unknown)}; expected some of {', '.join(sorted(_KEYS))}")
    if values.get("answer_base", "0") not in _BASES:
        raise MappingError(f"{where}: answer_base must be one of {', '.join(_BASES)}")
    if values.get("header", "first") not in HEADERS:
        raise MappingError(f"{where}: header must be one of {', '.join(HEADERS)}")
    mapping = ColumnMap(**values)  # type: ignore[arg-type]
    if mapping.answer_index and not mapping.options:
        raise MappingError(f"{where}: answer_index needs options (the columns it indexes)")
    if not (mapping.question or mapping.context):
        raise MappingError(f"{where}: map at least question (or context) to a column")
    return mapping


MISSING = object()


def nested(record: dict[str, object], column: str) -> object:
    """The value at a dotted path into nested JSON (`question.stem`), or MISSING; through a list
    it is the list of each element's value (`question.choices.text`)."""
    return _walk(record, column.split("."))


def _walk(value: object, keys: list[str]) -> object:
    if not keys:
        return value
    if isinstance(value, list):
        found = [_walk(element, keys) for element in value]
        return MISSING if any(element is MISSING for element in found) else found
    if isinstance(value, dict) and keys[0] in value:
        return _walk(value[keys[0]], keys[1:])
    return MISSING


def mapping_from_dict(data: dict[str, object]) -> ColumnMap:
    """The mapping an audit manifest recorded."""
    values = {key: tuple(value) if key == "options" and isinstance(value, list) else value for key, value in data.items()}
    return _build(values, "the audit manifest's benchmark mapping")
