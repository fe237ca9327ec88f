"""`audit filter` and `audit report` against edited audit files whose manifest digest was
recomputed, so only the schema, the manifest's own counts and the benchmark can tell; and the
filter's `--out` and `--manifest` names against the format it writes. The harness is
`tests/hostile.py`."""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import summary_of
from hostile import REPORT, Case, both, run_case

from audit.auditacross import Across
from audit.auditfile import AuditFile, AuditFileError, check_against_benchmark, locate_benchmark, read_audit
from audit.auditlines import _parse_strictly, has_long_digits, json_line, parse_line
from audit.auditscan import scan_audit
from audit.exposure import item_exposure
from audit.readers import load_benchmark, recorded_options

AUDIT = "bench.audit.jsonl"
V1 = Path(__file__).resolve().parent / "fixtures" / "audit-v1"
FILTER = ("filter", AUDIT, "--out", "clean.jsonl")
Records = list[dict[str, Any]]


def seal(root: Path, header: bytes, lines: list[bytes]) -> None:
    """Write the audit with `records` and `records_sha256` computed as `audit check` computes
    them: the count of record lines and the sha256 of their bytes, newlines included."""
    manifest = json.loads(header)
    manifest["records"], manifest["records_sha256"] = len(lines), hashlib.sha256(b"".join(lines)).hexdigest()
    (root / AUDIT).write_bytes(json_line(manifest) + b"".join(lines))


def resealed(edit: Callable[[dict[str, Any], Records], None], summary: bool = False) -> Callable[[Path], None]:
    """Edit the parsed manifest and records, write them back as the tool writes them, and
    recompute the digest (and, with `summary`, the manifest's summary) so the edit is sealed."""

    def prepare(root: Path) -> None:
        head, *rest = (root / AUDIT).read_bytes().splitlines(keepends=True)
        manifest, records = json.loads(head), [json.loads(line) for line in rest]
        edit(manifest, records)
        if summary:
            manifest["summary"] = summary_of(records)
        seal(root, json_line(manifest), [json_line(r) for r in records])

    return prepare


def raw(edit: Callable[[list[bytes]], list[bytes]]) -> Callable[[Path], None]:
    """Edit the record lines as bytes (for what the tool never writes), then reseal."""

    def prepare(root: Path) -> None:
        head, *rest = (root / AUDIT).read_bytes().splitlines(keepends=True)
        seal(root, head.rstrip(b"\r\n"), edit(rest))

    return prepare


def on_line(number: int, old: bytes, new: bytes) -> Callable[[Path], None]:
    """Replace the first `old` on audit line `number` (2 is the first record)."""

    def edit(lines: list[bytes]) -> list[bytes]:
        assert old in lines[number - 2], old
        lines[number - 2] = lines[number - 2].replace(old, new, 1)
        return lines

    return raw(edit)


def first(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], Records], None]:
    """An edit of the first record (line 2: item 33 in English, its source language, seen)."""
    return lambda _manifest, records: change(records[0])


def setting(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.__setitem__(key, value)


def dropping(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.pop(key)


def retagged(records: Records) -> None:
    """Roles and item tags recomputed the tool's way, so only the edit itself is wrong."""
    for record in records:
        record["role"] = "source" if record["lang"] == record["source_lang"] else "target"
    for item in {r["item_id"] for r in records}:
        group = [r for r in records if r["item_id"] == item]
        tag = item_exposure(group[0]["source_lang"], {r["lang"]: r["exposure"] for r in group}).value
        for record in group:
            record["item_exposure"] = tag


def foreign_everywhere(manifest: dict[str, Any], records: Records) -> None:
    """A language the benchmark lacks, declared in the manifest too: only the benchmark can tell."""
    records.append(dict(records[0], lang="xx", role="target"))
    manifest["benchmark"]["languages"].append("xx")
    retagged(records)


def source_moved(_manifest: dict[str, Any], records: Records) -> None:
    for record in records:
        if record["item_id"] == "33":
            record["source_lang"] = "fr"
    retagged(records)


def without(item: str, lang: str | None = None) -> Callable[[dict[str, Any], Records], None]:
    def edit(_manifest: dict[str, Any], records: Records) -> None:
        records[:] = [r for r in records if not (r["item_id"] == item and (lang is None or r["lang"] == lang))]

    return edit


def renamed(_manifest: dict[str, Any], records: Records) -> None:
    for record in records:
        if record["item_id"] == "33":
            record["item_id"] = "999"


def unseen_english(_manifest: dict[str, Any], records: Records) -> None:
    records[0]["exposure"] = "unseen"


def deep(_manifest: dict[str, Any], records: Records) -> None:
    records[0]["evidence"][0]["figures"]["nested"] = "DEEP"


def nest(lines: list[bytes]) -> list[bytes]:
    lines[0] = lines[0].replace(b'"DEEP"', b"[" * 100_000 + b"]" * 100_000, 1)
    return lines


def manifest_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], Records], None]:
    return lambda manifest, _records: change(manifest)


def header(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """Edit the manifest line alone, after the records were sealed."""

    def prepare(root: Path) -> None:
        head, rest = (root / AUDIT).read_bytes().split(b"\n", 1)
        manifest = json.loads(head)
        change(manifest)
        (root / AUDIT).write_bytes(json_line(manifest) + rest)

    return prepare


def crlf(lines: list[bytes]) -> list[bytes]:
    return [line.replace(b"\n", b"\r\n") for line in lines]


def add_bom(root: Path) -> None:
    (root / AUDIT).write_bytes(b"\xef\xbb\xbf" + (root / AUDIT).read_bytes())


def wrong_refused(name: str, prepare: Callable[[Path], None], *expect: str) -> Case:
    return Case(f"filter: {name}", FILTER, (AUDIT, *expect), prepare=prepare)


CASES = [
    # Records edited and the digest recomputed: the schema refuses them.
    wrong_refused("exposure 'maybe'", resealed(first(setting("exposure", "maybe"))), f"{AUDIT}:2", "field 'exposure'", "'maybe'", "seen, unseen, unknown"),
    wrong_refused("item tag unknown", resealed(first(setting("item_exposure", "leaky"))), f"{AUDIT}:2", "field 'item_exposure'"),
    wrong_refused("role 'both'", resealed(first(setting("role", "both"))), f"{AUDIT}:2", "field 'role'", "source, target"),
    wrong_refused("knowledge 'perhaps'", resealed(first(setting("knowledge", "perhaps"))), f"{AUDIT}:2", "field 'knowledge'", "or null"),
    wrong_refused("evidence status 'maybe'", resealed(first(lambda r: r["evidence"][1].__setitem__("status", "maybe"))), f"{AUDIT}:2", "field 'evidence[1].status'"),
    wrong_refused("check operator '~='", resealed(first(lambda r: r["decided_by"][0].__setitem__("op", "~="))), f"{AUDIT}:2", "field 'decided_by[0].op'", ">="),
    wrong_refused("check status 'maybe'", resealed(first(lambda r: r["decided_by"][0].__setitem__("status", "maybe"))), f"{AUDIT}:2", "field 'decided_by[0].status'"),
    wrong_refused("item id a number", resealed(first(setting("item_id", 33))), f"{AUDIT}:2", "field 'item_id'", "string"),
    wrong_refused("language null", resealed(first(setting("lang", None))), f"{AUDIT}:2", "field 'lang'"),
    wrong_refused("empty language", resealed(first(setting("lang", " "))), f"{AUDIT}:2", "field 'lang'"),
    wrong_refused("evidence a string", resealed(first(setting("evidence", "none"))), f"{AUDIT}:2", "field 'evidence'", "array"),
    wrong_refused("checks an object", resealed(first(setting("decided_by", {"signal": "ngram"}))), f"{AUDIT}:2", "field 'decided_by'", "array"),
    wrong_refused("figures an array", resealed(first(lambda r: r["evidence"][0].__setitem__("figures", [1, 2]))), f"{AUDIT}:2", "field 'evidence[0].figures'"),
    wrong_refused("provenance of numbers", resealed(first(lambda r: r["evidence"][0].__setitem__("provenance", [1]))), f"{AUDIT}:2", "field 'evidence[0].provenance[0]'"),
    wrong_refused("check value an object", resealed(first(lambda r: r["decided_by"][0].__setitem__("value", {"x": 1}))), f"{AUDIT}:2", "field 'decided_by[0].value'"),
    wrong_refused("record an array", raw(lambda lines: [b'["exposure"]\n', *lines[1:]]), f"{AUDIT}:2", "field 'record'"),
    wrong_refused("exposure missing", resealed(first(dropping("exposure"))), f"{AUDIT}:2", "field 'exposure'", "missing"),
    wrong_refused("item id missing", resealed(first(dropping("item_id"))), f"{AUDIT}:2", "field 'item_id'", "missing"),
    wrong_refused("evidence source missing", resealed(first(lambda r: r["evidence"][0].pop("source"))), f"{AUDIT}:2", "field 'evidence[0].source'", "missing"),
    wrong_refused("an extra record field", resealed(first(setting("leaky", False))), f"{AUDIT}:2", "field 'leaky'", "not a field"),
    wrong_refused("an extra evidence field", resealed(first(lambda r: r["evidence"][0].__setitem__("verdict", "clean"))), f"{AUDIT}:2", "field 'evidence[0].verdict'"),
    wrong_refused("an extra manifest key", resealed(manifest_edit(lambda m: m.__setitem__("approved", True))), f"{AUDIT}:1", "field 'approved'"),
    # ... the records against each other and the manifest's own counts.
    wrong_refused("a language the benchmark lacks", resealed(first(setting("lang", "xx")), summary=True), f"{AUDIT}:2", "field 'lang'", "'xx'"),
    wrong_refused("a duplicate record", resealed(lambda _m, records: records.append(dict(records[1])), summary=True), f"{AUDIT}:38", "second record", "line 3"),
    wrong_refused("role against the languages", resealed(first(setting("role", "target"))), f"{AUDIT}:2", "field 'role'"),
    wrong_refused("item tag against its languages", resealed(unseen_english, summary=True), f"{AUDIT}:2", "field 'item_exposure'", "unseen_everywhere"),
    wrong_refused("summary against the records", resealed(lambda _m, records: (unseen_english(_m, records), retagged(records))), f"{AUDIT}:1", "summary.languages.en"),
    wrong_refused("item summary against the records", resealed(manifest_edit(lambda m: m["summary"].__setitem__("items", {"unseen_everywhere": 3}))), f"{AUDIT}:1", "summary.items"),
    wrong_refused("fewer items declared than audited", resealed(manifest_edit(lambda m: m["benchmark"].__setitem__("items", 2))), f"{AUDIT}:1", "benchmark.items"),
    wrong_refused("count a string", resealed(manifest_edit(lambda m: m["summary"]["languages"]["en"].__setitem__("seen", "3"))), f"{AUDIT}:1", "summary.languages.en.seen"),
    wrong_refused("item count true", resealed(manifest_edit(lambda m: m["benchmark"].__setitem__("items", True))), f"{AUDIT}:1", "benchmark.items"),
    wrong_refused("record count a string", header(lambda m: m.__setitem__("records", str(m["records"]))), f"{AUDIT}:1", "field 'records'"),
    wrong_refused("record digest a number", header(lambda m: m.__setitem__("records_sha256", 0)), f"{AUDIT}:1", "field 'records_sha256'"),
    wrong_refused("a signal run 'ran' a string", resealed(manifest_edit(lambda m: m["signal_runs"][0].__setitem__("ran", "yes"))), f"{AUDIT}:1", "field 'signal_runs[0].ran'"),
    wrong_refused("links an array", resealed(manifest_edit(lambda m: m.__setitem__("links", ["x"]))), f"{AUDIT}:1", "field 'links'", "object"),
    wrong_refused("policy a string", resealed(manifest_edit(lambda m: m.__setitem__("policy", "lenient"))), f"{AUDIT}:1", "field 'policy'"),
    wrong_refused("summary missing", resealed(manifest_edit(lambda m: m.pop("summary"))), f"{AUDIT}:1", "field 'summary'", "missing"),
    # ... and against the benchmark.
    wrong_refused("a language declared but not the benchmark's", resealed(foreign_everywhere, summary=True), f"{AUDIT}:38", "'xx' is not a language of item '33'"),
    wrong_refused("an item not in the benchmark", resealed(renamed), f"{AUDIT}:2", "'999' is not an item of the benchmark"),
    wrong_refused("a variant without its record", resealed(without("33", "fr"), summary=True), "no record for 1 variant", "33/fr"),
    wrong_refused("an item without its records", resealed(without("30"), summary=True), "no record for 12 variant", "30/en"),
    wrong_refused("a source language not the item's", resealed(source_moved, summary=True), "field 'source_lang'", "'fr'", "'en'"),
    wrong_refused("a language declared that no item has", resealed(manifest_edit(lambda m: m["benchmark"]["languages"].append("xx"))), f"{AUDIT}:1", "benchmark.languages", "xx"),
    wrong_refused("more items declared than the benchmark has", resealed(manifest_edit(lambda m: m["benchmark"].__setitem__("items", 5))), f"{AUDIT}:1", "benchmark.items", "has 3"),
    # Bytes the tool never writes.
    wrong_refused("NaN", on_line(2, b'"value":1.0', b'"value":NaN'), f"{AUDIT}:2", "NaN"),
    wrong_refused("-Infinity", on_line(2, b'"value":1.0', b'"value":-Infinity'), f"{AUDIT}:2", "Infinity"),
    wrong_refused("a float past the range", on_line(2, b'"value":1.0', b'"value":1e999'), f"{AUDIT}:2", "out of range"),
    wrong_refused("an int past 64 bits", on_line(2, b'"value":1.0', b'"value":' + b"9" * 30), f"{AUDIT}:2", "out of range"),
    wrong_refused("an int of 5000 digits", on_line(2, b'"value":1.0', b'"value":' + b"9" * 5000), f"{AUDIT}:2", "out of range"),
    wrong_refused("a lone surrogate in an id", on_line(2, b'"item_id":"33"', b'"item_id":"33\\ud800"'), f"{AUDIT}:2", "field 'item_id'", "surrogate"),
    wrong_refused("a lone surrogate deep in provenance", on_line(2, b'"snippet":"', b'"snippet":"\\udfff'), f"{AUDIT}:2", "provenance", "surrogate"),
    wrong_refused("nesting 100,000 deep", both(resealed(deep), raw(nest)), f"{AUDIT}:2", "nested too deeply"),
    wrong_refused("a blank line among the records", raw(lambda lines: [lines[0], b"\n", *lines[1:]]), f"{AUDIT}:3", "not valid JSON"),
    wrong_refused("schema_version true", resealed(manifest_edit(lambda m: m.__setitem__("schema_version", True))), f"{AUDIT}:1", "schema_version"),
    # Not files at all.
    Case("filter: /dev/zero as the audit", ("filter", "/dev/zero", "--out", "clean.jsonl"), ("/dev/zero", "not a regular file")),
    Case("filter: a named pipe as the audit", ("filter", "pipe.audit.jsonl", "--out", "clean.jsonl"), ("pipe.audit.jsonl", "not a regular file"),
         prepare=lambda root: os.mkfifo(root / "pipe.audit.jsonl")),
    Case("filter: /dev/zero as the benchmark", ("filter", AUDIT, "--bench", "/dev/zero", "--out", "clean.jsonl"), ("/dev/zero", "not a regular file")),
    Case("report: /dev/zero as the audit", ("report", "--audit", "/dev/zero", "--out", "r"), ("/dev/zero", "not a regular file")),
    # The filter writes the input's format, named by --out, or refuses.
    Case("filter: --out .parquet for JSONL", ("filter", AUDIT, "--out", "clean.parquet"), ("clean.parquet", "names Parquet", "JSON Lines", ".jsonl.gz")),
    Case("filter: --out .csv for JSONL", ("filter", AUDIT, "--out", "clean.csv"), ("clean.csv", "names CSV", ".jsonl")),
    Case("filter: --out .json for JSONL", ("filter", AUDIT, "--out", "clean.json"), ("clean.json", "names JSON", ".ndjson")),
    Case("filter: --out .xlsx", ("filter", AUDIT, "--out", "clean.xlsx"), ("clean.xlsx", ".xlsx", "not a format")),
    Case("filter: --out .parquet.gz", ("filter", AUDIT, "--out", "clean.parquet.gz"), ("clean.parquet.gz", "Parquet")),
    Case("filter: --out without a suffix", ("filter", AUDIT, "--out", "clean"), ("--out clean", "no suffix", ".jsonl")),
    Case("filter: --out a hidden name", ("filter", AUDIT, "--out", ".clean"), ("no suffix",)),
    Case("filter: --flag into .tsv", ("filter", AUDIT, "--out", "flagged.tsv", "--flag"), ("flagged.tsv", "names TSV")),
    Case("filter: --manifest .yaml", ("filter", AUDIT, "--out", "clean.jsonl", "--manifest", "m.yaml"), ("--manifest m.yaml", "JSON", ".json")),
    Case("filter: --manifest without a suffix", ("filter", AUDIT, "--out", "clean.jsonl", "--manifest", "removed"), ("--manifest removed", ".json")),
    # audit report reads audits through the same checks.
    Case("report: exposure 'maybe'", (*REPORT, "--out", "r"), (f"{AUDIT}:2", "field 'exposure'"), prepare=resealed(first(setting("exposure", "maybe")))),
    Case("report: a duplicate record", (*REPORT, "--out", "r"), (f"{AUDIT}:38", "second record"), prepare=resealed(lambda _m, records: records.append(dict(records[1])), summary=True)),
    Case("report: a language declared but not the benchmark's", (*REPORT, "--out", "r"), ("'xx' is not a language of item",), prepare=resealed(foreign_everywhere, summary=True)),
    Case("report: a variant without its record", (*REPORT, "--out", "r"), ("no record for 1 variant",), prepare=resealed(without("33", "fr"), summary=True)),
    Case("report: NaN", (*REPORT, "--out", "r"), (f"{AUDIT}:2", "NaN"), prepare=on_line(2, b'"value":1.0', b'"value":NaN')),
    # Valid but odd: handled right.
    Case("filter: audit with a byte-order mark", FILTER, ("kept 3",), exit_code=0, prepare=add_bom),
    Case("filter: audit with CRLF lines, resealed", FILTER, ("kept 3",), exit_code=0, prepare=raw(crlf)),
    Case("filter: records reordered, resealed", FILTER, ("kept 3",), exit_code=0, prepare=resealed(lambda _m, records: records.reverse())),
    Case("filter: keys sorted, resealed", FILTER, ("kept 3",), exit_code=0,
         prepare=raw(lambda lines: [(json.dumps(json.loads(line), sort_keys=True) + "\n").encode() for line in lines])),
    Case("filter: one language dropped whole, as --langs would", FILTER, ("kept 3",), exit_code=0,
         prepare=resealed(lambda _m, records: records.__setitem__(slice(None), [r for r in records if r["lang"] != "ja"]), summary=True)),
    Case("filter: a version-2 audit without knowledge", FILTER, ("kept 3",), exit_code=0,
         prepare=resealed(lambda m, records: (m.__setitem__("schema_version", 2), [(r.pop("knowledge"), r.pop("knowledge_decided_by")) for r in records]))),
    Case("filter: a version-1 audit", ("filter", "v1/v1.audit.jsonl", "--bench", "v1/bench.jsonl", "--out", "clean.jsonl"), ("2 items",), exit_code=0,
         prepare=lambda root: shutil.copytree(V1, root / "v1")),
    Case("filter: --out .jsonl.gz", ("filter", AUDIT, "--out", "clean.jsonl.gz"), ("kept 3", "clean.jsonl.gz"), exit_code=0),
    Case("filter: --out .JSONL.GZ, gzipped", ("filter", AUDIT, "--out", "CLEAN.JSONL.GZ"), ("kept 3",), exit_code=0),
    Case("filter: --out .ndjson", ("filter", AUDIT, "--out", "clean.ndjson"), ("kept 3",), exit_code=0),
    Case("filter: --out in capitals", ("filter", AUDIT, "--out", "CLEAN.JSONL"), ("kept 3",), exit_code=0),
    Case("filter: --flag --out .jsonl.gz, --manifest .JSON", ("filter", AUDIT, "--out", "f.jsonl.gz", "--flag", "--manifest", "m.JSON"), ("flagged 0", "m.JSON"), exit_code=0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_filter_and_report_refuse_edited_audits(case: Case, sandbox: Path, capfd) -> None:
    run_case(case, sandbox, capfd)


def read_whole(path: Path) -> tuple[AuditFile, None]:
    """`read_audit`: the benchmark check then goes through the records it holds."""
    return read_audit(path), None


def outcome(read: Callable[[Path], tuple[AuditFile, Across | None]], path: Path, bench: Path | None) -> str | Records:
    """What a reader makes of an audit, its benchmark included, as `audit report` asks: the
    message it refuses it with, or its records."""
    try:
        audit, across = read(path)
        found, recorded = locate_benchmark(audit, path, bench)
        items = load_benchmark(found, recorded.format, options=recorded_options(recorded.mapping, recorded.source_lang)).items
        check_against_benchmark(audit, path, items, across)
        return list(audit.records)
    except AuditFileError as error:
        return str(error)


READS = [case for case in CASES if case.args[0] == "filter" and case.prepare is not None]


@pytest.mark.parametrize("case", READS, ids=[c.name.removeprefix("filter: ") for c in READS])
def test_the_one_pass_read_refuses_and_reads_as_the_whole_read(case: Case, sandbox: Path) -> None:
    """`audit report` checks an audit in one pass that keeps a few fields per record
    (`scan_audit`): every damaged file gets `read_audit`'s message, and every sound one the
    same records."""
    case.prepare(sandbox)
    path = sandbox / case.args[1]
    bench = sandbox / case.args[case.args.index("--bench") + 1] if "--bench" in case.args else None
    whole, scanned = outcome(read_whole, path, bench), outcome(scan_audit, path, bench)
    assert scanned == whole
    assert isinstance(whole, str) == (case.exit_code != 0)


def test_an_audit_changed_after_its_check_is_refused_when_read_back(sandbox: Path) -> None:
    """The one-pass read checks the file, and the report reads it again: lines changed in
    between are refused, not reported."""
    audit, _ = scan_audit(sandbox / AUDIT)
    first = next(iter(audit.records))
    lines = (sandbox / AUDIT).read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"exposure":"' + first["exposure"].encode(), b'"exposure":"maybe', 1)
    (sandbox / AUDIT).write_bytes(b"".join(lines))
    with pytest.raises(AuditFileError, match="changed while it was being read"):
        list(audit.records)


LINES = [
    b'{"record": "exposure", "value": 1.0, "n": 3}\n',
    b'{"a": 9223372036854775807}\n', b'{"a": -9223372036854775807}\n', b'{"a": 9223372036854775808}\n', b'{"a": -9223372036854775808}\n',
    b'{"a": 123456789012345678}\n', b'{"a": 18446744073709551616}\n', b'{"a": 1e308}\n', b'{"a": 1e309}\n', b'{"a": -1e999}\n', b'{"a": 5e-324}\n', b'{"a": 1e-400}\n',
    b'{"a": NaN}\n', b'{"a": Infinity}\n', b'{"a": "\\ud83d\\ude00"}\n', b'{"a": "\\ud800"}\n', b'{"a": "\\udfff x"}\n', b'{"a": "\xed\xa0\x80"}\n',
    b'{"a": "\xff"}\n', b'{"a": "\x01"}\n', b'{"a": 1, "a": 2}\n', b'{"a": [1, 2,]}\n', b'{"a": 01}\n', b'{"a": -0}\n', b'{"a": -0.0}\n', b"\n", b"  \r\n",
    b"[" * 800 + b"]" * 800 + b"\n", b"[" * 1025 + b"]" * 1025 + b"\n", b"[" * 100_000 + b"]" * 100_000 + b"\n", b'"\xef\xbb\xbf"\n', b'\xef\xbb\xbf{}\n',
]


@pytest.mark.parametrize("raw", LINES, ids=range(len(LINES)))
def test_a_record_line_reads_as_the_strict_parser_reads_it(raw: bytes) -> None:
    """A record line goes through orjson first: every value, and every refusal's message, is
    the strict parser's."""
    def read(parse: Callable[[Path, int, bytes], Any]) -> Any:
        try:
            value = parse(Path("a.jsonl"), 2, raw)
        except AuditFileError as error:
            return ("refused", str(error))
        try:
            return ("value", repr(value))
        except RecursionError:  # deeper than repr goes: orjson refused it, so both are the strict parser's
            return ("value", "deeper than repr goes")

    assert read(parse_line) == read(_parse_strictly)


def test_a_run_of_nineteen_digits_is_found_as_the_regular_expression_finds_it() -> None:
    """`has_long_digits` (a byte table) against what it replaced, `re`'s bytes `\\d{19}`: runs
    of 18, 19 and 20 digits at every edge, split by every other byte, and non-ASCII digits."""
    pattern = re.compile(rb"\d{19}")
    rng = random.Random(19)
    pieces = [b"1" * 18, b"2" * 19, b"3" * 20, b"0", b"9", b".", b"-", b"e", b" ", b"\xd9\xa3", b"\xef\xbc\x91", b"\x00", bytes([47]), bytes([58]), bytes([255])]
    lines = [b"", b"1" * 19, b"a" + b"7" * 19 + b"a", b"8" * 18 + b"x" + b"8" * 18, "١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦٧٨٩٠".encode()]
    lines += [b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12))) for _ in range(3000)]
    assert sum(bool(pattern.search(line)) for line in lines) > 500
    for line in lines:
        assert has_long_digits(line) == bool(pattern.search(line)), line


def test_every_line_of_an_audit_reads_as_the_strict_parser_reads_it(sandbox: Path) -> None:
    for number, raw in enumerate((sandbox / AUDIT).read_bytes().splitlines(keepends=True)[1:], start=2):
        assert repr(parse_line(sandbox / AUDIT, number, raw)) == repr(_parse_strictly(sandbox / AUDIT, number, raw))
