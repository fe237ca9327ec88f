"""mLAMA (Kassner et al. 2021, github norakassner/mlama): LAMA's T-REx and Google-RE facts in 53
languages, read from the published `mlama1.1/` directory:

- `{lang}/templates.jsonl`: one cloze template per relation, `{"relation": "P19", "template":
  "[X] was born in [Y] ."}`;
- `{lang}/{relation}.jsonl`: the facts, `{"uuid", "lineid", "sub_uri", "sub_label", "obj_uri",
  "obj_label"}`, labels in that language, Wikidata ids for both entities.

One item per fact, joined across languages by relation and the two Wikidata ids (the labels
differ by language); a cloze with the mask `[Y]`, the template with the subject's label for
`[X]`; English is the source (LAMA's facts are English).  mLAMA has no template for some
relations in some languages: such a facts file is a bad row naming it (upstream's reader prints
the same and skips it); read with skip_bad_rows to leave those out, listed.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from audit.items import Item, ItemKind, Variant
from audit.readers.common import BenchmarkError, Piece, ReadOptions, Record, Sink, extras, finish_items, json_rows, language_code, required, text_field, with_kind
from audit.readers.folders import check_all_read
from audit.readers.grouping import Grouping

MLAMA_MASK = "[Y]"
MLAMA_SOURCE_LANG = "en"
TEMPLATES = "templates.jsonl"
_FACT_KEYS = ("sub_uri", "sub_label", "obj_uri", "obj_label")


def is_mlama(folder: Path) -> bool:
    return folder.is_dir() and any((sub / TEMPLATES).is_file() for sub in folder.iterdir() if sub.is_dir())


def read_mlama(source: Path, options: ReadOptions, sink: Sink) -> Iterable[Item]:
    folders = sorted(sub for sub in source.iterdir() if sub.is_dir() and not sub.name.startswith("."))
    if not any((folder / TEMPLATES).is_file() for folder in folders):
        raise BenchmarkError(source, message="no {lang}/templates.jsonl: an mLAMA directory holds one folder per language")
    source_lang = options.source_lang or MLAMA_SOURCE_LANG
    grouping = Grouping(str(source), sink, "lang", "lang", duplicate=_second_fact)
    read: list[Path] = []
    for folder in folders:
        lang = language_code(str(folder), None, None, folder.name)
        templates = _templates(folder / TEMPLATES, sink)
        read.append(folder / TEMPLATES)
        for facts in sorted(p for p in folder.glob("*.jsonl") if p.name != TEMPLATES):
            read.append(facts)
            relation = facts.name.removesuffix(".jsonl")
            if relation not in templates:
                sink.reject(BenchmarkError(facts, None, "relation", f"no template for {relation} in {folder / TEMPLATES}"))
                continue
            for line, record in json_rows(facts, sink):
                try:
                    item_id, variant = _fact(facts, line, record, relation, templates[relation])
                except BenchmarkError as error:
                    sink.reject(error)
                    continue
                grouping.add(Piece(line, item_id, source_lang, lang, variant, {"relation": relation}, str(facts)))
    check_all_read(source, read, "mLAMA ({lang}/templates.jsonl and {lang}/{relation}.jsonl)")
    return finish_items(map(with_kind(ItemKind.CLOZE, MLAMA_MASK), grouping.drafts()), None, sink)


def _second_fact(piece: Piece, first: Piece) -> BenchmarkError:
    return BenchmarkError(piece.file, piece.line, "sub_uri", f"a second {piece.lang} fact {piece.item_id} in this file")


def _templates(path: Path, sink: Sink) -> dict[str, str]:
    if not path.is_file():
        raise BenchmarkError(path, message="missing: every mLAMA language folder has its templates.jsonl")
    templates: dict[str, str] = {}
    for line, record in json_rows(path, sink):
        relation = text_field(str(path), line, "relation", required(str(path), line, record, "relation"))
        template = text_field(str(path), line, "template", required(str(path), line, record, "template")) or ""
        if "[X]" not in template or MLAMA_MASK not in template:
            sink.reject(BenchmarkError(path, line, "template", f"{template!r} lacks [X] or [Y]"))
            continue
        templates[relation or ""] = template
    return templates


def _fact(path: Path, line: int, record: Record, relation: str, template: str) -> tuple[str, Variant]:
    where = str(path)
    sub_uri, sub_label, obj_uri, obj_label = (text_field(where, line, key, required(where, line, record, key)) for key in _FACT_KEYS)
    prompt = template.replace("[X]", sub_label or "")
    meta: Record = extras(record, _FACT_KEYS)
    meta["template"] = template
    return f"{relation}-{sub_uri}-{obj_uri}", Variant(question=prompt, answer=obj_label, subject=sub_label, meta=meta)
