"""`audit check`: tag every (item, language) of a benchmark seen / unseen / unknown.  The
options become an `AuditRequest`; `run_audit` does the rest, and this module prints: what was
read, notes, bars, the failed sources, the summary table, and the report beside the file."""
from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from audit.auditfile import AuditFile
from audit.bars import console, progress_display, step
from audit.children import WorkerDied
from audit.cli.common import build_progress_display
from audit.cli.shell import KEPT, InputError, system_error
from audit.corpora.apirun import check_display
from audit.corpora.base import Profile
from audit.corpora.client import InfiniGramClient
from audit.exposure import Knowledge, Membership
from audit.items import LoadReport
from audit.outputs import OutputError, check_directory_target
from audit.readers import FORMATS
from audit.report.aswritten import ReadAsWritten
from audit.report.build import ReadAudit
from audit.report.pages import ItemsById
from audit.report.render import REPORT, write_report
from audit.run import AuditRequest, Note, RequestError, run_audit
from audit.run import Progress as RunProgress
from audit.run.audit import preflight
from audit.run.progress import BuildHook, StepStart
from audit.run.summary import Failures
from audit.signals import KNOWLEDGE_SIGNALS, MODEL_SIGNALS, SIGNALS

STRICT_EXIT = 3


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
    kinds = report.kinds
    variants = sum(report.variant_counts.values())
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


def _warn_failed_sources(failures: Failures, variants: int) -> None:
    """Say which sources failed or could not tell, how many variants that left `unknown` (or,
    for a probed model, `undetermined`) and the first reason, so no such tag goes unexplained."""
    fields, first = failures.fields, failures.first
    for (status, signal, source), count in fields.items():
        unknown = failures.variants.get((status, signal, source), 0)
        what = "could not be checked" if status == "failed" else "could not be told"
        tag = "undetermined" if signal in KNOWLEDGE_SIGNALS else "unknown"
        left = "" if signal in MODEL_SIGNALS and signal not in KNOWLEDGE_SIGNALS else f", leaving {unknown} of {variants} variant(s) {tag}"
        console.print(f"[red]{status}[/red] {signal} on {escape(source)}: {count} field(s) {what}{left}; first error: {escape(first[status, signal, source])}", soft_wrap=True)


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
    for key, title, tags in (("knowledge", "What the probed model knows, per language", Knowledge),
                             ("membership", "What the probed model's membership scores say, per language", Membership)):
        if key in summary:
            _verdict_table(title, summary[key], tags)
    items = ", ".join(f"{name}: {count}" for name, count in sorted(summary["items"].items()))
    Console().print(f"items: {items}   ({elapsed:.1f} s)")


def _verdict_table(title: str, counts_by_lang: dict[str, dict[str, int]], tags: type[StrEnum]) -> None:
    table = Table(title=title)
    for column in ("language", "variants", *(tag.value for tag in tags)):
        table.add_column(column, justify="left" if column == "language" else "right")
    for lang, counts in sorted(counts_by_lang.items()):
        table.add_row(Text(lang), str(counts["total"]), *(str(counts[tag.value]) for tag in tags))
    Console().print(table)


class ConsoleProgress(RunProgress):
    """A run's progress on the terminal: what was read, notes in yellow, a bar for index
    builds, one per prepare step, and the check's bar (with the requests of API corpora)."""

    def __init__(self) -> None:
        self.benchmark: LoadReport | None = None

    def read(self, report: LoadReport) -> None:
        self.benchmark = report
        for skipped in report.skipped:
            console.print(f"[yellow]skipped[/yellow] {escape(skipped)}")
        _print_read(report)

    def release_items(self) -> ItemsById | None:
        """The benchmark's items packed for the report's pages (None if none was read), and
        the objects let go: the parent holds a third of their size while the pages render."""
        if self.benchmark is None:
            return None
        items, self.benchmark = ItemsById(self.benchmark.items), None
        return items

    def note(self, note: Note) -> None:
        console.print(f"[yellow]{note.kind}[/yellow] {escape(note.text)}")

    @contextmanager
    def building(self) -> Iterator[BuildHook]:
        progress, hook = build_progress_display()
        try:
            yield hook
        finally:
            progress.stop()

    @contextmanager
    def preparing(self) -> Iterator[StepStart]:
        with progress_display() as progress:

            def start(description: str, total: int | None) -> Callable[[int], None]:
                task = progress.add_task(description, total=total)
                return lambda done: progress.advance(task, done)

            yield start

    @contextmanager
    def checking(self, description: str, total: int, clients: list[InfiniGramClient]) -> Iterator[Callable[[], None]]:
        with check_display(clients) as progress:
            task = progress.add_task(escape(description), total=total)
            yield lambda: progress.advance(task)


@click.command()
@click.argument("benchmark", metavar="BENCH", type=click.Path(path_type=Path))
@click.option("--corpus", "corpora", required=True, multiple=True, help="`demo`, a name in indexes/corpora.toml (or --registry), or an index directory; repeat for several.")
@click.option("--signals", help=f"Comma-separated signals to run ({', '.join(SIGNALS)}) [default: every one the corpora support].")
@click.option("--out", type=click.Path(path_type=Path), help="Audit file to write [default: BENCH.CORPUS.audit.jsonl, corpora joined by +].")
@click.option("--langs", help="Comma-separated languages to check [default: all in the benchmark].")
@click.option("--format", type=click.Choice(list(FORMATS)), help="Benchmark format [default: detected from the path, the first record's keys or the columns]; `audit formats` lists them.")
@click.option("--map", "mapping", help="Which column holds what, for benchmarks without a reader: question=COL,answer=COL,context=COL,lang=COL,id=COL,options=A|B|C,answer_index=COL,exclude=COL,... or a TOML file of the same keys.")
@click.option("--source-lang", help="The language items were written in, where the benchmark does not say (also the language of every row of a one-language table).")
@click.option("--header", type=click.Choice(["first", "none"]), help="With --map: `none` for a CSV/TSV without a header row, whose columns --map then names by position from 0 (question=0,answer=1) [default: first, the first row names the columns].")
@click.option("--policy", type=click.Path(path_type=Path), help="Policy TOML merged over the built-in one.")
@click.option("--registry", type=click.Path(path_type=Path), help="Corpus registry TOML [default: indexes/corpora.toml].")
@click.option("--skip-bad-rows", is_flag=True, help="Skip (and count) malformed benchmark rows instead of stopping.")
@click.option("--workers", type=click.IntRange(min=1), help="Processes (threads when a corpus is remote) for the search [default: all cores; 8 when every corpus is remote]; more than the variants or four per core are clamped, with a note.")
@click.option("--links", multiple=True, help="Run the langlinks signal with this source: `wikipedia-api` (the MediaWiki API, and Wikidata's for entity ids), a lookup directory built by `audit langlinks build`, or a [links.NAME] entry of the registry; repeat for several.")
@click.option("--as-of", "as_of", type=click.DateTime(formats=["%Y-%m-%d"]), help="The model's training cutoff: the langlinks signal counts only articles that existed on this date (asking their creation dates from the API).")
@click.option("--probe-model", help="Run the probe signal with this model: `smollm2`, `gemma3-270m`, `openai:MODEL` (at $OPENAI_BASE_URL), a [models.NAME] entry of the registry, a .gguf file or a model directory.  Opt-in: every variant costs model calls.")
@click.option("--judge-model", help="The model that judges self-summaries [default: the probe model]; the same values as --probe-model.")
@click.option("--reference-model", help="A second local model the membership signal also reads each text with, for the reference-calibrated score loss_minus_reference (Carlini et al.): a model not trained on the benchmark, ideally of the same family; the same values as --probe-model.")
@click.option("--probe-prompts", type=click.Path(path_type=Path), help="Prompt templates (TOML) merged over the shipped ones, per language and task.")
@click.option("--probe-batch-size", type=click.IntRange(min=1), help="Prompts per batch for a local probe model [default: the registry's, else 8].")
@click.option("--offline", is_flag=True, help="Answer API corpora, link sources and probe models from their caches only; what is not cached is tagged unknown (undetermined).")
@click.option("--max-requests", type=click.IntRange(min=1), help="Send at most this many HTTP requests to each API corpus; what is left is tagged unknown, and running the command again resumes from the response cache.")
@click.option("--profile", type=click.Choice([str(p) for p in Profile]), help="For corpora that derive longest matches from counts: `decide` asks what the policy's rules need, `full` the longest match at every position [default: the registry's, else decide].")
@click.option("--report/--no-report", "with_report", default=True, show_default=True, help="Also write an exposure report (HTML, Markdown, JSON).")
@click.option("--report-dir", type=click.Path(path_type=Path), help="Where the report goes [default: OUT without .jsonl, plus .report].")
@click.option("--strict", is_flag=True, help=f"Exit with status {STRICT_EXIT} when any variant is unknown (for CI pipelines); the audit file is written all the same.")
@click.option("--executor", default="local", show_default=True, help="Where variants are checked: `local`, or a Ray cluster (`ray` for $RAY_ADDRESS or a new local one, `ray://HOST:PORT`); on Ray, local indexes are served by actors holding their shards.")
@click.option("--actors", type=click.IntRange(min=1), help="With a Ray executor, the actors serving each local index [default: one per node of the cluster].")
def check(with_report: bool, report_dir: Path | None, strict: bool, **fields: object) -> None:
    """Tag every (item, language) of BENCH seen / unseen / unknown in one or more corpora, with
    the evidence of every signal."""
    started = time.perf_counter()
    _recordable(click.get_current_context().params)
    progress = ConsoleProgress()
    try:
        request = AuditRequest.of(**fields)
        inputs = request.inputs()
        report_dir = _report_target(request, inputs, report_dir) if with_report else None
        as_written = ReadAsWritten() if report_dir is not None else None
        written = run_audit(request, progress=progress, command=["audit", *sys.argv[1:]], lines=as_written)
    except RequestError as error:
        raise InputError(str(error)) from None
    except WorkerDied as error:
        raise click.ClickException(f"{error}; no audit file was written") from None
    out = request.target
    _warn_failed_sources(written.failures, len(written.records))
    KEPT.append(f"the audit file {out} was written whole")
    if report_dir is not None and (items := progress.release_items()) is not None:
        _write_report(report_dir, written, out, items, inputs, as_written.read(written) if as_written is not None else None)
    summary = written.manifest["summary"]
    _print_summary(summary, out, time.perf_counter() - started)
    if report_dir is not None:
        Console(emoji=False).print(f"report: {report_dir / 'report.html'}", markup=False)
    unknown = sum(counts["unknown"] for counts in summary["languages"].values())
    if strict and unknown:
        console.print(f"[red]--strict:[/red] {unknown} variant(s) are unknown (see decided_by in {escape(str(out))})")
        sys.exit(STRICT_EXIT)


def _report_target(request: AuditRequest, inputs: list[Path], report_dir: Path | None) -> Path:
    """Where the report goes, refused (as the audit file's place is) before anything runs."""
    preflight(request)
    report_dir = report_dir or _default_report_dir(request.target)
    try:
        check_directory_target(report_dir, REPORT, inputs=[*inputs, request.target])
    except OutputError as error:
        raise RequestError.wrap(error) from None
    return report_dir


def _write_report(report_dir: Path, written: AuditFile, out: Path, items: ItemsById, inputs: list[Path], read: ReadAudit | None) -> None:
    """The exposure report beside the audit file, which is kept whatever happens to it."""
    try:
        with step(f"writing the report {report_dir}"):
            # The records stay on disk: the report's pass over them was made as they were
            # written (`read`), or is made now, and each provenance page reads its own item's lines back.
            write_report(report_dir, written, str(out), items, inputs=inputs, read=read)
    except OutputError as error:
        raise InputError(f"{error} (the audit file {out} was written)") from None
    except OSError as error:
        raise click.ClickException(f"{system_error(error)}; no report written (the audit file {out} was written whole)") from None
