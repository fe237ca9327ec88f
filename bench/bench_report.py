"""Report benchmark: `audit report` on a 4,608-variant benchmark with a full 12 x 12
source/target matrix.

    python bench/bench_report.py

The benchmark is the ECLeKTic sample's 39 questions repeated to 384, each copy with another
source language so every (source, target) cell of the matrix has questions; it is audited for
real against the demo corpus.  The predictions carry given judgments drawn with a fixed seed,
so the timing covers loading, scoring, bootstrap intervals, strata, plots and 384 provenance
pages, and not a model.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
QUESTIONS = 384


def synthetic_benchmark(path: Path) -> list[tuple[str, str, str]]:
    """384 items in the generic JSONL format, the sample's 39 over and over; returns (item_id,
    source, lang) per variant.  Each copy after the first numbers its questions and passages
    ("(2) In which country…"), so no two items share them: a check measures a field it has
    met before only once, and a real benchmark of 384 questions repeats none of them.  The
    answers are the sample's (a marked answer would no longer be found with its question)."""
    from audit.readers import load_benchmark

    items = load_benchmark(SAMPLE).items
    languages = list(items[0].variants)
    variants = []
    with open(path, "w", encoding="utf-8") as out:
        for n in range(QUESTIONS):
            item = items[n % len(items)]
            source = languages[n % len(languages)]
            copy = n // len(items)
            record = {
                "item_id": f"q{n:03d}",
                "source_lang": source,
                "variants": {lang: {"question": numbered(v.question, copy), "answer": v.answer, "context": numbered(v.context, copy)} for lang, v in item.variants.items()},
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            variants += [(record["item_id"], source, lang) for lang in item.variants]
    return variants


def numbered(text: str | None, copy: int) -> str | None:
    return f"({copy}) {text}" if copy and text else text


def judged_predictions(path: Path, variants: list[tuple[str, str, str]], seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for item_id, source, lang in variants:
            correct = rng.random() < (0.7 if lang == source else 0.45)
            out.write(json.dumps({"item_id": item_id, "lang": lang, "prediction": "…", "correct": correct}) + "\n")


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "report")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AUDIT_CACHE_DIR": str(args.work / "cache")}
    bench, predictions, audit = args.work / "bench384.jsonl", args.work / "predictions.jsonl", args.work / "bench384.audit.jsonl"
    variants = synthetic_benchmark(bench)
    judged_predictions(predictions, variants)
    cli = [sys.executable, "-m", "audit.cli"]
    timed([*cli, "check", str(bench), "--corpus", "demo", "--out", str(audit), "--no-report"], env)
    check_seconds = timed([*cli, "check", str(bench), "--corpus", "demo", "--out", str(audit), "--no-report"], env)
    exposure_seconds = timed([*cli, "report", "--audit", str(audit), "--out", str(args.work / "exposure-report")], env)
    report_seconds = timed([*cli, "report", "--audit", str(audit), "--predictions", str(predictions), "--out", str(args.work / "report")], env)
    data = json.loads((args.work / "report" / "report.json").read_text())
    cells = len({(p["source"], p["target"]) for p in data["evaluation"]["pairs"]})
    print("| step | seconds |\n|---|---|")
    print(f"| `audit check` of {len(variants):,} variants against `demo` (warm) | {check_seconds:.1f} |")
    print(f"| `audit report`, exposure only ({QUESTIONS} provenance pages) | {exposure_seconds:.1f} |")
    print(f"| `audit report` with predictions: scoring, 1,000 bootstrap resamples, strata, {cells}-cell matrix, plots, pages | {report_seconds:.1f} |")


if __name__ == "__main__":
    main()
