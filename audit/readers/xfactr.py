"""X-FACTR (Jiang et al. 2020, github jzbjyb/X-FACTR): cloze prompts for T-REx facts in 23
languages, read from the repository's `data` directory:

- `TREx_prompts.csv`: one row per relation, `pid,relation,en,zh,fr,...`, a cloze template per
  language with `[X]` for the subject and `[Y]` for the object, plus inflection markup;
- `mTRExf/sub/P*.jsonl`: the facts, one JSON object per line (`uuid`, `predicate_id`,
  `sub_uri`, `sub_label`, `obj_uri`, `obj_label`; English labels, Wikidata ids);
- `alias/mTRExf/{lang}.txt`: `QID<TAB>name<TAB>name...`, every name of an entity in a language.

One item per fact (`item_id` = its `uuid`), a cloze with the mask `[Y]`, English its source
(`options.source_lang` overrides; an item without a variant in its source language is a bad row).

**Facts.** `mTRExf/` is read when present, else `mTREx/` (with `alias/mTREx/`); item meta
`facts` says which.  mTRExf is the published benchmark: the README's dataset section (commit
c8d2d2c) lists `data/mTRExf/sub` as "the facts of 46 relations" and `scripts/probe.py` probes
`--probe mlamaf` (mTRExf) by default; mTREx is another, earlier sample of the same relations.
A facts file whose relation has no row in the CSV, or a fact whose `predicate_id` is not its
file's, is a bad row.

**Names.** X-FACTR takes an entity's name in a language from `mTRExf_unicode_escape.txt` (the
Wikidata label per language), which this reader does not read; names come from the alias files,
where nothing marks the label: `scripts/entity_lang.py` writes the label and the other names as
one set, sorted (every list is in code-point order, so `Blue Marble` comes before `Earth`).  So:

- in English, the name is the fact's own `sub_label` / `obj_label` (T-REx's label) and the
  aliases are the other names in `en.txt`.  It is not always among them: T-REx labels are
  sometimes surface forms (`Shakespearean` for Q692, `Soviet` for Q15180); about a fifth of the
  labels in mTRExf are not in `en.txt`.  X-FACTR itself prompts with the Wikidata label.
- in other languages, the name is the first listed name that is written in the language's own
  script (for languages with a non-Latin script: `Франция`, not `France`, in Russian) and does
  not look like a code (no digit; not all capitals; more than two letters: `Canada`, not `CA`;
  `iranien`, not `fa`, for Persian), else the first listed name.  This is a guess at the label
  (`Lutèce` for Paris in French); the aliases are all the other names, so answer matching sees
  every name.

**Prompts.** In each language whose template for the relation is non-empty and where both the
subject and the object have a name, the variant's `question` is the template with the subject's
name for `[X]` (and `[X.Case]`), `[Y]` (and `[Y.Case]`, `[Y;be]`) left as the mask `[Y]`, the
first form of an inflection choice (`[né;X-Gender=MASC|née;X-Gender=FEM]` gives `né`), every
other bracket (the article and preposition placeholders `[DEF;X]`, `[PREPLOC;Y]`, `[ARTDEF;Y]`,
...) dropped, and whitespace collapsed.  That approximates the published prompts: X-FACTR's code
inflects the names by case, picks the gendered form and the article from the entity, and adds
suffixes such as Turkish `[Y;be]`'s copula.  `Variant.meta["template"]` keeps the raw template.
`answer` is the object's name and `aliases` its other names; `subject` and `subject_aliases`
the same for the subject.

**Languages left out.** A language whose alias file lists no name for the subject or the object
is left out of that item and listed in the item's meta `unnamed_langs`.  A language without a
template for the relation is left out of all the relation's facts, and one without an alias file
(the published repository has none for `bn`) out of every item but English; neither is listed.
A non-empty template without `[X]` or `[Y]` is a bad row located at its CSV line and language
column (the published CSV has three: P31 `mg`, P47 `he` with a Cyrillic `Х`, P449 `war` with
`[X bad]`; read it with skip_bad_rows to leave them out).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from audit.items import Item, ItemKind, Variant
from audit.readers.common import (
    BenchmarkError,
    Draft,
    ReadOptions,
    Record,
    Sink,
    csv_rows,
    extras,
    finish_items,
    item_id_at,
    json_rows,
    language_code,
    read_lines,
    required,
    text_field,
)

XFACTR_SOURCE_LANG = "en"
XFACTR_MASK = "[Y]"
PROMPTS_FILE = "TREx_prompts.csv"
# The published facts first (see the module docstring), then the earlier sample.
FACT_SETS = ("mTRExf", "mTREx")
FACT_KEYS = ("uuid", "predicate_id", "sub_uri", "sub_label", "obj_uri", "obj_label")
# The language of the facts' own `sub_label` / `obj_label`.
LABEL_LANG = "en"

# Unicode character-name prefixes of the languages X-FACTR writes in a non-Latin script.
_SCRIPTS = {
    "bn": ("BENGALI",), "el": ("GREEK",), "he": ("HEBREW",), "ja": ("CJK", "HIRAGANA", "KATAKANA"),
    "ko": ("HANGUL",), "mr": ("DEVANAGARI",), "pa": ("GURMUKHI",), "ru": ("CYRILLIC",), "zh": ("CJK",),
}
_BRACKET = re.compile(r"\[([^\[\]]*)\]")
# `X`, `X.Nom`, `Y.IN+ESS`, `Y;be`: a slot, possibly with a case or a suffix for X-FACTR to inflect.
_SLOT = re.compile(r"([XY])(?:[.;][^\s|]*)?")
_QID = re.compile(r"Q[0-9]+")


@dataclass
class _Relation:
    """One row of TREx_prompts.csv: the relation's name and its template per language."""

    pid: str
    name: str | None
    line: int
    templates: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fact:
    file: Path
    line: int
    uuid: str
    pid: str
    sub_uri: str
    sub_label: str
    obj_uri: str
    obj_label: str
    extras: Record


def read_xfactr(path: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    prompts = path / PROMPTS_FILE
    if not prompts.is_file():
        raise BenchmarkError(path, message=f"no {PROMPTS_FILE}: pass X-FACTR's data directory (with {PROMPTS_FILE}, mTRExf/sub/ and alias/mTRExf/)")
    fact_set = next((name for name in FACT_SETS if (path / name / "sub").is_dir()), None)
    if fact_set is None:
        raise BenchmarkError(path, message="no mTRExf/sub/ (or mTREx/sub/) directory of facts")
    facts_dir = path / fact_set / "sub"
    files = sorted(facts_dir.glob("P*.jsonl"), key=lambda file: (len(file.stem), file.stem))
    if not files:
        raise BenchmarkError(facts_dir, message="no P*.jsonl facts files")
    alias_dir = path / "alias" / fact_set
    if not alias_dir.is_dir():
        raise BenchmarkError(path, message=f"no alias/{fact_set}/ directory: the names of the entities per language come from it")
    languages, relations = _read_prompts(prompts, sink)
    facts = list(_read_facts(files, relations, sink))
    qids = {uri for fact in facts for uri in (fact.sub_uri, fact.obj_uri)}
    names = {
        lang: _labelled(_read_names(alias_dir / f"{column}.txt", qids, sink), lang)
        for column, lang in languages.items()
        if (alias_dir / f"{column}.txt").is_file()
    }
    source_lang = options.source_lang or XFACTR_SOURCE_LANG
    # Each fact's item made as it is asked for: the facts and names are held, not every variant.
    drafts = (_draft(str(path), fact_set, source_lang, fact, relations[fact.pid], names) for fact in facts)
    return finish_items(drafts, None, sink)


# Templates ----------------------------------------------------------------------------------


def _read_prompts(path: Path, sink: Sink) -> tuple[dict[str, str], dict[str, _Relation]]:
    """The language columns (as spelled, to their codes) and the relations by pid."""
    rows = csv_rows(path, ",")
    header_line, header = next(rows, (1, []))
    header = [cell.strip() for cell in header]
    if "pid" not in header:
        raise BenchmarkError(path, header_line, None, f"expected a 'pid' column, then one template column per language; the header is {', '.join(header)}")
    twice = next((name for name in header if header.count(name) > 1), None)
    if twice is not None:
        raise BenchmarkError(path, header_line, twice, "appears twice in the header")
    languages = {column: language_code(path, header_line, column, column) for column in header if column not in ("pid", "relation")}
    relations: dict[str, _Relation] = {}
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            sink.reject(BenchmarkError(path, line, None, f"expected {len(header)} columns, found {len(row)}"))
            continue
        record = dict(zip(header, row, strict=True))
        pid = record["pid"].strip()
        if not pid:
            sink.reject(BenchmarkError(path, line, "pid", "required but empty"))
            continue
        if pid in relations:
            sink.reject(BenchmarkError(path, line, "pid", f"relation '{pid}' is also on line {relations[pid].line}"))
            continue
        relation = relations[pid] = _Relation(pid, (record.get("relation") or "").strip() or None, line)
        for column, lang in languages.items():
            template = record[column].strip()
            if not template:
                continue
            slots = _slots(template)
            missing = [f"[{slot}]" for slot in "XY" if slot not in slots]
            if missing:
                what = " or ".join(missing)
                sink.reject(BenchmarkError(path, line, column, f"template for {pid} has no {what}: {template!r}"))
                continue
            relation.templates[lang] = template
    return languages, relations


def _slot(inner: str) -> str | None:
    match = _SLOT.fullmatch(inner)
    return match.group(1) if match else None


def _slots(template: str) -> set[str]:
    return {slot for inner in _BRACKET.findall(template) if (slot := _slot(inner))}


def fill_template(template: str, subject: str) -> str:
    """The template with the subject in `[X]`, the mask in `[Y]`, the first form of each choice,
    other markup dropped and whitespace collapsed (see the module docstring)."""

    def token(match: re.Match[str]) -> str:
        inner = match.group(1)
        slot = _slot(inner)
        if slot == "X":
            return subject
        if slot == "Y":
            return XFACTR_MASK
        if "|" in inner:
            return inner.split("|", 1)[0].split(";", 1)[0].strip()
        return ""

    return " ".join(_BRACKET.sub(token, template).split())


# Facts and names ----------------------------------------------------------------------------


def _read_facts(files: list[Path], relations: dict[str, _Relation], sink: Sink) -> Iterator[_Fact]:
    seen: dict[str, tuple[Path, int]] = {}
    for file in files:
        for line, record in json_rows(file, sink):
            try:
                fact = _fact(file, line, record, relations)
                first = seen.setdefault(fact.uuid, (file, line))
                if first != (file, line):
                    raise BenchmarkError(file, line, "uuid", f"duplicate item id '{fact.uuid}' (first at {first[0]}:{first[1]})")
            except BenchmarkError as error:
                sink.reject(error)
                continue
            yield fact


def _fact(file: Path, line: int, record: Record, relations: dict[str, _Relation]) -> _Fact:
    path = str(file)
    for key in FACT_KEYS:
        required(path, line, record, key)
    texts = {key: text_field(path, line, key, record[key]) or "" for key in FACT_KEYS if key != "uuid"}
    pid = texts["predicate_id"]
    if pid != file.stem:
        raise BenchmarkError(path, line, "predicate_id", f"'{pid}' in the facts file of {file.stem}")
    if pid not in relations:
        raise BenchmarkError(path, line, "predicate_id", f"relation '{pid}' has no row in {PROMPTS_FILE}")
    return _Fact(
        file, line, item_id_at(path, line, record, "uuid"), pid,
        texts["sub_uri"], texts["sub_label"], texts["obj_uri"], texts["obj_label"],
        extras(record, FACT_KEYS),
    )


def _read_names(path: Path, qids: set[str], sink: Sink) -> dict[str, list[str]]:
    """The names of the wanted entities in one alias file, in file order, without repeats."""
    names: dict[str, list[str]] = {}
    for number, text in enumerate(read_lines(path), 1):
        if not text.strip():
            continue
        cells = text.rstrip("\r\n").split("\t")
        qid = cells[0].strip()
        if not _QID.fullmatch(qid):
            sink.reject(BenchmarkError(path, number, None, f"expected a Wikidata id (Q...) then tab-separated names, got {qid[:40]!r}"))
            continue
        if qid not in qids:
            continue
        listed = names.setdefault(qid, [])
        for cell in cells[1:]:
            name = " ".join(cell.split())
            if name and name not in listed:
                listed.append(name)
    return {qid: listed for qid, listed in names.items() if listed}


def _in_script(name: str, lang: str) -> bool:
    prefixes = _SCRIPTS.get(lang.split("-")[0])
    if prefixes is None:
        return True
    return any(char.isalpha() and unicodedata.name(char, "").startswith(prefixes) for char in name)


def _code_like(name: str) -> bool:
    cased = [char for char in name if char.isupper() or char.islower()]
    return any(char.isdigit() for char in name) or (bool(cased) and (all(char.isupper() for char in cased) or len(cased) <= 2))


def pick_name(names: list[str], lang: str) -> str:
    """The name taken as the label in a language other than English (see the module docstring)."""
    ranked = min(enumerate(names), key=lambda pair: (not _in_script(pair[1], lang), _code_like(pair[1]), pair[0]))
    return ranked[1]


# An entity's name in one language and its other names.
Named = tuple[str, list[str]]


def _labelled(names: dict[str, list[str]], lang: str) -> dict[str, Named]:
    """Each entity's label and other names; in English the label is the fact's, so a blank here."""
    if lang == LABEL_LANG:
        return {qid: ("", listed) for qid, listed in names.items()}
    labelled = {}
    for qid, listed in names.items():
        chosen = pick_name(listed, lang)
        labelled[qid] = (chosen, [name for name in listed if name != chosen])
    return labelled


def _named(uri: str, label: str, lang: str, names: dict[str, dict[str, Named]]) -> Named | None:
    found = names.get(lang, {}).get(uri)
    if lang == LABEL_LANG:
        return label, [name for name in (found[1] if found else []) if name != label]
    return found


# Items --------------------------------------------------------------------------------------


def _draft(path: str, fact_set: str, source_lang: str, fact: _Fact, relation: _Relation, names: dict[str, dict[str, Named]]) -> Draft:
    unnamed: list[str] = []
    variants: dict[str, Variant] = {}
    for lang, template in relation.templates.items():
        if lang not in names and lang != LABEL_LANG:
            continue  # no alias file: no names in this language at all
        subject = _named(fact.sub_uri, fact.sub_label, lang, names)
        obj = _named(fact.obj_uri, fact.obj_label, lang, names)
        if subject is None or obj is None:
            unnamed.append(lang)
            continue
        variants[lang] = Variant(
            question=fill_template(template, subject[0]),
            answer=obj[0],
            aliases=tuple(obj[1]),
            subject=subject[0],
            subject_aliases=tuple(subject[1]),
            meta={"template": template},
        )
    meta = {
        "relation": fact.pid,
        "relation_name": relation.name,
        "sub_uri": fact.sub_uri,
        "obj_uri": fact.obj_uri,
        "facts": fact_set,
        "unnamed_langs": unnamed,
        **fact.extras,
    }
    return Draft(
        path, fact.uuid, source_lang, [fact.line], variants, meta,
        kind=ItemKind.CLOZE, mask=XFACTR_MASK, rows=[(str(fact.file), fact.line)],
    )
