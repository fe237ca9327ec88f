"""`audit filter`: leaky items out, everything else byte-for-byte as it came in."""
from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

from click.testing import CliRunner
from conftest import BMLAMA, summary_of, write_jsonl
from manual import page

from audit.auditfile import read_audit, write_audit
from audit.cli import main
from audit.index.build import build_index
from audit.outputs import MARKER
from audit.readers import load_benchmark


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_removes_items_seen_in_a_target_language(planted_audit, tmp_path: Path):
    out = tmp_path / "clean.csv.gz"
    result = run("filter", str(planted_audit["audit"]), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "39 items: removed 2 as leaky (target-seen), kept 37" in result.output
    clean = load_benchmark(out)
    assert len(clean.items) == 37 and {"39", "46"}.isdisjoint(i.item_id for i in clean.items)
    original = {i.item_id: i for i in load_benchmark(planted_audit["bench"]).items}
    for item in clean.items:
        assert item.variants["fr"].context == original[item.item_id].variants["fr"].context
    assert gzip.decompress(out.read_bytes()).startswith(b"\xef\xbb\xbf")
    manifest = json.loads((tmp_path / "clean.csv.gz.manifest.json").read_text())
    assert manifest["counts"] == {"items": 39, "leaky": 2, "removed": 2, "kept": 37, "flagged": 0, "not_audited": 0, "by_reason": {"seen in a target language": 2}}
    leaks = {entry["item_id"]: entry for entry in manifest["leaky_items"]}
    assert leaks["39"]["seen_languages"] == ["fr"]
    assert {d["field"] for d in leaks["39"]["decided_by"]["fr"]} == {"context"}
    assert leaks["46"]["seen_languages"] == ["ja"]


def test_the_clean_benchmark_audits_clean(planted_audit, tmp_path: Path):
    out = tmp_path / "clean.csv.gz"
    assert run("filter", str(planted_audit["audit"]), "--out", str(out)).exit_code == 0
    again = tmp_path / "again.jsonl"
    result = run("check", str(out), "--corpus", str(planted_audit["index"]), "--out", str(again), "--no-report")
    assert result.exit_code == 0, result.output
    assert "seen_in_target" not in result.output


def test_flag_mode_keeps_every_row_and_marks_the_leaky_ones(planted_audit, tmp_path: Path):
    out = tmp_path / "flagged.csv"
    assert run("filter", str(planted_audit["audit"]), "--out", str(out), "--flag").exit_code == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    assert len(rows) == 468
    assert {r["q_id"] for r in rows if r["audit_leaky"] == "true"} == {"39", "46"}


def test_refuses_an_audit_of_another_file_and_existing_output(planted_audit, tmp_path: Path):
    other = tmp_path / "edited.csv.gz"
    other.write_bytes(gzip.compress(gzip.decompress(planted_audit["bench"].read_bytes()) + b"\n"))
    result = run("filter", str(planted_audit["audit"]), "--bench", str(other), "--out", str(tmp_path / "x.csv"))
    assert result.exit_code == 2 and "differs from the audited benchmark" in result.output
    existing = tmp_path / "exists.csv"
    existing.write_text("keep me", encoding="utf-8")
    result = run("filter", str(planted_audit["audit"]), "--out", str(existing))
    assert result.exit_code == 2 and "--force" in result.output and existing.read_text() == "keep me"


def test_generic_jsonl_and_bmlama_round_trip(tmp_path: Path):
    subset = tmp_path / "bmlama"
    subset.mkdir()
    for lang in ("en", "fr", "zh"):
        lines = (BMLAMA / f"{lang}.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:31]
        (subset / f"{lang}.tsv").write_text("".join(lines), encoding="utf-8")
    items = load_benchmark(subset).items
    leaked = items[4]
    generic = tmp_path / "facts.jsonl"
    write_jsonl(
        generic,
        [{"item_id": i.item_id, "source_lang": "en", "variants": {lang: {"question": v.question, "answer": v.answer} for lang, v in i.variants.items()}} for i in items],
    )
    write_jsonl(tmp_path / "docs.jsonl", [{"id": "d1", "text": f"Quiz: {leaked.variants['fr'].question.replace('<mask>', leaked.variants['fr'].answer)} {leaked.variants['fr'].question}"}])
    build_index([tmp_path / "docs.jsonl"], tmp_path / "index")
    for bench, out in ((subset, tmp_path / "clean-bmlama"), (generic, tmp_path / "clean.jsonl")):
        audit = tmp_path / f"{bench.name}.audit.jsonl"
        assert run("check", str(bench), "--corpus", str(tmp_path / "index"), "--out", str(audit), "--no-report").exit_code == 0
        result = run("filter", str(audit), "--out", str(out))
        assert result.exit_code == 0, result.output
        assert "30 items: removed 1" in result.output
        clean = load_benchmark(out)
        kept = [i.variants["fr"].question for i in items if i.item_id != leaked.item_id]
        assert [i.variants["fr"].question for i in clean.items] == kept
    assert {p.name for p in (tmp_path / "clean-bmlama").iterdir()} == {"en.tsv", "fr.tsv", "zh.tsv", MARKER}
    flagged = tmp_path / "flagged.jsonl"
    assert run("filter", str(tmp_path / "facts.jsonl.audit.jsonl"), "--out", str(flagged), "--flag").exit_code == 0
    marks = [json.loads(line)["audit"] for line in flagged.read_text(encoding="utf-8").splitlines()]
    assert len(marks) == 30 and sum(m["leaky"] for m in marks) == 1


def _resealed(source: Path, target: Path, edit) -> Path:
    """The audit edited, then written by the tool's own writer, so its digest is exactly what
    `audit check` would have computed: only the schema and the benchmark can tell."""
    audit = read_audit(source)
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    records = [{k: v for k, v in r.items() if k != "record"} for r in audit.records]
    edit(manifest, records)
    write_audit(target, manifest, records)
    return target


def test_an_edited_audit_is_refused_whatever_its_digest_says(planted_audit, tmp_path: Path):
    def foreign(manifest, records):
        manifest["benchmark"]["languages"].append("xx")
        records.append(dict(records[1], lang="xx"))
        manifest["summary"] = summary_of(records)

    def duplicated(manifest, records):
        records.append(dict(records[5]))
        manifest["summary"] = summary_of(records)

    def maybe(_manifest, records):
        records[3]["exposure"] = "maybe"

    expected = {foreign: ("xx", "is not a language of item"), duplicated: (":470:", "second record", "line 7"), maybe: (":5:", "field 'exposure'", "'maybe'")}
    for edit, fragments in expected.items():
        audit = _resealed(planted_audit["audit"], tmp_path / f"{edit.__name__}.audit.jsonl", edit)
        out = tmp_path / f"{edit.__name__}.csv.gz"
        result = run("filter", str(audit), "--bench", str(planted_audit["bench"]), "--out", str(out))
        assert result.exit_code == 2, result.output
        assert str(audit) in result.output and all(f in result.output for f in fragments), result.output
        assert not out.exists() and not Path(f"{out}.manifest.json").exists()
    untouched = _resealed(planted_audit["audit"], tmp_path / "same.audit.jsonl", lambda _m, _r: None)
    assert run("filter", str(untouched), "--bench", str(planted_audit["bench"]), "--out", str(tmp_path / "same.csv")).exit_code == 0


def test_the_clean_benchmark_is_in_the_format_its_name_says(planted_audit, tmp_path: Path):
    refused = tmp_path / "clean.parquet"
    result = run("filter", str(planted_audit["audit"]), "--out", str(refused))
    assert result.exit_code == 2 and "names Parquet" in result.output and ".csv or .csv.gz" in result.output
    assert not refused.exists()
    plain = tmp_path / "clean.csv"
    assert run("filter", str(planted_audit["audit"]), "--out", str(plain)).exit_code == 0
    assert plain.read_bytes().startswith(b"\xef\xbb\xbforiginal_lang,") and len(load_benchmark(plain).items) == 37
    result = run("filter", str(planted_audit["audit"]), "--out", str(tmp_path / "again.csv"), "--manifest", str(tmp_path / "removed.txt"))
    assert result.exit_code == 2 and "removal manifest is JSON" in result.output
    assert not (tmp_path / "again.csv").exists()


def test_jsonl_in_gzip_and_a_parquet_table_are_written_as_named(planted_audit, tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = load_benchmark(planted_audit["bench"]).items
    rows = [{"id": i.item_id, "lang": lang, "q": v.question, "a": v.answer, "c": v.context} for i in items for lang, v in i.variants.items()]
    write_jsonl(tmp_path / "items.jsonl", [{"item_id": i.item_id, "source_lang": i.source_lang, "variants": {
        lang: {"question": v.question, "answer": v.answer, "context": v.context} for lang, v in i.variants.items()}} for i in items])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    index = str(planted_audit["index"])
    for bench, extra, out in (("items.jsonl", [], "clean.JSONL.GZ"), ("rows.parquet", ["--map", "id=id,lang=lang,question=q,answer=a,context=c", "--source-lang", "en"], "clean.parquet")):
        audit = tmp_path / f"{bench}.audit.jsonl"
        result = run("check", str(tmp_path / bench), "--corpus", index, "--out", str(audit), "--no-report", *extra)
        assert result.exit_code == 0, result.output
        result = run("filter", str(audit), "--out", str(tmp_path / out))
        assert result.exit_code == 0, result.output
    assert len(gzip.decompress((tmp_path / "clean.JSONL.GZ").read_bytes()).decode().splitlines()) == 37
    kept = pq.read_table(tmp_path / "clean.parquet").to_pylist()
    assert {row["id"] for row in kept} == {i.item_id for i in items} - {"39", "46"} and set(kept[0]) == {"id", "lang", "q", "a", "c"}


def test_the_manual_lists_the_names_the_filter_writes():
    from audit.cli.filteroutput import SUFFIXES

    text = page("filter.md")
    table = text[text.index("| input | `--out` may end in |") :].split("\n\n")[0].splitlines()[2:]
    cells = [row.strip().strip("|").split(" | ") for row in table]
    listed = {tuple(name.strip(" `") for name in written.split(", ")) for _, written in cells if written.lstrip().startswith("`")}
    assert listed == set(SUFFIXES.values())


def test_an_audit_from_before_languages_were_recorded_filters_the_same(planted_audit, tmp_path: Path):
    """Version 3 lacked `seen_in_languages`, `seen_in` and `asked_in`: its records are read as
    not recording them, and the filter removes exactly what it removes from version 4."""
    current = read_audit(planted_audit["audit"])
    assert current.manifest["schema_version"] == 4
    assert all(isinstance(r["seen_in_languages"], list) and isinstance(r["asked_in"], list) for r in current.records)
    older = tmp_path / "v3.audit.jsonl"
    _resealed(planted_audit["audit"], older, lambda _m, records: [r.pop(k) for r in records for k in ("seen_in_languages", "seen_in", "asked_in")])
    header, rest = older.read_text(encoding="utf-8").split("\n", 1)
    older.write_text(json.dumps(json.loads(header) | {"schema_version": 3}, ensure_ascii=False) + "\n" + rest, encoding="utf-8")
    assert all("seen_in" not in r for r in read_audit(older).records)
    outputs = {}
    for name, audit in (("v4", planted_audit["audit"]), ("v3", older)):
        out = tmp_path / f"{name}.csv.gz"
        result = run("filter", str(audit), "--bench", str(planted_audit["bench"]), "--out", str(out))
        assert result.exit_code == 0, result.output
        outputs[name] = (gzip.decompress(out.read_bytes()), json.loads((tmp_path / f"{name}.csv.gz.manifest.json").read_text())["counts"])
    assert outputs["v3"] == outputs["v4"] and outputs["v4"][1]["removed"] == 2
