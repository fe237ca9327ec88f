"""`audit check`: tag every (item, language) of a benchmark seen / unseen / unknown."""
from __future__ import annotations

import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from audit.auditfile import is_audit_file, write_audit
from audit.check import audit_manifest, check_items, variant_processes
from audit.cli.common import build_progress_display
from audit.corpora.apirun import api_clients, budget_stops, check_display, limit_requests
from audit.corpora.base import Profile
from audit.corpora.local import LocalIndex
from audit.corpora.registry import CorpusError, open_corpus
from audit.corpora.shards import IndexOpenError
from audit.executors import ExecutorError, parse_executor
from audit.exposure import UNKNOWN, Knowledge
from audit.index.errors import IndexBuildError
from audit.items import LoadReport
from audit.langcodes import normalise_lang
from audit.links.model import LinksError
from audit.links.sources import open_links
from audit.outputs import OutputError, check_directory_target, check_file_target
from audit.policyfile import PolicyError, load_policy
from audit.probes.generation import ProbeError
from audit.probes.prompts import PromptError
from audit.ranges import check_workers
from audit.readers import FORMATS, BenchmarkError, ColumnMap, MappingError, ReadOptions, load_benchmark, parse_mapping
from audit.report.render import REPORT, write_report
from audit.shell import KEPT, InputError, console, progress_display, step, system_error
from audit.signals import KNOWLEDGE_SIGNALS, SIGNALS, SignalError, configure, parse_signals, plan
from audit.signals.probe import open_prober

STRICT_EXIT = 3


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


@click.command()
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
    progress, report_build = build_progress_display()
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
