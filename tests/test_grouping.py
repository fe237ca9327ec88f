"""Rows of row-per-language formats joined into items through a temporary file
(`audit.readers.grouping`): the same items, the same rejected rows in the same order and the
same first error as joining them in memory, while no more than a few rows are held at once."""
from __future__ import annotations

import copy
import json
import os
import random
import tracemalloc
from collections.abc import Iterator

import pytest

from audit.items import Variant
from audit.readers import BenchmarkError, ReadOptions, load_benchmark, parse_mapping
from audit.readers.common import Draft, Piece, Sink
from audit.readers.grouping import group_pieces
from audit.readers.squad import read_squad

LANGS = ("en", "fr", "de", "ja", "sw", "zh")


def _reference(path: str, pieces: list[Piece], sink: Sink, lang_field: str, source_field: str) -> list[Draft]:
    """Every draft held in a dict until the last row: how rows were joined before."""
    drafts: dict[str, Draft] = {}
    lines: dict[tuple[str, str], int] = {}
    for piece in pieces:
        draft = drafts.get(piece.item_id)
        if draft is None:
            draft = drafts[piece.item_id] = Draft(path, piece.item_id, piece.source_lang, [], meta=dict(piece.item_meta))
        if piece.source_lang != draft.source_lang:
            sink.reject(BenchmarkError(path, piece.line, source_field, f"item '{piece.item_id}' has source language '{draft.source_lang}' on line {draft.lines[0]} but '{piece.source_lang}' here"))
            continue
        key = (piece.item_id, piece.lang)
        if key in lines:
            sink.reject(BenchmarkError(path, piece.line, lang_field, f"duplicate language '{piece.lang}' for item '{piece.item_id}' (first on line {lines[key]})"))
            continue
        for name, value in piece.item_meta.items():
            if draft.meta.get(name) != value:
                piece.variant.meta[name] = value
        lines[key] = piece.line
        draft.lines.append(piece.line)
        draft.variants[piece.lang] = piece.variant
        if piece.file is not None:
            draft.rows.append((piece.file, piece.line))
    return list(drafts.values())


def _pieces(rng: random.Random, count: int) -> list[Piece]:
    """Rows of a few items in any order: some items' later rows name another source language,
    give a language twice, or change (or reorder) the item-level fields."""
    sources = {f"i{n}": rng.choice(LANGS) for n in range(count // 4 + 1)}
    pieces = []
    for line in range(1, count + 1):
        item = rng.choice(sorted(sources))
        source = sources[item] if rng.random() > 0.08 else rng.choice(LANGS)
        meta: dict = {"title": f"t-{item}", "topic": "x"}
        if rng.random() < 0.15:
            meta = {"topic": "x", "title": f"t-{item}"} if rng.random() < 0.5 else {"title": f"other-{line}", "extra": line}
        file = None if rng.random() < 0.5 else f"{rng.choice(LANGS)}.csv"
        variant = Variant(question=f"q {item} {line}", answer=str(line), meta={"row": line})
        pieces.append(Piece(line, item, source, rng.choice(LANGS), variant, meta, file))
    return pieces


def _seen(drafts: list[Draft]) -> list[tuple]:
    return [(d.path, d.item_id, d.source_lang, d.lines, d.variants, d.meta, d.rows) for d in drafts]


@pytest.mark.parametrize("seed", range(40))
def test_rows_are_joined_as_in_memory_with_the_same_rows_rejected(seed):
    pieces = _pieces(random.Random(seed), 60 + seed * 7)
    expected_sink, sink = Sink(skip=True), Sink(skip=True)
    expected = _reference("b.csv", copy.deepcopy(pieces), expected_sink, "lang", "source_lang")
    drafts = list(group_pieces("b.csv", copy.deepcopy(pieces), sink, "lang", "source_lang"))
    assert _seen(drafts) == _seen(expected)
    assert sink.skipped == expected_sink.skipped and sink.skipped


@pytest.mark.parametrize("seed", range(15))
def test_the_first_bad_row_is_raised_before_any_item_is_made(seed):
    pieces = _pieces(random.Random(100 + seed), 80)
    with pytest.raises(BenchmarkError) as expected:
        _reference("b.csv", copy.deepcopy(pieces), Sink(skip=False), "lang", "source_lang")
    with pytest.raises(BenchmarkError) as raised:
        group_pieces("b.csv", copy.deepcopy(pieces), Sink(skip=False), "lang", "source_lang")
    assert str(raised.value) == str(expected.value)


def test_an_item_level_field_that_differs_is_kept_in_that_rows_variant():
    first = Piece(1, "a", "en", "en", Variant(question="q"), {"title": "T", "url": "u"})
    reordered = Piece(2, "a", "en", "fr", Variant(question="q"), {"url": "u", "title": "T"})
    changed = Piece(3, "a", "en", "de", Variant(question="q"), {"title": "Other", "url": "u"})
    (draft,) = group_pieces("b.csv", [first, reordered, changed], Sink(skip=False), "lang", "source_lang")
    assert draft.meta == {"title": "T", "url": "u"}
    assert draft.variants["fr"].meta == {} and draft.variants["de"].meta == {"title": "Other"}


def _large_pieces(items: int, langs: int, text: int) -> Iterator[Piece]:
    """Each item's languages a whole pass of items apart, so none is whole before the last pass."""
    for lang in range(langs):
        for item in range(items):
            line = lang * items + item + 1
            yield Piece(line, f"q{item}", "en", LANGS[lang], Variant(question=f"{line} " + "x" * text), {"title": "y" * text})


def test_joining_holds_a_few_rows_not_the_benchmark():
    tracemalloc.start()
    try:
        drafts = group_pieces("b.csv", _large_pieces(200, 5, 20_000), Sink(skip=False), "lang", "source_lang")
        _, joined = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        count = 0
        for draft in drafts:
            count += len(draft.variants)
            assert draft.lines == [draft.lines[0] + 200 * k for k in range(5)]
        _, made = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1_000
    # 1,000 rows of 40 KB (40 MB): an item's five rows are 400 KB.
    assert joined < 4_000_000 and made < 4_000_000, (joined, made)


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open descriptors through /proc")
def test_the_temporary_file_goes_when_the_items_are_made_or_a_row_is_refused():
    before = _open_files()
    drafts = group_pieces("b.csv", _large_pieces(3, 2, 10), Sink(skip=False), "lang", "source_lang")
    assert _open_files() == before + 1
    assert len(list(drafts)) == 3 and _open_files() == before
    twice = [*_large_pieces(3, 2, 10), *_large_pieces(1, 1, 10)]
    with pytest.raises(BenchmarkError, match="duplicate language 'en' for item 'q0' \\(first on line 1\\)"):
        group_pieces("b.csv", twice, Sink(skip=False), "lang", "source_lang")
    assert _open_files() == before


def _xcsr(folder, rows: dict[str, list[str]]) -> None:
    for lang, ids in rows.items():
        (folder / lang).mkdir(parents=True)
        lines = [{"id": item, "lang": lang, "question": {"stem": f"{item} {lang} {n}", "choices": [{"label": "A", "text": "a"}, {"label": "B", "text": "b"}]}, "answerKey": "A"} for n, item in enumerate(ids)]
        (folder / lang / "dev.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_an_items_rows_name_the_rows_kept_not_a_refused_duplicate(tmp_path):
    _xcsr(tmp_path / "X-CSQA", {"en": ["x0", "x1", "x0"], "fr": ["x1", "x0"]})
    report = load_benchmark(tmp_path / "X-CSQA", "xcsr", skip_bad_rows=True)
    assert [s.split(": ", 1)[1] for s in report.skipped] == ["field 'lang': duplicate language 'en' for item 'x0' (first on line 1)"]
    x0 = next(item for item in report.items if item.item_id == "x0")
    assert x0.variants["en"].question == "x0 en 0"
    assert x0.origin.rows == ((str(tmp_path / "X-CSQA" / "en" / "dev.jsonl"), 1), (str(tmp_path / "X-CSQA" / "fr" / "dev.jsonl"), 2))


def test_a_per_language_table_joins_by_id_and_names_the_kept_rows(tmp_path):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "en.jsonl").write_text('{"id": "a", "q": "A en", "ans": "1"}\n{"id": "b", "q": "B en", "ans": "2"}\n', encoding="utf-8")
    (folder / "fr.jsonl").write_text('{"id": "b", "q": "B fr", "ans": "2"}\n{"id": "b", "q": "B fr again", "ans": "2"}\n{"id": "a", "q": "A fr", "ans": "1"}\n', encoding="utf-8")
    report = load_benchmark(folder, "per-language", skip_bad_rows=True, options=ReadOptions(mapping=parse_mapping("id=id,question=q,answer=ans")))
    assert [item.item_id for item in report.items] == ["a", "b"]
    b = report.items[1]
    assert b.source_lang == "en" and b.variants["fr"].question == "B fr"
    assert b.origin.rows == ((str(folder / "en.jsonl"), 2), (str(folder / "fr.jsonl"), 1))
    assert len(report.skipped) == 1 and "duplicate language 'fr' for item 'b' (first on line 1)" in report.skipped[0]


def _tables(folder, english: str, french: str):
    folder.mkdir()
    (folder / "en.jsonl").write_text(english, encoding="utf-8")
    (folder / "fr.jsonl").write_text(french, encoding="utf-8")
    return folder


def test_a_given_source_joins_per_language_tables_in_one_pass_to_the_same_items(tmp_path):
    """With --source-lang the rows are joined as they are read, not first spooled to learn
    the languages: the same items and rows, and the same lines skipped, now in file order; the
    first bad row in file order is the one raised, a duplicate in the first file before a
    broken row in the second (spooled, every row is mapped before any is joined)."""
    mapping = parse_mapping("id=id,question=q,answer=ans")
    folder = _tables(tmp_path / "t", '{"id": "a", "q": "A en", "ans": "1"}\n{"id": "a", "q": "A en again", "ans": "1"}\n{"id": "b", "q": "B en", "ans": "2"}\n', '{"id": "b", "q": "B fr", "ans": "2"}\n{"id": "a", "ans": "1"}\n{"id": "a", "q": "A fr", "ans": "1"}\n')
    spooled = load_benchmark(folder, "per-language", skip_bad_rows=True, options=ReadOptions(mapping=mapping))
    given = load_benchmark(folder, "per-language", skip_bad_rows=True, options=ReadOptions(mapping=mapping, source_lang="en"))
    assert [repr(item) for item in given.items] == [repr(item) for item in spooled.items]
    assert sorted(given.skipped) == sorted(spooled.skipped) and len(given.skipped) == 2
    assert ["duplicate language 'en'" in given.skipped[0], "field 'q'" in given.skipped[1]] == [True, True]
    with pytest.raises(BenchmarkError, match="duplicate language 'en' for item 'a'"):
        list(load_benchmark(folder, "per-language", options=ReadOptions(mapping=mapping, source_lang="en")).items)
    with pytest.raises(BenchmarkError, match=r"fr\.jsonl:2: field 'q'"):
        list(load_benchmark(folder, "per-language", options=ReadOptions(mapping=mapping)).items)


def test_squad_style_files_are_joined_one_file_at_a_time(tmp_path):
    """Ten languages' files of 1 MB of paragraphs each: reading them holds about one file's
    questions, not all ten (before, every file's questions were held until the last was read)."""
    for lang in ("en", "de", "fr", "es", "it", "pt", "ru", "tr", "vi", "zh"):
        paragraphs = [{"context": f"{lang} {p} " + "x" * 10_000, "qas": [{"id": f"q{p}", "question": f"Q{p} {lang}", "answers": [{"text": "x", "answer_start": 0}]}]} for p in range(100)]
        (tmp_path / f"xquad.{lang}.json").write_text(json.dumps({"data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")
    tracemalloc.start()
    try:
        items = [(item.item_id, sorted(item.variants), item.source_lang) for item in read_squad(tmp_path, ReadOptions(), Sink(skip=False))]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert items[0] == ("q0", sorted(["en", "de", "fr", "es", "it", "pt", "ru", "tr", "vi", "zh"]), "en") and len(items) == 100
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB held while reading 10 MB of files"


def _squad(path, ids: list[str]) -> None:
    paragraphs = [{"context": "c", "qas": [{"id": item, "question": f"Q {item}", "answers": [{"text": "a", "answer_start": 0}]}]} for item in ids]
    path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")


def test_squad_style_questions_given_twice_or_without_a_source_are_named(tmp_path):
    """A second question with an id in one language names the file that first gave it; an
    item with no source language (no English, none given) is refused before any item is
    made, naming the question and the languages it has."""
    (tmp_path / "dup").mkdir()
    _squad(tmp_path / "dup" / "q.de.json", ["a", "b"])
    _squad(tmp_path / "dup" / "q.en.json", ["b", "a", "b"])
    report = load_benchmark(tmp_path / "dup", skip_bad_rows=True)
    assert [item.item_id for item in report.items] == ["a", "b"] and report.items[0].source_lang == "en"
    assert report.skipped == [f"{tmp_path / 'dup' / 'q.en.json'}: field 'qas[id=b]': a second 'en' question with this id (first in {tmp_path / 'dup' / 'q.en.json'})"]
    assert report.items[1].origin.rows == ((str(tmp_path / "dup" / "q.de.json"), 2), (str(tmp_path / "dup" / "q.en.json"), 1))
    (tmp_path / "none").mkdir()
    _squad(tmp_path / "none" / "q.de.json", ["a", "b"])
    _squad(tmp_path / "none" / "q.fr.json", ["b"])
    with pytest.raises(BenchmarkError, match=r"question 'a'\)\? the files name de; give --source-lang"):
        load_benchmark(tmp_path / "none")
    assert [item.source_lang for item in load_benchmark(tmp_path / "none", options=ReadOptions(source_lang="de")).items] == ["de", "de"]
