"""Language truth: is a variant `seen` only through text of its own language?

Real benchmarks in their published formats (TyDi QA, XQuAD, XQuAD's Romanian file alone and
with its English source, XCOPA, MKQA, BMLAMA-17, the ECLeKTic sample) are audited with
`audit check` against corpora whose contents are known: the demo corpus, the demo corpus less
its Japanese or its Indonesian files, and XQuAD's English paragraphs alone, each built with
`audit index build` into a temporary directory.  It counts:
  1. variants of a language the corpus holds no text in that are `seen` (must be 0), and for
     every `seen` variant whether the documents behind each check that fired are in the
     variant's language (their own `lang`, not what the tool says);
  2. planted truth: recall of every exact kind of copy planted in the variant's language, and
     unplanted variants `seen`;
  3. near-duplicate rules fired on questions under 40 characters whose shingles, as text, are
     not in the matched snippet (false positives; must be 0).
Every `audit` command runs in its own process tree: wall time, CPU time, peak summed PSS.

    python bench/bench_language_truth.py                      # fixtures; about 4 minutes on 2 cores
    python bench/bench_language_truth.py --xquad DIR --xcopa 'DIR/data/*/val.*.jsonl'   # published files whole
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from language_truth import cases, corpora, planted, runner, tables, truth

from audit.forms import source_texts
from audit.readers import BenchmarkError, load_benchmark

ROOT = Path(__file__).resolve().parent.parent


def build_corpora(names: set[str], work: Path, cache: Path) -> dict[str, corpora.Corpus]:
    """The corpora the cases name, each built once."""
    files = corpora.demo_files()
    makers = {
        "demo": lambda: corpora.build("demo", list(files), work, cache),
        "demo-no-ja": lambda: corpora.without("ja", work, cache),
        "demo-no-id": lambda: corpora.without("id", work, cache),
        "xquad-en": lambda: corpora.only("xquad-en.jsonl.gz", work, cache),
        "demo-text": lambda: corpora.text_only("demo-text", work, cache),
    }
    built = {}
    for name in sorted(names):
        print(f"building {name} ...", file=sys.stderr)
        built[name] = makers[name]()
    return built


def questions_of(bench: str) -> truth.Asked:
    """{(item, language): (question, source-language texts)} as the benchmark's reader reads
    them; {} when it cannot."""
    try:
        items = load_benchmark(bench, skip_bad_rows=True).items
    except BenchmarkError:  # a benchmark the reader refuses is reported by `audit check` itself
        return {}
    return {(item.item_id, lang): (v.question, source_texts(item, lang)) for item in items for lang, v in item.variants.items() if v.question}


def run_case(case: cases.Case, corpus: corpora.Corpus, work: Path, cache: Path, workers: int) -> dict[str, Any]:
    out = work / "audits" / f"{case.name.replace(' ', '_')}.{corpus.name}.audit.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    records, run = runner.check(case.bench, corpus.location, out, runner.environment(cache), case.extra, workers)
    row: dict[str, Any] = {"case": case.name, "corpus": corpus.name, "run": run.to_dict(), "variants": len(records)}
    if run.returncode != 0:
        row["refused"] = run.output.strip().splitlines()[-1] if run.output.strip() else f"exit {run.returncode}"
        return row
    row["absent"] = truth.absent_languages(records, corpus.languages)
    row["deciding"] = truth.deciding_evidence(records, corpora.known())
    row["short"] = truth.short_questions(records, questions_of(case.bench))
    row["elsewhere"] = truth.seen_elsewhere(records)
    return row


def run_real(args: argparse.Namespace, work: Path, cache: Path) -> tuple[list[dict[str, Any]], dict[str, corpora.Corpus]]:
    chosen = [c for c in cases.real_cases(work, args.xquad, args.xcopa) if not args.cases or c.name in args.cases]
    wanted = [(case, name) for case in chosen for name in case.corpora if not args.corpora or name in args.corpora]
    built = build_corpora({name for _, name in wanted}, work, cache)
    rows = []
    for case, name in wanted:
        print(f"checking {case.name} against {name} ...", file=sys.stderr)
        rows.append(run_case(case, built[name], work, cache, args.workers))
    return rows, built


def run_planted(args: argparse.Namespace, work: Path, cache: Path) -> tuple[dict[str, Any], corpora.Corpus]:
    source = work / "planted.jsonl"
    plan = planted.corpus(source, args.planted_cap or None)
    out = work / "indexes" / "planted"
    build = runner.measured(runner.audit("index", "build", str(source), "--out", str(out), "--force"), runner.environment(cache))
    if build.returncode != 0:
        raise SystemExit(f"building the planted corpus failed:\n{build.output}")
    built = corpora.Corpus("planted", str(out), frozenset(corpora.demo_files().values()), (source.name,), build)
    records, run = runner.check(str(cases.ECLEKTIC), str(out), work / "audits" / "planted.audit.jsonl", runner.environment(cache), (), args.workers)
    if run.returncode != 0:
        raise SystemExit(f"checking the planted corpus failed:\n{run.output}")
    return {**planted.recall(records, plan), "deciding": truth.deciding_evidence(records, corpora.known()), "run": run.to_dict()}, built


def corpus_row(corpus: corpora.Corpus) -> dict[str, Any]:
    row = asdict(corpus)
    row["languages"], row["build"] = sorted(corpus.languages), corpus.build.to_dict() if corpus.build else None
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="real,planted", help="comma-separated: real, planted")
    parser.add_argument("--cases", nargs="*", help="only these benchmarks (names as in the tables)")
    parser.add_argument("--corpora", nargs="*", help="only these corpora: demo, demo-no-ja, demo-no-id, xquad-en, demo-text")
    parser.add_argument("--xquad", type=Path, help="a folder of XQuAD's published xquad.{lang}.json [default: the fixtures]")
    parser.add_argument("--xcopa", help="a glob of XCOPA files, one per language [default: the fixtures' test files]")
    parser.add_argument("--planted-cap", type=int, default=250_000, help="bytes of host text per demo file (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", type=Path, help="keep indexes and audits here [default: a temporary directory, removed]")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "work" / "language_truth.json")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    work = args.work or Path(tempfile.mkdtemp(prefix="language-truth-"))
    cache = work / "cache"
    try:
        results: dict[str, Any] = {"corpora": []}
        built: dict[str, corpora.Corpus] = {}
        if "real" in sections:
            results["real"], built = run_real(args, work, cache)
        if "planted" in sections:
            results["planted"], built["planted"] = run_planted(args, work, cache)
        results["corpora"] = [corpus_row(c) for c in built.values()]
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    print(tables.document(results))
    print(f"written {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
