"""The probe signal through `audit check --probe-model`: a real random-weight Llama (the GGUF
fixture), the probe cache, recorded judge replies, `--offline`, k samples, and the
OpenAI-compatible path through a real server on 127.0.0.1 (audit.probes.compat_server) over
the same model, with a real proxy in front that fails requests to exercise the retries."""
from __future__ import annotations

import json
import math
import sqlite3
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from conftest import FIXTURES, sample_subset

from audit.cli import main
from audit.policyfile import PolicyError, load_policy
from audit.probes.compat_server import serve
from audit.probes.local import LocalModel
from audit.readers import load_benchmark
from audit.signals.probe import open_prober

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"
ITEMS = ("33", "39", "46")
TASKS = ("summary", "direct", "cloze", "prefix")


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return sample_subset(tmp_path_factory.mktemp("probe-bench") / "three.csv", ITEMS)


def check(tmp_path: Path, bench: Path, *extra: str, cache: Path | None = None, name: str = "a") -> tuple[dict, dict[tuple[str, str], dict], str]:
    out = tmp_path / f"{name}.audit.jsonl"
    args = ["check", str(bench), "--corpus", "demo", "--langs", "en,fr,ja", "--out", str(out), "--no-report", *extra]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(cache or tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return lines[0], {(r["item_id"], r["lang"]): r for r in lines[1:]}, result.output


def probes(record: dict) -> dict[str, dict]:
    return {e["field"]: e for e in record["evidence"] if e["signal"] == "probe"}


@pytest.fixture(scope="module")
def first(tmp_path_factory, bench) -> tuple[Path, dict, dict[tuple[str, str], dict], str]:
    root = tmp_path_factory.mktemp("probe-first")
    return (root, *check(root, bench, "--probe-model", str(TINY)))


def test_a_probe_run_keeps_knowledge_apart_from_exposure(first, bench, tmp_path):
    _, manifest, records, output = first
    _, without, _ = check(tmp_path, bench)
    assert {key: r["exposure"] for key, r in records.items()} == {key: r["exposure"] for key, r in without.items()}
    assert all(r["knowledge"] is None and r["knowledge_decided_by"] == [] for r in without.values())
    assert manifest["models"]["probe"]["model_id"].startswith("llama-2-tiny-random@")
    assert manifest["models"]["judge"] == manifest["models"]["probe"]
    assert len(manifest["models"]["prompts"]["digest"]) == 64
    assert {"signal": "probe", "source": "llama-2-tiny-random", "ran": True, "reason": None} in manifest["signal_runs"]
    assert set(manifest["summary"]["knowledge"]) == {"en", "fr", "ja"}
    assert manifest["models"]["probe"]["backend"] == "llama.cpp" and manifest["models"]["probe"]["model_id"].endswith("+llama.cpp")
    # A random model never writes the judge's JSON, but a local judge scores the two replies, so
    # every self-summary is decided: by how far the summary moves their odds from the baseline's
    # (the same prompt without a summary).
    for (item_id, _lang), record in records.items():
        found = probes(record)
        assert set(found) == set(TASKS)
        summary = found["summary"]
        (asked,) = summary["provenance"]
        judged = asked["judge"]
        assert summary["status"] == "ok" and summary.get("error") is None
        assert judged["choices"] == ['{"verdict": "known"}', '{"verdict": "not_known"}'] and judged["finish_reason"] == "scored"
        known, not_known = judged["logprobs"]
        base_known, base_not_known = judged["baseline_logprobs"]
        shift = (known - not_known) - (base_known - base_not_known)
        assert max(known, not_known, base_known, base_not_known) < 0 and shift != 0
        verdict = "known" if shift > 0 else "not_known"
        assert summary["figures"]["judge"] == judged["verdict"] == verdict
        assert judged["output"] == ('{"verdict": "known"}' if known > not_known else '{"verdict": "not_known"}')
        assert summary["figures"]["judge_votes"] == {"known": verdict == "known", "not_known": verdict == "not_known", "unparsed": 0}
        assert summary["figures"]["judge_p_known"] == pytest.approx(1 / (1 + math.exp(-shift)), abs=1e-4)
        assert judged["parse_error"] is None and asked["output"]
        assert "Bremerhaven" in asked["prompt"] or item_id != "33"
        assert all(not e["figures"].get("matched") for e in found.values() if e["field"] in ("direct", "cloze"))
        assert record["knowledge"] == ("known" if verdict == "known" else "not_known")
    assert "variant(s) undetermined" not in output


def test_each_task_shows_what_it_hid_and_scores_the_raw_answer(first):
    _, _, records, _ = first
    english = probes(records["33", "en"])
    direct = english["direct"]
    assert direct["figures"]["hidden"] == ["AFN Bremerhaven"] and "AFN Bremerhaven" not in direct["provenance"][0]["prompt"]
    assert 0 <= direct["figures"]["similarity"] < 0.85 and direct["figures"]["matched"] is False
    cloze = english["cloze"]
    assert cloze["figures"]["masked"] == "Germany" and "[MASK]" in cloze["provenance"][0]["prompt"]
    assert "Germany" not in cloze["provenance"][0]["prompt"]
    prefix = english["prefix"]
    assert prefix["figures"]["reference"] and prefix["figures"]["reference"] not in prefix["provenance"][0]["prompt"]
    assert 0 <= prefix["figures"]["chrf"] < 0.6
    # Japanese has no capitalised names: the cloze probe masks the answer if the passage has it, else it is absent.
    japanese = probes(records["33", "ja"])["cloze"]
    assert japanese["status"] == "ok" or japanese["figures"]["reason"].startswith("no name to mask")


def test_a_rerun_replays_the_cache_byte_for_byte_and_the_model_reproduces_it(first, bench, tmp_path):
    root, _, records, _ = first
    _, again, _ = check(tmp_path, bench, "--probe-model", str(TINY), cache=root / "cache", name="again")
    _, fresh, _ = check(tmp_path, bench, "--probe-model", str(TINY), cache=tmp_path / "empty", name="fresh")
    for key, record in records.items():
        for task, found in probes(record).items():
            replayed, regenerated = probes(again[key])[task], probes(fresh[key])[task]
            assert [p["output"] for p in replayed["provenance"]] == [p["output"] for p in found["provenance"]] == [p["output"] for p in regenerated["provenance"]]
            assert all(p["cached"] for p in replayed["provenance"]) and not any(p["cached"] for p in regenerated["provenance"])
            assert replayed["figures"] == found["figures"] == regenerated["figures"]
        assert again[key]["knowledge"] == record["knowledge"] == fresh[key]["knowledge"]


def test_offline_with_an_empty_cache_is_undetermined_and_loads_nothing(bench, tmp_path):
    prober = open_prober(str(TINY), offline=True)
    prober.model.cache.path.unlink(missing_ok=True)
    _, records, output = check(tmp_path, bench, "--probe-model", str(TINY), "--offline", cache=tmp_path / "nothing")
    for record in records.values():
        assert record["knowledge"] == "undetermined"
        for found in probes(record).values():
            assert found["status"] in ("unknown", "absent")
            if found["status"] == "unknown":
                assert "offline" in found["error"]
    assert "Converting and de-quantizing" not in output
    items = load_benchmark(bench).items
    offline = open_prober(str(TINY), offline=True)
    offline.model.cache = None
    offline.prepare(items, ["en"], lambda description, total: lambda done: None)
    assert offline.model._backend is None and offline.model.asked == 0


def _judge_entries(cache: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT key, request FROM outputs").fetchall()
    return [(key, request) for key, request in rows if '"verdict"' in json.loads(request)["messages"][-1]["content"]]


def test_recorded_judge_replies_decide_known_and_not_known_and_bad_ones_do_not(bench, tmp_path):
    """A judge behind an OpenAI-compatible endpoint writes its verdict: the reply is parsed, and
    one that is not the JSON asked for decides nothing.  Recorded replies stand in for a judge
    that answers as told; the run that reads them is offline."""
    local = LocalModel.load(TINY.parent, gguf_file=TINY.name, batch_size=4)
    cache = tmp_path / "cache"
    with serve(local, batch_size=4) as server:
        served = requests.get(server.url + "/models", timeout=10).json()["data"][0]["id"]
        registry = _registry(tmp_path / "corpora.toml", server.url, served)
        _, records, _ = check(tmp_path, bench, "--probe-model", str(TINY), "--judge-model", "tiny-api", "--registry", str(registry), cache=cache)
    replies = {"AFN Bremerhaven": '```json\n{"verdict": "known"}\n```', "39": '{"verdict": "not_known"}', "46": 'Verdict: known'}
    entries = _judge_entries(cache / "probe-cache.sqlite")
    assert len(entries) == 9
    titles = {item.item_id: item.meta["title"] for item in load_benchmark(bench).items}
    with sqlite3.connect(cache / "probe-cache.sqlite") as db:
        for key, request in entries:
            prompt = json.loads(request)["messages"][-1]["content"]
            reply = replies["AFN Bremerhaven"] if titles["33"] in prompt else replies["39"] if titles["39"] in prompt else replies["46"]
            db.execute("UPDATE outputs SET text = ? WHERE key = ?", (reply, key))
    _, judged, _ = check(tmp_path, bench, "--probe-model", str(TINY), "--judge-model", "tiny-api", "--registry", str(registry), "--offline", cache=cache, name="judged")
    for lang in ("en", "fr", "ja"):
        assert "choices" not in probes(judged["33", lang])["summary"]["provenance"][0]["judge"]
        assert judged["33", lang]["knowledge"] == "known"
        assert judged["33", lang]["knowledge_decided_by"][0] == {"signal": "probe", "source": "llama-2-tiny-random", "field": "summary", "figure": "judge", "op": "==", "value": "known", "threshold": "known"}
        assert judged["39", lang]["knowledge"] == "not_known"
        assert judged["46", lang]["knowledge"] == "undetermined"
        assert probes(judged["46", lang])["summary"]["provenance"][0]["judge"]["parse_error"]
        assert judged["33", lang]["exposure"] == records["33", lang]["exposure"]


def test_k_samples_are_seeded_and_judged_by_strict_majority(bench, tmp_path):
    policy = tmp_path / "k.toml"
    policy.write_text('[probe]\nsamples = 3\ntemperature = 0.8\ntasks = ["summary"]\n', encoding="utf-8")
    _, records, _ = check(tmp_path, bench, "--probe-model", str(TINY), "--policy", str(policy), "--langs", "en")
    summary = probes(records["33", "en"])["summary"]
    assert [p["decoding"]["seed"] for p in summary["provenance"]] == [0, 1, 2]
    assert summary["figures"]["samples"] == 3 and sum(summary["figures"]["judge_votes"].values()) == 3
    assert set(probes(records["33", "en"])) == {"summary"}
    bad = tmp_path / "bad.toml"
    bad.write_text("[probe]\nsamples = 3\n", encoding="utf-8")
    with pytest.raises(PolicyError, match="samples above 1 need a temperature above 0"):
        load_policy(bad)


def test_probe_options_need_a_probe_model(bench, tmp_path):
    for args in (["--judge-model", "smollm2"], ["--signals", "probe"]):
        result = CliRunner().invoke(main, ["check", str(bench), "--corpus", "demo", "--no-report", "--out", str(tmp_path / "x.jsonl"), *args])
        assert result.exit_code == 2 and "--probe-model" in result.output
    result = CliRunner().invoke(main, ["check", str(bench), "--corpus", "demo", "--no-report", "--out", str(tmp_path / "x.jsonl"), "--probe-model", str(tmp_path / "nope.gguf")])
    assert result.exit_code == 2 and "nope.gguf" in result.output
    result = CliRunner().invoke(main, ["check", str(bench), "--corpus", "demo", "--no-report", "--out", str(tmp_path / "x.jsonl"), "--probe-model", str(TINY), "--signals", "ngram"])
    assert result.exit_code == 2 and "no signal that asks the model (probe, membership) is among --signals ngram" in result.output
    assert not (tmp_path / "x.jsonl").exists()


class Flaky:
    """A proxy in front of the model server that answers the first `failures` chat requests
    with 503 (Retry-After 0), then forwards."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.upstream, self.failures, self.seen = upstream, failures, 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with threading.Lock():
                    proxy.seen += 1
                    failing = proxy.seen <= proxy.failures
                if failing:
                    self.send_response(HTTPStatus.SERVICE_UNAVAILABLE)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                answer = requests.post(proxy.upstream + self.path.removeprefix("/v1"), data=body, headers={"Content-Type": "application/json"}, timeout=60)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _registry(path: Path, url: str, model: str) -> Path:
    path.write_text(f'[models.tiny-api]\nbackend = "openai"\nbase_url = "{url}"\nmodel = "{model}"\nconcurrency = 4\nmax_retries = 3\n', encoding="utf-8")
    return path


def test_the_openai_path_gives_the_local_answers_and_retries(bench, tmp_path):
    local = LocalModel.load(TINY.parent, gguf_file=TINY.name, batch_size=1)
    on_transformers = tmp_path / "local.toml"
    on_transformers.write_text(f'[models.tiny]\nbackend = "local"\npath = "{TINY}"\nruntime = "transformers"\n', encoding="utf-8")
    _, direct, _ = check(tmp_path, bench, "--probe-model", "tiny", "--registry", str(on_transformers), "--probe-batch-size", "1", "--langs", "en", name="local")
    with serve(local, batch_size=1) as server:
        served = requests.get(server.url + "/models", timeout=10).json()["data"][0]["id"]
        flaky = Flaky(server.url, failures=2)
        try:
            registry = _registry(tmp_path / "corpora.toml", flaky.url, served)
            manifest, remote, _ = check(tmp_path, bench, "--probe-model", "tiny-api", "--registry", str(registry), "--langs", "en", name="remote", cache=tmp_path / "remote-cache")
        finally:
            flaky.close()
        assert flaky.seen > 2
    assert manifest["models"]["probe"]["backend"] == "openai" and manifest["models"]["probe"]["model_id"] == f"{served}@{flaky.url}"
    for key, record in direct.items():
        for task, found in probes(record).items():
            assert [p["output"] for p in probes(remote[key])[task]["provenance"]] == [p["output"] for p in found["provenance"]]


def test_an_endpoint_with_structured_outputs_always_gives_the_judge_a_verdict(bench, tmp_path):
    """A registry entry with `structured_outputs = true`: the judge's request carries the
    verdict schema, the endpoint (the tool's own server, which constrains the reply to the
    schema's two replies) answers one of them, and every summary judged has a verdict parsed
    by the same checks as free text.  Without it the same endpoint's free replies are read."""
    local = LocalModel.load(TINY.parent, gguf_file=TINY.name, batch_size=2)
    with serve(local, batch_size=2) as server:
        served = requests.get(server.url + "/models", timeout=10).json()["data"][0]["id"]
        registry = _registry(tmp_path / "corpora.toml", server.url, served)
        registry.write_text(registry.read_text(encoding="utf-8") + "structured_outputs = true\n", encoding="utf-8")
        manifest, records, _ = check(tmp_path, bench, "--probe-model", "tiny-api", "--registry", str(registry), "--langs", "en,ja", name="structured")
        free = _registry(tmp_path / "free.toml", server.url, served)
        _, loose, _ = check(tmp_path, bench, "--probe-model", "tiny-api", "--registry", str(free), "--langs", "en,ja", name="free")
    assert manifest["models"]["judge"]["structured_outputs"] is True
    judged = [shown["judge"] for record in records.values() for shown in probes(record)["summary"]["provenance"] if "judge" in shown]
    assert judged and all(j["output"] in ('{"verdict": "known"}', '{"verdict": "not_known"}') and j["verdict"] in ("known", "not_known") for j in judged)
    assert all(j["schema"]["properties"]["verdict"]["enum"] == ["known", "not_known"] and "logprobs" not in j for j in judged)
    free_judged = [shown["judge"] for record in loose.values() for shown in probes(record)["summary"]["provenance"] if "judge" in shown]
    assert free_judged and all("schema" not in j for j in free_judged)
    # The random-weight model never writes the JSON unconstrained.
    assert all(j["verdict"] is None and j["parse_error"] for j in free_judged)


def test_an_endpoint_that_keeps_failing_leaves_probes_undetermined(bench, tmp_path):
    dead = Flaky("http://127.0.0.1:9", failures=10**6)
    try:
        registry = _registry(tmp_path / "corpora.toml", dead.url, "any")
        registry.write_text(registry.read_text(encoding="utf-8").replace("max_retries = 3", "max_retries = 1"), encoding="utf-8")
        _, records, output = check(tmp_path, bench, "--probe-model", "tiny-api", "--registry", str(registry), "--langs", "en")
    finally:
        dead.close()
    for record in records.values():
        assert record["knowledge"] == "undetermined"
        assert all(e["status"] in ("unknown", "absent") for e in probes(record).values())
        assert probes(record)["summary"]["error"].startswith("the model gave no answer: InternalServerError") or "503" in probes(record)["summary"]["error"]
    assert "undetermined" in output


@pytest.mark.slow
def test_the_real_smollm2_probes_two_items_in_two_languages_reproducibly(tmp_path):
    two = sample_subset(tmp_path / "two.csv", ("33", "39"))
    args = ("--probe-model", "smollm2", "--signals", "probe", "--langs", "en,fr")
    manifest, records, _ = check(tmp_path, two, *args)
    _, again, _ = check(tmp_path, two, *args, name="again")
    assert manifest["models"]["probe"]["model_id"].startswith("smollm2@") and len(records) == 4
    for key, record in records.items():
        assert record["knowledge"] in ("known", "not_known", "undetermined")
        found = probes(record)
        summary = found["summary"]["provenance"][0]
        assert summary["output"].strip() and summary["judge"]["output"] is not None
        if record["knowledge"] == "not_known":
            assert found["summary"]["figures"]["judge"] == "not_known"
        for task, evidence in found.items():
            replayed = probes(again[key])[task]
            assert [p["output"] for p in replayed["provenance"]] == [p["output"] for p in evidence["provenance"]]
            assert replayed["figures"] == evidence["figures"] and all(p["cached"] for p in replayed["provenance"])
        assert again[key]["knowledge"] == record["knowledge"]
