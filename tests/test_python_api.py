"""The Python API on a real audit of the bundled sample: `audit.read`, `Audit.to_pandas`,
`audit export`, and a damaged file refused as every reader refuses it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import audit
from audit.auditfile import AuditFileError, read_audit, write_audit
from audit.cli import main
from audit.records import Check, ExposureRecord
from audit.result import BASE_COLUMNS, table_bytes

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
LANGS = ("en", "fr", "ja")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def run(cache: Path, *args: str):
    return CliRunner().invoke(main, list(args), env={"AUDIT_CACHE_DIR": str(cache)})


@pytest.fixture(scope="module")
def sample_audit(cache, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "sample.audit.jsonl"
    result = run(cache, "check", str(SAMPLE), "--corpus", "demo", "--out", str(out), "--langs", ",".join(LANGS), "--no-report")
    assert result.exit_code == 0, result.output
    return out


def test_import_audit_loads_no_more_than_before():
    loaded = subprocess.run([sys.executable, "-c", "import audit, sys; print(sorted(m for m in sys.modules if m.startswith(('audit.', 'pandas', 'typing'))))"],
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_read_gives_typed_records_of_the_file(sample_audit: Path):
    result = audit.read(sample_audit)
    raw = read_audit(sample_audit)
    assert isinstance(result, audit.Audit) and len(result) == 39 * len(LANGS) == len(raw.records)
    assert result.manifest.benchmark.format == "eclektic-csv" and result.manifest.benchmark.items == 39
    assert sorted(result.languages) == sorted(LANGS)
    assert {run.signal for run in result.manifest.signal_runs if run.ran} == {"ngram", "minhash"}
    first = result.records[0]
    assert isinstance(first, ExposureRecord) and all(isinstance(check, Check) for check in first.decided_by)
    assert first.evidence[0].status == "ok" and isinstance(first.evidence[0].figures, dict)
    # typed and back: the very dictionaries the file holds
    assert [{"record": "exposure", **record.to_dict()} for record in result.records] == raw.records


def test_typed_records_write_the_same_bytes(sample_audit: Path, tmp_path: Path):
    result = audit.read(sample_audit)
    again = tmp_path / "again.audit.jsonl"
    bookkeeping = ("record", "schema_version", "records", "records_sha256")
    write_audit(again, {k: v for k, v in result.file.manifest.items() if k not in bookkeeping}, result.records)
    assert again.read_bytes() == sample_audit.read_bytes()


def test_to_pandas_one_row_per_item_and_language_with_deciding_figures(sample_audit: Path):
    result = audit.read(sample_audit)
    frame = result.to_pandas()
    assert len(frame) == len(result.records) and tuple(frame.columns[: len(BASE_COLUMNS)]) == BASE_COLUMNS
    assert not frame.duplicated(["item_id", "lang"]).any()
    seen_rate = frame.groupby("lang")["exposure"].apply(lambda tags: (tags == "seen").mean())
    assert seen_rate["en"] == 1.0  # the demo corpus holds every English source passage
    english = frame[frame.lang == "en"].iloc[0]
    record = next(r for r in result.records if r.item_id == english.item_id and r.lang == "en")
    context = next(e for e in record.evidence if e.signal == "ngram" and e.field == "context")
    assert english["ngram.demo.context.coverage"] == context.figures["coverage"] == 1.0
    assert english["ngram.demo.context.status"] == "ok"
    assert english["seen_in_languages"] == ",".join(record.seen_in_languages or [])
    assert english["asked_in"] == ",".join(record.asked_in or []) and "en" in english["asked_in"].split(",")
    assert "ngram.demo.context.coverage" in english["decided_by"].split("; ")
    # every figure a rule checked on a record is a column holding the value the rule saw
    checked = 0
    for row, rec in zip(frame.to_dict("records"), result.records, strict=True):
        for check in (check for check in rec.decided_by if check.figure):
            assert row[check.key] == check.value
            checked += 1
    assert checked >= len(result.records)


def test_all_figures_adds_the_signals_other_figures(sample_audit: Path):
    frame = audit.read(sample_audit).to_pandas(all_figures=True)
    assert {"minhash.demo.context.jaccard", "ngram.demo.question.exact_count", "ngram.demo.answer.exact_count"} <= set(frame.columns)
    assert frame["minhash.demo.context.jaccard"].between(0, 1).all()


def test_a_damaged_file_is_refused_naming_file_line_and_field(sample_audit: Path, tmp_path: Path):
    lines = sample_audit.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[3])
    record["exposure"] = "maybe"
    edited = tmp_path / "edited.audit.jsonl"
    edited.write_text("".join([*lines[:3], json.dumps(record, ensure_ascii=False) + "\n", *lines[4:]]), encoding="utf-8")
    with pytest.raises(AuditFileError, match="records' sha256 differs"):
        audit.read(edited)
    truncated = tmp_path / "truncated.audit.jsonl"
    truncated.write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(AuditFileError, match="truncated or damaged"):
        audit.read(truncated)
    # a valid digest over an invalid record: the schema still refuses it, at its line and field
    manifest = json.loads(lines[0])
    rewritten = tmp_path / "rewritten.audit.jsonl"
    write_audit(rewritten, {k: v for k, v in manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")},
                [{k: v for k, v in json.loads(line).items() if k != "record"} for line in [*lines[1:3], json.dumps(record) + "\n", *lines[4:]]])
    with pytest.raises(AuditFileError, match=rf"^{rewritten}:4: field 'exposure': expected one of seen, unseen, unknown, got 'maybe'$"):
        audit.read(rewritten)


def test_read_takes_an_older_audit(tmp_path: Path):
    old = audit.read(ROOT / "tests" / "fixtures" / "audit-v1" / "v1.audit.jsonl")
    frame = old.to_pandas()
    assert len(frame) == len(old.records) > 0 and frame["seen_in_languages"].isna().all()
    assert "ngram.index.question.exact_count" in frame.columns


def test_frame_survives_parquet(sample_audit: Path, tmp_path: Path):
    result = audit.read(sample_audit)
    path = tmp_path / "table.parquet"
    path.write_bytes(table_bytes(result.to_pandas(), "parquet"))
    pd.testing.assert_frame_equal(pd.read_parquet(path), result.to_pandas(), check_dtype=False)


def test_a_column_of_mixed_kinds_is_written_as_text(tmp_path: Path):
    frame = pd.DataFrame({"figure": [1, "many", None, 2.5], "count": [1, 2, None, 4]})
    path = tmp_path / "mixed.parquet"
    path.write_bytes(table_bytes(frame, "parquet"))
    back = pd.read_parquet(path)
    assert list(back["figure"].astype(object).where(back["figure"].notna(), None)) == ["1", "many", None, "2.5"]
    assert back["count"].tolist()[:2] == [1.0, 2.0]


def test_the_manual_lists_the_tables_columns():
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    table = text.split("The first columns are always these:", 1)[1].split("\n\n", 2)[1]
    documented = tuple(line.split("`")[1] for line in table.splitlines() if line.startswith("| `"))
    assert documented == BASE_COLUMNS


def test_the_manual_lists_the_figures_the_built_in_policy_judges(sample_audit: Path):
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    table = text.split("The built-in policy judges these figures", 1)[1].split("\n\n", 2)[1]
    documented = set()
    for line in table.splitlines()[2:]:
        signal, names, figures = (cell.strip() for cell in line.strip("|").split("|"))
        documented |= {(signal.strip("`"), name.strip("` "), figure.split("`")[1]) for name in names.split(",") for figure in figures.split(",")}
    rules = audit.read(sample_audit).manifest.policy["settings"]["rules"]
    assert documented == {(signal, name, figure) for signal, table in rules.items() for name, figures in table.items() for figure in figures}


def test_export_writes_the_table_as_parquet_and_csv(cache, sample_audit: Path, tmp_path: Path):
    parquet, csv = tmp_path / "table.parquet", tmp_path / "table.csv"
    result = run(cache, "export", str(sample_audit), "--parquet", str(parquet), "--csv", str(csv))
    assert result.exit_code == 0, result.output
    expected = audit.read(sample_audit).to_pandas()
    pd.testing.assert_frame_equal(pd.read_parquet(parquet), expected, check_dtype=False)
    assert list(pd.read_csv(csv, keep_default_na=False, dtype=str).columns) == list(expected.columns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv", "table.parquet"]  # no staging file left
    wider = tmp_path / "wide.parquet"
    assert run(cache, "export", str(sample_audit), "--parquet", str(wider), "--all-figures").exit_code == 0
    assert "minhash.demo.context.jaccard" in pd.read_parquet(wider).columns


def test_export_replaces_a_file_only_with_force_and_never_the_audit(cache, sample_audit: Path, tmp_path: Path):
    mine = tmp_path / "notes.csv"
    mine.write_text("not the tool's\n", encoding="utf-8")
    refused = run(cache, "export", str(sample_audit), "--csv", str(mine))
    assert refused.exit_code != 0 and f"{mine}: already exists (use --force to replace it)" in refused.output
    assert mine.read_text(encoding="utf-8") == "not the tool's\n"
    assert run(cache, "export", str(sample_audit), "--csv", str(mine), "--force").exit_code == 0
    assert mine.read_text(encoding="utf-8").startswith("item_id,lang,")
    before = sample_audit.read_bytes()
    itself = run(cache, "export", str(sample_audit), "--parquet", str(sample_audit), "--force")
    assert itself.exit_code != 0 and "refusing to overwrite it" in itself.output and sample_audit.read_bytes() == before
    assert "give --parquet OUT or --csv OUT" in run(cache, "export", str(sample_audit)).output


def test_export_refuses_a_damaged_audit_naming_file_and_line(cache, sample_audit: Path, tmp_path: Path):
    lines = sample_audit.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = tmp_path / "damaged.audit.jsonl"
    damaged.write_text("".join([*lines[:5], "{not json\n", *lines[6:]]), encoding="utf-8")
    out = tmp_path / "table.parquet"
    result = run(cache, "export", str(damaged), "--parquet", str(out))
    assert result.exit_code != 0 and f"{damaged}:6: not valid JSON" in result.output
    assert not out.exists()


def test_check_runs_the_audit_the_command_line_runs(cache, sample_audit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from audit.run import RequestError

    monkeypatch.setenv("AUDIT_CACHE_DIR", str(cache))
    out = tmp_path / "api.audit.jsonl"
    result = audit.check(SAMPLE, "demo", langs=list(LANGS), out=out)
    assert isinstance(result, audit.Audit) and result.path == out and len(result) == 39 * len(LANGS)
    # the same inputs write the same records, byte for byte, as `audit check` wrote
    assert out.read_bytes().splitlines()[1:] == sample_audit.read_bytes().splitlines()[1:]
    assert result.to_pandas().equals(audit.read(out).to_pandas())
    with pytest.raises(RequestError, match="workers"):
        audit.check(SAMPLE, "demo", workers=0, out=tmp_path / "never.audit.jsonl")
