"""Language roles never guessed, and benchmarks read as published: a lone XQuAD target file,
MLQA's cross-lingual files, MGSM, mLAMA and X-CSR, from real rows (fixtures/SOURCES.md)."""
from __future__ import annotations

import json
import random
import shutil
from datetime import date, time, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from audit.cli import main
from audit.items import ItemKind
from audit.readers import BenchmarkError, ReadOptions, detect_format, load_benchmark, parse_mapping

XQUAD = FIXTURES / "xquad"


CACHE: dict[str, str] = {}


@pytest.fixture(autouse=True, scope="module")
def _demo_cache(tmp_path_factory):
    """One cache for the module, so the demo index is built once."""
    CACHE["AUDIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))


def check(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", *args, "--corpus", "demo", "--out", str(tmp_path / "a.jsonl"), "--no-report"], env=CACHE)
    return result.exit_code, result.output


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]


# Language roles ------------------------------------------------------------------------------


def test_a_lone_xquad_target_file_is_audited_as_a_target_of_english(tmp_path):
    code, output = check(tmp_path, str(XQUAD / "xquad.ro.json"))
    assert code == 0, output
    assert "note: source language: en" in output
    rows = records(tmp_path / "a.jsonl")
    assert len(rows) == 35 and {(r["lang"], r["source_lang"], r["role"]) for r in rows} == {("ro", "en", "target")}


def test_a_lone_file_of_an_unknown_benchmark_in_another_language_is_refused(tmp_path):
    shutil.copy(XQUAD / "xquad.ro.json", tmp_path / "quiz.ro.json")
    code, output = check(tmp_path, str(tmp_path / "quiz.ro.json"))
    assert code == 2 and "quiz.ro.json" in output and "--source-lang" in output, output
    assert not (tmp_path / "a.jsonl").exists()
    report = load_benchmark(tmp_path / "quiz.ro.json", options=ReadOptions(source_lang="ro"))
    assert {item.source_lang for item in report.items} == {"ro"} and report.languages == ["ro"]


def test_xquad_targets_without_english_take_english_as_source(tmp_path):
    for lang in ("de", "ro"):
        shutil.copy(XQUAD / f"xquad.{lang}.json", tmp_path)
    report = load_benchmark(tmp_path)
    assert sorted(report.languages) == ["de", "ro"] and {i.source_lang for i in report.items} == {"en"}
    assert report.notes and "en" in report.notes[0]


def test_a_json_lines_file_named_json_in_a_folder_of_tables_is_named_not_dropped(tmp_path):
    row = {"item_id": "1", "question": "Wer schrieb Faust?", "answer": "Goethe"}
    for name in ("de.jsonl", "en.jsonl", "fr.json"):
        (tmp_path / name).write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(tmp_path, options=ReadOptions())
    assert info.value.path == str(tmp_path / "fr.json") and "not read" in str(info.value)
    code, output = check(tmp_path, str(tmp_path), "--map", "id=item_id,question=question,answer=answer")
    assert code == 2 and "fr.json" in output, output


def test_a_table_among_squad_documents_is_named_not_dropped(tmp_path):
    shutil.copy(XQUAD / "xquad.en.json", tmp_path)
    shutil.copy(XQUAD / "xquad.de.json", tmp_path)
    (tmp_path / "extra.jsonl").write_text('{"item_id": "1"}\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match="not read") as info:
        load_benchmark(tmp_path, "squad")
    assert info.value.path == str(tmp_path / "extra.jsonl")


# MLQA ----------------------------------------------------------------------------------------

MLQA = FIXTURES / "mlqa" / "test-context-de-question-de.json"


def cross_lingual(folder: Path, context: str, question: str) -> Path:
    """An MLQA cross-lingual file laid out as MLQA's are, from XQuAD's parallel real rows: the
    paragraphs (and answers) of `context`, the questions of `question`, joined by id."""
    asked = {qa["id"]: qa["question"] for article in json.loads((XQUAD / f"xquad.{question}.json").read_text(encoding="utf-8"))["data"] for p in article["paragraphs"] for qa in p["qas"]}
    document = json.loads((XQUAD / f"xquad.{context}.json").read_text(encoding="utf-8"))
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["question"] = asked[qa["id"]]
    path = folder / f"dev-context-{context}-question-{question}.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def test_mlqa_same_language_file_reads_as_a_target_of_english():
    report = load_benchmark(MLQA)
    [item] = report.items
    variant = item.variants["de"]
    assert item.item_id == "c076d4b0a1967805a45e7ab1e247e3a0739d4850" and item.source_lang == "en"
    assert variant.answer == "3050 und 3350 Meter" and variant.question == "Wie viele Meter über den Krater war die Dampfexplosion?"
    assert variant.field_languages == {} and variant.language_of("context", "de") == "de"
    assert report.notes


def test_mlqa_cross_lingual_file_gives_each_field_its_language(tmp_path):
    path = cross_lingual(tmp_path, "en", "de")
    report = load_benchmark(path)
    assert report.languages == ["de"] and len(report.items) == 35
    item = report.items[0]
    variant = item.variants["de"]
    german, english = (load_benchmark(XQUAD / f"xquad.{lang}.json").items[0].variants[lang] for lang in ("de", "en"))
    assert item.item_id == report.items[0].item_id
    assert (variant.question, variant.context, variant.answer) == (german.question, english.context, english.answer)
    assert variant.language_of("question", "de") == "de" and variant.language_of("context", "de") == "en"
    assert variant.language_of("answer", "de") == "en" and item.source_lang == "en"


def test_the_audit_file_records_a_fields_own_language(tmp_path):
    path = cross_lingual(tmp_path, "en", "de")
    code, output = check(tmp_path, str(path))
    assert code == 0, output
    rows = records(tmp_path / "a.jsonl")
    assert {json.dumps(r["field_languages"], sort_keys=True) for r in rows} == {'{"answer": "en", "context": "en", "title": "en"}'}
    assert all(r["lang"] == "de" and r["role"] == "target" for r in rows)
    result = CliRunner().invoke(main, ["filter", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "clean.json"), "--flag"], env=CACHE)
    assert result.exit_code == 0, result.output
    code, output = check(tmp_path, str(XQUAD / "xquad.de.json"))
    assert code == 0 and not any("field_languages" in r for r in records(tmp_path / "a.jsonl")), output


def test_mlqa_files_asking_one_language_twice_are_named(tmp_path):
    cross_lingual(tmp_path, "en", "de")
    cross_lingual(tmp_path, "de", "de")
    with pytest.raises(BenchmarkError, match="one file per question language"):
        load_benchmark(tmp_path)
    report = load_benchmark(str(tmp_path / "dev-context-*-question-de.json").replace("*", "en"))
    assert report.languages == ["de"]


# MGSM: headerless TSV, columns by position ----------------------------------------------------

MGSM = FIXTURES / "mgsm"
BY_POSITION = ("--map", "question=0,answer=1", "--header", "none")


def mgsm_rows(lang: str) -> list[list[str]]:
    return [line.split("\t") for line in (MGSM / f"mgsm_{lang}.tsv").read_text(encoding="utf-8").splitlines()]


def test_mgsm_folder_reads_by_column_position_with_languages_from_file_names(tmp_path):
    code, output = check(tmp_path, str(MGSM), *BY_POSITION)
    assert code == 0, output
    assert "6 items, 36 variants, 6 languages" in output
    manifest = json.loads((tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert manifest["benchmark"]["mapping"] == {"question": "0", "answer": "1", "answer_base": "0", "header": "none"}
    mapping = parse_mapping("question=0,answer=1,header=none")
    report = load_benchmark(MGSM, options=ReadOptions(mapping))
    assert sorted(report.languages) == ["bn", "de", "en", "ja", "sw", "zh"]
    first = report.items[0]
    assert first.source_lang == "en" and first.item_id == "1"
    for lang in ("en", "ja"):
        question, answer = mgsm_rows(lang)[0]
        assert (first.variants[lang].question, first.variants[lang].answer) == (question, answer)


def test_mgsm_filter_keeps_a_headerless_first_row_as_a_row(tmp_path):
    code, output = check(tmp_path, str(MGSM), *BY_POSITION)
    assert code == 0, output
    result = CliRunner().invoke(main, ["filter", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "clean"), "--flag"], env=CACHE)
    assert result.exit_code == 0, result.output
    flagged = [line.split("\t") for line in (tmp_path / "clean" / "mgsm_de.tsv").read_text(encoding="utf-8").splitlines()]
    assert [row[:2] for row in flagged] == mgsm_rows("de") and all(len(row) == 4 for row in flagged)
    assert {row[2] for row in flagged} <= {"true", "false"}


def test_a_lone_mgsm_file_is_named_by_its_language_and_needs_its_source(tmp_path):
    mapping = parse_mapping("question=0,answer=1,header=none")
    with pytest.raises(BenchmarkError, match="--source-lang"):
        load_benchmark(MGSM / "mgsm_de.tsv", options=ReadOptions(mapping))
    report = load_benchmark(MGSM / "mgsm_de.tsv", options=ReadOptions(mapping, "en"))
    assert report.languages == ["de"] and {i.source_lang for i in report.items} == {"en"} and len(report.items) == 6


def test_a_folder_of_lang_tsv_that_is_not_bmlama_is_not_read_as_bmlama(tmp_path):
    code, output = check(tmp_path, str(MGSM))
    assert code == 2 and "--header none" in output and "BMLAMA" not in output and "Prompt" not in output, output
    for lang in ("en", "de"):
        rows = mgsm_rows(lang)
        (tmp_path / f"{lang}.tsv").write_text("question\tanswer\n" + "".join(f"{q}\t{a}\n" for q, a in rows), encoding="utf-8")
    assert detect_format(tmp_path) == "per-language"
    report = load_benchmark(tmp_path, options=ReadOptions(parse_mapping("question=question,answer=answer")))
    assert sorted(report.languages) == ["de", "en"] and len(report.items) == 6


def test_bad_headerless_rows_are_named_with_file_line_and_column(tmp_path):
    shutil.copytree(MGSM, tmp_path / "mgsm")
    bad = tmp_path / "mgsm" / "mgsm_sw.tsv"
    lines = bad.read_text(encoding="utf-8").splitlines()
    lines[3] += "\textra"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = check(tmp_path, str(tmp_path / "mgsm"), *BY_POSITION)
    assert code == 2 and f"{bad}:4:" in output and "expected 2 columns, found 3" in output, output
    code, output = check(tmp_path, str(MGSM), "--map", "question=0,answer=2", "--header", "none")
    assert code == 2 and "mgsm_" in output and ":1: field '2'" in output, output
    code, output = check(tmp_path, str(MGSM), "--header", "none")
    assert code == 2 and "--header applies with --map" in output, output
    (tmp_path / "table.jsonl").write_text('{"q": "x"}\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match="--header none applies to CSV and TSV"):
        load_benchmark(tmp_path / "table.jsonl", options=ReadOptions(parse_mapping("question=q,header=none"), "en"))


# Dotted --map and X-CSR -------------------------------------------------------------------------

XCSQA = FIXTURES / "xcsr" / "X-CSQA"
XCODAH = FIXTURES / "xcsr" / "X-CODAH"
XCOPA = FIXTURES / "xcopa" / "data"


def xcsr_from_xcopa(folder: Path, langs: tuple[str, ...] = ("it", "zh", "sw")) -> Path:
    """X-CSR's layout (`{lang}/dev.jsonl`, nested question) filled with XCOPA's real parallel
    rows: the premise as the stem, its two choices, the label as the answer key."""
    for lang in langs:
        rows = [json.loads(line) for line in (XCOPA / lang / f"test.{lang}.jsonl").read_text(encoding="utf-8").splitlines()]
        (folder / lang).mkdir(parents=True)
        with open(folder / lang / "dev.jsonl", "w", encoding="utf-8") as handle:
            for row in rows:
                question = {"stem": row["premise"], "choices": [{"label": "A", "text": row["choice1"]}, {"label": "B", "text": row["choice2"]}]}
                handle.write(json.dumps({"id": f"xcopa-{row['idx']}", "lang": lang, "question": question, "answerKey": "AB"[row["label"]]}, ensure_ascii=False) + "\n")
    return folder


def test_map_reads_dotted_paths_into_nested_json():
    mapping = parse_mapping("id=id,question=question.stem,options=question.choices.text,answer_index=answerKey,answer_base=letter")
    report = load_benchmark(XCSQA / "en" / "dev.jsonl", options=ReadOptions(mapping, "en"))
    [item] = report.items
    variant = item.variants["en"]
    assert item.item_id == "be1920f7ba5454ad" and item.kind == ItemKind.MULTIPLE_CHOICE
    assert variant.question == "What will happen to your knowledge with more learning?"
    assert variant.options == ("headaches", "bigger brain", "education", "growth", "knowing more") and variant.answer == "growth"
    bad = parse_mapping("question=question.stm")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(XCSQA / "en" / "dev.jsonl", options=ReadOptions(bad, "en"))
    assert (info.value.line, info.value.field) == (1, "question.stm")


def test_xcsr_reads_x_csqa_and_x_codah_as_published():
    report = load_benchmark(XCSQA)
    assert report.format == "xcsr"
    [item] = report.items
    assert item.kind == ItemKind.MULTIPLE_CHOICE and item.source_lang == "en" and item.variants["en"].answer == "growth"
    [codah] = load_benchmark(XCODAH).items
    variant = codah.variants["en"]
    assert variant.question is None and variant.answer == "Jennifer loves her school very much, she is never absent even when she's sick."
    assert variant.meta == {"question_tag": "o"} and len(variant.options) == 4


def test_xcsr_joins_languages_by_id_and_reads_jap_as_japanese(tmp_path):
    folder = xcsr_from_xcopa(tmp_path / "X-CSQA")
    report = load_benchmark(folder)
    assert report.format == "xcsr" and sorted(report.languages) == ["it", "sw", "zh"] and len(report.items) == 8
    assert all(item.source_lang == "en" and len(item.variants) == 3 for item in report.items)
    from audit.readers.xcsr import _code
    assert _code("dev.jsonl", 1, "lang", "jap") == "ja"


def test_xcsr_bad_rows_are_named_with_file_line_and_field(tmp_path):
    folder = xcsr_from_xcopa(tmp_path / "X-CSQA", ("it", "zh"))
    path = folder / "zh" / "dev.jsonl"
    rows = path.read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].replace('"lang": "zh"', '"lang": "jap"')
    rows[4] = rows[4].replace('"answerKey": "A"', '"answerKey": "E"').replace('"answerKey": "B"', '"answerKey": "E"')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, output = check(tmp_path, str(folder))
    assert code == 2 and f"{path}:3: field 'lang'" in output and "folder of zh" in output, output
    report = load_benchmark(folder, skip_bad_rows=True)
    assert len(report.skipped) == 2 and f"{path}:5: field 'answerKey'" in report.skipped[1]


# mLAMA -----------------------------------------------------------------------------------------

XFACTR = FIXTURES / "xfactr"


def mlama_from_xfactr(folder: Path, langs: tuple[str, ...] = ("en", "zh", "ja"), relations: tuple[str, ...] = ("P19", "P37")) -> Path:
    """mLAMA's layout (`{lang}/templates.jsonl`, `{lang}/P*.jsonl`) filled with X-FACTR's real
    T-REx facts and templates (these have no inflection markup in en, zh and ja); a language's
    label is the entity's last listed name in X-FACTR's alias file, English the fact's own."""
    import csv

    with open(XFACTR / "TREx_prompts.csv", encoding="utf-8", newline="") as handle:
        templates = {row["pid"]: row for row in csv.DictReader(handle)}
    for lang in langs:
        names = {}
        if lang != "en":
            for line in (XFACTR / "alias" / "mTRExf" / f"{lang}.txt").read_text(encoding="utf-8").splitlines():
                qid, *listed = line.split("\t")
                names[qid] = listed[-1]
        (folder / lang).mkdir(parents=True)
        with open(folder / lang / "templates.jsonl", "w", encoding="utf-8") as handle:
            for relation in relations:
                handle.write(json.dumps({"relation": relation, "template": templates[relation][lang]}, ensure_ascii=False) + "\n")
        for relation in relations:
            facts = [json.loads(line) for line in (XFACTR / "mTRExf" / "sub" / f"{relation}.jsonl").read_text(encoding="utf-8").splitlines()]
            with open(folder / lang / f"{relation}.jsonl", "w", encoding="utf-8") as handle:
                for lineid, fact in enumerate(facts):
                    sub, obj = (fact[f"{k}_label"] if lang == "en" else names.get(fact[f"{k}_uri"]) for k in ("sub", "obj"))
                    if sub and obj:
                        row = {"uuid": fact["uuid"], "lineid": lineid, "obj_uri": fact["obj_uri"], "obj_label": obj, "sub_uri": fact["sub_uri"], "sub_label": sub}
                        handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder


def test_mlama_joins_facts_across_languages_by_their_wikidata_ids(tmp_path):
    folder = mlama_from_xfactr(tmp_path / "mlama1.1")
    report = load_benchmark(folder)
    assert report.format == "mlama" and sorted(report.languages) == ["en", "ja", "zh"]
    item = next(i for i in report.items if i.item_id == "P19-Q302-Q430776")
    assert item.kind == ItemKind.CLOZE and item.mask == "[Y]" and item.source_lang == "en"
    assert (item.variants["en"].question, item.variants["en"].answer, item.variants["en"].subject) == ("Jesus was born in [Y] .", "Nazareth", "Jesus")
    assert item.variants["zh"].question == "耶穌‧基督的出生地是[Y]。" and item.variants["zh"].answer == "拿撒勒"
    assert {"uuid", "lineid", "template"} <= set(report.unused_fields)


def test_mlama_file_without_its_template_is_named(tmp_path):
    folder = mlama_from_xfactr(tmp_path / "mlama1.1")
    templates = folder / "ja" / "templates.jsonl"
    templates.write_text(templates.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    code, output = check(tmp_path, str(folder))
    assert code == 2 and str(folder / "ja" / "P37.jsonl") in output and "no template for P37" in output, output
    report = load_benchmark(folder, skip_bad_rows=True)
    assert len(report.skipped) == 1 and all("ja" not in item.variants for item in report.items if item.item_id.startswith("P37"))


def test_mlama_bad_fact_and_stray_file_are_named(tmp_path):
    folder = mlama_from_xfactr(tmp_path / "mlama1.1")
    facts = folder / "zh" / "P19.jsonl"
    rows = facts.read_text(encoding="utf-8").splitlines()
    rows[1] = json.dumps({key: value for key, value in json.loads(rows[1]).items() if key != "obj_label"}, ensure_ascii=False)
    facts.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(folder)
    assert (info.value.path, info.value.line, info.value.field) == (str(facts), 2, "obj_label")
    facts.write_text("\n".join(rows[:1] + rows[2:]) + "\n", encoding="utf-8")
    (folder / "zh" / "notes.json").write_text("{}\n", encoding="utf-8")
    with pytest.raises(BenchmarkError, match="not read") as info:
        load_benchmark(folder)
    assert info.value.path == str(folder / "zh" / "notes.json")


def test_mlama_fact_given_twice_is_named_and_the_first_kept(tmp_path):
    folder = mlama_from_xfactr(tmp_path / "mlama1.1")
    facts = folder / "zh" / "P19.jsonl"
    rows = facts.read_text(encoding="utf-8").splitlines()
    again = {**json.loads(rows[0]), "sub_label": "again"}
    facts.write_text("\n".join([*rows, json.dumps(again, ensure_ascii=False)]) + "\n", encoding="utf-8")
    item_id = f"P19-{again['sub_uri']}-{again['obj_uri']}"
    with pytest.raises(BenchmarkError, match=f"a second zh fact {item_id} in this file") as info:
        load_benchmark(folder)
    assert (info.value.path, info.value.line, info.value.field) == (str(facts), len(rows) + 1, "sub_uri")
    report = load_benchmark(folder, skip_bad_rows=True)
    item = next(i for i in report.items if i.item_id == item_id)
    assert len(report.skipped) == 1 and item.variants["zh"].subject != "again"
    assert (str(facts), 1) in item.origin.rows and item.meta["relation"] == "P19"


def _random_cell(rng: random.Random, depth: int = 0) -> object:
    """A value of any shape a reader hands on, a lone surrogate sometimes in a string or a key."""
    texts = ["plain", "ünïcode ☃", "中文", "x\ud800", "\udc00y", "", "🙂"]
    scalars = [lambda: rng.choice(texts), lambda: rng.randint(-5, 5), lambda: 2**70, lambda: rng.random(), lambda: None, lambda: True,
               lambda: b"by\xfftes", lambda: Decimal("1.5"), lambda: date(2024, 1, 2), lambda: time(3, 4), lambda: timedelta(days=1)]
    if depth < 3 and rng.random() < 0.5:
        if rng.random() < 0.5:
            return {rng.choice([*texts, 7]): _random_cell(rng, depth + 1) for _ in range(rng.randint(0, 3))}
        made = [_random_cell(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return tuple(made) if rng.random() < 0.3 else made
    return rng.choice(scalars)()


def test_the_surrogate_check_in_c_agrees_with_the_walk():
    """orjson's refusal answers for the items it can encode; everything else is walked."""
    from audit.readers.common import _holds_surrogate, _walked_surrogate

    rng = random.Random(11)
    answers = []
    for _ in range(3000):
        value = _random_cell(rng)
        answers.append(_walked_surrogate(value))
        assert _holds_surrogate(value) == answers[-1], value
    assert 300 < sum(answers) < 2700
