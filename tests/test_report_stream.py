"""The report reads an audit in one pass and keeps no record: each record is judged as it
comes, and each item keeps only where its lines lie in the file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from audit.auditfile import AuditFile, AuditFileError, AuditStream, StoredRecords, read_audit, record_lines
from audit.auditscan import scan_audit
from audit.evaluate.stratify import ExposureReader, read_exposure
from audit.evidence import Evidence
from audit.exposure import decide
from audit.policyfile import compile_policy
from audit.report.build import RecordReading, read_records
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
    kept = ItemRecords(audit.records.path)
    for record, where in audit.records.located():
        kept.keep(record["item_id"], where)
    assert kept.item_ids() == ["a", "b", "c"]
    # Two runs for `a`: its first two lines are next to each other, its third is not.
    assert len(kept.where["a"]) == 2 and all(isinstance(offset, int) and isinstance(length, int) for offset, length in kept.where["a"])
    with kept.reading() as records_of:
        assert records_of("c") == [{"record": "exposure", **records[-1]}]
        assert [r["lang"] for r in records_of("a")] == ["en", "fr", "de"]
        assert records_of("c") == [{"record": "exposure", **records[-1]}]


def test_the_report_of_a_stored_audit_holds_no_record(planted_audit):
    path = planted_audit["audit"]
    held = read_audit(path)
    stored = AuditFile(held.manifest, StoredRecords(path, len(held.records)))
    read = read_records(stored, str(path))
    assert all(isinstance(run, tuple) for runs in read.records.where.values() for run in runs)
    assert read.sections == read_records(held, str(path)).sections
    item_id = held.records[0]["item_id"]
    expected = [record for record in held.records if record["item_id"] == item_id]
    for records in (read.records, read_records(held, str(path)).records):
        with records.reading() as records_of:
            assert records_of(item_id) == expected


def test_the_scan_feeds_the_report_the_reading_it_would_do_itself(planted_audit):
    """`audit report` reads the file once: the scan hands each sound record to the report's
    reading, which then holds what reading the file again would (sections, labels, where each
    item's lines lie)."""
    path = planted_audit["audit"]
    readings: list[RecordReading] = []

    def reading_for(manifest):
        readings.append(RecordReading(manifest, path))
        return readings[0].add

    audit, _ = scan_audit(path, reading_for)
    fed, again = readings[0].finish(str(path)), read_records(audit, str(path))
    assert fed.sections == again.sections
    assert (fed.labels.overall, fed.labels.by_signal, fed.labels.by_source) == (again.labels.overall, again.labels.by_signal, again.labels.by_source)
    assert fed.records.where == again.records.where and len(fed.records.where) > 1
    lines = path.read_bytes().splitlines(keepends=True)
    offset, length = fed.records.where[read_audit(path).records[0]["item_id"]][0]
    assert offset == len(lines[0]) and path.read_bytes()[offset : offset + length].endswith(b"\n")


def test_a_record_the_labels_refuse_stops_the_reading_and_names_the_file(planted_audit):
    path = planted_audit["audit"]
    held = read_audit(path)
    reading = RecordReading(held.manifest, None)
    first = held.records[0]
    for number, record in enumerate([first, *held.records[1:3], first, held.records[3]], start=2):
        reading.add(record, number, record)
    assert reading.problem is not None
    assert len(reading.records.where[first["item_id"]]) == len([r for r in held.records[:3] if r["item_id"] == first["item_id"]])
    with pytest.raises(AuditFileError, match=rf"^{re.escape(str(path))}: audit record 5: item '{re.escape(first['item_id'])}' in '{first['lang']}' appears twice"):
        reading.finish(str(path))


def test_a_damaged_file_is_refused_and_its_reading_fed_only_the_records_before_the_damage(planted_audit, tmp_path):
    damaged = tmp_path / "damaged.audit.jsonl"
    lines = planted_audit["audit"].read_bytes().splitlines(keepends=True)
    damaged.write_bytes(b"".join([lines[0], *lines[1:3], b'{"record": "exposure", "item_id": 7}\n', *lines[4:]]))
    readings: list[RecordReading] = []

    def reading_for(manifest):
        readings.append(RecordReading(manifest, damaged))
        return readings[0].add

    with pytest.raises(AuditFileError, match=rf"^{re.escape(str(damaged))}: the records' sha256 differs"):
        scan_audit(damaged, reading_for)
    # Fed the two sound records before the damaged line, and none after it.
    assert len(readings[0].reader.overall) == 2
