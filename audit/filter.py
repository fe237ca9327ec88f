"""Remove or flag leaky items before a benchmark is released.

The clean benchmark is written in the input's own format by copying the kept items' original
rows, so nothing the audit did not judge is rewritten (and never converted: see
`audit.cli.filteroutput`).  The audit must describe the very file
being filtered: `audit.auditfile.locate_benchmark` checks the sha256 its manifest records
before the benchmark is read.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from audit import __version__
from audit.auditfile import AuditedBenchmark, AuditFile
from audit.errors import AuditError
from audit.exposure import SEEN, UNKNOWN, Knowledge, Membership
from audit.items import Item
from audit.outputs import atomic_write_bytes, commit_directory, discard_staging, staging_directory
from audit.readers import FORMATS
from audit.readers.squad import squad_files
from audit.records import JsonObject
from audit.timestamps import utc_timestamp

RULES = ("target-seen", "any-seen")


class FilterError(AuditError):
    """The audit and the benchmark do not belong together, or the output cannot be written."""


@dataclass(frozen=True)
class FilterPolicy:
    """Which items leak: `target-seen` (seen in any target language, ECLeKTic's concern) or
    `any-seen` (seen anywhere, source included); `unknown` items are kept unless asked.
    `drop_known` also drops an item the probed model already knows in any language
    (LiveCLKTBench's construction rule: only facts the model does not know test transfer);
    `drop_member` one whose text the model's calibrated membership scores call a member."""

    rule: str = "target-seen"
    drop_unknown: bool = False
    drop_known: bool = False
    drop_member: bool = False

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise FilterError(f"unknown filter rule {self.rule!r}; expected one of {', '.join(RULES)}")


@dataclass
class Verdict:
    item_id: str
    leaky: bool
    reason: str
    seen_languages: list[str] = field(default_factory=list)
    unknown_languages: list[str] = field(default_factory=list)
    decided_by: dict[str, list[JsonObject]] = field(default_factory=dict)
    known_languages: list[str] = field(default_factory=list)
    knowledge_decided_by: dict[str, list[JsonObject]] = field(default_factory=dict)
    member_languages: list[str] = field(default_factory=list)
    membership_decided_by: dict[str, list[JsonObject]] = field(default_factory=dict)


def _leaky_entry(v: Verdict, policy: FilterPolicy) -> JsonObject:
    """A leaky item as the removal manifest lists it: the languages and checks behind it."""
    return ({"item_id": v.item_id, "reason": v.reason, "seen_languages": v.seen_languages, "unknown_languages": v.unknown_languages, "decided_by": v.decided_by}
            | ({"known_languages": v.known_languages, "knowledge_decided_by": v.knowledge_decided_by} if policy.drop_known else {})
            | ({"member_languages": v.member_languages, "membership_decided_by": v.membership_decided_by} if policy.drop_member else {}))


def judge_items(audit: AuditFile, policy: FilterPolicy) -> dict[str, Verdict]:
    """One verdict per audited item, with the evidence that decided each seen language."""
    by_item: dict[str, list[JsonObject]] = {}
    for record in audit.records:
        by_item.setdefault(record["item_id"], []).append(_verdict_fields(record))
    verdicts = {}
    for item_id, records in by_item.items():
        seen = [r for r in records if r.get("exposure") == SEEN and (policy.rule == "any-seen" or r.get("role") == "target")]
        unknown = [r for r in records if r.get("exposure") == UNKNOWN]
        known = [r for r in records if r.get("knowledge") == Knowledge.KNOWN] if policy.drop_known else []
        members = [r for r in records if r.get("membership") == Membership.MEMBER] if policy.drop_member else []
        if seen:
            reason = "seen in a target language" if policy.rule == "target-seen" else "seen"
        elif unknown and policy.drop_unknown:
            reason = "exposure unknown"
        elif known:
            reason = "known to the probed model"
        elif members:
            reason = "a member of the probed model's training data (calibrated membership scores)"
        else:
            reason = ""
        verdicts[item_id] = Verdict(
            item_id=item_id,
            leaky=bool(reason),
            reason=reason or ("kept: " + records[0].get("item_exposure", "")),
            seen_languages=[r["lang"] for r in seen],
            unknown_languages=[r["lang"] for r in unknown],
            decided_by={r["lang"]: r.get("decided_by", []) for r in seen + (unknown if policy.drop_unknown else [])},
            known_languages=[r["lang"] for r in known],
            knowledge_decided_by={r["lang"]: r.get("knowledge_decided_by", []) for r in known},
            member_languages=[r["lang"] for r in members],
            membership_decided_by={r["lang"]: r.get("membership_decided_by", []) for r in members},
        )
    return verdicts


# What a verdict reads of every record, and of some their checks (`_verdict_fields`).
VERDICT_FIELDS = ("item_id", "lang", "role", "exposure", "item_exposure", "knowledge", "membership")


def _verdict_fields(record: JsonObject) -> JsonObject:
    """What `judge_items` reads of a record, so an audit read from disk is judged without
    holding its evidence: the checks only of a seen or unknown language, a known one, a member."""
    kept = {name: record[name] for name in VERDICT_FIELDS if name in record}
    if record.get("exposure") in (SEEN, UNKNOWN):
        kept["decided_by"] = record.get("decided_by", [])
    if record.get("knowledge") == Knowledge.KNOWN:
        kept["knowledge_decided_by"] = record.get("knowledge_decided_by", [])
    if record.get("membership") == Membership.MEMBER:
        kept["membership_decided_by"] = record.get("membership_decided_by", [])
    return kept


def _read_text(path: Path) -> tuple[str, bool]:
    """The file's text (gunzipped when it is gzip) and whether it began with a byte-order mark."""
    raw = path.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return data.decode("utf-8-sig"), data.startswith(b"\xef\xbb\xbf")


def _write_text(path: Path, text: str, bom: bool = False) -> None:
    """Write beside the target and rename, gzipping when the name ends in .gz."""
    data = (("\ufeff" if bom else "") + text).encode("utf-8")
    atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.name.lower().endswith(".gz") else data)


def _flag(verdict: Verdict | None) -> JsonObject:
    if verdict is None:
        return {"leaky": None, "reason": "not audited"}
    return {"leaky": verdict.leaky, "reason": verdict.reason, "seen_languages": verdict.seen_languages}


def _filter_jsonl(source: Path, out: Path, line_owner: dict[int, str], verdicts: dict[str, Verdict], flag: bool) -> None:
    lines = []
    for number, line in enumerate(io.StringIO(_read_text(source)[0], newline=""), start=1):
        owner = line_owner.get(number)
        if owner is None:
            continue
        verdict = verdicts.get(owner)
        if flag:
            record = json.loads(line)
            record["audit"] = _flag(verdict)
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        elif verdict is None or not verdict.leaky:
            lines.append(line if line.endswith("\n") else line + "\n")
    _write_text(out, "".join(lines))


def _csv_records(handle: io.TextIOBase, delimiter: str) -> Iterable[tuple[int, list[str]]]:
    reader = csv.reader(handle, delimiter=delimiter)
    start = 1
    for row in reader:
        yield start, row
        start = reader.line_num + 1


def _filter_csv(source: Path, out: Path, line_owner: dict[int, str], verdicts: dict[str, Verdict], flag: bool, delimiter: str = ",") -> None:
    text, bom = _read_text(source)
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    for index, (start, row) in enumerate(_csv_records(io.StringIO(text, newline=""), delimiter)):
        if index == 0 and start not in line_owner:  # a header (a headerless file's first line is a row)
            writer.writerow(row + (["audit_leaky", "audit_reason"] if flag else []))
            continue
        owner = line_owner.get(start)
        if owner is None:
            continue
        verdict = verdicts.get(owner)
        if flag:
            flags = _flag(verdict)
            writer.writerow([*row, str(flags["leaky"]).lower(), flags["reason"]])
        elif verdict is None or not verdict.leaky:
            writer.writerow(row)
    _write_text(out, buffer.getvalue(), bom=bom)


FILTERED = "filtered benchmark"


@dataclass
class Origins:
    """Where the items' rows lie, gathered in one pass over them (each read of a packed item
    unpickles it): the owner of every line, of each item's first line (line k of every BMLAMA
    file is item k), and of each row per file (per-language tables); and the ids in order."""

    lines: dict[int, str] = field(default_factory=dict)
    first_lines: dict[int, str] = field(default_factory=dict)
    rows: dict[str, dict[int, str]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, items: Iterable[Item]) -> Origins:
        found = cls()
        for item in items:
            found.ids.append(item.item_id)
            if not item.origin:
                continue
            found.lines.update(dict.fromkeys(item.origin.lines, item.item_id))
            if item.origin.lines:
                found.first_lines[item.origin.lines[0]] = item.item_id
            for file, line in item.origin.rows:
                found.rows.setdefault(file, {})[line] = item.item_id
        return found


def _filter_bmlama(source: Path, out: Path, line_owner: dict[int, str], verdicts: dict[str, Verdict], flag: bool) -> None:
    """Line k of every language file is item k, so the same lines are kept in every file
    (`line_owner`: each item's first line).  The directory is replaced only if it is a
    filtered benchmark this tool wrote."""
    staging = staging_directory(out)
    try:
        for tsv in sorted(source.glob("*.tsv")):
            _filter_csv(tsv, staging / tsv.name, line_owner, verdicts, flag, delimiter="\t")
        commit_directory(staging, out, FILTERED, inputs=[source])
    except BaseException:
        discard_staging(staging)
        raise


LINE_FORMATS = tuple(name for name, spec in FORMATS.items() if spec.lines)
DIRECTORY_FORMATS = ("bmlama", "per-language")


def writes_directory(fmt: str, benchmark: Path) -> bool:
    """Whether the clean benchmark is a directory: for benchmarks spread over several files."""
    return fmt in DIRECTORY_FORMATS or (fmt == "squad" and len(squad_files(benchmark)) > 1)


def _filter_table(source: Path, out: Path, line_owner: dict[int, str], verdicts: dict[str, Verdict], flag: bool) -> None:
    """One table in its own format; Parquet rows are numbered from 1 as the reader numbers them."""
    name = source.name.lower().removesuffix(".gz")
    if name.endswith((".csv", ".tsv")):
        _filter_csv(source, out, line_owner, verdicts, flag, delimiter="\t" if name.endswith(".tsv") else ",")
    elif name.endswith(".parquet"):
        _filter_parquet(source, out, line_owner, verdicts, flag)
    elif source.is_dir():
        raise FilterError(f"{source}: writing a datasets directory is not supported; save it as Parquet (Dataset.to_parquet) and audit that")
    else:
        _filter_jsonl(source, out, line_owner, verdicts, flag)


def _filter_parquet(source: Path, out: Path, line_owner: dict[int, str], verdicts: dict[str, Verdict], flag: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    owners = [line_owner.get(row) for row in range(1, table.num_rows + 1)]
    if flag:
        flags = [_flag(verdicts.get(owner)) if owner else {"leaky": None, "reason": "not read"} for owner in owners]
        table = table.append_column("audit_leaky", pa.array([f["leaky"] for f in flags], pa.bool_())).append_column("audit_reason", pa.array([f["reason"] for f in flags]))
    else:
        keep = [row for row, owner in enumerate(owners) if owner is not None and not (owner in verdicts and verdicts[owner].leaky)]
        table = table.take(pa.array(keep, pa.int64()))
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    atomic_write_bytes(out, buffer.getvalue().to_pybytes())


def _filter_per_language(source: Path, out: Path, owners: dict[str, dict[int, str]], verdicts: dict[str, Verdict], flag: bool) -> None:
    """Each language's file filtered alike, at the same path relative to the files' common
    folder; `owners` are the items of each file's rows."""
    root = Path(os.path.commonpath([str(Path(file).parent) for file in owners]))
    staging = staging_directory(out)
    try:
        for file, line_owner in owners.items():
            target = staging / Path(file).relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            _filter_table(Path(file), target, line_owner, verdicts, flag)
        commit_directory(staging, out, FILTERED, inputs=[source])
    except BaseException:
        discard_staging(staging)
        raise


def _filter_squad_document(source: Path, target: Path, verdicts: dict[str, Verdict], flag: bool) -> None:
    """Questions of leaky items removed (or flagged); paragraphs and articles left empty go too."""
    document = json.loads(_read_text(source)[0])
    articles = []
    for article in document["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = []
            for qa in paragraph["qas"]:
                verdict = verdicts.get(str(qa.get("id", "")).strip())
                if flag:
                    qas.append({**qa, "audit": _flag(verdict)})
                elif verdict is None or not verdict.leaky:
                    qas.append(qa)
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    _write_text(target, json.dumps({**document, "data": articles}, ensure_ascii=False) + "\n")


def _filter_squad(source: Path, out: Path, verdicts: dict[str, Verdict], flag: bool) -> None:
    files = squad_files(source)
    if len(files) == 1:
        _filter_squad_document(files[0], out, verdicts, flag)
        return
    root = Path(os.path.commonpath([str(file.parent) for file in files]))
    staging = staging_directory(out)
    try:
        for file in files:
            target = staging / file.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            _filter_squad_document(file, target, verdicts, flag)
        commit_directory(staging, out, FILTERED, inputs=[source])
    except BaseException:
        discard_staging(staging)
        raise


@dataclass
class FilterResult:
    manifest: JsonObject
    kept: int
    removed: int
    flagged: int


def filter_benchmark(
    audit: AuditFile,
    items: Sequence[Item],
    benchmark: Path,
    recorded: AuditedBenchmark,
    out: Path,
    policy: FilterPolicy,
    *,
    flag: bool = False,
    audit_path: str = "",
) -> FilterResult:
    """Write the clean (or flagged) benchmark to `out` and return the removal manifest.
    `benchmark` is the audited file, as `locate_benchmark` found and checked it."""
    verdicts = judge_items(audit, policy)
    fmt = recorded.format
    origins = Origins.of(items)
    line_owner = origins.lines
    if fmt == "bmlama":
        _filter_bmlama(benchmark, out, origins.first_lines, verdicts, flag)
    elif fmt == "eclektic-csv":
        _filter_csv(benchmark, out, line_owner, verdicts, flag)
    elif fmt in LINE_FORMATS:
        _filter_jsonl(benchmark, out, line_owner, verdicts, flag)
    elif fmt == "table":
        _filter_table(benchmark, out, line_owner, verdicts, flag)
    elif fmt == "per-language":
        _filter_per_language(benchmark, out, origins.rows, verdicts, flag)
    elif fmt == "squad":
        _filter_squad(benchmark, out, verdicts, flag)
    else:
        raise FilterError(f"{benchmark}: writing the {fmt} format is not supported; use --flag with an audit of a supported format")
    leaky = [v for v in verdicts.values() if v.leaky]
    unaudited = [item_id for item_id in origins.ids if item_id not in verdicts]
    removed = 0 if flag else len(leaky)
    manifest = {
        "tool": "corpus-audit",
        "version": __version__,
        "created": utc_timestamp(),
        "audit": audit_path,
        "audit_config_hash": audit.manifest.get("config_hash"),
        "benchmark": {"path": str(benchmark), "absolute_path": str(benchmark.resolve()), "format": fmt, "sha256": recorded.sha256},
        "output": str(out),
        "mode": "flag" if flag else "remove",
        "policy": {"rule": policy.rule, "drop_unknown": policy.drop_unknown, "drop_known": policy.drop_known, "drop_member": policy.drop_member},
        "counts": {
            "items": len(items),
            "leaky": len(leaky),
            "removed": removed,
            "kept": len(items) - removed,
            "flagged": len(leaky) if flag else 0,
            "not_audited": len(unaudited),
            "by_reason": dict(Counter(v.reason for v in leaky)),
        },
        "not_audited": unaudited,
        "leaky_items": [_leaky_entry(v, policy) for v in leaky],
    }
    return FilterResult(manifest=manifest, kept=len(items) - removed, removed=removed, flagged=manifest["counts"]["flagged"])
