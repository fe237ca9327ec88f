"""One audit, whoever asked for it: read the benchmark, open the sources, plan the signals,
prepare them, check every variant, decide once, describe what was asked and write the file.

The command line, a server job and the Python API all call `run_audit`; they differ only in
how they open what the request names (`Opener`) and how they show progress (`Progress`).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

from audit.auditfile import AuditFile, AuditStream, is_audit_file
from audit.children import spaced_collections
from audit.corpora.apirun import api_clients, budget_stops, limit_requests
from audit.corpora.base import Corpus
from audit.corpora.client import InfiniGramClient
from audit.errors import AuditError
from audit.evidence import SignalRun
from audit.executors import Executor
from audit.items import LoadReport
from audit.langcodes import normalise_lang
from audit.links.sources import LinkSource
from audit.outputs import OutputError, check_file_target
from audit.policyfile import Policy
from audit.ranges import check_workers
from audit.readers import ReadOptions, load_benchmark
from audit.recordview import RecordView, Views
from audit.run.check import ItemWork
from audit.run.executors import choose_executor
from audit.run.manifest import Checked, audit_manifest
from audit.run.progress import QUIET, Note, NoteKind, Progress
from audit.run.request import AuditRequest, RequestError
from audit.run.sources import Opener, RegistryOpener
from audit.run.summary import Failures, Tally
from audit.signals import MODEL_SIGNALS, Runner, membership_spec, parse_signals, plan
from audit.signals.probe import Prober


@dataclass
class WrittenAudit(AuditFile):
    """The audit file a run wrote, its records read from disk when iterated, and the sources
    that failed or could not tell, counted as the records were made."""

    failures: Failures = field(default_factory=Failures)


@dataclass
class Reading:
    """The request's benchmark read under its policy: the variants to check (`langs`, None
    for all) and the signals asked for (None for every one that can run)."""

    policy: Policy
    report: LoadReport
    langs: list[str] | None
    signals: list[str] | None


@dataclass
class Planned:
    """The opened sources and the runners planned over them."""

    sources: list[Corpus]
    links: list[LinkSource]
    prober: Prober | None
    runners: list[Runner]
    runs: list[SignalRun]
    clients: list[InfiniGramClient]


@contextmanager
def refusing() -> Iterator[None]:
    """The tool's errors raised while a request's inputs are read or opened, as RequestErrors
    (the command line's input errors); a full disk or another system error (an OSError too)
    stays what it is."""
    try:
        yield
    except RequestError:
        raise
    except AuditError as error:
        if isinstance(error, OSError):
            raise
        raise RequestError.wrap(error) from None


def preflight(request: AuditRequest) -> Executor:
    """What can be refused before anything is read: where variants run, and the audit file's
    place (never over a command's input, nor over a file that is not an audit)."""
    where = request.where()
    out = request.target
    try:
        check_file_target(out, inputs=request.inputs(), force=True)
        if out.exists() and not is_audit_file(out):
            raise OutputError(f"{out}: exists and is not an audit file; refusing to overwrite it")
    except OutputError as error:
        raise RequestError.wrap(error) from None
    return where


class LinesReader(Protocol):
    """Reads the audit's record lines as they are written (the report's pass, made meanwhile);
    `start` says how the workers are to make the records' views, which come with their lines."""

    def start(self, policy: Policy) -> Views | None: ...

    def add(self, lines: bytes, views: list[RecordView] | None = None) -> None: ...


def run_audit(
    request: AuditRequest, *, progress: Progress = QUIET, opener: Opener | None = None, command: list[str] | None = None, lines: LinesReader | None = None
) -> WrittenAudit:
    """The audit file `request` asks for, written to `request.target` and returned as read
    back.  `command` is recorded in the manifest (the Python API's call by default); `lines`
    is handed every block of record lines as it is written."""
    where = preflight(request)
    opener = opener or RegistryOpener(request, where)
    reading = read(request, opener)
    progress.read(reading.report)
    planned = open_sources(request, opener, reading, progress)
    prepare(planned.runners, reading, progress)
    views = lines.start(reading.policy) if lines is not None else None
    with AuditStream(request.target, lines.add if lines is not None else None) as stream:
        checked = check(request, where, opener, reading, planned, progress, stream, views)
        for line in budget_stops(planned.sources):
            progress.note(Note(NoteKind.NOTE, line))
        manifest = audit_manifest(command or ["audit.check", str(request.benchmark)], reading.report, request.benchmark, checked, reading.policy, reading.langs)
        return WrittenAudit(**vars(stream.finish(manifest.to_dict())), failures=checked.tally.failures)


def read(request: AuditRequest, opener: Opener) -> Reading:
    """The signals asked for, the policy, and the benchmark read as the request says."""
    with refusing():
        signals = parse_signals(request.signals)
        policy = opener.policy(request.policy)
        mapping = opener.mapping(request.mapping) if request.mapping else None
        if request.header and mapping is None:
            raise RequestError("header", "--header applies with --map, which names the columns", named=False)
        options = ReadOptions(replace(mapping, header=str(request.header)) if mapping and request.header else mapping, request.source_lang)
        report = load_benchmark(request.benchmark, request.format, skip_bad_rows=request.skip_bad_rows, options=options, packed=True)
    return Reading(policy, report, wanted_languages(request.langs, report.languages) if request.langs else None, signals)


def wanted_languages(option: str, present: list[str]) -> list[str]:
    """The `langs` codes, normalised, each of which the benchmark must have."""
    wanted: list[str] = []
    codes = [part.strip() for part in option.split(",") if part.strip()]
    if not codes:
        raise RequestError("langs", f"--langs {option!r}: no language code given", named=False)
    for code in codes:
        try:
            lang = normalise_lang(code)
        except ValueError as error:
            raise RequestError("langs", str(error)) from None
        if lang not in present:
            raise RequestError("langs", f"the benchmark has no '{lang}' variants (it has {', '.join(present)})")
        if lang not in wanted:
            wanted.append(lang)
    return wanted


def open_sources(request: AuditRequest, opener: Opener, reading: Reading, progress: Progress) -> Planned:
    """Every corpus, link source and model the request names, opened and checked, and the
    runners planned over them; then what the options ask of them is checked."""
    with refusing(), progress.building() as build:
        sources = [opener.corpus(name, build) for name in request.corpora]
        links = [opener.links(name) for name in request.links]
        prober = opener.prober(request)
        policy = reading.policy
        runners, runs = plan(sources, reading.signals, policy.configs, policy.rules, links, request.as_of, prober)
    clients = limit_requests(sources, request.max_requests) if request.max_requests else api_clients(sources)
    _options_apply(request, reading, bool(clients), bool(links))
    if request.as_of and not links:
        progress.note(Note(NoteKind.NOTE, "--as-of applies to the langlinks signal, which runs only with --links"))
    for run in runs:
        if not run.ran and run.source:
            progress.note(Note(NoteKind.SKIPPED, f"signal {run.signal} on {run.source}: {run.reason}"))
    return Planned(sources, links, prober, runners, runs, clients)


def _options_apply(request: AuditRequest, reading: Reading, remote: bool, linked: bool) -> None:
    """Options that apply only with others, refused when given without them."""
    if request.max_requests and not remote:
        raise RequestError("max_requests", "--max-requests applies to API corpora (infini-gram or infini-gram mini entries of the registry)", named=False)
    if request.probe_model and reading.signals is not None and not MODEL_SIGNALS & set(reading.signals):
        raise RequestError("probe_model", f"no signal that asks the model (probe, membership) is among --signals {request.signals}")
    if not request.probe_model and (request.judge_model or request.probe_prompts or request.probe_batch_size or request.reference_model):
        raise RequestError("probe_model", "--judge-model, --reference-model, --probe-prompts and --probe-batch-size apply to the model signals, which run only with --probe-model", named=False)
    if request.reference_model and reading.signals is not None and membership_spec.NAME not in reading.signals:
        raise RequestError("reference_model", f"the reference model is read by the membership signal, which is not among --signals {request.signals}")


def variants(reading: Reading) -> int:
    counts = reading.report.variant_counts
    return sum(counts.values()) if reading.langs is None else sum(counts[lang] for lang in reading.langs)


def prepare(runners: Sequence[Runner], reading: Reading, progress: Progress) -> None:
    """The batched work of signals that have some (the langlinks signal's requests, the probe's
    prompts), before any variant is checked, each step with its own counter."""
    progress.variants(variants(reading))
    preparing = [runner for runner in runners if runner.prepare is not None]
    if not preparing:
        return
    with refusing(), progress.preparing() as step:
        for runner in preparing:
            runner.prepare(reading.report.items, reading.langs, step)


def check(
    request: AuditRequest, where: Executor, opener: Opener, reading: Reading, planned: Planned, progress: Progress, stream: AuditStream, views: Views | None = None
) -> Checked:
    """Every item checked where the one executor chosen here runs it, its records written to
    `stream` as they come, in order, with their `views` when asked; what the manifest needs is
    kept, not the records."""
    total = variants(reading)
    sources = planned.sources
    workers, clamped = check_workers(request.workers, total, remote=bool(sources) and len(api_clients(sources)) == len(sources))
    if clamped:
        progress.note(Note(NoteKind.NOTE, clamped))
    executor = choose_executor(where, workers, ItemWork(planned.runners, reading.policy, reading.langs, views=views), sources, reading.report.items, fork=opener.fork)
    description = f"checking against {', '.join(s.info.name for s in sources)}{executor.where}"
    tally = Tally()
    with spaced_collections(), executor, progress.checking(description, total, planned.clients) as advance:
        for outcome in executor.checked(reading.report.items, advance):
            stream.add(outcome.lines, outcome.variants, outcome.views)
            tally.merge(outcome.tally)
    return Checked([s.info for s in planned.sources], planned.runs, planned.links, request.as_of, planned.prober, executor.recorded, tally)
