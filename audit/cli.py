"""The `audit` command line: the one place that knows every loader, corpus and signal."""
from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    DownloadColumn,
    Progress,
    TextColumn,
)
from rich.table import Table
from rich.text import Text

from audit import __version__
from audit.auditfile import AuditFileError, check_against_benchmark, is_audit_file, locate_benchmark, read_audit, write_audit
from audit.check import audit_manifest, check_items, variant_processes
from audit.corpora.apirun import api_clients, budget_stops, check_display, limit_requests
from audit.corpora.base import Profile
from audit.corpora.local import LocalIndex
from audit.corpora.registry import CorpusError, check_corpora, chosen_entries, open_corpus
from audit.corpora.shards import IndexOpenError
from audit.corpora.soundness import OPEN_CHECKS
from audit.corpora.verify import EXTRA, verify_index
from audit.executors import ExecutorError, parse_executor
from audit.exposure import UNKNOWN, Knowledge
from audit.filter import FILTERED, RULES, FilterError, FilterPolicy, filter_benchmark, writes_directory
from audit.filteroutput import check_manifest_name, check_output_name
from audit.indexing import IndexBuildError, build_index, describe_size, nested_outputs, read_manifest
from audit.indexing import ProgressHook as IndexProgress
from audit.items import LoadReport
from audit.langcodes import normalise_lang
from audit.langupgrade import LanguageUpgradeError, add_languages
from audit.links.model import LinksError
from audit.links.sources import open_links
from audit.neardup import NEARDUP_DIR, NearDupError, NearDupParams, add_neardup, load_redis
from audit.outputs import OutputError, atomic_write_text, check_directory_target, check_file_target
from audit.policyfile import PolicyError, load_policy
from audit.probes.generation import ProbeError
from audit.probes.models import open_model
from audit.probes.prompts import PromptError
from audit.ranges import RangeError, check_workers, document_limit, memory_budget, worker_count
from audit.readers import FORMATS, BenchmarkError, ColumnMap, MappingError, ReadOptions, load_benchmark, parse_mapping, recorded_options
from audit.report.render import REPORT, write_report
from audit.shardbuild import build_sharded
from audit.shell import KEPT, Commands, InputError, Steps, console, progress_display, step, system_error
from audit.signals import KNOWLEDGE_SIGNALS, SIGNALS, SignalError, configure, minhash, parse_signals, plan
from audit.signals.probe import open_prober

STRICT_EXIT = 3


def _buildprogress_display() -> tuple[Steps, IndexProgress]:
    """A display for index builds and the hook that feeds it.  The display starts on the first
    report, which comes after the build has forked its workers: no thread exists at the fork."""
    progress = progress_display(DownloadColumn())
    tasks: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
        if stage not in tasks:
            tasks[stage] = progress.add_task("reading documents" if stage == "read" else "sorting suffixes", total=total if stage == "read" else None)
        if stage == "read":
            progress.update(tasks[stage], completed=done)
        else:
            progress.update(tasks[stage], description=f"sorting suffixes, shard {min(done + 1, total)} of {total}")
            if done >= total:
                progress.end_steps()

    return progress, report


def _shardprogress_display() -> tuple[Progress, IndexProgress]:
    """A display of shards finished, for sharded builds (`audit.shardbuild`)."""
    progress = progress_display()
    tasks: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks[stage] = progress.add_task("building shards", total=total)
        progress.update(tasks[stage], completed=done)

    return progress, report


@click.group(cls=Commands)
@click.version_option(__version__, prog_name="audit")
def main() -> None:
    """Audit multilingual benchmarks for pretraining-corpus contamination, with provenance."""


@main.group()
def index() -> None:
    """Build and inspect local byte-level infini-gram indexes."""


@index.command("build")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Index directory to create.")
@click.option("--mem", "memory", default="8G", show_default=True, help="Memory budget, 16M up to this machine's memory; larger corpora are split into shards that fit it.")
@click.option(
    "--normalize",
    "normalization",
    type=click.Choice(["text", "none"]),
    default="text",
    show_default=True,
    help="`text`: store NFC with whitespace collapsed, as queries are issued; `none`: raw bytes, as infini-gram's indexer does.",
)
@click.option(
    "--text-field",
    "text_field",
    default="text",
    show_default=True,
    metavar="NAME",
    help="The JSONL field or Parquet/datasets column holding each document's text (e.g. `content`); every other field is kept as provenance.",
)
@click.option(
    "--text-docs",
    "text_docs",
    type=click.Choice(["file", "block"]),
    default="file",
    show_default=True,
    help="What one document of a .txt/.txt.gz/.md file is: `file`, the whole file; `block`, each blank-line-separated block (its first line is recorded).",
)
@click.option("--force", is_flag=True, help="Replace an existing index at --out (only one audit wrote; never other files).")
@click.option("--no-minhash", "no_minhash", is_flag=True, help="Skip the near-duplicate (MinHash) index built after the suffix array; add it later with `audit index minhash`.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Build the near-duplicate index with this policy's [minhash.index] parameters (default: the built-in ones).")
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    help="Cut the input into N byte-balanced shards built apart (--mem bounds each), resumable: run the same command again after a failure.",
)
@click.option("--executor", default="local", show_default=True, help="Where --shards builds run: `local` (--workers processes), `ray` ($RAY_ADDRESS or a new local Ray), or `ray://HOST:PORT`.")
@click.option("--max-document", "max_document", default="64M", show_default=True, help="The longest document (a line, a text block or a text file read whole) read; a longer one, as a small gzip or zstd file can inflate to, is an error.")
@click.option("--workers", type=click.IntRange(min=1), help="Local processes: parsers of the plain build, or shards built at once with --shards [default: CPU count; more than the CPUs or the shards are not started].")
def index_build(
    sources: tuple[Path, ...],
    out: Path,
    memory: str,
    normalization: str,
    text_field: str,
    text_docs: str,
    force: bool,
    no_minhash: bool,
    policy_path: Path | None,
    shards: int | None,
    executor: str,
    max_document: str,
    workers: int | None,
) -> None:
    """Index corpus documents: JSONL(.gz), Parquet, `datasets` directories, plain text.

    SOURCES are files, read by suffix (.jsonl/.json[.gz] JSONL, .parquet, .arrow, .txt/.txt.gz/.md
    text; any other name as JSONL), `save_to_disk` directories of Hugging Face `datasets`, or
    other directories (every *.json* file below, in sorted order).  The suffix array is followed
    by the near-duplicate index, unless --no-minhash.

    With --shards N the input is cut into N shards built apart, on this machine or a Ray
    cluster (--executor); finished shards are kept, so the same command resumes a build that
    failed or was interrupted.
    """
    try:
        where = parse_executor(executor)
    except ExecutorError as error:
        raise InputError(str(error)) from None
    if where.distributed and shards is None:
        raise InputError(f"--executor {executor} builds shards: give --shards N")
    if where.distributed and workers is not None:
        raise InputError("--workers sets local processes; on Ray each shard takes one CPU of the cluster")
    limits = _build_limits(list(sources), memory, workers, shards, max_document)
    params = None if no_minhash else _minhash_params(policy_path, None)
    options = {"normalization": normalization, "text_field": text_field, "text_docs": text_docs, "force": force, **limits}
    progress, report = _buildprogress_display() if shards is None else _shardprogress_display()
    try:
        if shards is None:
            manifest, note = build_index(list(sources), out, progress=report, **options), ""
        else:
            built = build_sharded(list(sources), out, shards=shards, executor=where, progress=report, **options)
            manifest, note = built.manifest, f" ({built.built} built, {built.reused} already built; executor {where.kind.value})"
    except IndexBuildError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    click.echo(
        f"{out}: {manifest.documents:,} documents, {describe_size(manifest.bytes)} in {len(manifest.shards)} shard(s){note}, "
        f"built in {manifest.build_seconds:.1f} s (fingerprint {manifest.fingerprint})"
    )
    click.echo(f"{out}: languages {_languages_line(manifest.extra['languages'])}")
    if params is not None:
        _add_minhash(out, params, force=False)


def _build_limits(sources: list[Path], memory: str, workers: int | None, shards: int | None, max_document: str) -> dict[str, int]:
    """The memory budget, worker count and longest document of a build, refused out of range
    before any work, with a note for workers clamped and for directories audit wrote that the
    build skips."""
    try:
        budget, processes, longest = memory_budget(memory), worker_count(workers, shards), document_limit(max_document)
    except RangeError as error:
        raise InputError(str(error)) from None
    if processes.note:
        console.print(f"[yellow]note[/yellow] {processes.note}", markup=True, highlight=False)
    for nested in nested_outputs(sources):
        console.print(f"[yellow]note[/yellow] skipping {escape(str(nested))}: a directory audit wrote, not corpus files", markup=True, highlight=False)
    return {"memory_bytes": budget, "workers": processes.count, "max_document": longest}


def _minhash_params(policy_path: Path | None, sketcher: str | None) -> NearDupParams:
    """Build parameters from a policy's `[minhash.index]` table (checked before any work)."""
    try:
        expected = minhash.MinhashConfig.model_validate(load_policy(policy_path).settings.get(minhash.NAME, {})).index
        return expected.build_params(sketcher=sketcher)
    except PolicyError as error:
        raise InputError(str(error)) from None
    except ValidationError as error:
        raise InputError(f"{policy_path or 'the built-in policy'}: [minhash.index]: {error.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def _minhashprogress_display() -> tuple[Progress, IndexProgress]:
    """A display for the near-duplicate build and Redis load; like `_build_progress`, it starts
    on the first report, after the build has forked its workers."""
    progress = progress_display()
    tasks: dict[str, int] = {}
    labels = {"minhash": "sketching windows (documents)", "bands": "sorting LSH bands", "redis": "loading bands into Redis (windows)"}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
        if stage not in tasks:
            tasks[stage] = progress.add_task(labels.get(stage, stage), total=total)
        progress.update(tasks[stage], completed=done)

    return progress, report


def _add_minhash(directory: Path, params: NearDupParams, force: bool) -> None:
    progress, report = _minhashprogress_display()
    try:
        built = add_neardup(LocalIndex(directory), params, force=force, progress=report)
    except (IndexOpenError, NearDupError) as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    size = sum(f.bytes for f in built.files)
    click.echo(
        f"{directory / NEARDUP_DIR}: {built.windows:,} windows of {built.documents:,} documents ({built.hash_family['sketcher']}, "
        f"{built.params['num_perm']} permutations, {built.params['bands']} bands x {built.params['rows']} rows), "
        f"{describe_size(size)}, built in {built.build_seconds:.1f} s"
    )


@index.command("minhash")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--redis", "redis_url", metavar="URL", help="Also load the LSH bands into Redis (redis://host:port/db), to share them between processes and machines.")
@click.option("--sketcher", type=click.Choice(["datasketch", "rensa"]), help="MinHash implementation: datasketch (the reference, the default) or rensa (Rust, faster; pip install 'corpus-audit[rensa]'); overrides the policy's.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Build with this policy's [minhash.index] parameters (default: the built-in ones).")
@click.option("--force", is_flag=True, help="Rebuild a near-duplicate index the directory already has.")
def index_minhash(directory: Path, redis_url: str | None, sketcher: str | None, policy_path: Path | None, force: bool) -> None:
    """Add the near-duplicate (MinHash LSH) index to an index built by `audit index build`.

    It goes into DIRECTORY/minhash/ and is listed in the index's manifest, so `audit index
    verify` checks it.  With --redis, an index that already has one is only loaded into Redis
    (add --force to rebuild it first).
    """
    exists = (directory / NEARDUP_DIR).exists()
    if force or not exists or not redis_url:
        _add_minhash(directory, _minhash_params(policy_path, sketcher), force=force)
    if redis_url:
        progress, report = _minhashprogress_display()
        try:
            windows = load_redis(directory, redis_url, report)
        except NearDupError as error:
            raise InputError(str(error)) from None
        finally:
            progress.stop()
        click.echo(f"{redis_url}: loaded the LSH bands of {windows:,} windows of {directory / NEARDUP_DIR}")


@index.command("info")
@click.argument("directory", type=click.Path(path_type=Path))
def index_info(directory: Path) -> None:
    """Describe an index: documents, size, shards, sources, fingerprint (after the open checks;
    `checked` says what they cover and what only `audit index verify` finds)."""
    try:
        corpus = LocalIndex(directory)
    except IndexOpenError as error:
        raise InputError(str(error)) from None
    manifest = read_manifest(directory)
    languages = corpus.info.details.get("languages") or f"language unknown: built without a language table; write one with `audit index languages {directory}`"
    info = {"corpus": corpus.info.__dict__, "languages": languages, "checked": OPEN_CHECKS, "manifest": json.loads(manifest.to_json()) if manifest else None}
    click.echo(json.dumps(info, indent=2, ensure_ascii=False))


@index.command("languages")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Write the table anew when the index has one (a damaged one included).")
@click.option("--workers", type=click.IntRange(min=1), help="Processes identifying documents [default: CPU count; more than the CPUs are not started].")
def index_languages(directory: Path, force: bool, workers: int | None) -> None:
    """Write the per-document language table of an index built before tables were written, in
    place: each document's language from its metadata, its input's name, or identified from its
    text, as `audit index build` does; the manifest records it."""
    progress = progress_display()
    tasks: list[int] = []

    def report(_: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks.append(progress.add_task("identifying documents' languages", total=total))
        progress.update(tasks[0], completed=done)

    try:
        upgrade = add_languages(directory, force=force, workers=worker_count(workers).count, progress=report)
    except LanguageUpgradeError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    done = upgrade.summary
    click.echo(f"{directory}: {'rewrote' if upgrade.replaced else 'wrote'} the language table of {done['documents']:,} documents ({_languages_line(done)}) in {upgrade.seconds:.1f} s")


def _languages_line(summary: dict) -> str:
    """Documents per language and how their languages were known (`audit.langtable.summary`)."""
    counts = ", ".join(f"{lang} {n:,}" for lang, n in summary["counts"].items())
    known = ", ".join(f"{how} {n:,}" for how, n in summary["known_by"].items() if n)
    return f"{counts}; known by {known}"


@index.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
def index_verify(directory: Path) -> None:
    """Re-hash every file of an index against its manifest; exit 1 if any differs.

    Indexes whose manifest records no hashes (built by infini-gram's indexer, or by an older
    corpus-audit) get the structural checks only, and exit 0 if those pass.
    """
    progress = progress_display(DownloadColumn())
    tasks: list[int] = []

    def report(done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks.append(progress.add_task("hashing index files", total=total))
        progress.update(tasks[0], completed=done)

    try:
        result = verify_index(directory, report)
    except IndexOpenError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    for file in result.files:
        click.echo(f"{file.status:<22} {file.name:<14} {file.detail}".rstrip())
    if result.damaged:
        extra = sum(file.status == EXTRA for file in result.damaged)
        differ = f"{len(result.damaged) - extra} of {len(result.files) - extra} files differ from the manifest" + (f", {extra} unexpected" if extra else "")
        click.echo(f"{directory}: damaged, {differ}; rebuild it (audit index build ... --force)")
    elif result.structure:
        click.echo(f"{directory}: damaged, {result.structure}; rebuild it (audit index build ... --force)")
    elif result.hashed:
        click.echo(f"{directory}: all {len(result.files)} files match the manifest")
    else:
        click.echo(f"{directory}: sizes and offsets are consistent; not verifiable: no recorded hashes (rebuild with audit index build to record them)")
    if not result.ok:
        sys.exit(1)


def _wanted_languages(option: str, present: list[str]) -> list[str]:
    """The --langs codes, normalised, each of which the benchmark must have."""
    wanted: list[str] = []
    codes = [part.strip() for part in option.split(",") if part.strip()]
    if not codes:
        raise InputError(f"--langs {option!r}: no language code given")
    for code in codes:
        try:
            lang = normalise_lang(code)
        except ValueError as error:
            raise InputError(f"--langs: {error}") from None
        if lang not in present:
            raise InputError(f"--langs: the benchmark has no '{lang}' variants (it has {', '.join(present)})")
        if lang not in wanted:
            wanted.append(lang)
    return wanted


_SURROGATE = re.compile("[\ud800-\udfff]")


def _recordable(params: dict[str, object]) -> None:
    """Refuse, before any work, an argument the audit file could not record: a name of bytes
    that are not UTF-8 (the system hands them over as lone surrogates)."""
    for value in params.values():
        for text in value if isinstance(value, tuple) else (value,):
            if isinstance(text, str | Path) and _SURROGATE.search(str(text)):
                shown = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                raise InputError(f"{shown}: a name that is not valid UTF-8; rename it (the audit file records every name as UTF-8 text)")


def _default_report_dir(audit_path: Path) -> Path:
    return audit_path.with_name(audit_path.name.removesuffix(".jsonl").removesuffix(".audit") + ".report")


def _print_read(report: LoadReport) -> None:
    """What was read, before any corpus is asked: the counts a user compares with the benchmark's
    documentation, rows the benchmark excluded, codes recoded, and fields no signal reads."""
    kinds = Counter(str(item.kind) for item in report.items)
    variants = sum(len(item.variants) for item in report.items)
    line = f"read {report.path} ({report.format}): {len(report.items)} items, {variants} variants, {len(report.languages)} languages ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})"
    if report.excluded:
        line += f"; {report.excluded} rows excluded by the benchmark"
    console.print(line, soft_wrap=True, highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", soft_wrap=True, highlight=False, markup=False)
    if report.language_codes:
        console.print("language codes: " + ", ".join(f"{given} → {code}" for given, code in report.language_codes.items()), soft_wrap=True, highlight=False, markup=False)
    if report.unused_fields:
        console.print(f"not checked by any signal (kept in the audit's manifest): {', '.join(report.unused_fields)}", soft_wrap=True, highlight=False, markup=False)


def _default_out(bench: Path, corpora: tuple[str, ...]) -> Path:
    """Named after the benchmark (a glob's nearest named directory: `data/*/test.*.jsonl` → data)."""
    named = next((part for part in reversed(bench.parts) if not any(c in part for c in "*?[")), "") if any(c in str(bench) for c in "*?[") else bench.name
    stem = Path(named).name.split(".")[0] or "benchmark"
    return Path(f"{stem}.{'+'.join(Path(corpus).name for corpus in corpora)}.audit.jsonl")


def _warn_failed_sources(records: list[dict]) -> None:
    """Say which sources failed or could not tell, how many variants that left `unknown` (or,
    for a probed model, `undetermined`) and the first reason, so no such tag goes unexplained."""
    fields: dict[tuple[str, str, str], int] = {}
    variants: dict[tuple[str, str, str], int] = {}
    first: dict[tuple[str, str, str], str] = {}
    for record in records:
        undecided = set()
        for evidence in record["evidence"]:
            if evidence["status"] in ("failed", "unknown"):
                key = (evidence["status"], evidence["signal"], evidence["source"])
                fields[key] = fields.get(key, 0) + 1
                first.setdefault(key, evidence.get("error") or "")
                undecided.add(key)
        for key in undecided:
            left = record.get("knowledge") == Knowledge.UNDETERMINED if key[1] in KNOWLEDGE_SIGNALS else record["exposure"] == UNKNOWN
            variants[key] = variants.get(key, 0) + left
    for (status, signal, source), count in fields.items():
        unknown = variants.get((status, signal, source), 0)
        what = "could not be checked" if status == "failed" else "could not be told"
        tag = "undetermined" if signal in KNOWLEDGE_SIGNALS else "unknown"
        console.print(
            f"[red]{status}[/red] {signal} on {escape(source)}: {count} field(s) {what}, leaving {unknown} of {len(records)} variant(s) {tag}; first error: {escape(first[status, signal, source])}",
            soft_wrap=True,
        )


def _print_summary(summary: dict, out: Path, elapsed: float) -> None:
    """Per language, in a stable order: the tags, the seen rate over decided variants (an
    unknown is neither seen nor unseen) and the unknown share beside it."""
    table = Table(title=Text(f"Exposure per language ({out})"))
    for column in ("language", "variants", "seen", "unseen", "unknown", "seen rate (decided)", "unknown share"):
        table.add_column(column, justify="left" if column == "language" else "right")
    rows = sorted(summary["languages"].items())
    totals = {tag: sum(counts[tag] for _, counts in rows) for tag in ("seen", "unseen", "unknown", "total")}
    for lang, counts in [*rows, ("all", totals)]:
        decided = counts["seen"] + counts["unseen"]
        rate = f"{counts['seen'] / decided:.1%}" if decided else "–"
        share = f"{counts['unknown'] / counts['total']:.1%}" if counts["total"] else "–"
        table.add_row(Text(lang), str(counts["total"]), str(counts["seen"]), str(counts["unseen"]), str(counts["unknown"]), rate, share, end_section=lang == rows[-1][0] if rows else False)
    Console().print(table)
    if "knowledge" in summary:
        known = Table(title="What the probed model knows, per language")
        for column in ("language", "variants", *(tag.value for tag in Knowledge)):
            known.add_column(column, justify="left" if column == "language" else "right")
        for lang, counts in sorted(summary["knowledge"].items()):
            known.add_row(Text(lang), str(counts["total"]), *(str(counts[tag.value]) for tag in Knowledge))
        Console().print(known)
    items = ", ".join(f"{name}: {count}" for name, count in sorted(summary["items"].items()))
    Console().print(f"items: {items}   ({elapsed:.1f} s)")


@main.command()
@click.argument("bench", type=click.Path(path_type=Path))
@click.option("--corpus", "corpora", required=True, multiple=True, help="`demo`, a name in indexes/corpora.toml (or --registry), or an index directory; repeat for several.")
@click.option("--signals", "signal_names", help=f"Comma-separated signals to run ({', '.join(SIGNALS)}) [default: every one the corpora support].")
@click.option("--out", type=click.Path(path_type=Path), help="Audit file to write [default: BENCH.CORPUS.audit.jsonl, corpora joined by +].")
@click.option("--langs", help="Comma-separated languages to check [default: all in the benchmark].")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), help="Benchmark format [default: detected from the path, the first record's keys or the columns]; `audit formats` lists them.")
@click.option("--map", "mapping", help="Which column holds what, for benchmarks without a reader: question=COL,answer=COL,context=COL,lang=COL,id=COL,options=A|B|C,answer_index=COL,exclude=COL,... or a TOML file of the same keys.")
@click.option("--source-lang", help="The language items were written in, where the benchmark does not say (also the language of every row of a one-language table).")
@click.option("--header", type=click.Choice(["first", "none"]), help="With --map: `none` for a CSV/TSV without a header row, whose columns --map then names by position from 0 (question=0,answer=1) [default: first, the first row names the columns].")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Policy TOML merged over the built-in one.")
@click.option("--registry", type=click.Path(path_type=Path), help="Corpus registry TOML [default: indexes/corpora.toml].")
@click.option("--skip-bad-rows", is_flag=True, help="Skip (and count) malformed benchmark rows instead of stopping.")
@click.option("--workers", type=click.IntRange(min=1), help="Processes (threads when a corpus is remote) for the search [default: all cores; 8 when every corpus is remote]; more than the variants or four per core are clamped, with a note.")
@click.option("--links", "link_names", multiple=True, help="Run the langlinks signal with this source: `wikipedia-api` (the MediaWiki API, and Wikidata's for entity ids), a lookup directory built by `audit langlinks build`, or a [links.NAME] entry of the registry; repeat for several.")
@click.option("--as-of", "as_of", type=click.DateTime(formats=["%Y-%m-%d"]), help="The model's training cutoff: the langlinks signal counts only articles that existed on this date (asking their creation dates from the API).")
@click.option("--probe-model", help="Run the probe signal with this model: `smollm2`, `gemma3-270m`, `openai:MODEL` (at $OPENAI_BASE_URL), a [models.NAME] entry of the registry, a .gguf file or a model directory.  Opt-in: every variant costs model calls.")
@click.option("--judge-model", help="The model that judges self-summaries [default: the probe model]; the same values as --probe-model.")
@click.option("--probe-prompts", type=click.Path(path_type=Path), help="Prompt templates (TOML) merged over the shipped ones, per language and task.")
@click.option("--probe-batch-size", type=click.IntRange(min=1), help="Prompts per batch for a local probe model [default: the registry's, else 8].")
@click.option("--offline", is_flag=True, help="Answer API corpora, link sources and probe models from their caches only; what is not cached is tagged unknown (undetermined).")
@click.option("--max-requests", type=click.IntRange(min=1), help="Send at most this many HTTP requests to each API corpus; what is left is tagged unknown, and running the command again resumes from the response cache.")
@click.option("--profile", type=click.Choice([str(p) for p in Profile]), help="For corpora that derive longest matches from counts: `decide` asks what the policy's rules need, `full` the longest match at every position [default: the registry's, else decide].")
@click.option("--report/--no-report", "with_report", default=True, show_default=True, help="Also write an exposure report (HTML, Markdown, JSON).")
@click.option("--report-dir", type=click.Path(path_type=Path), help="Where the report goes [default: OUT without .jsonl, plus .report].")
@click.option("--strict", is_flag=True, help=f"Exit with status {STRICT_EXIT} when any variant is unknown (for CI pipelines); the audit file is written all the same.")
@click.option("--executor", "executor_name", default="local", show_default=True, help="Where variants are checked: `local`, or a Ray cluster (`ray` for $RAY_ADDRESS or a new local one, `ray://HOST:PORT`); on Ray, local indexes are served by actors holding their shards.")
@click.option("--actors", type=click.IntRange(min=1), help="With a Ray executor, the actors serving each local index [default: one per node of the cluster].")
def check(
    bench: Path,
    corpora: tuple[str, ...],
    signal_names: str | None,
    out: Path | None,
    langs: str | None,
    fmt: str | None,
    mapping: str | None,
    source_lang: str | None,
    header: str | None,
    policy_path: Path | None,
    registry: Path | None,
    skip_bad_rows: bool,
    workers: int | None,
    link_names: tuple[str, ...],
    as_of: object,
    probe_model: str | None,
    judge_model: str | None,
    probe_prompts: Path | None,
    probe_batch_size: int | None,
    offline: bool,
    max_requests: int | None,
    profile: str | None,
    with_report: bool,
    report_dir: Path | None,
    strict: bool,
    executor_name: str,
    actors: int | None,
) -> None:
    """Tag every (item, language) of BENCH seen / unseen / unknown in one or more corpora, with
    the evidence of every signal."""
    started = time.perf_counter()
    _recordable(click.get_current_context().params)
    try:
        executor = parse_executor(executor_name)
    except ExecutorError as error:
        raise InputError(str(error)) from None
    if actors and not executor.distributed:
        raise InputError("--actors applies to a Ray executor (--executor ray or ray://HOST:PORT)")
    if len(set(corpora)) < len(corpora):
        raise InputError(f"--corpus: {', '.join(sorted({c for c in corpora if corpora.count(c) > 1}))} given twice")
    out = out or _default_out(bench, corpora)
    report_dir = (report_dir or _default_report_dir(out)) if with_report else None
    inputs = [path for path in (bench, policy_path, registry, probe_prompts, *map(Path, corpora), *map(Path, link_names)) if path is not None and path.exists()]
    try:
        check_file_target(out, inputs=inputs, force=True)
        if out.exists() and not is_audit_file(out):
            raise OutputError(f"{out}: exists and is not an audit file; refusing to overwrite it")
        if report_dir is not None:
            check_directory_target(report_dir, REPORT, inputs=[*inputs, out])
    except OutputError as error:
        raise InputError(str(error)) from None
    try:
        wanted_signals = parse_signals(signal_names)
        policy = load_policy(policy_path)
        options = ReadOptions(_with_header(parse_mapping(mapping), header) if mapping else None, source_lang)
        if header and not mapping:
            raise MappingError("--header applies with --map, which names the columns")
        report = load_benchmark(bench, fmt, skip_bad_rows=skip_bad_rows, options=options)
    except (BenchmarkError, MappingError, PolicyError, SignalError) as error:
        raise InputError(str(error)) from None
    wanted = _wanted_languages(langs, report.languages) if langs else None
    for skipped in report.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(skipped)}")
    _print_read(report)
    progress, report_build = _buildprogress_display()
    cutoff = as_of.date() if as_of else None  # type: ignore[attr-defined]
    try:
        sources = [open_corpus(corpus, registry, progress=report_build, offline=offline, profile=profile, executor=executor, actors=actors) for corpus in corpora]
        link_sources = [open_links(name, registry, offline=offline) for name in link_names]
        prober = open_prober(probe_model, judge_model, probe_prompts, registry, offline=offline, batch_size=probe_batch_size) if probe_model else None
        runners, runs = plan(sources, wanted_signals, configure(policy.settings), policy.rules, link_sources, cutoff, prober)
    except (CorpusError, IndexOpenError, IndexBuildError, SignalError, LinksError, ProbeError, PromptError, ExecutorError) as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    clients = limit_requests(sources, max_requests) if max_requests else api_clients(sources)
    if max_requests and not clients:
        raise InputError("--max-requests applies to API corpora (infini-gram or infini-gram mini entries of the registry)")
    if probe_model and wanted_signals is not None and "probe" not in wanted_signals:
        raise InputError(f"--probe-model: the probe signal is not among --signals {signal_names}")
    if not probe_model and (judge_model or probe_prompts or probe_batch_size):
        raise InputError("--judge-model, --probe-prompts and --probe-batch-size apply to the probe signal, which runs only with --probe-model")
    if cutoff and not link_sources:
        console.print("[yellow]note[/yellow] --as-of applies to the langlinks signal, which runs only with --links")
    for run in runs:
        if not run.ran and run.source:
            console.print(f"[yellow]skipped[/yellow] signal {run.signal} on {escape(run.source)}: {escape(run.reason)}")
    _prepare(runners, report.items, wanted)
    variants = sum(1 for item in report.items for lang in item.variants if wanted is None or lang in wanted)
    processes, clamped = check_workers(workers, variants, remote=bool(sources) and len(api_clients(sources)) == len(sources))
    if clamped:
        console.print(f"[yellow]note[/yellow] {clamped}")
    workers = processes
    forked = not executor.distributed and processes > 1 and all(isinstance(source, LocalIndex) for source in sources)
    where = f" on {executor}" if executor.distributed else ""
    with variant_processes(runners, policy, processes) if forked else nullcontext() as pool, check_display(clients) as progress:
        task = progress.add_task(escape(f"checking against {', '.join(s.info.name for s in sources)}{where}"), total=variants)
        records = check_items(report.items, runners, policy, langs=wanted, workers=workers, on_done=lambda: progress.advance(task), processes=pool, executor=executor)
    links = {"sources": [source.describe() for source in link_sources], "as_of": cutoff.isoformat() if cutoff else None} if link_sources else None
    models = prober.describe() if prober else None
    for line in budget_stops(sources):
        console.print(f"[yellow]note[/yellow] {escape(line)}")
    manifest = audit_manifest(["audit", *sys.argv[1:]], report, bench, [s.info for s in sources], runs, policy, wanted, records, links, models, executor)
    summary = manifest["summary"]
    _warn_failed_sources(records)
    written = write_audit(out, manifest, records)
    KEPT.append(f"the audit file {out} was written whole")
    if report_dir is not None:
        try:
            with step(f"writing the report {report_dir}"):
                write_report(report_dir, written, str(out), report.items, inputs=inputs)
        except OutputError as error:
            raise InputError(f"{error} (the audit file {out} was written)") from None
        except OSError as error:
            raise click.ClickException(f"{system_error(error)}; no report written (the audit file {out} was written whole)") from None
    _print_summary(summary, out, time.perf_counter() - started)
    if report_dir is not None:
        Console(emoji=False).print(f"report: {report_dir / 'report.html'}", markup=False)
    unknown = sum(counts["unknown"] for counts in summary["languages"].values())
    if strict and unknown:
        console.print(f"[red]--strict:[/red] {unknown} variant(s) are unknown (see decided_by in {escape(str(out))})")
        sys.exit(STRICT_EXIT)



def _with_header(mapping: ColumnMap, header: str | None) -> ColumnMap:
    return replace(mapping, header=header) if header else mapping


def _prepare(runners: list, items: list, langs: list[str] | None) -> None:
    """Run the batched work of signals that have some (the langlinks signal's requests) before
    any variant is checked, each step with its own progress bar."""
    preparing = [runner for runner in runners if runner.prepare is not None]
    if not preparing:
        return
    with progress_display() as progress:

        def step(description: str, total: int | None) -> Callable[[int], None]:
            task = progress.add_task(description, total=total)
            return lambda done: progress.advance(task, done)

        for runner in preparing:
            try:
                runner.prepare(items, langs, step)
            except (LinksError, ProbeError) as error:
                raise InputError(str(error)) from None


@main.command("filter")
@click.argument("audit_path", metavar="AUDIT", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Clean benchmark to write, in the input's format, which its suffix must name (a new directory for BMLAMA).")
@click.option("--bench", type=click.Path(path_type=Path), help="The audited benchmark [default: the path in the audit's manifest].")
@click.option("--rule", type=click.Choice(RULES), default="target-seen", show_default=True, help="Which items leak.")
@click.option("--drop-unknown", is_flag=True, help="Also treat items with a language of unknown exposure as leaky.")
@click.option("--flag", is_flag=True, help="Keep every item and mark each leaky or not, instead of removing.")
@click.option("--manifest", "manifest_path", type=click.Path(path_type=Path), help="Removal manifest, JSON [default: OUT.manifest.json].")
@click.option("--force", is_flag=True, help="Replace existing output (never the command's inputs, nor a directory audit did not write).")
def filter_command(
    audit_path: Path, out: Path, bench: Path | None, rule: str, drop_unknown: bool, flag: bool, manifest_path: Path | None, force: bool
) -> None:
    """Remove (or flag) leaky items of an audited benchmark before release."""
    if out.name in ("", ".", ".."):
        raise InputError(f"--out {out}: give the name of a new file (a new directory for BMLAMA)")
    manifest_path = manifest_path or out.with_name(out.name + ".manifest.json")
    try:
        audit = read_audit(audit_path)
        bench, recorded = locate_benchmark(audit, audit_path, bench)
        inputs = [audit_path, bench]
        if writes_directory(recorded.format, bench):
            if out.exists() and not force:
                raise OutputError(f"{out}: already exists (use --force to replace it)")
            check_directory_target(out, FILTERED, inputs=inputs)
        else:
            check_file_target(out, inputs=inputs, force=force)
        check_file_target(manifest_path, inputs=inputs, force=force)
        if _same_path(out, manifest_path):
            raise OutputError(f"--manifest {manifest_path}: is the same file as --out")
        check_output_name(out, recorded.format, bench)
        check_manifest_name(manifest_path)
        report = load_benchmark(bench, recorded.format, options=recorded_options(recorded.mapping, recorded.source_lang))
        check_against_benchmark(audit, audit_path, report.items)
        result = filter_benchmark(audit, report.items, bench, recorded, out, FilterPolicy(rule, drop_unknown), flag=flag, audit_path=str(audit_path))
    except (AuditFileError, BenchmarkError, MappingError, FilterError, OutputError) as error:
        raise InputError(str(error)) from None
    atomic_write_text(manifest_path, json.dumps(result.manifest, indent=2, ensure_ascii=False) + "\n")
    counts = result.manifest["counts"]
    verb = f"flagged {counts['flagged']}" if flag else f"removed {counts['removed']}"
    click.echo(
        f"{counts['items']} items: {verb} as leaky ({rule}{', unknown counts as leaky' if drop_unknown else ''}), "
        f"kept {counts['kept']}; {counts['not_audited']} not audited. Wrote {out} and {manifest_path}."
    )


def _same_path(a: Path, b: Path) -> bool:
    return Path(a).absolute() == Path(b).absolute()


METHODS = ("auto", "given", "eclektic", "robust", "judge")


@main.command("report")
@click.option("--audit", "audit_path", required=True, type=click.Path(path_type=Path), help="Audit file written by `audit check`.")
@click.option("--predictions", type=click.Path(path_type=Path), help="A model's answers (JSONL or CSV); without it, an exposure-only report.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Report directory: new, empty, or a report audit wrote (then replaced).")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True, help="How answers are judged; auto: given judgments when every row has one, else robust.")
@click.option("--bench", type=click.Path(path_type=Path), help="The audited benchmark [default: the path in the audit's manifest].")
@click.option("--judge-model", help="Model name for --method judge [default: $AUDIT_JUDGE_MODEL].")
@click.option("--judge-concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Judge requests in flight.")
@click.option("--bootstrap", type=click.IntRange(min=0, max=100_000), default=1000, show_default=True, help="Bootstrap resamples over questions for the intervals (at most 100000, and as many as fit in about 2 GiB).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seeds the resamples and permutations.")
@click.option("--item-pages", type=click.Path(path_type=Path), help="Link the provenance pages of this report of the same audit instead of writing copies.")
def report_command(
    audit_path: Path,
    predictions: Path | None,
    out: Path,
    method: str,
    bench: Path | None,
    judge_model: str | None,
    judge_concurrency: int,
    bootstrap: int,
    seed: int,
    item_pages: Path | None,
) -> None:
    """Transfer scores stratified by measured exposure, with intervals, plots and provenance pages."""
    from audit.evaluate import (
        EvaluationError,
        JudgeConfig,
        JudgeError,
        PredictionsError,
        evaluate,
        load_predictions,
    )

    try:
        audit = read_audit(audit_path)
        bench, recorded = locate_benchmark(audit, audit_path, bench)
        inputs = [path for path in (audit_path, bench, predictions, item_pages) if path is not None]
        check_directory_target(out, REPORT, inputs=inputs)
        items = load_benchmark(bench, recorded.format, options=recorded_options(recorded.mapping, recorded.source_lang)).items
        check_against_benchmark(audit, audit_path, items)
        evaluation = None
        if predictions is not None:
            answers = load_predictions(predictions, items)
            if method == "auto":
                method = "given" if all(p.correct is not None for p in answers.predictions.values()) else "robust"
            judge = JudgeConfig(model=judge_model, concurrency=judge_concurrency) if method == "judge" else None
            with progress_display() as progress:
                task = progress.add_task(f"scoring ({method})", total=None)
                result = evaluate(
                    items, answers, audit, method, judge=judge, bootstrap=bootstrap, seed=seed,
                    progress=lambda done, total: progress.update(task, completed=done, total=total),
                )
            evaluation = result.to_dict()
            for problem in evaluation["problems"]:
                console.print(f"[yellow]problem[/yellow] {escape(problem)}")
        with step(f"writing the report {out}"):
            data = write_report(out, audit, str(audit_path), items, evaluation, item_pages, inputs=inputs)
    except (AuditFileError, BenchmarkError, MappingError, PredictionsError, EvaluationError, JudgeError, OutputError, FileNotFoundError) as error:
        raise InputError(str(error)) from None
    if evaluation:
        _print_evaluation(evaluation, method)
    pages = len(data["exposure"]["items"])
    click.echo(f"report: {out / 'report.html'} ({pages} provenance pages{f', linked from {item_pages}' if item_pages else ''})")


def _print_evaluation(evaluation: dict[str, Any], method: str) -> None:
    """The headline scores: overall, clean transfer, and transfer to what the model did not know."""
    total = evaluation["total"]
    click.echo(
        f"overall success {_fmt(total['overall_success'])}, transfer {_fmt(total['transfer_score'])} "
        f"({method}, {evaluation['questions']} questions)"
    )
    clean = (evaluation.get("strata") or {}).get("clean_transfer")
    if clean:
        click.echo(f"clean transfer (targets unseen by every signal) {_fmt(clean['transfer_score'])}")
    unknown = (evaluation.get("strata") or {}).get("unknown_to_model")
    if unknown:
        click.echo(f"transfer to targets the probed model did not know {_fmt(unknown['total']['transfer_score'])}")


def _fmt(stat: dict) -> str:
    if stat["value"] is None:
        return "n/a"
    interval = stat.get("ci_bootstrap")
    return f"{stat['value']:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


@main.command("corpora")
@click.option("--registry", type=click.Path(path_type=Path), help="Corpus registry TOML [default: indexes/corpora.toml].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True, help="Seconds to wait for each API request.")
@click.option("--live", is_flag=True, help="Ask each API endpoint what it serves (GET /, else a count per name): mark names it no longer has (exit 1) and list indexes it offers that the registry lacks.")
@click.option("--corpus", "names", multiple=True, help="Only this registered name; repeat for several [default: every one].")
def corpora_command(registry: Path | None, timeout: float, live: bool, names: tuple[str, ...]) -> None:
    """List the corpora --corpus accepts, whether each answers now, and what is cached."""
    from audit.corpora.discovery import apply_to, discover, summary_lines

    try:
        checks = check_corpora(registry, timeout=timeout, probe_remote=not live, names=names)
        found = discover(chosen_entries(registry, names), timeout, chosen_entries(registry)) if live else None
    except CorpusError as error:
        raise InputError(str(error)) from None
    if found is not None:
        apply_to(checks, found)
    table = Table(title="Corpora")
    for column in ("name", "backend", "location", "reachable", "cached", "note"):
        table.add_column(column)
    for entry in checks:
        reachable = {True: "yes", False: "no", None: "?"}[entry.reachable]
        cached = "" if entry.cached is None else f"{entry.cached:,}"
        table.add_row(*(Text(cell) for cell in (entry.name, entry.backend, entry.location, reachable, cached, entry.message or entry.description)))
    Console(emoji=False).print(table)
    if found is not None:
        for line in summary_lines(found):
            click.echo(line)
        if found.exit_code:
            sys.exit(found.exit_code)


_SHAPES = {"file": "a file", "directory": "a directory", "any": "a file, directory or glob", "many": "a directory or glob"}
# The keys, columns or files each reader looks for, all named in the README's format table
# (tests keep the two alike); the table readers take theirs from --map or a preset.
_EXPECTS: dict[str, tuple[str, ...]] = {
    "eclektic-jsonl": ("q_id", "original_lang", "question", "answer", "content", "{L}_q", "{L}_a", "{L}_c"),
    "eclektic-csv": ("q_id", "language", "original_lang", "question", "answer", "content"),
    "bmlama": ("{lang}.tsv", "Prompt", "Ans", "Candidate Ans", "Subject"),
    "jsonl": ("item_id", "source_lang", "variants"),
    "squad": ("data", "paragraphs", "qas", "id", "question", "answers"),
    "mkqa": ("example_id", "queries", "answers"),
    "tydiqa": ("example_id", "language", "question_text", "document_plaintext", "annotations"),
    "xfactr": ("TREx_prompts.csv", "mTRExf/sub/P*.jsonl", "alias/mTRExf/{lang}.txt"),
    "mlama": ("{lang}/templates.jsonl", "{lang}/P*.jsonl", "relation", "template", "sub_uri", "sub_label", "obj_uri", "obj_label"),
    "xcsr": ("{lang}/dev.jsonl", "id", "lang", "question.stem", "question.choices", "answerKey"),
    "table": (),
    "per-language": (),
}
# One command per reader, on the benchmark as it is published.
EXAMPLES: dict[str, str] = {
    "eclektic-jsonl": "audit check eclektic_main.jsonl --corpus demo",
    "eclektic-csv": "audit check eclektic_long.csv --corpus demo",
    "bmlama": "audit check BMLAMA/BMLAMA17 --corpus demo",
    "jsonl": "audit check my_bench.jsonl --corpus demo",
    "squad": "audit check xquad/ --corpus demo   (or MLQA_V1/dev/dev-context-en-question-de.json)",
    "mkqa": "audit check mkqa.jsonl.gz --corpus demo",
    "tydiqa": "audit check tydiqa-v1.0-dev.jsonl.gz --corpus demo",
    "xfactr": "audit check X-FACTR/data --corpus demo",
    "mlama": "audit check mlama1.1 --corpus demo",
    "xcsr": "audit check X-CSR_datasets/X-CSQA --corpus demo",
    "table": "audit check my_bench.csv --corpus demo --map question=Q,answer=A --source-lang fr",
    "per-language": "audit check url-nlp/mgsm --corpus demo --map question=0,answer=1 --header none",
}


@main.command("formats")
def formats_command() -> None:
    """List the benchmark formats --format names, what each reads, the fields it expects and an example."""
    width = max(len(name) for name in FORMATS)
    for spec in FORMATS.values():
        click.echo(f"{spec.name:<{width}}  {spec.description} [reads {_SHAPES[spec.shape]}]")
        click.echo(f"{'':<{width}}  expects: {', '.join(_EXPECTS[spec.name]) or 'the columns --map names, or those of a preset'}")
        click.echo(f"{'':<{width}}  example: {EXAMPLES[spec.name]}")


@main.group("langlinks")
def langlinks() -> None:
    """Which Wikipedias hold an item's article: lookups built from langlinks dumps."""


@langlinks.command("build")
@click.argument("dumps", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Lookup directory to create (replaced only if audit wrote it).")
@click.option("--wiki", help="The wiki the dumps are of (e.g. en), when their names do not say (enwiki-20230701-langlinks.sql.gz does).")
@click.option("--dump-date", "dump_date", type=click.DateTime(formats=["%Y-%m-%d"]), help="The snapshot's date, when neither the names nor the dumps' footers give it.")
def langlinks_build(dumps: tuple[Path, ...], out: Path, wiki: str | None, dump_date: object) -> None:
    """Build a langlinks lookup from `{wiki}-langlinks.sql(.gz)` dumps, with the `page` dumps that
    map titles to page ids and, optionally, the `redirect` dumps; and from Wikidata's JSON entity
    dumps (`wikidata-YYYYMMDD-all.json.gz`), whose sitelinks answer by entity id or by title."""
    from audit.links.dump import build, summary

    progress = progress_display(TextColumn("{task.completed:,} rows"))
    task = progress.add_task("reading dump rows", total=None)
    started = time.perf_counter()
    try:
        with progress:
            manifest = build(list(dumps), out, wiki=wiki, dump_date=dump_date.date() if dump_date else None, on_rows=lambda n: progress.advance(task, n))
    except (LinksError, OutputError) as error:
        raise InputError(str(error)) from None
    for line in summary(manifest):
        click.echo(f"{out}: {line} ({time.perf_counter() - started:.1f} s)")


@langlinks.command("lookup")
@click.argument("article")
@click.option("--lang", help="The article's wiki (a language code), when ARTICLE is a title rather than a URL or a Wikidata id.")
@click.option("--links", "--dump", "links", required=True, help="Where to look: a lookup built by `audit langlinks build`, `wikipedia-api`, or a [links.NAME] entry of the registry.")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [links.NAME] entries [default: indexes/corpora.toml].")
@click.option("--offline", is_flag=True, help="Answer from the langlinks cache only.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def langlinks_lookup(article: str, lang: str | None, links: str, registry: Path | None, offline: bool, as_json: bool) -> None:
    """Which Wikipedias hold ARTICLE (a URL, a title with --lang, or a Wikidata id such as
    Q42), as of the source's snapshot."""
    from audit.links.dump import parse_article
    from audit.links.entities import is_qid
    from audit.links.model import Article
    from audit.links.wikis import WikiError, wiki_for

    try:
        if is_qid(article):
            asked = Article(qid=article.strip())
        else:
            wiki, title = parse_article(article, wiki_for(lang) if lang else None)
            asked = Article(wiki=wiki, title=title)
        answers = open_links(links, registry, offline=offline).resolve([asked])
    except (LinksError, ValueError, WikiError) as error:
        raise InputError(str(error)) from None
    resolution = answers.found.get(asked)
    if resolution is None:
        reason = answers.errors.get(asked, "no answer")
        click.echo(json.dumps({"article": str(asked), "found": False, "reason": reason}) if as_json else f"{asked}: unknown: {reason}")
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(resolution.to_dict(), ensure_ascii=False, indent=2))
    elif not resolution.found:
        click.echo(f"{asked}: unknown: {resolution.reason}")
    else:
        moved = f" (redirected from {resolution.redirected_from!r})" if resolution.redirected_from else ""
        click.echo(f"{resolution.wiki}: {resolution.title}{moved}, as of {resolution.as_of}: {len(resolution.links)} other wikis")
        for link in resolution.links:
            click.echo(f"  {link.wiki:<12} {link.lang or '(no language)':<10} {link.title}  {link.url}")
    if not resolution.found:
        sys.exit(1)


@main.group("probe")
def probe_group() -> None:
    """Probe models outside an audit."""


@probe_group.command("serve-model")
@click.option("--probe-model", "model", required=True, help="The model to serve: smollm2, gemma3-270m, a [models.NAME] local entry of the registry, a .gguf file or a model directory.")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [models.NAME] entries [default: indexes/corpora.toml].")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535))
@click.option("--batch-size", type=click.IntRange(min=1), help="Requests answered together [default: the registry's, else 8].")
def serve_model(model: str, registry: Path | None, host: str, port: int, batch_size: int | None) -> None:
    """Offer a local model on an OpenAI-compatible endpoint (/v1/chat/completions), so several
    audits, or `--probe-model openai:NAME`, share one loaded model."""
    from audit.probes.compat_server import check_address, serve_forever

    try:
        check_address(host, port)
        opened = open_model(model, registry, batch_size=batch_size)
        if opened.describe().get("backend") != "transformers":
            raise ProbeError(f"--probe-model {model}: already an endpoint; serve-model offers local models")
        with step(f"loading the model {opened.model_id}"):
            backend = opened.backend()
    except ProbeError as error:
        raise InputError(str(error)) from None
    console.print(f"serving {opened.model_id} at http://{host}:{port}/v1 as model {model!r}", markup=False)
    serve_forever(backend, host, port)


@main.command("serve", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve_command(args: tuple[str, ...]) -> None:
    """Serve local indexes over the infini-gram API protocol, with audit jobs (`audit serve --help`)."""
    try:
        from audit.server import main as serve_main
    except ModuleNotFoundError as error:
        raise InputError(f"audit serve needs the [serve] extra, which is not installed (no module {error.name!r}): pip install \"corpus-audit[serve]\" (in a checkout: pip install \".[serve]\")") from None
    sys.exit(serve_main(list(args)))


if __name__ == "__main__":
    main()
