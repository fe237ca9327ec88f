"""Loaders on real benchmark files (the bundled ECLeKTic sample, the committed BMLAMA-17 and
ECLeKTic fixtures), and on small hand-made broken files."""
from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import BMLAMA, ECLEKTIC_CSV, FIXTURES

from audit.items import Origin, PackedItems
from audit.langcodes import normalise_lang
from audit.readers import FORMATS, BenchmarkError, ReadOptions, detect_format, load_benchmark
from audit.readers.common import Sink

ECLEKTIC_EXAMPLE = FIXTURES / "eclektic" / "eclektic_main_qid502_qa_only.json"
ECLEKTIC_LANGS = ["he", "en", "de", "es", "fr", "hi", "id", "it", "ja", "ko", "pt", "zh"]
CSV_HEADER = [
    "original_lang", "original_content", "original_question", "original_answer", "content",
    "question", "answer", "language", "translated", "q_id", "title", "url",
]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    return write_lines(path, [json.dumps(record, ensure_ascii=False) for record in records])


def csv_row(q_id: str, language: str, original_lang: str = "en", **cells: str) -> dict[str, str]:
    row = dict.fromkeys(CSV_HEADER, "")
    row.update(
        original_lang=original_lang, q_id=q_id, language=language, translated="1",
        question=f"question {q_id} in {language}", answer=f"answer {q_id} in {language}",
    )
    row.update(cells)
    return row


def write_csv(path: Path, rows: list[dict[str, str]], header: list[str] = CSV_HEADER) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def example_record() -> dict:
    return json.loads(ECLEKTIC_EXAMPLE.read_text(encoding="utf-8"))


def item(item_id: str, source: str = "en", **variants: dict) -> dict:
    return {"item_id": item_id, "source_lang": source, "variants": variants or {"en": {"question": "Q?"}}}


def raises(call, **kwargs) -> BenchmarkError:
    with pytest.raises(BenchmarkError) as info:
        call(**kwargs)
    return info.value


def assert_error(error: BenchmarkError, path: Path, line: int | None, field: str | None, *words: str) -> None:
    assert (error.path, error.line, error.field) == (str(path), line, field), str(error)
    for word in words:
        assert word in error.message, error.message


# Real files ------------------------------------------------------------------------------


def test_eclektic_csv_real_file_groups_39_questions_in_12_languages():
    report = load_benchmark(ECLEKTIC_CSV)
    assert report.format == "eclektic-csv"
    assert report.skipped == []
    assert len(report.items) == 39
    assert all(sorted(item.variants) == sorted(ECLEKTIC_LANGS) for item in report.items)
    first = report.items[0]
    assert (first.item_id, first.source_lang) == ("33", "en")
    en, fr = first.variants["en"], first.variants["fr"]
    assert (en.question, en.answer) == ("In which country was AFN Bremerhaven located?", "Germany")
    assert (fr.question, fr.answer) == ("Dans quel pays se trouvait l'AFN Bremerhaven ?", "Allemagne")
    assert first.variants["zh"].answer == "德国"
    assert en.context.startswith("AFN Bremerhaven was originally")
    assert (en.title, en.url) == ("AFN Bremerhaven", "https://en.wikipedia.org/wiki/AFN_Bremerhaven")
    assert fr.title is None
    assert first.meta == {"title": "AFN Bremerhaven", "url": "https://en.wikipedia.org/wiki/AFN_Bremerhaven"}
    assert (en.meta, fr.meta) == ({"translated": "0"}, {"translated": "1"})
    # The French passage spans lines 3-9, so the Hebrew record starts on line 10.
    assert first.origin.path == str(ECLEKTIC_CSV)
    assert first.origin.lines[:3] == (2, 3, 10)


def test_eclektic_csv_reads_gzip_identically(tmp_path):
    unpacked = tmp_path / "eclektic.csv"
    unpacked.write_bytes(gzip.decompress(ECLEKTIC_CSV.read_bytes()))
    plain, zipped = load_benchmark(unpacked), load_benchmark(ECLEKTIC_CSV)
    assert zipped.format == "eclektic-csv"
    assert [item.variants for item in zipped.items] == [item.variants for item in plain.items]


def test_eclektic_wide_jsonl_from_the_schema_example(tmp_path):
    record = example_record()
    english = {**record, "q_id": 7, "original_lang": "en", "title": "Tian Fen", "url": "https://en.wikipedia.org/x"}
    path = write_jsonl(tmp_path / "eclektic_main.jsonl", [record, english])
    report = load_benchmark(path)
    assert report.format == "eclektic-jsonl"
    first, second = report.items
    assert (first.item_id, first.source_lang, second.item_id) == ("502", "zh", "7")
    assert first.languages == ECLEKTIC_LANGS
    zh = first.variants["zh"]
    assert (zh.question, zh.answer, zh.context) == ("西汉册封谁为武安侯？", "田蚡", None)
    assert (zh.title, zh.url) == ("武安侯", "https://zh.wikipedia.org/wiki/武安侯")
    assert first.variants["en"].answer == "Tian Fen" and first.variants["en"].title is None
    assert first.meta["title"] == "武安侯" and "_provenance" in first.meta
    assert "question" not in first.meta  # equal to zh_q, so nothing to keep
    assert first.origin == Origin(str(path), (1,))
    assert second.variants["en"].title == "Tian Fen"


def test_eclektic_wide_jsonl_source_text_falls_back_and_keeps_disagreement(tmp_path):
    missing = {key: value for key, value in example_record().items() if key not in ("zh_q", "zh_a")}
    differing = {**example_record(), "q_id": 503, "answer": "Tian Fen (田蚡)"}
    report = load_benchmark(write_jsonl(tmp_path / "main.jsonl", [missing, differing]), "eclektic-jsonl")
    filled, kept = report.items
    assert (filled.variants["zh"].question, filled.variants["zh"].answer) == ("西汉册封谁为武安侯？", "田蚡")
    assert kept.variants["zh"].answer == "田蚡"
    assert kept.meta["answer"] == "Tian Fen (田蚡)"


@pytest.fixture(scope="module")
def bmlama17():
    return load_benchmark(BMLAMA)


def test_bmlama17_loads_every_fact_in_17_languages(bmlama17):
    assert bmlama17.format == "bmlama"
    assert bmlama17.skipped == []
    assert len(bmlama17.items) == 125
    assert len(bmlama17.languages) == 17
    assert all(len(item.variants) == 17 and item.source_lang == "en" for item in bmlama17.items)
    first = bmlama17.items[0]
    assert first.item_id == "bmlama-00001"
    assert first.origin.path == str(BMLAMA) and first.origin.lines == (2,)
    assert first.origin.rows[0] == (str(BMLAMA / "en.tsv"), 2) and len(first.origin.rows) == 17
    assert (first.kind, first.mask) == ("cloze", "<mask>")
    en = first.variants["en"]
    assert (en.question, en.answer) == ("Charles II of Spain was born in <mask>.", "Madrid")
    assert en.subject == "Charles II of Spain"
    assert en.meta["candidates"][0] == "Toronto" and len(en.meta["candidates"]) == 10
    assert bmlama17.items[-1].item_id == "bmlama-00125"


def test_bmlama17_zh_split_header_and_quoted_hebrew(bmlama17):
    zh = bmlama17.items[0].variants["zh"]
    assert (zh.question, zh.answer, zh.subject) == ("卡洛斯二世出生于<mask>。", "马德里", "卡洛斯二世")
    # he.tsv quotes cells holding `"` (CSV style): line 122 has the Hebrew abbreviation for LGBT.
    he = bmlama17.items[120].variants["he"]
    assert 'להט"ב' in he.meta["candidates"]
    assert he.answer in he.meta["candidates"]


# Small BMLAMA copies ---------------------------------------------------------------------


def bmlama_copy(tmp_path: Path, langs=("en", "fr", "zh"), rows: int = 4) -> Path:
    folder = tmp_path / "bmlama"
    folder.mkdir()
    for lang in langs:
        lines = (BMLAMA / f"{lang}.tsv").read_bytes().split(b"\r\n")[: rows + 1]
        (folder / f"{lang}.tsv").write_bytes(b"\r\n".join(lines) + b"\r\n")
    return folder


def test_bmlama_copy_with_zh_header_quirk(tmp_path):
    report = load_benchmark(bmlama_copy(tmp_path), langs=["zh", "en"])
    assert [item.item_id for item in report.items] == ["bmlama-00001", "bmlama-00002", "bmlama-00003", "bmlama-00004"]
    assert report.languages == ["en", "zh"]
    assert report.items[1].variants["zh"].question.endswith("<mask>。")


def test_bmlama_misaligned_files_name_both(tmp_path):
    folder = bmlama_copy(tmp_path)
    shutil.copy(BMLAMA / "fr.tsv", folder / "fr.tsv")
    error = raises(load_benchmark, path=folder, skip_bad_rows=True)
    assert_error(error, folder / "fr.tsv", None, None, "fr.tsv has 125", "en.tsv has 4")


def test_bmlama_language_in_two_files_names_both(tmp_path):
    """`en.tsv` beside `en.tsv.gz`: refused before any table is read, naming the second file
    and the first."""
    folder = bmlama_copy(tmp_path)
    with gzip.open(folder / "en.tsv.gz", "wb") as packed:
        packed.write((folder / "en.tsv").read_bytes())
    error = raises(load_benchmark, path=folder)
    assert_error(error, folder / "en.tsv.gz", None, None, "language 'en' is also in en.tsv")


def test_bmlama_directory_without_tsv(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    assert_error(raises(load_benchmark, path=tmp_path), tmp_path, None, None, "no benchmark files")


def test_bmlama_wrong_header(tmp_path):
    folder = bmlama_copy(tmp_path)
    (folder / "fr.tsv").write_text("Question\tAnswer\tCandidates\tSubject\r\n", encoding="utf-8")
    assert_error(raises(load_benchmark, path=folder, skip_bad_rows=True), folder / "fr.tsv", 1, None, "header")


def test_bmlama_unknown_language_file(tmp_path):
    folder = bmlama_copy(tmp_path)
    shutil.copy(folder / "fr.tsv", folder / "xx.tsv")
    assert_error(raises(load_benchmark, path=folder), folder / "xx.tsv", None, None, "'xx'")


def test_bmlama_bad_row_raises_or_is_skipped(tmp_path):
    folder = bmlama_copy(tmp_path)
    lines = (folder / "fr.tsv").read_text(encoding="utf-8").split("\n")
    lines[2] = "a row\twith three\tcells\r"
    (folder / "fr.tsv").write_text("\n".join(lines), encoding="utf-8")
    assert_error(raises(load_benchmark, path=folder), folder / "fr.tsv", 3, None, "expected 4", "found 3")
    report = load_benchmark(folder, skip_bad_rows=True)
    assert report.skipped == [f"{folder / 'fr.tsv'}:3: expected 4 tab-separated cells, found 3"]
    assert len(report.items) == 4
    assert sorted(report.items[1].variants) == ["en", "zh"]


def test_bmlama_bad_source_row_skips_the_item(tmp_path):
    folder = bmlama_copy(tmp_path)
    lines = (folder / "en.tsv").read_text(encoding="utf-8").split("\n")
    lines[1] = "only one cell\r"
    (folder / "en.tsv").write_text("\n".join(lines), encoding="utf-8")
    report = load_benchmark(folder, skip_bad_rows=True)
    assert [item.item_id for item in report.items] == ["bmlama-00002", "bmlama-00003", "bmlama-00004"]
    assert len(report.skipped) == 2
    assert report.skipped[0].startswith(f"{folder / 'en.tsv'}:2: ")
    assert report.skipped[1].startswith(f"{folder}:2: item 'bmlama-00001' has no variant")


def _break_row(path: Path, row: int, text: str = "one cell") -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[row] = text + "\r"
    path.write_text("\n".join(lines), encoding="utf-8")


def test_bmlama_streams_items_before_its_tables_are_read_whole(tmp_path):
    """Row k of every table makes item k, so the first item comes while the rest of every
    table is unread: a bad row near the end is only met after it (and is then raised)."""
    folder = bmlama_copy(tmp_path)
    _break_row(folder / "zh.tsv", 4)
    items = FORMATS["bmlama"].read(folder, ReadOptions(), Sink(skip=False))
    first = next(iter(items))
    assert first.item_id == "bmlama-00001" and sorted(first.variants) == ["en", "fr", "zh"]
    with pytest.raises(BenchmarkError, match="found 1"):
        list(items)


def test_bmlama_skipped_rows_are_listed_table_by_table(tmp_path):
    """Read side by side, the tables' rejected rows are still listed as reading each table
    whole would list them (English first, then the others in file order), items last."""
    folder = bmlama_copy(tmp_path)
    _break_row(folder / "zh.tsv", 1)
    _break_row(folder / "fr.tsv", 3)
    _break_row(folder / "en.tsv", 4)
    report = load_benchmark(folder, skip_bad_rows=True)
    assert [line.split(": ")[0] for line in report.skipped] == [
        f"{folder / 'en.tsv'}:5", f"{folder / 'fr.tsv'}:4", f"{folder / 'zh.tsv'}:2", f"{folder}:5",
    ]
    assert [item.item_id for item in report.items] == ["bmlama-00001", "bmlama-00002", "bmlama-00003"]


@pytest.mark.parametrize(("fr_rows", "zh_rows"), [(5, 4), (4, 3), (3, 5), (6, 2)])
def test_bmlama_misaligned_names_the_first_table_in_file_order(tmp_path, fr_rows, zh_rows):
    """Whichever table runs out first, the error names the first (in file order) whose
    length differs from the English table's, with both lengths."""
    folder = bmlama_copy(tmp_path, rows=4)
    for lang, rows in (("fr", fr_rows), ("zh", zh_rows)):
        lines = (BMLAMA / f"{lang}.tsv").read_bytes().split(b"\r\n")[: rows + 1]
        (folder / f"{lang}.tsv").write_bytes(b"\r\n".join(lines) + b"\r\n")
    wrong, rows = ("fr", fr_rows) if fr_rows != 4 else ("zh", zh_rows)
    error = raises(load_benchmark, path=folder, skip_bad_rows=True)
    assert_error(error, folder / f"{wrong}.tsv", None, None, f"{wrong}.tsv has {rows} data rows but en.tsv has 4")


def test_bmlama_blank_lines_at_the_end_are_not_rows_but_between_rows_are(tmp_path):
    folder = bmlama_copy(tmp_path)
    with (folder / "fr.tsv").open("a", encoding="utf-8") as table:
        table.write("\r\n\r\n")
    assert len(load_benchmark(folder).items) == 4
    lines = (folder / "zh.tsv").read_text(encoding="utf-8").split("\n")
    (folder / "zh.tsv").write_text("\n".join([*lines[:3], "\r", *lines[3:]]), encoding="utf-8")
    error = raises(load_benchmark, path=folder, skip_bad_rows=True)
    assert_error(error, folder / "zh.tsv", None, None, "zh.tsv has 5 data rows but en.tsv has 4")


# Generic JSONL ---------------------------------------------------------------------------


def test_generic_jsonl_item_per_line(tmp_path):
    path = write_jsonl(tmp_path / "bench.jsonl", [
        {
            "item_id": 1, "source_lang": "en", "split": "test", "meta": {"topic": "geo"},
            "variants": {
                "en": {"question": " Capital of France? ", "answer": "Paris", "context": "", "difficulty": 2},
                "pt_br": {"question": "Capital da França?", "answer": "Paris"},
            },
        },
        item("two", fr={"question": "Q ?"}, en={"question": "Q?"}),
    ])
    report = load_benchmark(path)
    assert report.format == "jsonl"
    first, second = report.items
    assert (first.item_id, first.languages) == ("1", ["en", "pt-BR"])
    en = first.variants["en"]
    assert (en.question, en.answer, en.context) == ("Capital of France?", "Paris", None)
    assert en.meta == {"difficulty": 2}
    assert first.meta == {"split": "test", "topic": "geo"}
    assert second.languages == ["fr", "en"]
    assert second.origin == Origin(str(path), (2,))


@pytest.mark.parametrize("fmt", ["jsonl", "eclektic-jsonl"])
def test_item_per_line_formats_stream(tmp_path, fmt):
    """One item per line is read one line at a time: the first item comes before a broken
    last line is met, and `load_benchmark` packs items as they come (no list of them)."""
    rows = [item("one", en={"question": "Q?"}), item("two", en={"question": "R?"})]
    if fmt == "eclektic-jsonl":
        rows = [{"q_id": n, "original_lang": "en", "en_q": "Q?", "en_a": "A"} for n in (1, 2)]
    path = write_jsonl(tmp_path / "bench.jsonl", rows)
    with path.open("a", encoding="utf-8") as file:
        file.write("{not json\n")
    items = iter(FORMATS[fmt].read(path, ReadOptions(), Sink(skip=False)))
    assert next(items).item_id in ("one", "1")
    with pytest.raises(BenchmarkError, match=":3: "):
        list(items)
    packed = load_benchmark(path, fmt, skip_bad_rows=True, packed=True)
    assert isinstance(packed.items, PackedItems) and len(packed.items) == 2 and len(packed.skipped) == 1
    assert list(packed.items) == load_benchmark(path, fmt, skip_bad_rows=True).items


def test_generic_jsonl_language_per_line_gzip(tmp_path):
    rows = [
        {"item_id": "a", "lang": "en", "source_lang": "en", "question": "Q1?", "answer": "A1", "note": "x"},
        {"item_id": "b", "lang": "en", "source_lang": "en", "question": "Q2?"},
        {"item_id": "a", "lang": "de", "source_lang": "en", "question": "F1?", "answer": "A1"},
    ]
    path = tmp_path / "long.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps(row) for row in rows).encode()))
    report = load_benchmark(path)
    assert report.format == "jsonl"
    first, second = report.items
    assert (first.item_id, first.languages, second.item_id) == ("a", ["en", "de"], "b")
    assert first.variants["en"].meta == {"note": "x"}
    assert first.origin.lines == (1, 3)


def test_langs_restricts_variants_and_drops_items_left_empty(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [
        item("1", en={"question": "Q?"}, fr={"question": "Q ?"}, de={"question": "F?"}),
        item("2", en={"question": "Q?"}),
    ])
    report = load_benchmark(path, langs=["FR", "de"])
    assert [(item.item_id, item.languages) for item in report.items] == [("1", ["fr", "de"])]
    assert_error(raises(load_benchmark, path=path, langs=["fr", "ja"]), path, None, "langs", "ja")
    assert_error(raises(load_benchmark, path=path, langs=["jp"]), path, None, "langs", "'ja'")


# Errors ----------------------------------------------------------------------------------


def test_error_text_omits_missing_parts():
    assert str(BenchmarkError("b.jsonl", 3, "lang", "bad")) == "b.jsonl:3: field 'lang': bad"
    assert str(BenchmarkError("b.jsonl", 3, None, "bad")) == "b.jsonl:3: bad"
    assert str(BenchmarkError("b.jsonl", None, "langs", "bad")) == "b.jsonl: field 'langs': bad"
    assert str(BenchmarkError("b.jsonl", message="bad")) == "b.jsonl: bad"


def test_missing_file(tmp_path):
    path = tmp_path / "nope.jsonl"
    assert_error(raises(load_benchmark, path=path, skip_bad_rows=True), path, None, None, "no such file")


def test_bad_json_line(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", [json.dumps(item("1")), '{"item_id": 2,', json.dumps(item("3"))])
    assert_error(raises(load_benchmark, path=path), path, 2, None, "invalid JSON")


def test_missing_required_key(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [item("1"), {"source_lang": "en", "variants": {}}])
    assert_error(raises(load_benchmark, path=path), path, 2, "item_id", "missing")
    wide = write_jsonl(tmp_path / "w.jsonl", [{"q_id": 1, "en_q": "Q?"}])
    assert_error(raises(load_benchmark, path=wide), wide, 1, "original_lang", "missing")


def test_missing_csv_column(tmp_path):
    path = write_csv(tmp_path / "e.csv", [csv_row("1", "en")], header=[c for c in CSV_HEADER if c != "language"])
    assert_error(raises(load_benchmark, path=path, fmt="eclektic-csv", skip_bad_rows=True), path, 1, "language")


def test_wrong_types(tmp_path):
    nested = write_jsonl(tmp_path / "n.jsonl", [item("1", en={"question": 42})])
    assert_error(raises(load_benchmark, path=nested), nested, 1, "variants.en.question", "string", "number")
    long = write_jsonl(tmp_path / "l.jsonl", [{"item_id": "1", "lang": "en", "source_lang": "en", "answer": ["A"]}])
    assert_error(raises(load_benchmark, path=long), long, 1, "answer", "array")
    ids = write_jsonl(tmp_path / "i.jsonl", [item("1"), {**item("x"), "item_id": 1.5}])
    assert_error(raises(load_benchmark, path=ids), ids, 2, "item_id", "string or integer")
    wide = write_jsonl(tmp_path / "w.jsonl", [{**example_record(), "en_a": {"text": "Tian Fen"}}])
    assert_error(raises(load_benchmark, path=wide), wide, 1, "en_a", "object")


def test_unknown_language_codes(tmp_path):
    nested = write_jsonl(tmp_path / "n.jsonl", [item("1", en={"question": "Q?"}, xx={"question": "Q?"})])
    assert_error(raises(load_benchmark, path=nested), nested, 1, "variants.xx", "'xx'")
    source = write_jsonl(tmp_path / "s.jsonl", [item("1", source="english")])
    assert_error(raises(load_benchmark, path=source), source, 1, "source_lang", "did you mean 'en'")
    wide = write_jsonl(tmp_path / "w.jsonl", [{**example_record(), "usa_q": "Q?"}])
    assert_error(raises(load_benchmark, path=wide), wide, 1, "usa_q", "did you mean 'en'")
    table = write_csv(tmp_path / "e.csv", [csv_row("1", "en"), csv_row("1", "jp")])
    assert_error(raises(load_benchmark, path=table), table, 3, "language", "did you mean 'ja'")


def test_duplicate_item_id_names_both_lines(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [item("1"), item("2"), item("1")])
    assert_error(raises(load_benchmark, path=path), path, 3, "item_id", "'1'", "line 1")
    wide = write_jsonl(tmp_path / "w.jsonl", [example_record(), example_record()])
    assert_error(raises(load_benchmark, path=wide), wide, 2, "q_id", "'502'", "line 1")


def test_duplicate_language_in_long_formats(tmp_path):
    table = write_csv(tmp_path / "e.csv", [csv_row("1", "en"), csv_row("1", "fr"), csv_row("1", "fr")])
    assert_error(raises(load_benchmark, path=table), table, 4, "language", "'fr'", "line 3")
    rows = [{"item_id": "1", "lang": lang, "source_lang": "en", "question": "Q?"} for lang in ("en", "de", "en")]
    long = write_jsonl(tmp_path / "l.jsonl", rows)
    assert_error(raises(load_benchmark, path=long), long, 3, "lang", "'en'", "line 1")


def test_item_rows_disagreeing_on_source_language(tmp_path):
    table = write_csv(tmp_path / "e.csv", [csv_row("1", "en"), csv_row("1", "fr", original_lang="fr")])
    assert_error(raises(load_benchmark, path=table), table, 3, "original_lang", "'en' on line 2", "'fr'")
    rows = [{"item_id": "1", "lang": "en", "source_lang": s, "question": "Q?"} for s in ("en", "de")]
    long = write_jsonl(tmp_path / "l.jsonl", rows)
    assert_error(raises(load_benchmark, path=long), long, 2, "source_lang", "'en' on line 1")


def test_source_language_without_variant(tmp_path):
    nested = write_jsonl(tmp_path / "n.jsonl", [item("1"), item("2", source="de", en={"question": "Q?"})])
    assert_error(raises(load_benchmark, path=nested), nested, 2, "source_lang", "'de'")
    table = write_csv(tmp_path / "e.csv", [csv_row("1", "en"), csv_row("2", "fr"), csv_row("2", "de")])
    assert_error(raises(load_benchmark, path=table), table, 3, "original_lang", "item '2'", "'en'")


def test_csv_row_with_wrong_number_of_columns(tmp_path):
    path = write_csv(tmp_path / "e.csv", [csv_row("1", "en")])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("en,too,few,columns\n")
    assert_error(raises(load_benchmark, path=path), path, 3, None, "expected 12 columns, found 4")


def test_empty_inputs(tmp_path):
    empty = write_lines(tmp_path / "empty.jsonl", [])
    assert_error(raises(load_benchmark, path=empty), empty, None, None, "empty")
    assert_error(raises(load_benchmark, path=empty, fmt="jsonl"), empty, None, None, "no items")
    header_only = write_csv(tmp_path / "e.csv", [])
    assert_error(raises(load_benchmark, path=header_only), header_only, None, None, "no items")


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_bytes(json.dumps(item("1")).encode() + b'\n{"item_id": "\xff"}\n')
    assert_error(raises(load_benchmark, path=path, skip_bad_rows=True), path, 2, None, "UTF-8")


def test_skip_bad_rows_records_each_skipped_row(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", [
        json.dumps(item("1")),
        "not json",
        json.dumps(item("2", en={"question": 3})),
        json.dumps(item("3")),
        json.dumps(item("1")),
    ])
    report = load_benchmark(path, skip_bad_rows=True)
    assert [item.item_id for item in report.items] == ["1", "3"]
    assert len(report.skipped) == 3
    assert [entry.split(": ")[0] for entry in report.skipped] == [f"{path}:2", f"{path}:3", f"{path}:5"]
    assert report.skipped[1] == f"{path}:3: field 'variants.en.question': expected a string or null, got number"


def test_skip_bad_rows_still_raises_when_nothing_is_left(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", [json.dumps(item("1", source="xx")), "[1, 2]"])
    error = raises(load_benchmark, path=path, fmt="jsonl", skip_bad_rows=True)
    assert_error(error, path, None, None, "no items", "2 bad rows skipped")


def test_csv_skip_bad_rows_keeps_the_rest_of_the_item(tmp_path):
    table = write_csv(tmp_path / "e.csv", [csv_row("1", "en"), csv_row("1", "zz"), csv_row("1", "fr")])
    report = load_benchmark(table, skip_bad_rows=True)
    assert report.items[0].languages == ["en", "fr"]
    assert report.items[0].origin.lines == (2, 4)
    assert report.skipped == [f"{table}:3: field 'language': unknown language code 'zz': 'zz' is not an ISO 639-1 code"]


def test_detection_errors(tmp_path):
    assert_error(raises(detect_format, path=ECLEKTIC_EXAMPLE), ECLEKTIC_EXAMPLE, 1, None, "pretty-printed")
    other = write_lines(tmp_path / "other.csv", ["id,text", "1,hello"])
    assert_error(raises(load_benchmark, path=other), other, 1, None, "cannot detect")
    single = tmp_path / "en.tsv"
    shutil.copy(BMLAMA / "en.tsv", single)
    assert_error(raises(load_benchmark, path=single), single, None, None, "directory")
    assert detect_format(BMLAMA) == "bmlama"
    assert_error(raises(load_benchmark, path=BMLAMA, fmt="jsonl"), BMLAMA, None, None, "a file")


def test_normalise_lang():
    assert [normalise_lang(code) for code in ("EN", "zh_TW", "zh-hans", "pt-br", "iw", "es-419")] == [
        "en", "zh-TW", "zh-Hans", "pt-BR", "he", "es-419",
    ]
    assert normalise_lang("fra") == "fr"
    with pytest.raises(ValueError, match="did you mean 'fr'"):
        normalise_lang("frn")
    with pytest.raises(ValueError, match=r"not an ISO 639-1 code$"):
        normalise_lang("qq")
