"""Audit jobs: a submitted benchmark checked against a served index off the request path.

A job is a directory under the jobs root holding the uploaded benchmark, `job.json` (its
status, rewritten atomically at every change) and, once done, `audit.jsonl`.  Jobs run one at a
time (by default) on a worker thread pool, so a long audit never holds an HTTP request open;
clients poll the status and download the audit file when it is done.

The jobs root is the state: a restarted server reads it back, answers for every finished job,
and runs again the jobs that were queued or running when it stopped (an audit is deterministic,
so a rerun gives what the interrupted run would have).  A job names its policy by digest:
uploaded policies are kept under `policies/`, and the server's own policy is the default.

With a Ray executor the server's byte-level indexes are held by shard actors, and a job's
variants are checked in Ray tasks asking them (`check_items(..., executor=)`); the records are
those a local server gives.

A job may name one of the server's probe models (`probe_model`): its probe step runs in the
job's worker.  Models are shared by all jobs (a local one loads once, on first use) and each
answers one `generate` call at a time (`CachedModel`).
"""
from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from datetime import date
from pathlib import Path
from typing import Any

from audit.auditfile import write_audit
from audit.check import audit_manifest, check_items
from audit.corpora.base import Corpus
from audit.executors import LOCAL, Executor
from audit.langcodes import normalise_lang
from audit.links.model import LinksError
from audit.outputs import atomic_write_text
from audit.policyfile import Policy, PolicyError, load_policy
from audit.probes.cache import CachedModel
from audit.probes.generation import ProbeError
from audit.probes.prompts import PromptError
from audit.readers import BenchmarkError, load_benchmark
from audit.readers.columns import MappingError, parse_inline
from audit.readers.common import ReadOptions
from audit.server.errors import JobError
from audit.server.names import BadName, job_id, upload_name
from audit.server.policies import PolicyFolder
from audit.server.probing import ProbeModels
from audit.server.retention import Kept, Retention, expired, folder_bytes
from audit.server.uploads import UploadError, store_upload
from audit.signals import configure, plan
from audit.timestamps import utc_timestamp

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
FORMATS = ("eclektic-jsonl", "eclektic-csv", "bmlama", "jsonl")
SERVER_PATHS = ("cache", "file", "path")


@dataclass
class Job:
    id: str
    index: str
    format: str | None
    langs: list[str] | None
    benchmark: str = "benchmark"
    policy: str | None = None
    mapping: str | None = None
    source_lang: str | None = None
    links: list[str] | None = None
    as_of: str | None = None
    probe_model: str | None = None
    models: dict[str, Any] | None = None
    status: str = QUEUED
    submitted: str = field(default_factory=utc_timestamp)
    finished: str | None = None
    done: int = 0
    total: int | None = None
    prepare: dict[str, Any] | None = None
    error: str | None = None
    summary: dict[str, Any] | None = None
    restarts: int = 0

    def public(self) -> dict[str, Any]:
        """The status a client sees: without the server's own paths (a model's cache and
        files, the prompt templates' file), which job.json keeps."""
        data = asdict(self)
        if self.models:
            data["models"] = {role: {k: v for k, v in part.items() if k not in SERVER_PATHS} for role, part in self.models.items()}
        return data

    @classmethod
    def from_file(cls, path: Path) -> Job:
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class JobManager:
    """Accepts, runs and reports audit jobs; at most `max_pending` wait or run at once."""

    def __init__(
        self,
        root: Path,
        corpora: dict[str, Corpus],
        *,
        policy: Policy | None = None,
        workers: int = 1,
        max_pending: int = 16,
        check_workers: int | None = None,
        links: dict[str, Any] | None = None,
        probes: ProbeModels | None = None,
        executor: Executor = LOCAL,
        retention: Retention | None = None,
        max_inflated_bytes: int = 256 << 20,
    ) -> None:
        self.root = Path(root)
        self.retention = retention or Retention()
        self.max_inflated_bytes = max_inflated_bytes
        self.executor = executor
        self.links = links or {}
        self.probes = probes
        self.corpora = corpora
        self.policy = policy or load_policy(None)
        self.policies = PolicyFolder(self.root, self.policy)
        self.max_pending = max_pending
        self.check_workers = check_workers
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-job")
        self._resume()
        self.prune()

    def _resume(self) -> None:
        """Read back the jobs a previous server left, and queue again those it did not finish."""
        for status_file in sorted(self.root.glob("*/job.json")):
            try:
                job = Job.from_file(status_file)
            except (OSError, ValueError, TypeError) as error:
                raise JobError(f"{status_file}: unreadable job status ({error}); move the directory aside", 500) from None
            self._jobs[job.id] = job
            if job.status not in (QUEUED, RUNNING):
                continue
            if job.index not in self.corpora:
                self._update(job, status=FAILED, error=f"the server restarted without index {job.index!r}", finished=utc_timestamp())
                continue
            lost = [name for name in job.links or [] if name not in self.links]
            if lost:
                self._update(job, status=FAILED, error=f"the server restarted without link source(s) {', '.join(lost)}", finished=utc_timestamp())
                continue
            changed = self._models_changed(job)
            if changed:
                self._update(job, status=FAILED, error=changed, finished=utc_timestamp())
                continue
            self._update(job, status=QUEUED, done=0, prepare=None, restarts=job.restarts + 1)
            self._pool.submit(self._run, job)

    @property
    def probe_models(self) -> dict[str, CachedModel]:
        return self.probes.models if self.probes else {}

    def _models_changed(self, job: Job) -> str | None:
        """Why a job left queued cannot run on this server's models: its model is gone, or the
        model, judge or prompts it was accepted with are not the ones served now."""
        if job.probe_model is None:
            return None
        if self.probes is None or job.probe_model not in self.probes.models:
            return f"the server restarted without probe model {job.probe_model!r}"
        now = self.probes.prober(job.probe_model).describe()
        then = job.models or {}
        for role, key, what in (("probe", "model_id", "probe model"), ("judge", "model_id", "judge model"), ("prompts", "digest", "prompt templates")):
            if then.get(role, {}).get(key) != now[role][key]:
                return f"the server restarted with another {what}: {now[role][key]}, not {then.get(role, {}).get(key)} as the job was accepted with"
        return None

    def add_policy(self, text: bytes) -> Policy:
        return self.policies.add(text)

    def policy_for(self, name: str | None) -> Policy:
        return self.policies.get(name)

    def submit(
        self, index: str, benchmark: bytes, filename: str, fmt: str | None, langs: str | None, policy: str | None = None,
        mapping: str | None = None, source_lang: str | None = None, links: str | None = None, as_of: str | None = None,
        probe_model: str | None = None,
    ) -> Job:
        if index not in self.corpora:
            raise JobError(f"unknown index {index!r}; audit jobs run on {', '.join(sorted(self.corpora)) or 'no index'}", 404)
        if fmt is not None and fmt not in FORMATS:
            raise JobError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
        if not benchmark:
            raise JobError("the request body (the benchmark file) is empty")
        try:
            wanted = [normalise_lang(code.strip()) for code in langs.split(",") if code.strip()] if langs else None
        except ValueError as error:
            raise JobError(f"langs: {error}") from None
        try:
            if mapping:
                parse_inline(mapping, "map")  # inline only: a client never names a file on the server
        except MappingError as error:
            raise JobError(str(error)) from None
        try:
            lang = normalise_lang(source_lang) if source_lang else None
        except ValueError as error:
            raise JobError(f"source_lang: {error}") from None
        sources = [name.strip() for name in links.split(",") if name.strip()] if links else None
        unknown = [name for name in sources or [] if name not in self.links]
        if unknown:
            raise JobError(f"links: {', '.join(unknown)} is not a link source of this server (it has {', '.join(sorted(self.links)) or 'none'}; `audit serve --links`)")
        if as_of is not None:
            try:
                as_of = date.fromisoformat(as_of).isoformat()
            except ValueError:
                raise JobError(f"as_of: {as_of!r} is not a date (YYYY-MM-DD)") from None
            if not sources:
                raise JobError("as_of: applies to the langlinks signal, which runs only with links=")
        if probe_model is not None and probe_model not in self.probe_models:
            offered = ", ".join(sorted(self.probe_models)) or "none; `audit serve --probe-model`"
            what = "a path: a job names one of the server's probe models" if "/" in probe_model or "\\" in probe_model else "not a probe model of this server"
            raise JobError(f"probe_model: {probe_model!r} is {what} (it has {offered})")
        models = self.probes.prober(probe_model).describe() if self.probes and probe_model is not None else None
        digest = self.policy_for(policy).digest
        try:
            name = upload_name(filename)
        except BadName as error:
            raise JobError(str(error)) from None
        self.prune()
        with self._lock:
            pending = sum(1 for j in self._jobs.values() if j.status in (QUEUED, RUNNING))
            if pending >= self.max_pending:
                raise JobError(f"{pending} jobs are already waiting or running; try again later", 429)
            job = Job(
                id=uuid.uuid4().hex[:16], index=index, format=fmt, langs=wanted, benchmark=name, policy=digest,
                mapping=mapping or None, source_lang=lang, links=sources, as_of=as_of, probe_model=probe_model, models=models,
            )
            self._jobs[job.id] = job
        self._start(job, benchmark)
        return job

    def _start(self, job: Job, benchmark: bytes) -> None:
        """Keep the upload in the job's folder (inflated, if compressed) and queue the job; a
        failure leaves no folder and no job behind."""
        directory = self.root / job.id
        try:
            directory.mkdir()
            job.benchmark = store_upload(directory, job.benchmark, benchmark, self.max_inflated_bytes)
            self._save(job)
        except UploadError as error:
            self._forget(job)
            raise JobError(str(error), error.status) from None
        except BaseException:
            self._forget(job)
            raise
        self._pool.submit(self._run, job)

    def _forget(self, job: Job) -> None:
        with self._lock:
            self._jobs.pop(job.id, None)
        shutil.rmtree(self.root / job.id, ignore_errors=True)

    def get(self, name: str) -> Job:
        try:
            key = job_id(name)
        except BadName as error:
            raise JobError(str(error)) from None
        with self._lock:
            job = self._jobs.get(key)
        if job is None:
            raise JobError(f"no job {key!r}", 404)
        return job

    def delete(self, name: str) -> Job:
        """Remove a finished job and its folder; a queued or running one is refused (409), as
        a job's worker may be reading or writing its folder."""
        job = self.get(name)
        with self._lock:
            if job.status in (QUEUED, RUNNING):
                raise JobError(f"job {job.id} is {job.status}; delete it once it is done or failed", 409)
            self._jobs.pop(job.id, None)
        shutil.rmtree(self.root / job.id, ignore_errors=True)
        return job

    def prune(self) -> list[str]:
        """Remove the finished jobs past the retention's age or size (see retention.py)."""
        with self._lock:
            jobs = list(self._jobs.values())
        kept = [Kept(job.id, job.finished if job.status in (DONE, FAILED) else None, folder_bytes(self.root / job.id)) for job in jobs]
        removed = expired(kept, self.retention)
        for name in removed:
            with self._lock:
                job = self._jobs.get(name)
                if job is None or job.status not in (DONE, FAILED):
                    continue
                del self._jobs[name]
            shutil.rmtree(self.root / name, ignore_errors=True)
        return removed

    def result_path(self, job_id: str) -> Path:
        job = self.get(job_id)
        if job.status != DONE:
            raise JobError(f"job {job_id} is {job.status}, not done" + (f": {job.error}" if job.error else ""), 409)
        return self.root / job_id / "audit.jsonl"

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _save(self, job: Job) -> None:
        atomic_write_text(self.root / job.id / "job.json", json.dumps(asdict(job), indent=2))

    def _update(self, job: Job, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(job, key, value)
            self._save(job)

    def _advance(self, job: Job) -> None:
        with self._lock:
            job.done += 1

    def _step(self, job: Job) -> Callable[[str, int | None], Callable[[int], None]]:
        """Progress of a prepare step (the probe's prompts, the langlinks' batches) as the job's
        `prepare`: what the step does, and how far it is."""

        def start(description: str, total: int | None) -> Callable[[int], None]:
            self._update(job, prepare={"step": description, "done": 0, "total": total})

            def advance(count: int) -> None:
                with self._lock:
                    job.prepare = {**(job.prepare or {}), "done": (job.prepare or {}).get("done", 0) + count}

            return advance

        return start

    def _run(self, job: Job) -> None:
        self._update(job, status=RUNNING)
        # Errors name the job's files by their names in the job, never by the server's path.
        folder = f"{self.root / job.id}{os.sep}"
        try:
            summary = self._audit(job, self.root / job.id / job.benchmark)
        except (BenchmarkError, PolicyError, JobError, LinksError, ProbeError, PromptError, ValueError) as error:
            self._update(job, status=FAILED, error=str(error).replace(folder, ""), finished=utc_timestamp())
        except Exception as error:  # a job must end in a state a client can read, whatever broke
            self._update(job, status=FAILED, error=f"internal error: {type(error).__name__}: {error}".replace(folder, ""), finished=utc_timestamp())
        else:
            self._update(job, status=DONE, summary=summary, finished=utc_timestamp())
        self.prune()

    def _audit(self, job: Job, benchmark: Path) -> dict[str, Any]:
        corpus = self.corpora[job.index]
        policy = self.policy_for(job.policy)
        sources = [self.links[name] for name in job.links or []]
        cutoff = date.fromisoformat(job.as_of) if job.as_of else None
        prober = self.probes.prober(job.probe_model) if self.probes and job.probe_model else None
        runners, runs = plan([corpus], None, configure(policy.settings), policy.rules, sources, cutoff, prober)
        options = ReadOptions(parse_inline(job.mapping, "map") if job.mapping else None, job.source_lang)
        report = load_benchmark(benchmark, job.format, options=options)
        if job.langs:
            missing = [lang for lang in job.langs if lang not in report.languages]
            if missing:
                raise ValueError(f"langs: the benchmark has no {', '.join(missing)} variants (it has {', '.join(report.languages)})")
        self._update(job, total=sum(1 for item in report.items for lang in item.variants if not job.langs or lang in job.langs))
        for runner in runners:
            if runner.prepare is not None:
                runner.prepare(report.items, job.langs, self._step(job))
        records = check_items(
            report.items,
            runners,
            policy,
            langs=job.langs,
            workers=self.check_workers,
            on_done=lambda: self._advance(job),
            executor=self.executor,
        )
        links = {"sources": [source.describe() for source in sources], "as_of": job.as_of} if sources else None
        models = prober.describe() if prober else None
        manifest = audit_manifest(["audit", "serve", "job", job.id], report, benchmark, [corpus.info], runs, policy, job.langs, records, links, models, self.executor)
        write_audit(self.root / job.id / "audit.jsonl", manifest, records)
        return manifest["summary"]

