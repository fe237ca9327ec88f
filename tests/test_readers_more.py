"""Language roles never guessed, and benchmarks read as published: a lone XQuAD target file,
MLQA's cross-lingual files, MGSM, mLAMA and X-CSR, from real rows (fixtures/SOURCES.md)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from audit.cli import main
from audit.readers import BenchmarkError, ReadOptions, load_benchmark

XQUAD = FIXTURES / "xquad"


def check(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", *args, "--corpus", "demo", "--out", str(tmp_path / "a.jsonl"), "--no-report"], env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
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
