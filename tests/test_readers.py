"""Readers of benchmarks in their published formats, on real files committed as fixtures (XQuAD,
MKQA, TyDi QA, XCOPA; see fixtures/SOURCES.md), and the column mapping on tables written here
from those rows.  Expected counts are computed from the fixture files themselves, independently
of the readers."""
from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from audit.cli import main
from audit.items import ItemKind
from audit.readers import BenchmarkError, MappingError, ReadOptions, detect_format, load_benchmark, parse_mapping

XQUAD = FIXTURES / "xquad"
MKQA = FIXTURES / "mkqa" / "test_mkqa.jsonl.gz"
TYDI = FIXTURES / "tydiqa" / "tiny_dev.jsonl.gz"
XCOPA_TEST = FIXTURES / "xcopa" / "data" / "*" / "test.*.jsonl"


def xquad_questions(lang: str) -> dict[str, dict]:
    document = json.loads((XQUAD / f"xquad.{lang}.json").read_text(encoding="utf-8"))
    return {qa["id"]: {**qa, "context": p["context"], "title": a["title"]} for a in document["data"] for p in a["paragraphs"] for qa in p["qas"]}


def jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# SQuAD-style: XQuAD ---------------------------------------------------------------------------


def test_xquad_directory_joins_six_languages_by_question_id():
    langs = sorted(p.name.split(".")[1] for p in XQUAD.glob("xquad.*.json"))
    by_lang = {lang: xquad_questions(lang) for lang in langs}
    report = load_benchmark(XQUAD)
    assert report.format == "squad" == detect_format(XQUAD)
    assert len(report.items) == len(by_lang["en"]) == 35
    assert sorted(report.languages) == langs
    item = next(i for i in report.items if i.item_id == "56beb4343aeaaa14008c925b")
    assert item.source_lang == "en" and item.kind == ItemKind.OPEN
    de = by_lang["de"]["56beb4343aeaaa14008c925b"]
    variant = item.variants["de"]
    assert (variant.question, variant.answer, variant.context) == (de["question"], de["answers"][0]["text"], de["context"])
    assert variant.title == "Super Bowl 50"
    assert len(item.origin.rows) == len(langs)


def test_squad_single_xquad_target_file_is_a_target_of_english():
    one = FIXTURES / "xquad" / "xquad.vi.json"
    report = load_benchmark(one)
    assert report.languages == ["vi"] and len(report.items) == 35
    assert all(item.source_lang == "en" for item in report.items)
    assert len(report.notes) == 1 and report.notes[0].startswith("source language: en")
    said = load_benchmark(one, options=ReadOptions(source_lang="vi"))
    assert said.languages == ["vi"] and all(item.source_lang == "vi" for item in said.items) and not said.notes


def test_squad_glob_of_some_languages(tmp_path):
    report = load_benchmark(str(XQUAD / "xquad.[dr]*.json"), options=ReadOptions(source_lang="de"))
    assert sorted(report.languages) == ["de", "ro"]
    assert all(item.source_lang == "de" for item in report.items)


def test_squad_errors_point_at_the_json_path(tmp_path):
    document = json.loads((XQUAD / "xquad.en.json").read_text(encoding="utf-8"))
    del document["data"][0]["paragraphs"][1]["qas"][2]["id"]
    bad = tmp_path / "xquad.en.json"
    bad.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(bad)
    assert info.value.field == "data[0].paragraphs[1].qas[2].id"
    report = load_benchmark(bad, skip_bad_rows=True)
    assert len(report.items) == 34 and len(report.skipped) == 1
    (tmp_path / "truncated.json").write_text((XQUAD / "xquad.en.json").read_text(encoding="utf-8")[:5000], encoding="utf-8")
    with pytest.raises(BenchmarkError, match="invalid JSON"):
        load_benchmark(tmp_path / "truncated.json", "squad", options=ReadOptions(source_lang="en"))


# MKQA -----------------------------------------------------------------------------------------


def test_mkqa_reads_26_languages_with_answers_and_aliases():
    rows = jsonl(MKQA)
    report = load_benchmark(MKQA)
    assert report.format == "mkqa"
    assert len(report.items) == len(rows) == 6
    assert len(report.languages) == len(rows[0]["queries"]) == 26
    assert report.language_codes == {"zh_hk": "zh-HK", "zh_cn": "zh-CN", "zh_tw": "zh-TW"}
    first, item = rows[0], report.items[0]
    assert item.item_id == str(first["example_id"]) and item.source_lang == "en"
    answers = first["answers"]["ja"]
    expected = list(dict.fromkeys([t for a in answers for t in [a.get("text"), *a.get("aliases", [])] if t]))
    variant = item.variants["ja"]
    assert variant.question == first["queries"]["ja"]
    assert [variant.answer, *variant.aliases] == expected
    assert "answer_types" in report.unused_fields and "aliases" not in report.unused_fields


# TyDi QA primary task -------------------------------------------------------------------------


def test_tydiqa_takes_gold_passage_and_minimal_answer_by_byte_offsets():
    rows = jsonl(TYDI)
    report = load_benchmark(TYDI)
    assert report.format == "tydiqa"
    assert len(report.items) == len(rows) == 11
    assert sorted(report.languages) == ["ar", "bn", "en", "fi", "id", "ja", "ko", "ru", "sw", "te", "th"]
    for row, item in zip(rows, report.items, strict=True):
        assert len(item.variants) == 1 and item.source_lang in item.variants
        variant = item.variants[item.source_lang]
        assert variant.question == row["question_text"].strip()
        annotated = [a for a in row["annotations"] if a["minimal_answer"]["plaintext_start_byte"] >= 0]
        if annotated:
            span = annotated[0]["minimal_answer"]
            raw = row["document_plaintext"].encode("utf-8")[span["plaintext_start_byte"]:span["plaintext_end_byte"]]
            assert variant.answer == raw.decode("utf-8").strip()
            assert variant.answer in variant.context
    indonesian = next(i for i in report.items if i.source_lang == "id").variants["id"]
    assert indonesian.answer and indonesian.context and indonesian.answer in indonesian.context


# Per-language files: XCOPA ---------------------------------------------------------------------


def test_xcopa_glob_is_multiple_choice_joined_by_idx():
    files = sorted(FIXTURES.glob("xcopa/data/*/test.*.jsonl"))
    rows = {path.parent.name: jsonl(path) for path in files}
    report = load_benchmark(str(XCOPA_TEST))
    assert report.format == "per-language"
    assert len(report.items) == len(rows["it"]) == 8
    assert sorted(report.languages) == sorted(rows)
    item = report.items[0]
    assert item.kind == ItemKind.MULTIPLE_CHOICE and item.source_lang == "en" and "en" not in item.variants
    row = rows["it"][0]
    variant = item.variants["it"]
    assert variant.question == row["premise"]
    assert variant.options == (row["choice1"], row["choice2"])
    assert variant.answer == variant.options[row["label"]]
    assert variant.meta["question"] == row["question"]
    assert {"changed", "question"} <= set(report.unused_fields) and "options" not in report.unused_fields


def test_xcopa_directory_with_two_splits_asks_for_one():
    with pytest.raises(BenchmarkError, match="also in") as info:
        load_benchmark(FIXTURES / "xcopa")
    assert "glob" in info.value.message


# Column mapping --------------------------------------------------------------------------------


def _xquad_rows() -> list[dict]:
    """XQuAD's German and Romanian questions as one long table with ECLeKTic-like column names."""
    rows = []
    for lang in ("en", "de", "ro"):
        for qid, qa in xquad_questions(lang).items():
            rows.append({"q_no": qid, "Sprache": lang, "Frage": qa["question"], "Antwort": qa["answers"][0]["text"], "Passage": qa["context"], "drop": "yes" if qid.endswith("5b") else "no"})
    return rows


MAPPING = "id=q_no,lang=Sprache,question=Frage,answer=Antwort,context=Passage,exclude=drop"


def test_mapping_reads_csv_tsv_jsonl_and_parquet_alike(tmp_path):
    rows = _xquad_rows()
    excluded = sum(1 for row in rows if row["drop"] == "yes")
    assert excluded
    paths = []
    for suffix, delimiter in ((".csv", ","), (".tsv", "\t")):
        path = tmp_path / f"bench{suffix}"
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
        paths.append(path)
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    paths.append(tmp_path / "bench.jsonl")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "bench.parquet")
    paths.append(tmp_path / "bench.parquet")
    reports = [load_benchmark(path, options=ReadOptions(parse_mapping(MAPPING))) for path in paths]
    for report in reports:
        assert report.format == "table"
        assert report.excluded == excluded
        assert len(report.items) == 35 - excluded // 3
        assert sorted(report.languages) == ["de", "en", "ro"]
        assert report.mapping["question"] == "Frage"
    assert [i.variants["ro"].question for i in reports[0].items] == [i.variants["ro"].question for i in reports[3].items]


def test_mapping_reads_a_datasets_directory(tmp_path):
    rows = _xquad_rows()
    directory = tmp_path / "xquad_hf"
    directory.mkdir()
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(directory / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (directory / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": "test"}))
    (directory / "dataset_info.json").write_text(json.dumps({"features": {name: {"dtype": "string", "_type": "Value"} for name in rows[0]}}))
    report = load_benchmark(directory, options=ReadOptions(parse_mapping(MAPPING)))
    assert report.format == "table" and len(report.items) == 35 - sum(r["drop"] == "yes" for r in rows) // 3


def test_per_language_files_align_by_row_without_an_id(tmp_path):
    for lang in ("en", "de"):
        questions = list(xquad_questions(lang).values())
        (tmp_path / f"{lang}.csv").write_text("q,a\n" + "".join(f"\"{q['question']}\",\"{q['answers'][0]['text']}\"\n" for q in questions), encoding="utf-8")
    report = load_benchmark(tmp_path, options=ReadOptions(parse_mapping("question=q,answer=a")))
    assert report.format == "per-language" and len(report.items) == 35
    first = report.items[0]
    assert first.variants["de"].question == next(iter(xquad_questions("de").values()))["question"]


def test_mapping_errors_name_the_key_or_the_row(tmp_path):
    with pytest.raises(MappingError, match="unknown key"):
        parse_mapping("questoin=Frage")
    with pytest.raises(MappingError, match="answer_index needs options"):
        parse_mapping("question=q,answer_index=label")
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps({"q": "Wer?", "lang": "xx"}) + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path, options=ReadOptions(parse_mapping("question=q,lang=lang")))
    assert (info.value.line, info.value.field) == (1, "lang") and "unknown language code" in info.value.message
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path, options=ReadOptions(parse_mapping("question=Frage,lang=lang")))
    assert (info.value.line, info.value.field) == (1, "Frage")


def test_multiple_choice_mapping_with_letters(tmp_path):
    path = tmp_path / "mc.jsonl"
    path.write_text(json.dumps({"id": 1, "q": "2+2?", "A": "3", "B": "4", "key": "B"}) + "\n", encoding="utf-8")
    report = load_benchmark(path, options=ReadOptions(parse_mapping("id=id,question=q,options=A|B,answer_index=key,answer_base=letter"), source_lang="en"))
    variant = report.items[0].variants["en"]
    assert (variant.options, variant.answer, report.items[0].kind) == (("3", "4"), "4", ItemKind.MULTIPLE_CHOICE)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "q": "2+2?", "A": "3", "B": "4", "key": "C"}) + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError, match="names none of the 2 options"):
        load_benchmark(bad, options=ReadOptions(parse_mapping("id=id,question=q,options=A|B,answer_index=key,answer_base=letter"), source_lang="en"))


# Through the command line ----------------------------------------------------------------------


def test_check_records_the_mapping_and_filter_and_report_reread_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = _xquad_rows()
    bench = tmp_path / "bench.jsonl"
    bench.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner().invoke(main, ["check", str(bench), "--corpus", "demo", "--map", MAPPING, "--out", "a.jsonl", "--no-report"], env=env)
    assert result.exit_code == 0, result.output
    assert "rows excluded by the benchmark" in result.output
    manifest = json.loads(Path("a.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert manifest["benchmark"]["mapping"]["question"] == "Frage"
    assert manifest["benchmark"]["excluded_rows"] == sum(r["drop"] == "yes" for r in rows)
    assert "drop" not in manifest["benchmark"]["unused_fields"]
    result = CliRunner().invoke(main, ["filter", "a.jsonl", "--out", "clean.jsonl", "--flag"], env=env)
    assert result.exit_code == 0, result.output
    flagged = jsonl(tmp_path / "clean.jsonl")
    assert len(flagged) == len(rows) - sum(r["drop"] == "yes" for r in rows)
    assert all("audit" in row for row in flagged)


def test_check_reads_a_glob_of_per_language_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURES / "xcopa", tmp_path / "xcopa")
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner().invoke(main, ["check", "xcopa/data/*/test.*.jsonl", "--corpus", "demo", "--no-report"], env=env)
    assert result.exit_code == 0, result.output
    assert "8 items, 40 variants, 5 languages (8 multiple-choice)" in result.output
    manifest = json.loads(Path("data.demo.audit.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert manifest["benchmark"]["path"] == "xcopa/data/*/test.*.jsonl"
    assert manifest["benchmark"]["kinds"] == {"multiple-choice": 8}


def _audit_then_filter(tmp_path: Path, bench: str, *extra: str, corpus: str = "demo", out: str = "clean") -> tuple[dict, Path]:
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner().invoke(main, ["check", bench, "--corpus", corpus, "--out", "a.jsonl", "--no-report", *extra], env=env)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["filter", "a.jsonl", "--out", out, "--rule", "any-seen"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(Path(f"{out}.manifest.json").read_text(encoding="utf-8")), tmp_path / out


def test_filter_writes_squad_files_without_the_leaky_questions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(XQUAD, tmp_path / "xquad")
    german = json.loads((XQUAD / "xquad.de.json").read_text(encoding="utf-8"))["data"][0]["paragraphs"][0]
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"text": german["context"]}, ensure_ascii=False) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["index", "build", "corpus.jsonl", "--out", "index", "--no-minhash"])
    assert result.exit_code == 0, result.output
    manifest, clean = _audit_then_filter(tmp_path, "xquad", corpus="index")
    leaky = {entry["item_id"] for entry in manifest["leaky_items"]}
    assert leaky == {qa["id"] for qa in german["qas"]}
    assert sorted(p.name for p in clean.glob("xquad.*.json")) == sorted(p.name for p in XQUAD.glob("*.json"))
    for path in clean.glob("xquad.*.json"):
        kept = {qa["id"] for a in json.loads(path.read_text(encoding="utf-8"))["data"] for p in a["paragraphs"] for qa in p["qas"]}
        assert kept == set(xquad_questions(path.name.split(".")[1])) - leaky
    assert len(load_benchmark(clean).items) == 35 - len(leaky)


def test_filter_writes_per_language_files_and_parquet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURES / "xcopa", tmp_path / "xcopa")
    manifest, clean = _audit_then_filter(tmp_path, "xcopa/data/*/test.*.jsonl")
    assert sorted(str(p.relative_to(clean)) for p in clean.rglob("*.jsonl")) == sorted(f"{lang}/test.{lang}.jsonl" for lang in ("et", "it", "sw", "vi", "zh"))
    assert len(jsonl(clean / "it" / "test.it.jsonl")) == 8 - manifest["counts"]["removed"]
    rows = _xquad_rows()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "bench.parquet")
    Path("a.jsonl").unlink()
    Path("clean.manifest.json").unlink()
    shutil.rmtree(clean)
    manifest, clean = _audit_then_filter(tmp_path, "bench.parquet", "--map", MAPPING, out="clean.parquet")
    kept = pq.read_table(clean).to_pylist()
    leaky = {entry["item_id"] for entry in manifest["leaky_items"]}
    assert leaky and {row["q_no"] for row in kept} == {r["q_no"] for r in rows if r["drop"] == "no"} - leaky


def test_per_language_parquet_files_named_by_their_folder(tmp_path):
    for lang in ("en", "de"):
        rows = [{"sample_id": qid, "question": qa["question"], "option_a": qa["answers"][0]["text"], "option_b": "—", "answer": "A"} for qid, qa in xquad_questions(lang).items()]
        (tmp_path / lang).mkdir()
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / lang / "test-00000-of-00001.parquet")
    mapping = parse_mapping("id=sample_id,question=question,options=option_a|option_b,answer_index=answer,answer_base=letter")
    report = load_benchmark(str(tmp_path / "*" / "test-*.parquet"), options=ReadOptions(mapping))
    assert sorted(report.languages) == ["de", "en"] and len(report.items) == 35
    assert all(item.kind == ItemKind.MULTIPLE_CHOICE and item.variants["de"].answer == item.variants["de"].options[0] for item in report.items)
