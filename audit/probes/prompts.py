"""Localised prompt templates for the probes, shipped in `audit/data/probe_prompts.toml`.

A model is probed in the benchmark's own language, so each language may have its own wording;
one English `[default]` table naming the language covers the rest.  Users change prompts with a
TOML file of their own merged over the shipped one per language and key, and every template
is checked when loaded, so a typo in a placeholder fails before any model is asked.
"""
from __future__ import annotations

import hashlib
import json
import string
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from audit.errors import AuditError, UnreadableFile, read_toml_file
from audit.langcodes import describe_lang, normalise_lang

DEFAULT = "default"
SHIPPED = "data/probe_prompts.toml"


class Task(StrEnum):
    SUMMARY = "summary"
    DIRECT = "direct"
    CLOZE = "cloze"
    PREFIX = "prefix"
    JUDGE = "judge"


_TASKS = frozenset(map(str, Task))
# Placeholders each task must use: a prompt without the probed text asks nothing.
REQUIRED: Mapping[Task, frozenset[str]] = MappingProxyType({
    Task.SUMMARY: frozenset({"entity"}),
    Task.DIRECT: frozenset({"passage"}),
    Task.CLOZE: frozenset({"masked_passage"}),
    Task.PREFIX: frozenset({"prefix"}),
    Task.JUDGE: frozenset({"summary", "reference"}),
})
# Placeholders each task may use; anything else is a typo or a value the probe never supplies.
ALLOWED: Mapping[Task, frozenset[str]] = MappingProxyType({
    **{task: names | {"language"} for task, names in REQUIRED.items()},
    Task.JUDGE: frozenset({"entity", "summary", "reference", "answer", "language"}),
})


class PromptError(AuditError):
    """A bad template file or template use; the message names the file and the key."""


def _fields(names: frozenset[str]) -> str:
    return ", ".join(f"{{{name}}}" for name in sorted(names))


@dataclass(frozen=True)
class Template:
    """One task's template as used for one language: `table` is where it was found (the
    language's own table or `default`), `source` and `key` where errors point."""

    task: Task
    lang: str
    table: str
    text: str
    source: str
    key: str
    placeholders: frozenset[str]

    def render(self, **values: str) -> str:
        """The prompt; `language` defaults to the probed language's English name, so callers
        never spell it and the default table always names the right language."""
        unknown = set(values) - ALLOWED[self.task]
        if unknown:
            raise PromptError(f"{self.source}: key '{self.key}': {_fields(frozenset(unknown))} is not a value a {self.task} prompt takes")
        filled = {"language": describe_lang(self.lang), **values}
        missing = self.placeholders - set(filled)
        if missing:
            raise PromptError(f"{self.source}: key '{self.key}': no value given for {_fields(frozenset(missing))}")
        return self.text.format_map(filled)


@dataclass(frozen=True)
class _Entry:
    text: str
    source: str
    key: str
    placeholders: frozenset[str]


@dataclass(frozen=True)
class Templates:
    """The merged templates by language table and task; `digest` identifies them in the audit
    manifest, `sources` lists the files read (shipped first)."""

    tables: Mapping[str, Mapping[Task, _Entry]]
    sources: tuple[str, ...]
    digest: str

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages with a table of their own."""
        return tuple(sorted(table for table in self.tables if table != DEFAULT))

    def for_lang(self, task: Task, lang: str) -> Template:
        """The language's own template for `task`, else the `[default]` one.  A region or
        variant falls back to its language (`pt-BR` to `pt`); a script never does (`zh-Hant`
        is not given the `zh` table, written in Simplified characters)."""
        task = Task(task)
        try:
            canonical = normalise_lang(lang)
        except ValueError as error:
            raise PromptError(f"cannot choose a {task} prompt: {error}") from None
        table = next((table for table in _lookups(canonical) if task in self.tables.get(table, {})), DEFAULT)
        entry = self.tables[table][task]
        return Template(task, canonical, table, entry.text, entry.source, entry.key, entry.placeholders)


def _lookups(lang: str) -> Iterator[str]:
    """`lang`, then shorter tags down to the language, stopping at a script subtag."""
    parts = lang.split("-")
    while parts:
        yield "-".join(parts)
        last = parts.pop()
        if parts and len(last) == 4 and last.isalpha():
            return


def placeholders(text: str) -> frozenset[str]:
    """The `{name}` fields of a template; ValueError for malformed braces or for fields
    `str.format` would treat as more than a name (`{}`, `{0}`, `{a.b}`, `{a!r}`, `{a:>9}`)."""
    names: set[str] = set()
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as error:
        raise ValueError(f"malformed braces ({error}); write {{{{ and }}}} for a literal brace") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"'{{{name}}}' is not a placeholder; placeholders are names such as {{entity}}, and a literal brace is written {{{{ or }}}}")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} must be written plain, without a conversion or format spec")
        names.add(name)
    return frozenset(names)


def _check(task: Task, text: str, where: str) -> frozenset[str]:
    try:
        names = placeholders(text)
    except ValueError as error:
        raise PromptError(f"{where}: {error}") from None
    extra = names - ALLOWED[task]
    if extra:
        raise PromptError(f"{where}: placeholder {_fields(extra)} is not allowed in a {task} template (allowed: {_fields(ALLOWED[task])})")
    missing = REQUIRED[task] - names
    if missing:
        raise PromptError(f"{where}: missing the required placeholder {_fields(missing)}")
    return names


def _table_name(name: str, path: str) -> str:
    if name == DEFAULT:
        return DEFAULT
    try:
        return normalise_lang(name)
    except ValueError as error:
        raise PromptError(f"{path}: key '{name}': {error}") from None


def _entries(data: Mapping[str, object], path: str) -> dict[str, dict[Task, _Entry]]:
    """Every template of one file, checked and keyed by canonical language code."""
    tables: dict[str, dict[Task, _Entry]] = {}
    spelled: dict[str, str] = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise PromptError(f"{path}: key '{name}': expected a table of templates per language ([{DEFAULT}], [de], ...), not {_toml_type(table)}")
        lang = _table_name(name, path)
        if lang in spelled:
            raise PromptError(f"{path}: key '{name}': the same language as [{spelled[lang]}]")
        spelled[lang] = name
        entries = tables.setdefault(lang, {})
        for key, text in table.items():
            where = f"{path}: key '{name}.{key}'"
            if key not in _TASKS:
                raise PromptError(f"{where}: unknown task; expected one of {', '.join(Task)}")
            if not isinstance(text, str):
                raise PromptError(f"{where}: expected a string, not {_toml_type(text)}")
            entries[Task(key)] = _Entry(text, path, f"{name}.{key}", _check(Task(key), text, where))
    return tables


def _toml_type(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}.get(type(value), f"a {type(value).__name__}")


def _digest(tables: Mapping[str, Mapping[Task, _Entry]]) -> str:
    texts = {lang: {str(task): entry.text for task, entry in entries.items()} for lang, entries in tables.items()}
    return hashlib.sha256(json.dumps(texts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def load_templates(path: Path | None = None) -> Templates:
    """The shipped templates, with the user's file (if given) merged over them per language
    and key.  Both files are checked alike; every problem is a `PromptError`."""
    shipped = resources.files("audit").joinpath(SHIPPED)
    shipped_name = str(shipped)
    tables = _entries(tomllib.loads(shipped.read_text(encoding="utf-8")), shipped_name)
    missing = [task for task in Task if task not in tables.get(DEFAULT, {})]
    if missing:
        raise PromptError(f"{shipped_name}: key '{DEFAULT}.{missing[0]}': missing")
    sources = [shipped_name]
    if path is not None:
        try:
            data = read_toml_file(Path(path), "prompt file")
        except UnreadableFile as error:
            raise PromptError(str(error)) from None
        for lang, entries in _entries(data, str(path)).items():
            tables.setdefault(lang, {}).update(entries)
        sources.append(str(path))
    frozen = MappingProxyType({lang: MappingProxyType(dict(entries)) for lang, entries in tables.items()})
    return Templates(frozen, tuple(sources), _digest(frozen))
