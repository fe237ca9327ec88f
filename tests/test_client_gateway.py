"""`audit check` through tests/replay/gateway.py, a gateway in front of a real `audit serve` of
the demo index, that throttles half the requests for a while, drops connections or answers a
deterministic 500: no field is lost, the audit file's records equal those of the undisturbed
run, and the manifest counts the retries.  And a run interrupted (SIGINT, SIGKILL) resumes from
the response cache without asking again what was answered."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import sample_ids, sample_subset
from replay.gateway import Gateway, Plan
from test_server import Served, start_server

from audit.corpora.client import ApiQueryError, ClientSettings, InfiniGramClient
from audit.corpora.demo import demo_index
from audit.corpora.registry import cache_dir

QUESTIONS = 3


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"demo={demo_index(cache_dir())}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return sample_subset(tmp_path_factory.mktemp("bench") / "sample.csv", sample_ids()[:QUESTIONS])


def registry(root: Path, url: str, **settings: object) -> Path:
    """A registry naming the served index `demo-api` at `url`, with a cache of its own."""
    lines = ["[corpora.demo-api]", 'backend = "infini-gram-api"', f'url = "{url}"', 'index = "demo"', f'cache = "{root / "cache.sqlite"}"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    path = root / "corpora.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def check_command(bench: Path, root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "audit.cli", "check", str(bench), "--corpus", "demo-api", "--registry", str(root / "corpora.toml"), "--signals", "ngram", "--out", str(root / "out.audit.jsonl"), "--no-report", "--workers", "4", *extra]


def run_check(bench: Path, root: Path, *extra: str) -> tuple[dict, list[dict], str]:
    """`audit check` in a process of its own; the manifest, the records and what it printed."""
    env = dict(os.environ, AUDIT_CACHE_DIR=str(root / "audit-cache"), COLUMNS="200")
    done = subprocess.run(check_command(bench, root, *extra), capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in (root / "out.audit.jsonl").read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:], done.stdout + done.stderr


def interrupt(process: subprocess.Popen, stop: signal.Signals) -> str:
    """Send `stop` to a running check and return what it printed; killed if it hangs."""
    process.send_signal(stop)
    try:
        return process.communicate(timeout=120)[0].decode()
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise


def requests_of(manifest: dict) -> dict:
    (corpus,) = manifest["corpora"]
    return corpus["details"]["requests"]


def comparable(records: list[dict]) -> list[dict]:
    """Records less what names the address asked (the gateway's or the server's)."""
    text = json.dumps(records, sort_keys=True)
    return json.loads(text.replace('"http://127.0.0.1:', '"ADDRESS:'))


@pytest.fixture(scope="module")
def undisturbed(served: Served, bench: Path, tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("undisturbed")
    registry(root, served.url)
    manifest, records, _ = run_check(bench, root)
    assert requests_of(manifest)["retries"] == 0 and requests_of(manifest)["requests"] > 0
    return records


def disturbed(served: Served, bench: Path, root: Path, plan: Plan, **settings: object) -> tuple[dict, list[dict], Gateway]:
    gateway = Gateway(served.url, plan)
    try:
        registry(root, gateway.url, backoff=0.01, max_backoff=0.05, **settings)
        manifest, records, _ = run_check(bench, root)
    finally:
        gateway.stop()
    return manifest, records, gateway


def test_half_the_requests_refused_for_a_while_loses_no_field(served: Served, bench: Path, undisturbed: list[dict], tmp_path: Path):
    manifest, records, gateway = disturbed(served, bench, tmp_path, Plan(throttle_share=0.5, window_seconds=3.0, seed=1), throttle_wait=0.3)
    assert comparable(records) == comparable(undisturbed)
    counts = requests_of(manifest)
    assert gateway.counts["throttled"] > 0 and counts["throttled"] == gateway.counts["throttled"]
    assert counts["retries"] >= counts["throttled"] and counts["not_asked"] == 0


def test_rate_limits_with_retry_after_lose_no_field(served: Served, bench: Path, undisturbed: list[dict], tmp_path: Path):
    plan = Plan(throttle_share=0.5, window_seconds=2.0, throttle_status=429, retry_after="0.2", seed=2)
    manifest, records, gateway = disturbed(served, bench, tmp_path, plan)
    assert comparable(records) == comparable(undisturbed)
    assert gateway.counts["throttled"] > 0 and requests_of(manifest)["throttled"] == gateway.counts["throttled"]


def test_dropped_connections_lose_no_field(served: Served, bench: Path, undisturbed: list[dict], tmp_path: Path):
    manifest, records, gateway = disturbed(served, bench, tmp_path, Plan(drop_share=0.15, seed=3), attempts=10)
    assert comparable(records) == comparable(undisturbed)
    counts = requests_of(manifest)
    assert gateway.counts["dropped"] > 0 and counts["dropped"] == gateway.counts["dropped"]
    assert counts["retries"] >= counts["dropped"]


def test_a_deterministic_500_is_asked_once_and_later_requests_go_through(served: Served):
    gateway = Gateway(served.url, Plan(failing_queries=("broken",)))
    try:
        client = InfiniGramClient(ClientSettings(url=gateway.url, index="demo", backoff=0.01))
        with pytest.raises(ApiQueryError, match=r"\[Flask\] Internal server error"):
            client.query("count", query="broken")
        assert client.query("count", query="University")["count"] > 0
    finally:
        gateway.stop()
    assert [entry["outcome"] for entry in gateway.log] == ["failed", "forwarded"]
    assert client.stats["retries"] == 0


def test_the_budget_stops_the_run_says_so_and_a_second_run_resumes(served: Served, bench: Path, undisturbed: list[dict], tmp_path: Path):
    gateway = Gateway(served.url, Plan())
    try:
        registry(tmp_path, gateway.url)
        manifest, records, printed = run_check(bench, tmp_path, "--max-requests", "25")
        counts = requests_of(manifest)
        assert counts["requests"] == 25 and counts["max_requests"] == 25 and counts["not_asked"] > 0
        assert "stopped on its request budget of 25 requests" in manifest["corpora"][0]["details"]["stopped"]
        assert "stopped on its request budget" in " ".join(printed.split())
        assert any(r["exposure"] == "unknown" for r in records)
        first = len(gateway.log)
        manifest, records, _ = run_check(bench, tmp_path)
    finally:
        gateway.stop()
    assert comparable(records) == comparable(undisturbed)
    asked = [entry["payload"] for entry in gateway.log]
    assert not set(asked[:first]) & set(asked[first:])
    assert requests_of(manifest)["cache_hits"] >= 25


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_run_resumes_without_asking_again(served: Served, bench: Path, undisturbed: list[dict], tmp_path: Path, stop: signal.Signals):
    """Stopped once 40 requests were answered, then run again: every answer the first run
    received was cached, so the second asks none of them again; only a request in flight when
    SIGKILL struck (answered by the server, never read) may be asked twice."""
    log = tmp_path / "gateway.jsonl"
    gateway = Gateway(served.url, Plan(log_path=log))
    try:
        registry(tmp_path, gateway.url)
        env = dict(os.environ, AUDIT_CACHE_DIR=str(tmp_path / "audit-cache"))
        process = subprocess.Popen(check_command(bench, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tempfile.gettempdir())
        while len(gateway.log) < 40 and process.poll() is None:
            time.sleep(0.01)
        assert process.poll() is None, "the run ended before it could be interrupted"
        output = interrupt(process, stop)
        assert process.returncode != 0, output
        first = len(gateway.log)
        _, records, _ = run_check(bench, tmp_path)
    finally:
        gateway.stop()
    assert comparable(records) == comparable(undisturbed)
    logged = [json.loads(line)["payload"] for line in log.read_text(encoding="utf-8").splitlines()]
    asked_twice = set(logged[:first]) & set(logged[first:])
    in_flight = ClientSettings(url=gateway.url, index="demo").concurrency
    assert len(asked_twice) == 0 if stop == signal.SIGINT else len(asked_twice) <= in_flight


def test_a_budget_for_a_run_without_api_corpora_is_refused(bench: Path, tmp_path: Path):
    env = dict(os.environ, AUDIT_CACHE_DIR=str(cache_dir()))
    done = subprocess.run([sys.executable, "-m", "audit.cli", "check", str(bench), "--corpus", "demo", "--max-requests", "5", "--out", str(tmp_path / "x.audit.jsonl")],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=300)
    assert done.returncode == 2 and "--max-requests applies to API corpora" in done.stderr
    assert not (tmp_path / "x.audit.jsonl").exists()


def test_ctrl_c_during_a_minutes_hold_ends_the_run_without_waiting_it_out(served: Served, bench: Path, tmp_path: Path):
    gateway = Gateway(served.url, Plan(throttle_share=1.0, window_seconds=3600))
    try:
        registry(tmp_path, gateway.url, throttle_wait=600)
        env = dict(os.environ, AUDIT_CACHE_DIR=str(tmp_path / "audit-cache"))
        process = subprocess.Popen(check_command(bench, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tempfile.gettempdir())
        while not gateway.counts["throttled"] and process.poll() is None:
            time.sleep(0.01)
        time.sleep(1)  # for the refused requests to reach the hold
        assert process.poll() is None, "the run ended before it could be interrupted"
        output = interrupt(process, signal.SIGINT)
    finally:
        gateway.stop()
    assert process.returncode == 128 + signal.SIGINT and "interrupted by SIGINT" in output, output
    assert gateway.counts["forwarded"] == 0
