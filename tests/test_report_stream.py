"""The report reads an audit in one pass and keeps no record: each record is judged as it
comes, and each item keeps only where its lines lie in the file."""
from __future__ import annotations

from pathlib import Path

from audit.auditfile import AuditFile, AuditStream, StoredRecords, read_audit, record_lines
from audit.evaluate.stratify import ExposureReader, read_exposure
from audit.evidence import Evidence
from audit.exposure import decide
from audit.policyfile import compile_policy
from audit.report.build import read_records
from audit.report.itemrecords import ItemRecords


def _oracle(audit: AuditFile, keep: str, name: str) -> dict[tuple[str, str], str]:
    """One signal's (or source's) labels the slow way: every record's evidence judged whole."""
    policy = compile_policy({"name": "audit", **audit.manifest["policy"]["settings"]}, "test")
    labels = {}
    for record in audit.records:
        evidence = [Evidence.from_dict(entry) for entry in record["evidence"]]
        labels[(record["item_id"], record["lang"])] = decide(policy, [e for e in evidence if getattr(e, keep) == name]).exposure
    return labels


def test_a_signal_met_only_in_later_records_labels_the_earlier_ones_too(planted_audit):
    audit = read_audit(planted_audit["audit"])
    # No signal or corpus named in the manifest, and the n-gram signal's evidence only from
    # the second half of the records on: the reader meets the signal and its source late.
    audit.manifest.update(signals=[], corpora=[])
    half = len(audit.records) // 2
    for record in audit.records[:half]:
        record["evidence"] = [entry for entry in record["evidence"] if entry["signal"] != "ngram"]
    labels = read_exposure(audit)
    assert list(labels.by_signal) == ["ngram"] and len(labels.by_source) == 1
    for signal in labels.by_signal:
        assert labels.by_signal[signal] == _oracle(audit, "signal", signal)
        # In the records' order, as the report's tables list them.
        assert list(labels.by_signal[signal]) == list(labels.overall)
    for source in labels.by_source:
        assert labels.by_source[source] == _oracle(audit, "source", source)
    assert {labels.signal_label("ngram", record["item_id"], record["lang"]) for record in audit.records[:half]} <= {"unknown", "unseen"}


def test_the_reader_one_record_at_a_time_equals_the_reader_of_the_whole_audit(planted_audit):
    audit = read_audit(planted_audit["audit"])
    reader = ExposureReader(audit.manifest)
    keys = [reader.add(record, number) for number, record in enumerate(audit.records, start=2)]
    whole, streamed = read_exposure(audit), reader.finish()
    assert keys == list(whole.overall)
    assert (streamed.overall, streamed.by_signal, streamed.by_source, streamed.signals, streamed.sources, streamed.judged) == (
        whole.overall, whole.by_signal, whole.by_source, whole.signals, whole.sources, whole.judged,
    )  # fmt: skip


def _stored(path: Path, records: list[dict]) -> AuditFile:
    with AuditStream(path) as stream:
        stream.add(record_lines(records), len(records))
        return stream.finish({"tool": "test"})


def test_an_item_keeps_where_its_lines_lie_even_when_they_are_apart(tmp_path: Path):
    records = [{"item_id": item, "lang": lang, "text": f"{item}-{lang} ünïcode"} for item, lang in [("a", "en"), ("a", "fr"), ("b", "en"), ("a", "de"), ("c", "en")]]
    audit = _stored(tmp_path / "audit.jsonl", records)
    assert isinstance(audit.records, StoredRecords)
    kept = ItemRecords(audit)
    for record, where in kept.located():
        kept.keep(record["item_id"], where)
    assert kept.item_ids() == ["a", "b", "c"]
    # Two runs for `a`: its first two lines are next to each other, its third is not.
    runs = kept.runs_of(kept.variants.item_number["a"])
    assert len(runs) == 2 and all(isinstance(offset, int) and isinstance(length, int) for offset, length in runs)
    assert runs[0][0] < runs[1][0] and len(kept.runs_of(kept.variants.item_number["b"])) == 1
    with kept.reading() as records_of:
        assert records_of("c") == [{"record": "exposure", **records[-1]}]
        assert [r["lang"] for r in records_of("a")] == ["en", "fr", "de"]
        assert records_of("c") == [{"record": "exposure", **records[-1]}]


def test_the_report_of_a_stored_audit_holds_no_record(planted_audit):
    path = planted_audit["audit"]
    held = read_audit(path)
    stored = AuditFile(held.manifest, StoredRecords(path, len(held.records)))
    read = read_records(stored, str(path))
    assert not read.records.held and len(read.records.runs[0]) >= len(read.records.item_ids())
    assert read.sections == read_records(held, str(path)).sections
    item_id = held.records[0]["item_id"]
    expected = [record for record in held.records if record["item_id"] == item_id]
    for records in (read.records, read_records(held, str(path)).records):
        with records.reading() as records_of:
            assert records_of(item_id) == expected
