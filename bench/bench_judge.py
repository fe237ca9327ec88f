"""Evaluation benchmark: LLM-judge throughput and the cost of every metric and stratum.

    python bench/bench_judge.py           # about 15 seconds

1. **Judge throughput.** A local OpenAI-compatible server (`POST /v1/chat/completions`, stdlib
   `http.server` in its own process, one thread per keep-alive connection) answers every
   request after `--latency` (default 50 ms), as a hosted model's time to first token would.
   `--judgments` distinct answers are judged with concurrency 1, 4 and 16, each time into an
   empty cache; then once more from the full cache, which asks the server nothing.
2. **Metrics and strata.** A synthetic but valid ECLeKTic-shaped benchmark, 384 questions in 13
   languages (so 384 x 12 = 4,608 pairs), with predictions and an audit file of two signals
   written by `audit.auditfile.write_audit`. Timed: reading the predictions, and `evaluate` with
   each string method and with given judgments, including every per-language, per-pair and
   per-stratum figure with 1,000 bootstrap resamples and 1,000 permutations per test.

Prints a Markdown table (paste into bench/README.md) and writes bench/work/judge.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from audit.auditfile import read_audit, write_audit
from audit.evaluate import JudgeConfig, evaluate, load_predictions
from audit.evaluate.judge import JudgeRequest, judge
from audit.evidence import Evidence
from audit.exposure import decide
from audit.items import Item, Variant
from audit.policyfile import load_policy

ROOT = Path(__file__).resolve().parents[1]
LANGS = ["en", "de", "fr", "es", "it", "pt", "he", "hi", "id", "ja", "ko", "zh", "nl"]
QUESTIONS = 384


class SlowJudge(BaseHTTPRequestHandler):
    """Answers YES or NO after a fixed delay, like a remote model would."""

    latency = 0.05
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.latency)
        prompt = body["messages"][0]["content"]
        answer = "YES" if "right" in prompt.rsplit("Predicted answer:", 1)[1] else "NO"
        data = json.dumps({
            "id": "bench", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64


def serve(latency: float, ports: multiprocessing.Queue) -> None:
    """The judge server, in a process of its own so that it does not share the client's GIL."""
    SlowJudge.latency = latency
    server = Server(("127.0.0.1", 0), SlowJudge)
    ports.put(server.server_address[1])
    server.serve_forever()


def judge_throughput(count: int, latency: float, work: Path) -> list[dict]:
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(latency, ports), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
    requests = [
        JudgeRequest("German", f"Frage {i}?", f"Antwort {i}", f"Kontext {i}.", f"{'right' if i % 3 else 'wrong'} {i}")
        for i in range(count)
    ]
    judge(requests[:1], JudgeConfig(model="warm-up", base_url=url, api_key="bench", cache_path=work / "warm.sqlite"))
    rows = []
    try:
        for concurrency in (1, 4, 16):
            cache = work / f"judge-{concurrency}.sqlite"
            config = JudgeConfig(model="bench", base_url=url, api_key="bench", cache_path=cache, concurrency=concurrency)
            started = time.perf_counter()
            results = judge(requests, config)
            elapsed = time.perf_counter() - started
            assert all(r.status == "ok" and not r.cached for r in results)
            rows.append({"what": f"judge, concurrency {concurrency}", "judgments": count, "seconds": elapsed,
                         "per_second": count / elapsed, "ideal_per_second": concurrency / latency})
        started = time.perf_counter()
        results = judge(requests, config)
        elapsed = time.perf_counter() - started
        assert all(r.cached for r in results)
        rows.append({"what": "judge, all cached", "judgments": count, "seconds": elapsed, "per_second": count / elapsed,
                     "ideal_per_second": None})
    finally:
        server.terminate()
        server.join()
    return rows


def synthetic(work: Path, seed: int = 0) -> tuple[list[Item], Path, Path]:
    """Items, a predictions file and an audit file: 384 questions x 12 targets."""
    rng = random.Random(seed)
    items, predictions, records = [], [], []
    policy = load_policy()
    for q in range(QUESTIONS):
        source = LANGS[q % len(LANGS)]
        variants = {
            lang: Variant(question=f"Question {q} in {lang}?", answer=f"Antwort {q} Nummer {lang}", context=f"Passage {q} ({lang}).")
            for lang in LANGS
        }
        items.append(Item(f"q{q:04d}", source, variants))
        knows = rng.random() < 0.7
        for lang in LANGS:
            correct = knows if lang == source else knows and rng.random() < 0.45
            gold = variants[lang].answer
            words = gold.split()
            text = gold if correct else " ".join(rng.sample(words, rng.randint(0, len(words) - 1)))
            predictions.append({"item_id": f"q{q:04d}", "lang": lang, "prediction": f"It is {text}.", "correct": correct})
            evidence = [
                Evidence("ngram", "bench", "question", figures={"exact_count": int(rng.random() < 0.15), "coverage": 0.1, "longest_match_fraction": 0.1}),
                Evidence("minhash", "bench", "context", figures={"coverage": rng.random() * 0.6, "longest_match_chars": 20}),
            ]
            if rng.random() < 0.03:
                evidence[0] = Evidence("ngram", "bench", "question", status="failed", error="timeout")
            decision = decide(policy, evidence)
            records.append({
                "item_id": f"q{q:04d}", "lang": lang, "source_lang": source, "role": "source" if lang == source else "target",
                "exposure": decision.exposure, "decided_by": decision.decided_by, "evidence": [e.to_dict() for e in evidence],
            })
    predictions_path = work / "predictions.jsonl"
    predictions_path.write_text("".join(json.dumps(row) + "\n" for row in predictions), encoding="utf-8")
    audit_path = work / "bench.audit.jsonl"
    write_audit(audit_path, {"signals": ["ngram", "minhash"], "policy": {"name": policy.name, "settings": policy.settings}}, records)
    return items, predictions_path, audit_path


def timed(label: str, run, repeat: int) -> tuple[dict, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return {"what": label, "seconds": best}, result


def metrics_cost(work: Path, repeat: int) -> list[dict]:
    items, predictions_path, audit_path = synthetic(work)
    audit = read_audit(audit_path)
    rows = []
    row, loaded = timed("read 4,992 predictions + check against the benchmark", lambda: load_predictions(predictions_path, items), repeat)
    rows.append(row)
    for method in ("given", "eclektic", "robust"):
        row, result = timed(f"evaluate `{method}`: all figures + strata", lambda m=method: evaluate(items, loaded, audit, m), repeat)
        summary = result.to_dict()
        row["pairs"] = summary["total"]["overall_success"]["n"]
        row["figures"] = count_figures(summary)
        row["transfer"] = summary["total"]["transfer_score"]["value"]
        rows.append(row)
    row, _ = timed("evaluate `given`, no intervals or tests", lambda: evaluate(items, loaded, audit, "given", bootstrap=0), repeat)
    rows.append(row)
    return rows


def count_figures(summary: dict) -> int:
    strata = summary["strata"]
    groups = [summary["total"], *summary["per_target"].values(), *summary["per_source"].values(), *summary["pairs"],
              *strata["target_exposure"].values(), *strata["source_exposure"].values(), strata["clean_transfer"],
              *(s for split in strata["by_signal"].values() for s in split.values())]
    return 2 * len(groups) + len(strata["differences"])


def table(judging: list[dict], computing: list[dict], latency: float) -> str:
    lines = [
        f"| judge ({latency * 1000:.0f} ms per request) | judgments | time | judgments/s | ideal (concurrency / latency) |",
        "|---|---|---|---|---|",
    ]
    for row in judging:
        ideal = f"{row['ideal_per_second']:.0f}" if row["ideal_per_second"] else "-"
        lines.append(f"| {row['what']} | {row['judgments']} | {row['seconds']:.2f} s | {row['per_second']:.1f} | {ideal} |")
    lines += ["", "| metrics, 384 questions x 12 targets = 4,608 pairs | time | figures |", "|---|---|---|"]
    for row in computing:
        lines.append(f"| {row['what']} | {row['seconds'] * 1000:.0f} ms | {row.get('figures', '-')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=96, help="distinct answers judged per concurrency level")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server waits per request")
    parser.add_argument("--repeat", type=int, default=3, help="runs per metrics timing; the fastest is reported")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("judging ...", file=sys.stderr)
        judging = judge_throughput(args.judgments, args.latency, work)
        print("computing metrics ...", file=sys.stderr)
        computing = metrics_cost(work, args.repeat)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    out = ROOT / "bench" / "work" / "judge.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "judge": judging, "metrics": computing}, indent=2), encoding="utf-8")
    print(table(judging, computing, args.latency))
    print(f"\n{machine['cpus']} cores, Python {machine['python']}; raw numbers in {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
