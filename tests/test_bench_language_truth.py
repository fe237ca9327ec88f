"""The language-truth benchmark's core (bench/language_truth) on tiny real inputs, so that the
script keeps working: real indexes built by `audit index build`, real `audit check` processes."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_language_truth import run_case  # noqa: E402
from language_truth import cases, corpora, planted, runner, truth  # noqa: E402

from audit.readers import load_benchmark  # noqa: E402
from audit.text import normalize  # noqa: E402

XQUAD_RO = cases.FIXTURES / "xquad" / "xquad.ro.json"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("language-truth")


def test_a_language_the_corpus_lacks(work):
    """XQuAD's Romanian file against XQuAD's English paragraphs: every Romanian variant is of
    a language the corpus lacks, and no `seen` one can have its evidence in Romanian text."""
    corpus = corpora.only("xquad-en.jsonl.gz", work, work / "cache")
    assert corpus.languages == {"en"} and corpus.build.returncode == 0
    case = cases.Case("xquad.ro.json", str(XQUAD_RO), ("xquad-en",))
    row = run_case(case, corpus, work, work / "cache", 1)
    assert row["run"]["cpu_seconds"] > 0 and row["run"]["peak_pss_mib"] > 0
    if row.get("refused"):  # refusing a file whose source language it cannot know is an answer too
        assert "source" in row["refused"]
        return
    records = runner.read_records(work / "audits" / "xquad.ro.json.xquad-en.audit.jsonl")
    seen = sum(r["exposure"] == "seen" for r in records)
    assert row["absent"]["variants"] == row["variants"] == 35
    assert row["absent"]["seen"] == row["deciding"]["seen"] == seen
    assert row["deciding"]["own_language"] == 0 and len(row["deciding"]["exceptions"]) == seen
    questions = [v.question for item in load_benchmark(XQUAD_RO).items for v in item.variants.values()]
    assert row["short"]["short_questions"] == sum(len(normalize(q)) < truth.SHORT for q in questions)


def test_text_shingles_tell_a_collision_from_a_copy():
    """A short question shares its shingles, as text, with a snippet that holds it and not with
    unrelated text in another script."""
    question = "Salju menghalangi jalanan masuk."
    assert truth.text_containment(question, [f"Kemarin. {question} Lalu"]) == 1.0
    assert truth.text_containment(question, ["癌中，細胞が増える。"]) == 0.0


def test_planted_kinds_are_found_in_their_language(work):
    """French copies of the ECLeKTic sample, every kind, in a small real corpus: each kind is
    planted, and a planted variant is `seen` through its own copy."""
    source = work / "planted.jsonl"
    plan = planted.corpus(source, 30_000, only=("fr",))
    assert set(plan.values()) == set(planted.KINDS) and {lang for _, lang in plan} == {"fr"}
    out = work / "planted-index"
    built = runner.measured(runner.audit("index", "build", str(source), "--out", str(out)), runner.environment(work / "cache"))
    assert built.returncode == 0, built.output
    records, run = runner.check(str(cases.ECLEKTIC), str(out), work / "planted.audit.jsonl", runner.environment(work / "cache"), ("--langs", "fr"), 1)
    assert run.returncode == 0, run.output
    result = planted.recall(records, plan)
    assert result["planted"] == len(plan) and result["unplanted"] == 39 - len(plan)
    for kind, found in result["kinds"].items():
        assert found["recall"] == 1.0 and found["through_own_copy"] == found["planted"], kind
