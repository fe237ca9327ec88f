"""ECLeKTic's definitions on hand-computed cases, intervals, and strata from real audit files."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from audit.auditfile import AuditFile, write_audit
from audit.evaluate import EvaluationError, evaluate, load_predictions
from audit.evaluate.metrics import Estimator, PairScores
from audit.evaluate.stratify import combination_name
from audit.evaluate.string_metric import eclektic_recall
from audit.evidence import Evidence
from audit.exposure import decide
from audit.items import Item, Variant
from audit.policyfile import compile_policy, load_policy

Z = 1.959963984540054


def bench(answers: dict[str, dict[str, str]], sources: dict[str, str]) -> list[Item]:
    return [
        Item(item_id, sources[item_id], {lang: Variant(question=f"{item_id}?", answer=gold, context=f"{item_id} {gold}") for lang, gold in golds.items()})
        for item_id, golds in answers.items()
    ]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def value(stat: dict) -> float | None:
    return stat["value"]


# q1 (en): en right, fr right, de wrong.  q2 (en): en WRONG, fr right, de right.
# q3 (fr): fr right, en right, de wrong.  q4 (en): never answered in en; fr and de right.
JUDGED = {
    ("q1", "en"): True, ("q1", "fr"): True, ("q1", "de"): False,
    ("q2", "en"): False, ("q2", "fr"): True, ("q2", "de"): True,
    ("q3", "fr"): True, ("q3", "en"): True, ("q3", "de"): False,
    ("q4", "fr"): True, ("q4", "de"): True,
}
SOURCES = {"q1": "en", "q2": "en", "q3": "fr", "q4": "en"}
ITEMS = bench({q: {lang: f"gold {q} {lang}" for lang in ("en", "fr", "de")} for q in SOURCES}, SOURCES)


@pytest.fixture()
def judged(tmp_path) -> Path:
    return jsonl(tmp_path / "judged.jsonl", [
        {"item_id": q, "lang": lang, "prediction": "x", "correct": ok} for (q, lang), ok in JUDGED.items()
    ])


class TestDefinitions:
    def test_given_judgments_by_hand(self, judged):
        result = evaluate(ITEMS, judged, None, "given", bootstrap=200).to_dict()
        # Scored pairs: q1-fr (1,1) q1-de (1,0) q2-fr (0,1) q2-de (0,1) q3-en (1,1) q3-de (1,0); q4 has no source answer.
        assert value(result["total"]["overall_success"]) == pytest.approx(2 / 6)
        assert value(result["total"]["transfer_score"]) == pytest.approx(2 / 4)
        assert result["total"]["overall_success"]["n"] == 6 and result["total"]["transfer_score"]["n"] == 4
        assert result["total"]["transfer_score"]["questions"] == 2
        assert {lang: value(s["overall_success"]) for lang, s in result["per_target"].items()} == {"de": 0.0, "en": 1.0, "fr": 0.5}
        assert {lang: value(s["transfer_score"]) for lang, s in result["per_target"].items()} == {"de": 0.0, "en": 1.0, "fr": 1.0}
        assert {lang: value(s["overall_success"]) for lang, s in result["per_source"].items()} == {"en": 0.25, "fr": 0.5}
        assert {lang: value(s["transfer_score"]) for lang, s in result["per_source"].items()} == {"en": 0.5, "fr": 0.5}
        pairs = {(p["source"], p["target"]): (value(p["overall_success"]), value(p["transfer_score"])) for p in result["pairs"]}
        assert pairs == {("en", "de"): (0.0, 0.0), ("en", "fr"): (0.5, 1.0), ("fr", "de"): (0.0, 0.0), ("fr", "en"): (1.0, 1.0)}
        assert result["questions"] == 3 and result["languages"] == ["de", "en", "fr"] and result["source_languages"] == ["en", "fr"]

    def test_a_question_never_answered_in_its_source_language_is_left_out_and_reported(self, judged):
        result = evaluate(ITEMS, judged, None, "given", bootstrap=0).to_dict()
        q4 = [row for row in result["rows"] if row["item_id"] == "q4"]
        assert [(r["target"], r["source_correct"], r["target_correct"]) for r in q4] == [("fr", None, True), ("de", None, True)]
        assert any("item 'q4' has answers in fr, de but none in its source language 'en'" in p for p in result["problems"])
        assert any("2 of 8 pairs could not be scored" in p for p in result["problems"])

    def test_a_question_answered_wrongly_in_its_source_counts_against_overall_only(self, judged):
        result = evaluate(ITEMS, judged, None, "given", bootstrap=0).to_dict()
        assert value(result["per_source"]["en"]["overall_success"]) == pytest.approx(1 / 4)
        q2_only = [item for item in ITEMS if item.item_id == "q2"]
        q2_rows = [json.loads(line) for line in judged.read_text().splitlines() if '"q2"' in line]
        alone = evaluate(q2_only, load_predictions(jsonl(judged.with_name("q2.jsonl"), q2_rows)), None, "given", bootstrap=0).to_dict()
        assert value(alone["total"]["overall_success"]) == 0.0
        assert alone["total"]["transfer_score"] == {"value": None, "n": 0, "questions": 0, "ci_bootstrap": None, "ci_normal": None}

    def test_normal_interval_is_the_papers_margin(self, judged):
        total = evaluate(ITEMS, judged, None, "given", bootstrap=0).to_dict()["total"]
        margin = Z * math.sqrt((1 / 3) * (2 / 3) / 6)
        assert total["overall_success"]["ci_normal"] == pytest.approx([0.0, 1 / 3 + margin])
        assert total["transfer_score"]["ci_normal"] == pytest.approx([0.5 - Z * math.sqrt(0.25 / 4), 0.5 + Z * math.sqrt(0.25 / 4)])
        assert total["overall_success"]["ci_bootstrap"] is None

    def test_bootstrap_interval_is_seeded_and_covers_the_value(self, judged):
        first = evaluate(ITEMS, judged, None, "given", bootstrap=300, seed=5).to_dict()["total"]["overall_success"]
        again = evaluate(ITEMS, judged, None, "given", bootstrap=300, seed=5).to_dict()["total"]["overall_success"]
        assert first == again
        low, high = first["ci_bootstrap"]
        assert 0 <= low <= first["value"] <= high <= 1


STRING_ANSWERS = {"q1": {"en": "New York City", "fr": "New York", "de": "New York"}, "q2": {"en": "Paris", "fr": "Paris", "de": "Paris"}}
STRING_PREDICTED = {("q1", "en"): "New York", ("q1", "fr"): "New", ("q1", "de"): "New York", ("q2", "en"): "paris", ("q2", "fr"): "Paris"}


class TestStringMethods:
    def run(self, tmp_path: Path, method: str) -> dict:
        items = bench(STRING_ANSWERS, {"q1": "en", "q2": "en"})
        path = jsonl(tmp_path / "p.jsonl", [{"item_id": q, "lang": l, "prediction": p} for (q, l), p in STRING_PREDICTED.items()])
        return evaluate(items, path, None, method, bootstrap=0).to_dict()

    def test_published_formulas(self, tmp_path):
        result = self.run(tmp_path, "eclektic")
        # source recalls: q1 2/3, q2 0 ("paris" is not "Paris"); pair scores: q1-fr 2/3*1/2, q1-de 2/3*1, q2-fr 0.
        assert value(result["total"]["overall_success"]) == pytest.approx((1 / 3 + 2 / 3 + 0) / 3)
        # published transfer: sum of pair scores / (sum of source recalls * 2 target languages), q2-de missing or not.
        assert value(result["total"]["transfer_score"]) == pytest.approx(1 / ((2 / 3 + 0) * 2))
        assert value(result["per_target"]["fr"]["transfer_score"]) == pytest.approx((1 / 3) / (2 / 3))
        n = (4 / 3) ** 2 / (2 * (2 / 3) ** 2)
        assert result["total"]["transfer_score"]["ci_normal"] == pytest.approx([0.75 - Z * math.sqrt(0.75 * 0.25 / n), 1.0])
        row = next(r for r in result["rows"] if r["target"] == "fr" and r["item_id"] == "q1")
        assert (row["source_score"], row["target_score"], row["source_correct"], row["target_correct"]) == (pytest.approx(2 / 3), 0.5, False, False)

    def test_robust_variant(self, tmp_path):
        result = self.run(tmp_path, "robust")
        assert value(result["total"]["overall_success"]) == pytest.approx((1 / 3 + 2 / 3 + 1) / 3)
        assert value(result["total"]["transfer_score"]) == pytest.approx(2 / (2 / 3 + 2 / 3 + 1))
        assert result["rows"][0]["method"] == "robust"

    def test_matches_the_published_code_on_complete_predictions(self, tmp_path):
        rng = random.Random(3)
        langs = ["en", "fr", "de", "zh", "ja"]
        golds = {f"q{i}": {lang: rng.choice(["Paris", "New York City", "德国", "東京 タワー", "1945"]) for lang in langs} for i in range(30)}
        sources = {q: rng.choice(langs) for q in golds}
        predicted = {(q, l): rng.choice(["Paris", "New York", "德意志", "東京", "1945年", "no idea"]) for q in golds for l in langs}
        path = jsonl(tmp_path / "p.jsonl", [{"item_id": q, "lang": l, "prediction": p} for (q, l), p in predicted.items()])
        result = evaluate(bench(golds, sources), path, None, "eclektic", bootstrap=0).to_dict()
        in_lang = {q: eclektic_recall(golds[q][sources[q]], predicted[(q, sources[q])], sources[q]) for q in golds}
        cross = [eclektic_recall(golds[q][l], predicted[(q, l)], l) * in_lang[q] for q in golds for l in langs if l != sources[q]]
        assert value(result["total"]["overall_success"]) == pytest.approx(sum(cross) / len(cross))
        assert value(result["total"]["transfer_score"]) == pytest.approx(sum(cross) / (sum(in_lang.values()) * 4))


class TestErrors:
    def test_unknown_method(self, judged):
        with pytest.raises(EvaluationError, match="unknown method 'exact'"):
            evaluate(ITEMS, judged, None, "exact")

    def test_given_needs_every_judgment(self, tmp_path):
        path = jsonl(tmp_path / "p.jsonl", [{"item_id": "q1", "lang": "en", "prediction": "x", "correct": True},
                                            {"item_id": "q1", "lang": "fr", "prediction": "x"}])
        with pytest.raises(EvaluationError, match=rf"{path}:2: this method needs a judgment"):
            evaluate(ITEMS, path, None, "given")

    def test_string_methods_need_answer_text(self, tmp_path):
        path = jsonl(tmp_path / "p.jsonl", [{"item_id": "q1", "lang": "en", "correct": True}, {"item_id": "q1", "lang": "fr", "correct": True}])
        with pytest.raises(EvaluationError, match="needs the model's answer text"):
            evaluate(ITEMS, path, None, "eclektic")

    def test_no_target_answers(self, tmp_path):
        path = jsonl(tmp_path / "p.jsonl", [{"item_id": "q1", "lang": "en", "correct": True}])
        with pytest.raises(EvaluationError, match="no answers in a target language"):
            evaluate(ITEMS, path, None, "given")


# Audit files ----------------------------------------------------------------------------------

BUILTIN = load_policy()
# The built-in rules, plus one on a second signal's evidence for the same field.
POLICY = compile_policy({**BUILTIN.settings, "name": "two-signals", "rules": {**BUILTIN.settings["rules"], "minhash": {"context": {"containment": 0.5}}}}, "test")


def ngram(exact: int = 0, *, failed: bool = False) -> Evidence:
    if failed:
        return Evidence("ngram", "demo", "question", status="failed", error="index unavailable")
    return Evidence("ngram", "demo", "question", figures={"exact_count": exact, "coverage": 0.1, "longest_match_fraction": 0.2})


def minhash(coverage: float) -> Evidence:
    return Evidence("minhash", "demo", "context", figures={"containment": coverage, "jaccard": coverage / 2})


def record(item_id: str, lang: str, evidence: list[Evidence]) -> dict:
    return {
        "item_id": item_id, "lang": lang, "source_lang": SOURCES[item_id],
        "role": "source" if lang == SOURCES[item_id] else "target",
        "exposure": decide(POLICY, evidence).exposure,
        "decided_by": decide(POLICY, evidence).decided_by,
        "evidence": [e.to_dict() for e in evidence],
    }


def loaded(path: Path) -> AuditFile:
    """A toy audit as written, for `evaluate`: its records hold only what the strata read, so
    it is read without the file reader's schema and benchmark checks."""
    head, *rest = path.read_text(encoding="utf-8").splitlines()
    return AuditFile(json.loads(head), [json.loads(line) for line in rest])


def write_test_audit(path: Path) -> Path:
    records = [
        record("q1", "en", [ngram(1), minhash(0.1)]),        # source seen
        record("q1", "fr", [ngram(1), minhash(0.1)]),        # seen by ngram only
        record("q1", "de", [ngram(0), minhash(0.1)]),        # clean
        record("q2", "en", [ngram(0), minhash(0.1)]),        # source unseen
        record("q2", "fr", [ngram(0), minhash(0.9)]),        # seen by minhash only
        record("q3", "fr", [ngram(1), minhash(0.1)]),        # source seen
        record("q3", "en", [ngram(0), minhash(0.1)]),        # clean
        record("q3", "de", [ngram(failed=True), minhash(0.1)]),  # unknown: ngram failed
    ]                                                         # q2-de: no record, unknown
    manifest = {"signals": ["ngram", "minhash"], "policy": {"name": POLICY.name, "settings": POLICY.settings}}
    write_audit(path, manifest, records)
    return path


class TestStrata:
    def test_splits_by_exposure(self, tmp_path, judged):
        audit = loaded(write_test_audit(tmp_path / "a.audit.jsonl"))
        result = evaluate(ITEMS, judged, audit, "given", bootstrap=200, seed=1).to_dict()
        strata = result["strata"]

        def figures(split: dict) -> dict:
            return {label: (value(s["overall_success"]), value(s["transfer_score"]), s["overall_success"]["n"]) for label, s in split.items()}

        assert figures(strata["target_exposure"]) == {"seen": (0.5, 1.0, 2), "unseen": (0.5, 0.5, 2), "unknown": (0.0, 0.0, 2)}
        assert figures(strata["source_exposure"]) == {"seen": (0.5, 0.5, 4), "unseen": (0.0, None, 2), "unknown": (None, None, 0)}
        assert figures(strata["by_signal"]["ngram"]) == {"seen": (1.0, 1.0, 1), "unseen": (pytest.approx(1 / 3), 0.5, 3), "unknown": (0.0, 0.0, 2)}
        assert figures(strata["by_signal"]["minhash"]) == {"seen": (0.0, None, 1), "unseen": (0.5, 0.5, 4), "unknown": (0.0, None, 1)}
        assert (value(strata["clean_transfer"]["overall_success"]), value(strata["clean_transfer"]["transfer_score"])) == (0.5, 0.5)
        assert strata["clean_transfer"]["overall_success"]["n"] == 2
        assert strata["signals"] == ["ngram", "minhash"]
        labels = {(r["item_id"], r["target"]): (r["source_exposure"], r["target_exposure"]) for r in result["rows"]}
        assert labels[("q2", "de")] == ("unseen", "unknown") and labels[("q3", "de")] == ("seen", "unknown")
        assert any("3 of 8 pairs have no audit record" in p for p in result["problems"])

    def test_differences_between_strata(self, tmp_path, judged):
        audit = loaded(write_test_audit(tmp_path / "a.audit.jsonl"))
        differences = evaluate(ITEMS, judged, audit, "given", bootstrap=200, seed=1).to_dict()["strata"]["differences"]
        found = {(d["split"], d.get("signal"), d["metric"]): d for d in differences}
        target = found[("target_exposure", None, "transfer_score")]
        assert (target["a"], target["b"], target["difference"]) == ("unseen", "seen", -0.5)
        assert target["test"] == "permutation within questions" and 0 < target["p_value"] <= 1
        assert found[("target_exposure", None, "overall_success")]["difference"] == 0.0
        source = found[("source_exposure", None, "transfer_score")]
        assert source["test"] == "permutation over questions" and source["difference"] is None and source["p_value"] is None
        assert found[("source_exposure", None, "overall_success")]["difference"] == pytest.approx(-0.5)
        assert {key[1] for key in found if key[0] == "by_signal"} == {"ngram", "minhash"}
        assert ("clean_transfer", None, "transfer_score") in found

    def test_audit_of_another_benchmark_is_an_error(self, tmp_path, judged):
        path = tmp_path / "other.audit.jsonl"
        write_audit(path, {"signals": ["ngram"]}, [{"item_id": "zz", "lang": "en", "exposure": "seen", "evidence": []}])
        with pytest.raises(EvaluationError, match="no record for any evaluated pair"):
            evaluate(ITEMS, judged, loaded(path), "given", bootstrap=0)

    def test_bad_exposure_value_is_an_error(self, tmp_path, judged):
        path = tmp_path / "bad.audit.jsonl"
        write_audit(path, {}, [{"item_id": "q1", "lang": "fr", "exposure": "maybe", "evidence": []}])
        with pytest.raises(EvaluationError, match=r"audit record 2: field 'exposure'"):
            evaluate(ITEMS, judged, loaded(path), "given", bootstrap=0)

    def test_without_policy_rules_signals_are_not_judged_alone(self, tmp_path, judged):
        path = tmp_path / "bare.audit.jsonl"
        write_audit(path, {"signals": ["ngram"]}, [{"item_id": "q1", "lang": "fr", "exposure": "unseen", "evidence": []}])
        result = evaluate(ITEMS, judged, loaded(path), "given", bootstrap=0).to_dict()
        assert result["strata"]["by_signal"] == {}
        assert value(result["strata"]["clean_transfer"]["overall_success"]) == 1.0
        assert any("no policy rules" in p for p in result["problems"])

    def test_result_is_json_with_the_agreed_keys(self, tmp_path, judged):
        audit = loaded(write_test_audit(tmp_path / "a.audit.jsonl"))
        result = json.loads(json.dumps(evaluate(ITEMS, judged, audit, "given", bootstrap=50).to_dict()))
        assert {"method", "method_notes", "questions", "languages", "source_languages", "total", "per_target",
                "per_source", "pairs", "strata", "rows", "problems"} <= set(result)
        assert {"target_exposure", "source_exposure", "by_signal", "clean_transfer", "differences"} <= set(result["strata"])
        assert {"value", "n", "ci_bootstrap", "ci_normal"} <= set(result["total"]["overall_success"])
        assert {"item_id", "source", "target", "source_correct", "target_correct", "source_score", "target_score",
                "method", "source_exposure", "target_exposure", "judge"} <= set(result["rows"][0])
        assert {"split", "a", "b", "metric", "difference", "ci", "p_value", "test"} <= set(result["strata"]["differences"][0])
        assert evaluate(ITEMS, judged, None, "given", bootstrap=0).to_dict()["strata"] == {}


class TestPermutationTest:
    def table(self, correct_when_seen: bool) -> tuple[PairScores, np.ndarray]:
        rng = np.random.default_rng(0)
        questions = np.repeat(np.arange(60), 4)
        seen = np.tile([True, True, False, False], 60)
        t = np.where(seen, 1.0, 0.0) if correct_when_seen else rng.integers(0, 2, 240).astype(float)
        pairs = PairScores(questions, np.full(240, "en", dtype=object), np.tile(np.array(["de", "fr", "es", "it"], dtype=object), 60),
                           np.ones(240), t, 60)
        return pairs, seen

    def test_a_real_difference_is_significant(self):
        pairs, seen = self.table(correct_when_seen=True)
        result = Estimator(pairs, draws=200, permutations=200, seed=0).difference(seen, ~seen)
        assert result["overall_success"].difference == 1.0
        assert result["overall_success"].p_value == pytest.approx(1 / 201)
        assert result["overall_success"].ci == (1.0, 1.0)

    def test_no_difference_is_not_significant(self):
        pairs, seen = self.table(correct_when_seen=False)
        result = Estimator(pairs, draws=200, permutations=200, seed=0).difference(seen, ~seen)
        assert result["overall_success"].p_value > 0.05
        low, high = result["overall_success"].ci
        assert low < 0 < high


# Two signals, two sources --------------------------------------------------------------------

# The n-gram signal ran on both corpora, the near-duplicate one (rule on `containment`) on
# `books` only.
TWO = compile_policy({**BUILTIN.settings, "name": "two-sources", "rules": {**BUILTIN.settings["rules"], "minhash": {"context": {"containment": 0.5}}}}, "test")


def exact(source: str, count: int | None) -> Evidence:
    if count is None:
        return Evidence("ngram", source, "question", status="failed", error="timed out")
    return Evidence("ngram", source, "question", figures={"exact_count": count, "coverage": 0.1, "longest_match_fraction": 0.2})


def near(containment: float) -> Evidence:
    return Evidence("minhash", "books", "context", figures={"containment": containment, "jaccard": containment / 2})


def two_source_record(item_id: str, lang: str, web: int | None, books: int, containment: float) -> dict:
    evidence = [exact("web", web), exact("books", books), near(containment)]
    decision = decide(TWO, evidence)
    return {
        "item_id": item_id, "lang": lang, "source_lang": SOURCES[item_id],
        "role": "source" if lang == SOURCES[item_id] else "target",
        "exposure": decision.exposure, "decided_by": decision.decided_by, "evidence": [e.to_dict() for e in evidence],
    }


def write_two_source_audit(path: Path) -> Path:
    records = [
        two_source_record("q1", "en", 0, 0, 0.1),
        two_source_record("q1", "fr", 1, 0, 0.9),     # ngram (web) and minhash (books): ngram+minhash
        two_source_record("q1", "de", 0, 0, 0.8),     # minhash only; web unseen, books seen
        two_source_record("q2", "en", 0, 0, 0.1),
        two_source_record("q2", "fr", 0, 2, 0.1),     # ngram only, in books
        two_source_record("q2", "de", 0, 0, 0.1),     # neither
        two_source_record("q3", "fr", 1, 0, 0.1),
        two_source_record("q3", "en", None, 0, 0.9),  # web failed: ngram unknown, so the combination is unknown although minhash saw it
    ]                                                 # q3-de: no record, unknown everywhere
    corpora = [{"name": "web"}, {"name": "books"}]
    runs = [{"signal": "ngram", "source": "web", "ran": True, "reason": None}, {"signal": "ngram", "source": "books", "ran": True, "reason": None},
            {"signal": "minhash", "source": "web", "ran": False, "reason": "no MinHash index beside it"},
            {"signal": "minhash", "source": "books", "ran": True, "reason": None}]
    manifest = {"corpora": corpora, "signals": ["ngram", "minhash"], "signal_runs": runs, "policy": {"name": TWO.name, "settings": TWO.settings}}
    write_audit(path, manifest, records)
    return path


def figures_of(split: dict) -> dict:
    return {label: (value(s["overall_success"]), value(s["transfer_score"]), s["overall_success"]["n"]) for label, s in split.items()}


class TestSignalsAndSources:
    # Scored pairs (source s, target t): q1-fr (1,1) q1-de (1,0) q2-fr (0,1) q2-de (0,1) q3-en (1,1) q3-de (1,0).

    def test_signal_combinations_by_hand(self, tmp_path, judged):
        audit = loaded(write_two_source_audit(tmp_path / "two.audit.jsonl"))
        strata = evaluate(ITEMS, judged, audit, "given", bootstrap=200, seed=1).to_dict()["strata"]
        combination = strata["signal_combination"]
        assert combination["signals"] == ["ngram", "minhash"]
        assert list(combination["strata"]) == ["ngram only", "minhash only", "ngram+minhash", "neither", "unknown"]
        assert figures_of(combination["strata"]) == {
            "ngram only": (0.0, None, 1),        # q2-fr
            "minhash only": (0.0, 0.0, 1),       # q1-de
            "ngram+minhash": (1.0, 1.0, 1),      # q1-fr
            "neither": (0.0, None, 1),           # q2-de
            "unknown": (0.5, 0.5, 2),            # q3-en (ngram failed in web), q3-de (no record)
        }
        both = combination["strata"]["ngram+minhash"]["overall_success"]
        assert both["ci_bootstrap"] is not None and both["ci_normal"] is not None and both["questions"] == 1
        assert sum(s["overall_success"]["n"] for s in combination["strata"].values()) == 6

    def test_each_source_judged_alone(self, tmp_path, judged):
        audit = loaded(write_two_source_audit(tmp_path / "two.audit.jsonl"))
        result = evaluate(ITEMS, judged, audit, "given", bootstrap=200, seed=1).to_dict()
        strata = result["strata"]
        assert strata["sources"] == ["web", "books"]
        # web alone: only q1-fr's exact match; q3-en's failure is unknown, never unseen.
        assert figures_of(strata["by_source"]["web"]) == {"seen": (1.0, 1.0, 1), "unseen": (0.0, 0.0, 3), "unknown": (0.5, 0.5, 2)}
        # books alone, both signals: q1-fr, q1-de, q2-fr, q3-en seen (st 1, 0, 0, 1; s 1, 1, 0, 1).
        assert figures_of(strata["by_source"]["books"]) == {"seen": (0.5, pytest.approx(2 / 3), 4), "unseen": (0.0, None, 1), "unknown": (0.0, 0.0, 1)}
        assert figures_of(strata["by_signal"]["ngram"]) == {"seen": (0.5, 1.0, 2), "unseen": (0.0, 0.0, 2), "unknown": (0.5, 0.5, 2)}
        assert figures_of(strata["target_exposure"]) == {"seen": (0.5, pytest.approx(2 / 3), 4), "unseen": (0.0, None, 1), "unknown": (0.0, 0.0, 1)}
        differences = {(d["split"], d.get("source"), d["metric"]): d for d in strata["differences"]}
        web = differences[("by_source", "web", "overall_success")]
        assert (web["a"], web["b"], web["difference"]) == ("unseen", "seen", -1.0)
        assert "signal" not in web and ("by_source", "books", "transfer_score") in differences
        combinations = {(r["item_id"], r["target"]): r["target_combination"] for r in result["rows"]}
        assert combinations[("q1", "fr")] == "ngram+minhash" and combinations[("q3", "de")] == "unknown"

    def test_a_signal_without_rules_is_no_part_of_a_combination(self, tmp_path, judged):
        path = tmp_path / "three.audit.jsonl"
        write_two_source_audit(path)
        audit = loaded(path)
        audit.manifest["signals"].append("pageviews")
        combination = evaluate(ITEMS, judged, audit, "given", bootstrap=0).to_dict()["strata"]["signal_combination"]
        assert combination["signals"] == ["ngram", "minhash"]
        assert "neither" in combination["strata"]

    def test_combination_names(self):
        three = ["ngram", "minhash", "probe"]
        assert [combination_name(seen, three) for seen in (["minhash"], ["ngram", "probe"], three, [])] == ["minhash only", "ngram+probe", "ngram+minhash+probe", "none"]
        assert [combination_name(seen, ["ngram"]) for seen in (["ngram"], [])] == ["ngram", "none"]
