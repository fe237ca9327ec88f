"""Run signals over every (item, language) and turn their evidence into exposure records.

Signals arrive as callables, so this module needs none of them by name: the CLI and the
server choose which run.  Variants are checked on a thread pool, or, when every source is a
local index, on forked processes (`variant_processes`): the suffix-array searches release the
GIL, but most of the signals' work is Python that holds it.  On a Ray cluster the runners that
can travel are run in Ray tasks (`spread_evidence`); the records come out the same.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import statistics
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any

from audit import __version__
from audit.auditfile import benchmark_digest
from audit.children import end_pool, pool_options, sigint_blocked
from audit.corpora.base import CorpusInfo
from audit.evidence import Evidence, SignalRun
from audit.executors import LOCAL, Executor, connect
from audit.exposure import SEEN, UNKNOWN, UNSEEN, Knowledge, decide, decide_knowledge, item_exposure, seen_in
from audit.items import Item, LoadReport
from audit.policyfile import Policy
from audit.records import AuditManifest, BenchmarkRecord, ExposureRecord
from audit.timestamps import utc_timestamp

SignalRunner = Callable[[Item, str], list[Evidence]]
# Variants one Ray task checks: few round trips, and little to redo when a worker is lost.
RAY_CHUNK = 8
# A Ray task whose worker died is re-run this many times before its variants are `failed`.
RAY_RETRIES = 3


def check_variant(item: Item, lang: str, runners: list[SignalRunner], policy: Policy) -> ExposureRecord:
    return _decided(item, lang, [e for run in runners for e in run(item, lang)], policy)


def _decided(item: Item, lang: str, evidence: list[Evidence], policy: Policy) -> ExposureRecord:
    variant = item.variants.get(lang)
    field_languages = variant.field_languages if variant is not None else None
    record = ExposureRecord.decided(item.item_id, lang, item.source_lang, decide(policy, evidence, lang), evidence, decide_knowledge(policy, evidence), field_languages)
    record.asked_in = sorted(item.variants)
    return record


# What forked workers check with: set before the fork, so each child inherits the runners
# with their open indexes and memory maps instead of receiving them pickled.
_FORKED: list[tuple[list[SignalRunner], Policy]] = []


@contextmanager
def variant_processes(runners: list[SignalRunner], policy: Policy, workers: int) -> Iterator[Pool]:
    """Forked processes ready to check variants with these runners.  Enter it before any
    thread starts (a progress display), so no child inherits a lock another thread held."""
    _FORKED.append((runners, policy))
    try:
        with sigint_blocked():
            pool = multiprocessing.get_context("fork").Pool(workers, **pool_options())
        try:
            yield pool
        except BaseException:
            end_pool(pool)
            raise
        pool.terminate()
    finally:
        _FORKED.clear()


def _check_forked(task: tuple[Item, str]) -> ExposureRecord:
    runners, policy = _FORKED[-1]
    return check_variant(*task, runners, policy)


def check_items(
    items: list[Item],
    runners: list[SignalRunner],
    policy: Policy,
    *,
    langs: list[str] | None = None,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    processes: Pool | None = None,
    executor: Executor = LOCAL,
) -> list[dict[str, Any]]:
    """Records in item order then language order, whatever order the pool finishes in.

    `langs` limits which variants are checked; the others stay on the item, since signals
    compare a target variant with its source-language text.  With `processes` (from
    `variant_processes` over the same runners) variants are checked there; with a Ray
    `executor`, the runners that can travel are run on the cluster (`spread_evidence`);
    else on threads."""
    tasks = [(item, lang) for item in items for lang in item.variants if langs is None or lang in langs]
    if executor.distributed:
        evidence = spread_evidence(tasks, runners, executor, workers, on_done)
        records = [_decided(item, lang, [e for found in per_runner for e in found], policy) for (item, lang), per_runner in zip(tasks, evidence, strict=True)]
    elif processes is not None:
        records = []
        for record in processes.imap(_check_forked, tasks, chunksize=4):
            records.append(record)
            if on_done:
                on_done()
    else:

        def run(task: tuple[Item, str]) -> ExposureRecord:
            record = check_variant(*task, runners, policy)
            if on_done:
                on_done()
            return record

        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            records = list(pool.map(run, tasks))
    by_item: dict[str, list[ExposureRecord]] = {}
    for record in records:
        by_item.setdefault(record.item_id, []).append(record)
    for group in by_item.values():
        summary = item_exposure(group[0].source_lang, {r.lang: r.exposure for r in group})
        found_in = seen_in([r.seen_in_languages for r in group])
        for record in group:
            record.item_exposure, record.seen_in = summary, found_in
    return [record.to_dict() for record in records]


def _shipped_evidence(token: str, shipped: list[Any], tasks: list[tuple[Item, str]]) -> list[list[list[Evidence]]]:
    """On a Ray worker: each variant's evidence from each shipped runner.  The runners arrive
    once per worker process (wrapped in a list, so Ray passes the reference unresolved)."""
    if token not in _SHIPPED:
        import ray

        _SHIPPED.clear()
        _SHIPPED[token] = ray.get(shipped[0])
    return [[run(item, lang) for run in _SHIPPED[token]] for item, lang in tasks]


_SHIPPED: dict[str, list[SignalRunner]] = {}


def spread_evidence(
    tasks: list[tuple[Item, str]], runners: list[SignalRunner], executor: Executor, workers: int | None, on_done: Callable[[], None] | None
) -> list[list[list[Evidence]]]:
    """Per variant, per runner, its evidence, in the order given.  Runners whose source can
    travel (`portable`: a local index, re-opened on the worker and asking the same shard
    actors) run in Ray tasks of RAY_CHUNK variants; the others (an API cache, a link source,
    a model) run here on threads.  A task Ray could not finish even after retrying its lost
    workers leaves its runners' fields `failed`, which the policy reads as `unknown`."""
    ray = connect(executor)
    shipped = [i for i, run in enumerate(runners) if getattr(run, "portable", False)]
    kept = [i for i in range(len(runners)) if i not in shipped]
    table: list[list[list[Evidence]]] = [[[] for _ in runners] for _ in tasks]
    waiting = [len([part for part in (shipped, kept) if part])] * len(tasks)
    lock = threading.Lock()

    def finished(position: int) -> None:
        with lock:
            waiting[position] -= 1
            if waiting[position] == 0 and on_done:
                on_done()

    def run_kept(position: int) -> None:
        item, lang = tasks[position]
        for i in kept:
            table[position][i] = runners[i](item, lang)
        finished(position)

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        pending = [pool.submit(run_kept, position) for position in range(len(tasks))] if kept else []
        if shipped:
            remote = ray.remote(_shipped_evidence).options(max_retries=RAY_RETRIES, num_cpus=1)
            token, reference = uuid.uuid4().hex, ray.put([runners[i] for i in shipped])
            chunks = {remote.remote(token, [reference], tasks[start : start + RAY_CHUNK]): start for start in range(0, len(tasks), RAY_CHUNK)}
            while chunks:
                ready, _ = ray.wait(list(chunks), num_returns=1)
                start = chunks.pop(ready[0])
                part = tasks[start : start + RAY_CHUNK]
                try:
                    found = ray.get(ready[0])
                except ray.exceptions.RayError as error:
                    found = [[runners[i].failed(item, error) for i in shipped] for item, _ in part]
                for offset, per_runner in enumerate(found):
                    for i, evidence in zip(shipped, per_runner, strict=True):
                        table[start + offset][i] = evidence
                    finished(start + offset)
        for future in pending:
            future.result()
    return table


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per language and per item, for the manifest and the printed table; the checks
    behind the tags per signal and source; what the model knows per language, when it was
    probed; and, for sources that derive matches from counts, the count queries each variant
    cost."""
    per_lang: dict[str, Counter] = {}
    knowledge: dict[str, Counter] = {}
    items: dict[str, str] = {}
    for record in records:
        per_lang.setdefault(record["lang"], Counter())[record["exposure"]] += 1
        items[record["item_id"]] = record["item_exposure"]
        if record.get("knowledge") is not None:
            knowledge.setdefault(record["lang"], Counter())[record["knowledge"]] += 1
    summary: dict[str, Any] = {
        "languages": {
            lang: {tag: counts.get(tag, 0) for tag in (SEEN, UNSEEN, UNKNOWN)} | {"total": sum(counts.values())}
            for lang, counts in per_lang.items()
        },
        "items": dict(Counter(items.values())),
        "checks": check_counts(records),
    }
    if knowledge:
        summary["knowledge"] = {lang: {tag.value: counts.get(tag, 0) for tag in Knowledge} | {"total": sum(counts.values())} for lang, counts in knowledge.items()}
        summary["knowledge_checks"] = check_counts(records, "knowledge", "knowledge_decided_by", {Knowledge.KNOWN: "fired", Knowledge.NOT_KNOWN: "passed"})
    queries = count_queries(records)
    if queries:
        summary["count_queries"] = queries
    return summary


def check_counts(records: list[dict[str, Any]], tag: str = "exposure", checks: str = "decided_by", outcome: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Per `signal/source`, the checks the tags rest on (`decided_by`): rules that fired on
    `seen` variants, rules that passed on `unseen` ones, and rules left undecided by a bound
    or a failed source on `unknown` ones (the same for `knowledge`, from its own checks)."""
    counts: dict[str, Counter] = {}
    outcome = outcome or {SEEN: "fired", UNSEEN: "passed"}
    for record in records:
        for check in record.get(checks) or []:
            if "source" in check:
                counts.setdefault(f"{check['signal']}/{check['source']}", Counter())[check.get("status") or outcome.get(record[tag], "undecided")] += 1
    return {key: dict(sorted(found.items())) for key, found in sorted(counts.items())}


def count_queries(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per source whose matches were derived from counts: the count queries charged to each
    variant's budget, in all, at the median and at most."""
    spent: dict[str, list[int]] = {}
    for record in records:
        per_source: Counter = Counter()
        for evidence in record["evidence"]:
            per_source[evidence["source"]] += evidence.get("figures", {}).get("count_queries", 0)
        for source, queries in per_source.items():
            spent.setdefault(source, []).append(queries)
    return {
        source: {"total": sum(values), "median_per_variant": statistics.median(values), "max_per_variant": max(values)}
        for source, values in spent.items()
        if any(values)
    }


def audit_manifest(
    command: list[str],
    benchmark: LoadReport,
    benchmark_path: Path,
    corpora: list[CorpusInfo],
    runs: list[SignalRun],
    policy: Policy,
    langs: list[str] | None,
    records: list[dict[str, Any]],
    links: dict[str, Any] | None = None,
    models: dict[str, Any] | None = None,
    executor: Executor = LOCAL,
) -> dict[str, Any]:
    """The audit file's first line, wherever the audit ran (the CLI or a server job): what was
    checked, against what, with which signals (and why any was skipped), under which policy,
    and a hash that says when two audits compare.  `links`: the link sources the langlinks
    signal asked and the cutoff it judged at, when it ran.  `executor` is recorded only when it
    is not local, and is not part of the hash: where variants were checked changes no record."""
    signals = list(dict.fromkeys(run.signal for run in runs if run.ran))
    settings: dict[str, Any] = {"policy": policy.settings, "corpus": [c.fingerprint for c in corpora], "langs": langs, "signals": signals}
    if benchmark.mapping or benchmark.source_lang:
        settings["read"] = {"mapping": benchmark.mapping, "source_lang": benchmark.source_lang}
    if links is not None:
        settings["links"] = {"sources": [{k: v for k, v in source.items() if k in ("name", "backend", "endpoint", "path")} for source in links["sources"]], "as_of": links["as_of"]}
    if models is not None:
        settings["models"] = {"probe": models["probe"]["model_id"], "judge": models["judge"]["model_id"], "prompts": models["prompts"]["digest"]}
    return AuditManifest(
        tool="corpus-audit",
        version=__version__,
        created=utc_timestamp(),
        command=command,
        benchmark=BenchmarkRecord(
            path=str(benchmark_path),
            absolute_path=str(Path(benchmark_path).resolve()),
            format=benchmark.format,
            sha256=benchmark_digest(benchmark_path),
            items=len(benchmark.items),
            languages=benchmark.languages,
            skipped_rows=benchmark.skipped,
            excluded_rows=benchmark.excluded,
            kinds=dict(Counter(str(item.kind) for item in benchmark.items)),
            language_codes=benchmark.language_codes,
            unused_fields=benchmark.unused_fields,
            mapping=benchmark.mapping,
            source_lang=benchmark.source_lang,
        ),
        corpora=[asdict(info) for info in corpora],
        signals=signals,
        signal_runs=runs,
        policy={"name": policy.name, "source": policy.source, "hash": policy.digest, "settings": policy.settings},
        config_hash=hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16],
        summary=summarise(records),
        links=links,
        models=models,
        executor=str(executor) if executor.distributed else None,
    ).to_dict()
