"""Audit jobs: a submitted benchmark checked against a served index off the request path.

A job is a directory under the jobs root holding the uploaded benchmark, `job.json` (its
status, rewritten atomically at every change) and, once done, `audit.jsonl`.  Jobs run one at a
time (by default) on a worker thread pool, so a long audit never holds an HTTP request open;
clients poll the status and download the audit file when it is done.

The jobs root is the state: a restarted server reads it back, answers for every finished job,
and runs again the jobs that were queued or running when it stopped (an audit is deterministic,
so a rerun gives what the interrupted run would have).  A job names its policy by digest:
uploaded policies are kept under `policies/`, and the server's own policy is the default.

A job is one call of `run_audit`, as `audit check` makes it, with what the server holds
(`ServedOpener`): the records are those the command line writes for the same inputs.  With a
Ray executor the server's byte-level indexes are held by shard actors, and a job's variants
are checked in Ray tasks asking them; the records are those a local server gives.

A job may name one of the server's probe models (`probe_model`): its probe step runs in the
job's worker.  Models are shared by all jobs (a local one loads once, on first use) and each
answers one `generate` call at a time (`CachedModel`).
"""
from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from audit.corpora.base import Corpus
from audit.corpora.client import InfiniGramClient
from audit.errors import AuditError
from audit.executors import LOCAL, Executor
from audit.links.sources import LinkSource
from audit.outputs import atomic_write_text
from audit.policyfile import Policy, load_policy
from audit.probes.cache import CachedModel
from audit.run import AuditRequest, Progress, RequestError, run_audit
from audit.run.sources import ServedOpener
from audit.server.errors import JobError
from audit.server.jobmodels import Job, JobRequest, JobState, Step
from audit.server.names import BadName, job_id, upload_name
from audit.server.policies import PolicyFolder
from audit.server.probing import ProbeModels
from audit.server.retention import Kept, Retention, expired, folder_bytes
from audit.server.uploads import UploadError, store_upload
from audit.timestamps import utc_timestamp

PENDING = (JobState.QUEUED, JobState.RUNNING)


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
        links: dict[str, LinkSource] | None = None,
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
            if job.status not in PENDING:
                continue
            if job.index not in self.corpora:
                self.update(job, status=JobState.FAILED, error=f"the server restarted without index {job.index!r}", finished=utc_timestamp())
                continue
            lost = [name for name in job.links or [] if name not in self.links]
            if lost:
                self.update(job, status=JobState.FAILED, error=f"the server restarted without link source(s) {', '.join(lost)}", finished=utc_timestamp())
                continue
            changed = self._models_changed(job)
            if changed:
                self.update(job, status=JobState.FAILED, error=changed, finished=utc_timestamp())
                continue
            self.update(job, status=JobState.QUEUED, done=0, prepare=None, restarts=job.restarts + 1)
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

    def submit(self, request: JobRequest, benchmark: bytes) -> Job:
        """Check what the request names against what this server holds, keep the upload and
        queue the job; at most `max_pending` jobs wait or run at once (429 past it)."""
        if request.index not in self.corpora:
            raise JobError(f"unknown index {request.index!r}; audit jobs run on {', '.join(sorted(self.corpora)) or 'no index'}", 404)
        if not benchmark:
            raise JobError("the request body (the benchmark file) is empty")
        sources = request.link_names
        unknown = [name for name in sources or [] if name not in self.links]
        if unknown:
            raise JobError(f"links: {', '.join(unknown)} is not a link source of this server (it has {', '.join(sorted(self.links)) or 'none'}; `audit serve --links`)")
        probe_model = request.probe_model
        if probe_model is not None and probe_model not in self.probe_models:
            offered = ", ".join(sorted(self.probe_models)) or "none; `audit serve --probe-model`"
            what = "a path: a job names one of the server's probe models" if "/" in probe_model or "\\" in probe_model else "not a probe model of this server"
            raise JobError(f"probe_model: {probe_model!r} is {what} (it has {offered})")
        models = self.probes.prober(probe_model).describe() if self.probes and probe_model is not None else None
        digest = self.policy_for(request.policy).digest
        try:
            name = upload_name(request.filename)
        except BadName as error:
            raise JobError(str(error)) from None
        self.prune()
        with self._lock:
            pending = sum(1 for j in self._jobs.values() if j.status in PENDING)
            if pending >= self.max_pending:
                raise JobError(f"{pending} jobs are already waiting or running; try again later", 429)
            job = Job.submitted_now(
                id=uuid.uuid4().hex[:16], index=request.index, format=request.format, langs=request.langs.split(",") if request.langs else None,
                benchmark=name, policy=digest, mapping=request.map, source_lang=request.source_lang, links=sources, as_of=request.as_of,
                probe_model=probe_model, models=models,
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
            if job.status in PENDING:
                raise JobError(f"job {job.id} is {job.status}; delete it once it is done or failed", 409)
            self._jobs.pop(job.id, None)
        shutil.rmtree(self.root / job.id, ignore_errors=True)
        return job

    def prune(self) -> list[str]:
        """Remove the finished jobs past the retention's age or size (see retention.py)."""
        with self._lock:
            jobs = list(self._jobs.values())
        kept = [Kept(job.id, job.finished if job.status in (JobState.DONE, JobState.FAILED) else None, folder_bytes(self.root / job.id)) for job in jobs]
        removed = expired(kept, self.retention)
        for name in removed:
            with self._lock:
                job = self._jobs.get(name)
                if job is None or job.status not in (JobState.DONE, JobState.FAILED):
                    continue
                del self._jobs[name]
            shutil.rmtree(self.root / name, ignore_errors=True)
        return removed

    def result_path(self, job_id: str) -> Path:
        job = self.get(job_id)
        if job.status != JobState.DONE:
            raise JobError(f"job {job_id} is {job.status}, not done" + (f": {job.error}" if job.error else ""), 409)
        return self.root / job_id / "audit.jsonl"

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _save(self, job: Job) -> None:
        atomic_write_text(self.root / job.id / "job.json", job.saved())

    def update(self, job: Job, **changes: object) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(job, key, value)
            self._save(job)

    def _run(self, job: Job) -> None:
        self.update(job, status=JobState.RUNNING)
        # Errors name the job's files by their names in the job, never by the server's path.
        folder = f"{self.root / job.id}{os.sep}"
        try:
            summary = self._audit(job)
        except (AuditError, ValueError) as error:
            said = error.by_field() if isinstance(error, RequestError) else str(error)
            self.update(job, status=JobState.FAILED, error=said.replace(folder, ""), finished=utc_timestamp())
        except Exception as error:  # a job must end in a state a client can read, whatever broke
            self.update(job, status=JobState.FAILED, error=f"internal error: {type(error).__name__}: {error}".replace(folder, ""), finished=utc_timestamp())
        else:
            self.update(job, status=JobState.DONE, summary=summary, finished=utc_timestamp())
        self.prune()

    def _audit(self, job: Job) -> dict[str, object]:
        """The job as `audit check` would run it, on what this server holds."""
        folder = self.root / job.id
        request = AuditRequest.of(
            benchmark=folder / job.benchmark, corpora=(job.index,), format=job.format, mapping=job.mapping, source_lang=job.source_lang,
            langs=job.langs or None, links=tuple(job.links or ()), as_of=job.as_of, probe_model=job.probe_model,
            workers=self.check_workers, executor=str(self.executor), out=folder / "audit.jsonl",
        )
        probers = {job.probe_model: self.probes.prober(job.probe_model)} if self.probes and job.probe_model else {}
        opener = ServedOpener(self.corpora, self.links, probers, self.policy_for(job.policy))
        written = run_audit(request, progress=JobProgress(self, job), opener=opener, command=["audit", "serve", "job", job.id])
        return written.manifest["summary"]

    def advance(self, job: Job, count: int = 1, step: bool = False) -> None:
        """Count variants checked, or a prepare step's parts done."""
        with self._lock:
            if step and job.prepare is not None:
                job.prepare.done += count
            elif not step:
                job.done += count



class JobProgress(Progress):
    """A run's progress as the job's counters: `total` once the variants are known, the
    prepare step under way, and `done` as variants are checked."""

    def __init__(self, manager: JobManager, job: Job) -> None:
        self.manager, self.job = manager, job

    def variants(self, total: int) -> None:
        self.manager.update(self.job, total=total)

    @contextmanager
    def preparing(self) -> Iterator[Callable[[str, int | None], Callable[[int], None]]]:
        def start(description: str, total: int | None) -> Callable[[int], None]:
            self.manager.update(self.job, prepare=Step(step=description, total=total))
            return lambda count: self.manager.advance(self.job, count, step=True)

        yield start

    @contextmanager
    def checking(self, description: str, total: int, clients: list[InfiniGramClient]) -> Iterator[Callable[[], None]]:
        yield lambda: self.manager.advance(self.job)
