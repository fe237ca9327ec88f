"""The near-duplicate signal's floors per script (`[minhash.floor]` in the shipped policy): how
many distinct shingles a question must keep before its containment may decide.

    python bench/bench_minhash_floors.py      # about a minute on 2 cores, once the demo index is built

Two sides of one choice, measured per script:
- **False positives.** Every question of the real fixtures (XCOPA, TyDi QA, XQuAD in
  tests/fixtures) is checked against the bundled demo index, no floor applied; none of them is
  in the demo corpus as a copy, so each one reaching the policy's question containment (0.5) is
  a false positive.  For each floor F: how many of those would still decide (kept >= F).
- **Recall.** ECLeKTic's questions in its 12 languages (the demo sample) are what planted copies
  are made of (`tests/test_minhash.py`, `bench_minhash.py`): the share with fewer than F
  distinct shingles is recall lost to the floor, whatever the corpus.

Prints Markdown tables for bench/README.md and writes bench/work/minhash_floors.json.
"""
from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
BENCHMARKS = {
    "xcopa": [FIXTURES / "xcopa" / "data" / "*" / "test.*.jsonl", FIXTURES / "xcopa" / "data" / "*" / "val.*.jsonl"],
    "tydiqa": [FIXTURES / "tydiqa" / "tiny_dev.jsonl.gz"],
    "xquad": [FIXTURES / "xquad"],
}
ECLEKTIC = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
FLOORS = range(1, 11)
THRESHOLD = 0.5
SHORT = 40


def question_rows(index, paths, config) -> list[dict]:
    """Every question's script, length, distinct shingles that can match (`kept`: neither shared
    with the source nor common), common ones, best containment over any document, and whether
    it is below its floor."""
    from audit.readers import load_benchmark
    from audit.signals import minhash

    rows = []
    for path in paths:
        for item in load_benchmark(path).items:
            for lang, variant in item.variants.items():
                for evidence in minhash.run(index, item, lang, config):
                    if evidence.field == "question" and evidence.status == "ok":
                        figures = evidence.figures
                        rows.append({"lang": lang, "chars": len(variant.question or ""), "script": figures["script"], "kept": figures["shingles"] - figures["shingles_common"], "common": figures["shingles_common"], "containment": figures["any_language"]["containment"], "below_floor": "below_floor" in figures, "matched": figures["matched_shingles"]})
    return rows


def eclektic_kept(corpus, common) -> list[dict]:
    """ECLeKTic's questions: distinct shingles, and how many the default cut calls common in the demo corpus."""
    from audit.neardup import NearDupParams, field_shingles
    from audit.neardup.rarity import CommonShingles
    from audit.neardup.verify import SetAside
    from audit.readers import load_benchmark
    from audit.text import dominant_script, normalize

    sizes = NearDupParams().shingle.table()
    cut = CommonShingles(corpus, common.per_million_bytes, common.at_least)
    rows = []
    for item in load_benchmark(ECLEKTIC).items:
        for lang, variant in item.variants.items():
            text = normalize(variant.question or "")
            found = field_shingles(text, sizes, SetAside(), cut)
            rows.append({"lang": lang, "script": dominant_script(text), "kept": found.rare, "common": found.common})
    return rows


def main() -> None:
    from audit.corpora.demo import demo_index
    from audit.corpora.local import LocalIndex
    from audit.neardup import NearDuplicateIndex
    from audit.policyfile import load_policy

    cache = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir()) / "corpus-audit-bench"
    directory = demo_index(cache)
    index = NearDuplicateIndex.open(directory, corpus=LocalIndex(directory))
    from audit.signals import minhash

    shipped = minhash.MinhashConfig.model_validate(load_policy().section("minhash"))
    unfloored = shipped.model_copy(update={"floor": minhash.Floors(default=1)})
    fixtures = {name: question_rows(index, paths, unfloored) for name, paths in BENCHMARKS.items()}
    defaults = [row for paths in BENCHMARKS.values() for row in question_rows(index, paths, shipped)]
    eclektic = eclektic_kept(index.corpus, shipped.common)
    by_script: dict[str, list[dict]] = defaultdict(list)
    for rows in fixtures.values():
        for row in rows:
            by_script[row["script"]].append(row)
    print(f"Fixture questions reaching containment {THRESHOLD} against the demo index (false positives), by the floor they need to decide:\n")
    print("| script | questions | under 40 chars | reaching 0.5 | " + " | ".join(f"floor {f}" for f in FLOORS) + " |")
    print("|---" * (4 + len(FLOORS)) + "|")
    for script, rows in sorted(by_script.items()):
        hits = [r for r in rows if r["containment"] >= THRESHOLD]
        cells = [f"{sum(1 for r in hits if r['kept'] >= f)} ({sum(1 for r in hits if r['kept'] >= f and r['chars'] < SHORT)})" for f in FLOORS]
        print(f"| {script} | {len(rows)} | {sum(r['chars'] < SHORT for r in rows)} | {len(hits)} | " + " | ".join(cells) + " |")
    print("\n(in brackets: of them, questions under 40 characters)\n")
    ecl_script: dict[str, list[int]] = defaultdict(list)
    for row in eclektic:
        ecl_script[row["script"]].append(row["kept"])
    print("ECLeKTic questions (the planted copies' text) below each floor, by script, after the shipped common-shingle cut:\n")
    print("| script | questions | fewest shingles | " + " | ".join(f"< {f}" for f in FLOORS) + " |")
    print("|---" * (3 + len(FLOORS)) + "|")
    for script, kept in sorted(ecl_script.items()):
        cells = [f"{sum(k < f for k in kept) / len(kept):.1%}" for f in FLOORS]
        print(f"| {script} | {len(kept)} | {min(kept)} | " + " | ".join(cells) + " |")
    deciding = [r for r in defaults if r["containment"] >= THRESHOLD and not r["below_floor"]]
    print(f"\nWith the shipped policy's floors and common-shingle cut ({shipped.common.per_million_bytes} per million bytes, at least {shipped.common.at_least}):")
    print(f"- fixture questions deciding at containment {THRESHOLD}: {len(deciding)}, of them under {SHORT} characters: {sum(r['chars'] < SHORT for r in deciding)}")
    print(f"- fixture question shingles called common (counted, never matched): {sum(r['common'] for r in defaults)} of {sum(r['kept'] + r['common'] for r in defaults)}")
    print(f"- ECLeKTic question shingles called common (counted, never matched): {sum(r['common'] for r in eclektic)} of {sum(r['kept'] + r['common'] for r in eclektic)}")
    out = ROOT / "bench" / "work" / "minhash_floors.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"fixtures": fixtures, "defaults": defaults, "eclektic": eclektic}, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
