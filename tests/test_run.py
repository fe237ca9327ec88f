"""One audit run for every entry point: a server job and `audit check` on the same inputs write
the same records, byte for byte, whichever executor gathered the evidence; a request that
cannot run says which option is wrong, to the command line and to a server alike."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ECLEKTIC_CSV, sample_ids, sample_subset

from audit.cli import main
from audit.corpora.local import LocalIndex
from audit.executors import parse_executor
from audit.policyfile import load_policy
from audit.readers import FORMATS
from audit.run import AuditRequest, RequestError, run_audit
from audit.run.check import ItemWork
from audit.run.executors import Forked, RayTasks, Threads, choose_executor
from audit.server.jobmodels import JobRequest, JobState
from audit.server.jobs import JobManager

LANGS = "en,de,ja"


def finished(jobs: JobManager, job_id: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while (job := jobs.get(job_id)).status not in (JobState.DONE, JobState.FAILED):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert job.status == JobState.DONE, job.error


def without_time(manifest: bytes) -> dict:
    data = json.loads(manifest)
    del data["created"], data["command"]
    return data


def test_a_server_job_and_the_command_line_write_the_same_records(wiki_index: Path, tmp_path: Path, monkeypatch):
    """The job runs on threads in the server's process, the command on two forked workers:
    the records are the same bytes and the manifests differ only in `created` and `command`."""
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    bench = sample_subset(tmp_path / "bench.csv", sample_ids()[:6])
    jobs = JobManager(tmp_path / "jobs", {"wiki": LocalIndex(wiki_index, name="wiki")})
    try:
        job = jobs.submit(JobRequest.parse({"index": "wiki", "langs": LANGS, "filename": bench.name, "format": "eclektic-csv"}), bench.read_bytes())
        finished(jobs, job.id)
    finally:
        jobs.shutdown()
    served = jobs.result_path(job.id)
    stored = served.parent / job.benchmark
    out = tmp_path / "cli.audit.jsonl"
    result = CliRunner().invoke(
        main, ["check", str(stored), "--corpus", str(wiki_index), "--langs", LANGS, "--format", "eclektic-csv", "--workers", "2", "--out", str(out), "--no-report"]
    )
    assert result.exit_code == 0, result.output
    server_lines, cli_lines = served.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert len(server_lines) == 1 + 6 * 3
    assert server_lines[1:] == cli_lines[1:]
    manifests = without_time(server_lines[0]), without_time(cli_lines[0])
    assert manifests[0] == manifests[1] and manifests[0]["corpora"][0]["name"] == "wiki" and manifests[0]["benchmark"]["path"] == str(stored)


def test_the_server_takes_every_format_the_command_line_reads():
    assert JobRequest.parse({"index": "x", "format": "mkqa"}).format == "mkqa"
    for name in FORMATS:
        assert JobRequest.parse({"index": "x", "format": name}).format == name
    with pytest.raises(Exception, match="format 'csv' is not one of eclektic-jsonl, eclektic-csv"):
        JobRequest.parse({"index": "x", "format": "csv"})


def test_a_request_names_the_option_it_cannot_take(wiki_index: Path, tmp_path: Path):
    with pytest.raises(RequestError) as bad:
        AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)], workers=0)
    assert bad.value.field == "workers" and "greater than or equal to 1" in str(bad.value)
    request = AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)], langs=["en", "sw"], out=tmp_path / "a.audit.jsonl")
    with pytest.raises(RequestError) as missing:
        run_audit(request)
    said = str(missing.value).removeprefix("--langs: ")
    assert said.startswith("the benchmark has no 'sw' variants (it has ") and missing.value.by_field() == f"langs: {said}"
    assert not request.target.exists()
    twice = AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)] * 2)
    with pytest.raises(RequestError, match=r"--corpus: .* given twice"):
        run_audit(twice)
    assert twice.target == Path(f"eclektic_sample.{wiki_index.name}+{wiki_index.name}.audit.jsonl")


def test_the_executor_is_chosen_once_from_the_option_the_workers_and_the_sources(wiki_index: Path):
    local, ray = parse_executor("local"), parse_executor("ray")
    work = ItemWork([], load_policy(None))
    index = LocalIndex(wiki_index, name="wiki")
    assert isinstance(choose_executor(local, 2, work, [index], []), Forked)
    assert isinstance(choose_executor(local, 1, work, [index], []), Threads)
    assert isinstance(choose_executor(local, 2, work, [index], [], fork=False), Threads)
    assert isinstance(choose_executor(local, 2, work, [index, object()], []), Threads)
    chosen = choose_executor(ray, 2, work, [index], [])
    assert isinstance(chosen, RayTasks) and chosen.recorded == "ray" and chosen.where == " on ray"
