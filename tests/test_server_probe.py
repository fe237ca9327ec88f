"""`audit serve --probe-model`: jobs that probe a model the server offers, with the real
server on 127.0.0.1 and a real model (the committed random-weight Llama GGUF, see
tests/fixtures/models/SOURCES.md).  A job's probe evidence is the CLI's for the same benchmark
and model; a job names only what the server offers; an offline server never runs its model."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from click.testing import CliRunner
from conftest import sample_ids, sample_subset
from test_server import Served, start_server, wait_for

from audit.auditfile import read_audit
from audit.cli import main
from audit.probes.cache import OFFLINE_MISS

MODEL = Path(__file__).resolve().parent / "fixtures" / "models" / "llama-2-tiny-random.gguf"
NAME = "llama-2-tiny-random"
# A GGUF model's id: its name, the first 16 hex digits of the file's sha256 and the runtime
# (llama.cpp, the default for a GGUF file on a CPU).
MODEL_ID = f"{NAME}@{hashlib.sha256(MODEL.read_bytes()).hexdigest()[:16]}+llama.cpp"
LANGS = "en,fr"


def write_subset(path: Path, items: int, skip: int = 0) -> Path:
    """`items` ECLeKTic sample questions (after the first `skip`), their English and French rows."""
    return sample_subset(path, sample_ids()[skip : skip + items], langs=("en", "fr"))


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return write_subset(tmp_path_factory.mktemp("bench") / "eclektic-3.csv", 3)


@pytest.fixture(scope="module")
def other_bench(tmp_path_factory) -> Path:
    """Other questions than `bench`'s, so their prompts are in no cache yet."""
    return write_subset(tmp_path_factory.mktemp("bench") / "eclektic-2.csv", 2, skip=3)


def serve_probing(wiki_index: Path, root: Path, *args: str) -> Served:
    """A server offering the wiki index and the GGUF model, its probe cache under `root`."""
    return start_server(
        "--index", f"wiki={wiki_index}", "--probe-model", str(MODEL), "--jobs-dir", str(root / "jobs"), *args,
        env={"AUDIT_CACHE_DIR": str(root / "cache")},
    )


@pytest.fixture(scope="module")
def served(wiki_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = serve_probing(wiki_index, tmp_path_factory.mktemp("probe-server"), "--job-workers", "2")
    yield server
    server.stop()


def submit(served: Served, bench: Path, **params: str) -> dict:
    submitted = requests.post(served.url + "jobs", params={"index": "wiki", "langs": LANGS, "filename": bench.name, **params}, data=bench.read_bytes(), timeout=30)
    assert submitted.status_code == 202, submitted.text
    return submitted.json()


def finish(served: Served, job: dict, out: Path) -> tuple[dict, dict, list[dict]]:
    """Wait for the job to be done, and read back its audit file."""
    job = wait_for(served.url, job, seconds=180)
    assert job["status"] == "done", job
    out.write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", timeout=30).content)
    audit = read_audit(out)
    return job, audit.manifest, audit.records


def run_job(served: Served, bench: Path, out: Path, **params: str) -> tuple[dict, dict, list[dict]]:
    return finish(served, submit(served, bench, **params), out)


def probe_evidence(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    return {(r["item_id"], r["lang"]): [e for e in r["evidence"] if e["signal"] == "probe"] for r in records}


def answers(records: list[dict]) -> list[dict]:
    """Every prompt the model (or its judge) answered, with its raw output, in record order."""
    shown = [p for evidence in probe_evidence(records).values() for e in evidence for p in e.get("provenance", [])]
    return [one for p in shown for one in (p, p.get("judge")) if one and "output" in one]


def test_health_lists_the_probe_model(served: Served):
    health = requests.get(served.url + "health", timeout=10).json()
    assert [(m["name"], m["model_id"], m["backend"]) for m in health["probe_models"]] == [(NAME, MODEL_ID, "llama.cpp")]
    assert health["judge_model"] is None


def test_a_job_names_only_a_model_the_server_offers(served: Served, bench: Path):
    for value, says in ((str(MODEL), "is a path: a job names one of the server's probe models"), ("smollm2", "is not a probe model of this server")):
        refused = requests.post(served.url + "jobs", params={"index": "wiki", "probe_model": value}, data=bench.read_bytes(), timeout=30)
        assert refused.status_code == 400 and refused.json()["error"] == f"probe_model: {value!r} {says} (it has {NAME})"


def test_a_probing_job_gives_the_clis_probe_evidence(served: Served, bench: Path, wiki_index: Path, tmp_path: Path):
    job = submit(served, bench, probe_model=NAME)
    # The CLI runs meanwhile, here, on a cache of its own.
    out = tmp_path / "cli.audit.jsonl"
    args = ["check", str(bench), "--corpus", str(wiki_index), "--probe-model", str(MODEL), "--langs", LANGS, "--out", str(out), "--no-report"]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cli-cache")})
    assert result.exit_code == 0, result.output
    cli = read_audit(out)
    job, manifest, records = finish(served, job, tmp_path / "job.audit.jsonl")
    assert len(records) == 6 and all(r["knowledge"] in ("known", "not_known", "undetermined") for r in records)
    assert job["probe_model"] == NAME and job["models"]["probe"]["model_id"] == manifest["models"]["probe"]["model_id"] == MODEL_ID
    assert job["prepare"]["step"].startswith(("probe: ", "membership: ")) and job["prepare"]["done"] == job["prepare"]["total"] > 0
    assert answers(records) and not any(one["cached"] for one in answers(records))
    # Both ran the model afresh (separate caches), so the raw outputs, the scores and the
    # verdicts are reproduced, not replayed.
    assert probe_evidence(records) == probe_evidence(cli.records)
    assert [(r["item_id"], r["lang"], r["knowledge"], r["knowledge_decided_by"]) for r in records] == [
        (r["item_id"], r["lang"], r["knowledge"], r["knowledge_decided_by"]) for r in cli.records
    ]
    assert {role: manifest["models"][role]["model_id"] for role in ("probe", "judge")} == {role: cli.manifest["models"][role]["model_id"] for role in ("probe", "judge")}
    assert manifest["models"]["prompts"]["digest"] == cli.manifest["models"]["prompts"]["digest"]


def test_a_job_without_probe_model_probes_nothing(served: Served, bench: Path, tmp_path: Path):
    job, manifest, records = run_job(served, bench, tmp_path / "plain.audit.jsonl")
    assert job["probe_model"] is None and job["models"] is None and "models" not in manifest
    assert records and all(r["knowledge"] is None and not probe_evidence([r])[r["item_id"], r["lang"]] for r in records)
    assert "probe" not in manifest["signals"] and next(run for run in manifest["signal_runs"] if run["signal"] == "probe")["ran"] is False


def test_concurrent_jobs_share_the_model_one_call_at_a_time(served: Served, other_bench: Path, tmp_path: Path):
    """Two jobs at once (two job workers) on one model: each generate call holds the model,
    cache look-ups included, so every prompt is run once, by one job, and the other job reads
    its answer from the cache."""
    before = requests.get(served.url + "health", timeout=10).json()["probe_models"][0]["answered"]
    jobs = [submit(served, other_bench, probe_model=NAME) for _ in range(2)]
    first, second = (answers(finish(served, job, tmp_path / f"{job['id']}.audit.jsonl")[2]) for job in jobs)
    after = requests.get(served.url + "health", timeout=10).json()["probe_models"][0]["answered"]
    assert first and [(a["prompt"], a["output"]) for a in first] == [(b["prompt"], b["output"]) for b in second]
    assert all({a["cached"], b["cached"]} == {True, False} for a, b in zip(first, second, strict=True))
    # The scoring judge also asks, once per judged variant, its baseline (the prompt without a summary).
    asked = len(first) + sum("baseline_logprobs" in one for one in first)
    assert {key: after[key] - before[key] for key in after} == {"from_cache": asked, "from_model": asked}


def test_an_offline_server_leaves_knowledge_undetermined_without_loading_the_model(wiki_index: Path, bench: Path, tmp_path: Path):
    """An empty cache, offline: no prompt is answered, so nothing is `not_known`; and a job
    whose model the restarted server no longer offers, or offers as another file, fails, saying so."""
    stale = {"probe": {"model_id": f"{NAME}@0000000000000000"}, "judge": {"model_id": f"{NAME}@0000000000000000"}, "prompts": {"digest": "x"}}
    for job_id, model, models in (("0123456789abcdef", "gone-model", None), ("fedcba9876543210", NAME, stale)):
        orphan = tmp_path / "jobs" / job_id
        orphan.mkdir(parents=True)
        shutil.copy(bench, orphan / bench.name)
        status = {"id": job_id, "index": "wiki", "format": None, "langs": ["en"], "benchmark": bench.name, "probe_model": model, "models": models, "status": "running"}
        (orphan / "job.json").write_text(json.dumps(status), encoding="utf-8")
    server = serve_probing(wiki_index, tmp_path, "--offline")
    try:
        gone, changed = (requests.get(server.url + f"jobs/{job_id}", timeout=10).json() for job_id in ("0123456789abcdef", "fedcba9876543210"))
        assert gone["status"] == "failed" and gone["error"] == "the server restarted without probe model 'gone-model'"
        assert changed["status"] == "failed" and changed["error"] == f"the server restarted with another probe model: {MODEL_ID}, not {NAME}@0000000000000000 as the job was accepted with"
        job, manifest, records = run_job(server, bench, tmp_path / "offline.audit.jsonl", probe_model=NAME)
        health = requests.get(server.url + "health", timeout=10).json()
    finally:
        server.stop()
    assert manifest["models"]["probe"]["offline"] is True and job["prepare"]["done"] == job["prepare"]["total"]
    assert [r["knowledge"] for r in records] == ["undetermined"] * 6
    asked = [e for evidence in probe_evidence(records).values() for e in evidence if e["status"] != "absent"]
    assert asked and all(e["status"] == "unknown" and OFFLINE_MISS in e["error"] for e in asked)
    assert health["probe_models"][0]["answered"] == {"from_cache": 0, "from_model": 0} and health["probe_models"][0]["offline"] is True


def start_failing(args: list[str], root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "audit.server", "--port", "0", *args],
        check=False, capture_output=True, text=True, cwd=tempfile.gettempdir(), timeout=60, env={**os.environ, "AUDIT_CACHE_DIR": str(root / "cache")},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--probe-model", "/nowhere/model.gguf"], "audit serve: --probe-model /nowhere/model.gguf: not smollm2, gemma3-270m"),
        (["--probe-model", str(MODEL), "--judge-model", "nothing-here"], "audit serve: --judge-model nothing-here: not smollm2"),
        (["--judge-model", str(MODEL)], "apply to probe models, which are offered only with --probe-model"),
    ],
)
def test_a_bad_probe_model_stops_the_server_at_startup(args: list[str], message: str, tmp_path: Path):
    result = start_failing(args, tmp_path)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_two_models_of_one_name_stop_the_server(tmp_path: Path):
    copy = tmp_path / "copy" / MODEL.name
    copy.parent.mkdir()
    shutil.copy(MODEL, copy)
    result = start_failing(["--probe-model", str(MODEL), "--probe-model", str(copy)], tmp_path)
    assert result.returncode == 2 and f"--probe-model {copy}: a model named {NAME!r} is given already (by --probe-model {MODEL})" in result.stderr
