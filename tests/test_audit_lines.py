"""Audit lines are compact JSON (orjson), and hold exactly what the standard library's spaced
lines held: the same values for every kind of value a record carries, and a file written with
spaces after the separators, as earlier versions wrote it, reads as the same audit."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest
from conftest import ECLEKTIC_CSV

from audit.auditfile import read_audit, record_lines
from audit.auditlines import json_line
from audit.run import AuditRequest, run_audit

AWKWARD = {
    "text": 'Zürich "quoted" back\\slash\ttab\nnewline \x01 東京 \u2028 🙂',
    "numbers": [0, -1, 2**63 - 1, 2**64 - 1, 1.0, 0.1, 1e-05, 2.5e-07, 1e16, 123456789.0, -0.0],
    "counts": {1: 2, 3: 4},
    "nested": {"empty": {}, "list": [], "none": None, "flags": [True, False]},
}


def test_a_line_holds_what_the_standard_library_wrote_without_its_spaces():
    line = json_line(AWKWARD)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(json.dumps(AWKWARD, ensure_ascii=False))
    assert "東京".encode() in line and b"\\u" not in line.replace(b"\\u0001", b"").replace(b"\\u2028", b"")
    assert b'{"text":"Z' in line and b'"counts":{"1":2,"3":4}' in line
    plain = {key: value for key, value in AWKWARD.items() if key != "counts"}
    assert json_line(plain) == orjson.dumps(plain, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
    assert record_lines([AWKWARD, {"n": 1}]) == json_line({"record": "exposure", **AWKWARD}) + b'{"record":"exposure","n":1}\n'


def test_a_lone_surrogate_is_refused_not_written():
    with pytest.raises(TypeError, match="surrogates"):
        json_line({"text": "alone \ud800"})


def spaced(path: Path, out: Path) -> None:
    """The audit at `path` as earlier versions wrote it: a space after every separator, and the
    manifest's digest of those lines."""
    head, *rest = path.read_bytes().splitlines(keepends=True)
    lines = [(json.dumps(json.loads(line), ensure_ascii=False) + "\n").encode() for line in rest]
    manifest = json.loads(head) | {"records_sha256": hashlib.sha256(b"".join(lines)).hexdigest()}
    out.write_bytes((json.dumps(manifest, ensure_ascii=False) + "\n").encode() + b"".join(lines))


def test_an_audit_written_compact_reads_as_the_same_audit_written_spaced(wiki_index: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    request = AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)], langs=["en", "fr", "ja"], workers=1, out=tmp_path / "a.audit.jsonl")
    run_audit(request)
    written = request.target.read_bytes().splitlines(keepends=True)
    assert all(line == json_line(json.loads(line)) for line in written)
    assert b'"record":"manifest"' in written[0] and all(line.startswith(b'{"record":"exposure",') for line in written[1:])
    spaced(request.target, tmp_path / "spaced.audit.jsonl")
    compact, old = read_audit(request.target), read_audit(tmp_path / "spaced.audit.jsonl")
    assert old.records == compact.records and len(compact.records) == compact.manifest["records"] > 0
    assert {k: v for k, v in old.manifest.items() if k != "records_sha256"} == {k: v for k, v in compact.manifest.items() if k != "records_sha256"}
    assert (tmp_path / "spaced.audit.jsonl").stat().st_size > request.target.stat().st_size
