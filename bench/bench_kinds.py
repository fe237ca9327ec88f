"""Benchmarks in their published formats, and items checked by what their kind stands for.

Part 1, reading: each real benchmark read by `load_benchmark` into aligned items, beside the
pandas or json code a user would otherwise write (which yields rows, not items aligned across
languages), each in a fresh process: time, how far the process's peak RSS rose, and the time ratio.
  - BMLAMA-17 (`--bmlama`, ../shared by default): 17 TSV files, `pandas.read_csv` each;
  - XQuAD (`--xquad`, a checkout of google-deepmind/xquad): 12 SQuAD JSON files, `json.load`
    and `pandas.json_normalize` of the questions;
  - X-FACTR (`--xfactr`, a checkout of jzbjyb/X-FACTR's `data/`): no other reader joins its
    templates, facts and names, so its time is given alone.

Part 2, checking: the first `--facts` BMLAMA facts against the bundled demo corpus, once as
cloze items (filled statements for the answer, the prompt around the mask, the subject-answer
pair) and once as the prompt written with its mask (an open question, as before cloze items
were understood): seconds, evidence per variant and `seen` per language, and how many
subject-answer pairs count in any document against a document of the variant's language.

    python bench/bench_kinds.py --xquad PATH/xquad --xfactr PATH/X-FACTR/data
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from fresh import in_fresh_process, measure

from audit.corpora.registry import open_corpus
from audit.items import ItemKind
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.run.executors import check_items
from audit.signals import configure, plan

ROOT = Path(__file__).resolve().parent.parent
SHARED_BMLAMA = ROOT.parent / "shared" / "data" / "bench" / "bmlama" / "BMLAMA17"


def measured(work: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def read_with(reader: str, path: str, fmt: str | None) -> dict[str, Any]:
    """One reader's count: variants for ours, rows for pandas'."""
    if reader == "ours":
        return {"count": sum(len(item.variants) for item in load_benchmark(path, fmt, skip_bad_rows=True).items)}
    return {"count": READERS[reader](Path(path))}


def pandas_bmlama(directory: Path) -> int:
    return sum(len(pd.read_csv(path, sep="\t", quoting=3)) for path in sorted(directory.glob("*.tsv")))


def pandas_xquad(directory: Path) -> int:
    rows = 0
    for path in sorted(directory.glob("xquad.*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        rows += len(pd.json_normalize(data, record_path=["paragraphs", "qas"]))
    return rows


READERS: dict[str, Callable[[Path], int]] = {"pandas_bmlama": pandas_bmlama, "pandas_xquad": pandas_xquad}


def reading(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    cases = [("BMLAMA-17", args.bmlama, "bmlama", "pandas_bmlama"), ("XQuAD", args.xquad, None, "pandas_xquad"), ("X-FACTR", args.xfactr, "xfactr", None)]
    for name, path, fmt, alternative in cases:
        if path is None or not Path(path).exists():
            print(f"{name}: skipped (no path)")
            continue
        report = load_benchmark(path, fmt, skip_bad_rows=True)
        ours = in_fresh_process(__file__, "ours", str(path), fmt or "")
        row = {
            "benchmark": name, "items": len(report.items), "variants": ours["count"], "languages": len(report.languages),
            "skipped": len(report.skipped), "seconds": ours["seconds"], "peak_rss_added_mib": ours["peak_rss_added_mib"],
        }
        if alternative is not None:
            theirs = in_fresh_process(__file__, alternative, str(path), "")
            row.update(
                pandas_rows=theirs["count"], pandas_seconds=theirs["seconds"], pandas_peak_rss_added_mib=theirs["peak_rss_added_mib"],
                time_ratio=round(ours["seconds"] / theirs["seconds"], 2),
            )
        rows.append(row)
        print(json.dumps(row))
    return rows


def checking(args: argparse.Namespace) -> dict[str, Any]:
    items = load_benchmark(args.bmlama, "bmlama").items[: args.facts]
    corpus = open_corpus("demo")
    policy = load_policy()
    runners, _ = plan([corpus], ["ngram"], configure(policy.settings), policy.rules)
    results: dict[str, Any] = {}
    for label, batch in (("cloze", items), ("as written", [replace(item, kind=ItemKind.OPEN, mask=None) for item in items])):
        records, seconds = measured(lambda b=batch: [record.to_dict() for record in check_items(b, runners, policy, workers=args.workers)])
        seen = Counter(r["lang"] for r in records if r["exposure"] == "seen")
        fields = Counter(d["field"] for r in records if r["exposure"] == "seen" for d in r["decided_by"])
        results[label] = {
            "variants": len(records), "seconds": round(seconds, 1), "variants_per_second": round(len(records) / seconds, 1),
            "evidence_per_variant": round(sum(len(r["evidence"]) for r in records) / len(records), 2),
            "seen": sum(seen.values()), "seen_by_field": dict(fields), "seen_per_language": dict(sorted(seen.items())),
        }
        if label == "cloze":
            pairs = [e["figures"] for r in records for e in r["evidence"] if e["field"] == "subject+answer" and e["status"] == "ok"]
            variants_any = {(r["item_id"], r["lang"]) for r in records for e in r["evidence"] if e["field"] == "subject+answer" and e["figures"].get("documents")}
            variants_own = {(r["item_id"], r["lang"]) for r in records for e in r["evidence"] if e["field"] == "subject+answer" and e["figures"].get("documents_in_language")}
            results["pairs"] = {
                "pair_checks": len(pairs), "variants_paired_in_any_document": len(variants_any), "variants_paired_in_own_language": len(variants_own),
                "own_language_by_language": dict(sorted(Counter(lang for _, lang in variants_own).items())),
                "any_document_by_language": dict(sorted(Counter(lang for _, lang in variants_any).items())),
            }
        print(label, json.dumps(results[label]))
    results["time_ratio_cloze_to_as_written"] = round(results["cloze"]["seconds"] / results["as written"]["seconds"], 2)
    print("pairs", json.dumps(results["pairs"]))
    return results


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        reader, path, fmt = sys.argv[2:5]
        print(json.dumps(measure(lambda: read_with(reader, path, fmt or None))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bmlama", type=Path, default=SHARED_BMLAMA)
    parser.add_argument("--xquad", type=Path)
    parser.add_argument("--xfactr", type=Path)
    parser.add_argument("--facts", type=int, default=500, help="BMLAMA facts checked in part 2 (0: skip it)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "work" / "kinds.json")
    args = parser.parse_args()
    results = {"reading": reading(args), "checking": checking(args) if args.facts else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
