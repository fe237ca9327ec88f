"""The report's pass over the records made while `audit check` writes them: the same report as
the pass over the file, and never a cause of a lost check."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import audit.report.render as render
from audit.auditfile import AuditStream, as_written, read_audit, record_lines
from audit.auditlines import json_line
from audit.cli import main
from audit.evidence import Evidence
from audit.exposure import Knowledge, Membership, decide
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.records import ExposureRecord
from audit.recordview import Views
from audit.report.aswritten import ReadAsWritten
from audit.report.build import READ_WHOLE, read_records
from audit.report.render import write_report
from audit.run import AuditRequest, run_audit


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_pass_made_as_the_check_writes_gives_the_report_of_the_file(planted_audit, tmp_path: Path, monkeypatch, workers: int):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    request = AuditRequest.of(benchmark=planted_audit["bench"], corpora=[str(planted_audit["index"])], workers=workers, out=tmp_path / "a.audit.jsonl")
    as_written = ReadAsWritten()
    written = run_audit(request, lines=as_written)
    read = as_written.read(written)
    assert read is not None and as_written.failed is None
    again = read_records(written, str(request.target))
    labels, whole = read.labels, again.labels
    assert (labels.overall, labels.by_signal, labels.by_source, labels.signals, labels.sources, labels.judged) == (
        whole.overall, whole.by_signal, whole.by_source, whole.signals, whole.sources, whole.judged,
    )  # fmt: skip
    assert list(labels.overall) == list(whole.overall) and read.records.item_ids() == again.records.item_ids()
    # Each item's lines are found where the file holds them, after its manifest line.
    with read.records.reading() as mine, again.records.reading() as theirs:
        assert all(mine(item_id) == theirs(item_id) for item_id in again.records.item_ids())
    items = load_benchmark(planted_audit["bench"]).items
    write_report(tmp_path / "as-written", written, str(request.target), items, read=read)
    write_report(tmp_path / "from-file", written, str(request.target), items)
    made, reread = _files(tmp_path / "as-written"), _files(tmp_path / "from-file")
    assert len(made) > 10 and made == reread


def test_audit_check_reports_from_the_pass_it_made_as_it_wrote(planted_audit, tmp_path: Path, monkeypatch):
    """`audit check` does not read its own file again before the pages; its report is the
    bytes `audit report` writes of that file."""
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "b.audit.jsonl"

    def refused(*args: object) -> None:
        raise AssertionError("the report read the records again")

    with monkeypatch.context() as patched:
        patched.setattr(render, "read_records", refused)
        result = CliRunner().invoke(main, ["check", str(planted_audit["bench"]), "--corpus", str(planted_audit["index"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    again = CliRunner().invoke(main, ["report", "--audit", str(out), "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    made = _files(tmp_path / "b.report")
    assert len(made) > 10 and made == _files(tmp_path / "again")


def _written(path: Path, as_written: ReadAsWritten, blocks: list[bytes], counts: list[int], policy_settings: dict | None = None):
    with AuditStream(path, as_written.add) as stream:
        for block, count in zip(blocks, counts, strict=True):
            stream.add(block, count)
        return stream.finish({"tool": "test", "policy": {"settings": policy_settings}})


def test_a_line_the_pass_cannot_read_stops_the_pass_not_the_writing(planted_audit, tmp_path: Path):
    records = read_audit(planted_audit["audit"]).records
    policy = load_policy(None)
    as_written = ReadAsWritten()
    as_written.start(policy)
    good, bad = record_lines(records[:3]), b'{"record": "exposure", "item_id": "x"\n'
    written = _written(tmp_path / "c.audit.jsonl", as_written, [good, bad, record_lines(records[3:5])], [3, 1, 2], policy.settings)
    assert as_written.failed is not None and as_written.failed.startswith("line 5:")
    # The file holds every line written all the same; the report is left to read it.
    assert written.manifest["records"] == 6 and (tmp_path / "c.audit.jsonl").read_bytes().count(b"\n") == 7
    assert as_written.read(written) is None


def test_a_pass_under_another_policy_or_short_of_lines_gives_nothing(planted_audit, tmp_path: Path):
    records = read_audit(planted_audit["audit"]).records
    policy = load_policy(None)
    as_written = ReadAsWritten()
    as_written.start(policy)
    other = dict(policy.settings, rules=[])
    written = _written(tmp_path / "d.audit.jsonl", as_written, [record_lines(records[:4])], [4], other)
    assert as_written.failed is None and as_written.read(written) is None
    # Lines written past the pass (none handed to it) leave it short: nothing either.
    short = ReadAsWritten()
    short.start(policy)
    with AuditStream(tmp_path / "e.audit.jsonl") as stream:
        stream.add(record_lines(records[:2]), 2)
        short.add(record_lines(records[:1]))
        written = stream.finish({"tool": "test", "policy": {"settings": policy.settings}})
    assert short.read(written) is None
    # Never started (a check that asked for no report): nothing, and lines are ignored.
    idle = ReadAsWritten()
    idle.add(record_lines(records[:1]))
    assert idle.read(written) is None


def _with_every_kind(record: ExposureRecord, k: int) -> ExposureRecord:
    """The record with the evidence the report's sections read whole: a Wikipedia article in a
    target language (the premise), a self-summary the judge read (the judge's calibration) and
    membership scores, and what the model knows and its membership verdict."""
    record.evidence += [
        Evidence("langlinks", "wikipedia", "article", figures={"article": True, "title": f"T{k}", "url": f"https://x.org/{k}", "existed": k % 3 == 0,
                                                               "created": "2019-01-01", "as_of": "2024-01-01", "item_article": f"I{k}"}),
        Evidence("probe", "tiny", "summary", figures={"judge": ("known", "not_known", "?")[k % 3], "answer_recall": (k % 4) / 3, "chrf": k / 10},
                 provenance=[{"judge": "known", "reply": "<b>x</b>"}]),
        Evidence("membership", "tiny", "question", figures={"loss": 1.0 + k / 7, "zlib": 0.5, "min_k": -k / 5}),
    ]  # fmt: skip
    record.knowledge = (Knowledge.KNOWN, Knowledge.NOT_KNOWN)[k % 2]
    record.membership = (Membership.MEMBER, Membership.NON_MEMBER)[k % 2]
    return record


def _report_of_views(planted_audit, out: Path, whole: frozenset[str]) -> dict[str, bytes]:
    audit = read_audit(planted_audit["audit"])
    records = [_with_every_kind(ExposureRecord.from_dict(line), k) for k, line in enumerate(audit.records)]
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    manifest["signals"] = [*manifest["signals"], "membership"]
    policy = load_policy(None)
    as_written_pass = ReadAsWritten()
    as_written_pass.start(policy)
    views = Views(whole)
    with AuditStream(out / "v.audit.jsonl", as_written_pass.add) as stream:
        for block in (records[:7], records[7:]):
            written = [as_written(record) for record in block]
            stream.add(b"".join(map(json_line, written)), len(block), [views.view(r, w, decide(policy, r.evidence, r.lang).said) for r, w in zip(block, written, strict=True)])
        audit_file = stream.finish(manifest)
    read = as_written_pass.read(audit_file)
    assert read is not None and as_written_pass.failed is None
    items = load_benchmark(planted_audit["bench"]).items
    write_report(out / "as-written", audit_file, "v.audit.jsonl", items, read=read)
    write_report(out / "from-file", audit_file, "v.audit.jsonl", items)
    return {"as-written": _files(out / "as-written"), "from-file": _files(out / "from-file")}


def test_views_made_where_the_records_are_give_the_report_of_their_lines(planted_audit, tmp_path: Path):
    """A worker's views of its records (the evidence the sections read kept whole, the rest
    judged there) give the report the file gives, premise, calibration and membership too."""
    made = _report_of_views(planted_audit, tmp_path, READ_WHOLE)
    assert len(made["from-file"]) > 10 and made["as-written"] == made["from-file"]
    report = json.loads(made["from-file"]["report.json"])
    assert report["premise"]["total"]["fails"] > 0
    assert report["knowledge"]["calibration"]["verdicts"]["known"]["summaries"] > 0
    assert report["membership"]["calibration"]["fields"]["question"]
    # Views that keep nothing whole lose what the sections read: the test can tell.
    (tmp_path / "none").mkdir()
    lost = _report_of_views(planted_audit, tmp_path / "none", frozenset())
    assert lost["as-written"] != lost["from-file"]
