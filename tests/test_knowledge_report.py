"""What the probed model knows, in the report and the evaluation: a real audit of four ECLeKTic
items probed with the random-weight GGUF fixture (its own judge, scoring the two verdicts, so
every self-summary is decided), then the same audit with knowledge and judge verdicts set per
record, reported with predictions and opened in Chromium."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, sample_subset
from test_report import browser, images_rendered  # noqa: F401  (browser is a fixture)

from audit.auditfile import read_audit, write_audit
from audit.cli import main
from audit.evaluate import evaluate
from audit.readers import load_benchmark

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"
ITEMS = ("33", "30", "55", "39")
LANGS = ("en", "fr", "de")
MODEL = "llama-2-tiny-random"

# What the model knew, per variant; 55/de is left without knowledge (undetermined).
KNOWLEDGE = {
    ("33", "en"): "known", ("33", "fr"): "not_known", ("33", "de"): "known",
    ("30", "en"): "not_known", ("30", "fr"): "not_known", ("30", "de"): "not_known",
    ("55", "en"): "known", ("55", "fr"): "known", ("55", "de"): None,
    ("39", "en"): "undetermined", ("39", "fr"): "known", ("39", "de"): "not_known",
}
# The judge's verdict on each self-summary, its answer recall and chrF (None: no gold answer).
SUMMARIES = {
    ("33", "en"): ("known", 1.0, 0.7), ("33", "fr"): ("known", 0.5, 0.5), ("33", "de"): ("known", 0.0, 0.3),
    ("30", "en"): ("not_known", 0.0, 0.1), ("30", "fr"): ("not_known", 0.25, 0.2), ("30", "de"): ("not_known", None, 0.3),
    ("55", "en"): (None, 0.0, 0.1), ("55", "fr"): (None, 0.75, 0.2),
    ("39", "en"): (None, 0.0, 0.1), ("39", "fr"): (None, 0.1, 0.1), ("39", "de"): (None, 1.0, 0.4),
}
# 55/de: the judge was never asked (no judge in its provenance), so it is not calibrated.
# Every answer right except item 55's source and these targets.
WRONG = {("55", "en"), ("33", "de"), ("55", "de"), ("39", "fr")}
SCRIPT = "<script>document.title='owned'</script>"


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return sample_subset(tmp_path_factory.mktemp("knowledge-bench") / "four.csv", ITEMS)


@pytest.fixture(scope="module")
def probed(tmp_path_factory, bench) -> Path:
    out = tmp_path_factory.mktemp("knowledge-audit") / "probed.audit.jsonl"
    args = ["check", str(bench), "--corpus", "demo", "--langs", ",".join(LANGS), "--out", str(out), "--no-report", "--probe-model", str(TINY)]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(out.parent / "cache")})
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def predictions(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("knowledge-predictions") / "given.jsonl"
    rows = [{"item_id": item, "lang": lang, "prediction": "…", "correct": (item, lang) not in WRONG} for item in ITEMS for lang in LANGS]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _manifest(audit) -> dict:
    return {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}


def _set_summary(evidence: dict, key: tuple[str, str]) -> dict:
    """The self-summary's judge verdict and figures as SUMMARIES says; for the French one of
    item 33, a raw output and a judge reply that are markup."""
    if key not in SUMMARIES:
        return evidence | {"provenance": [{k: v for k, v in shown.items() if k != "judge"} for shown in evidence["provenance"]]}
    verdict, recall, chrf = SUMMARIES[key]
    figures = {k: v for k, v in evidence["figures"].items() if k != "answer_recall"} | {"judge": verdict, "chrf": chrf}
    if recall is not None:
        figures["answer_recall"] = recall
    provenance = [dict(shown) for shown in evidence["provenance"]]
    judge = {**provenance[0]["judge"], "verdict": verdict, "parse_error": None if verdict else "no JSON object in the output"}
    if key == ("33", "fr"):
        provenance[0]["output"] = f"AFN Bremerhaven {SCRIPT} & <b>radio</b>"
        judge["output"] = '<i>{"verdict": "known"}</i>'
    provenance[0]["judge"] = judge
    return evidence | {"figures": figures, "provenance": provenance, "status": "ok" if verdict else "unknown"}


@pytest.fixture(scope="module")
def edited(probed, tmp_path_factory) -> Path:
    """The probed audit with knowledge and self-summary verdicts set as KNOWLEDGE and
    SUMMARIES say."""
    audit = read_audit(probed)
    records = []
    for record in audit.records:
        key = (record["item_id"], record["lang"])
        evidence = [_set_summary(e, key) if (e["signal"], e["field"]) == ("probe", "summary") else e for e in record["evidence"]]
        known = {"knowledge": KNOWLEDGE[key]} if KNOWLEDGE[key] else {}
        records.append({k: v for k, v in record.items() if k not in ("record", "knowledge")} | known | {"evidence": evidence})
    path = tmp_path_factory.mktemp("knowledge-edited") / "edited.audit.jsonl"
    write_audit(path, _manifest(audit), records)
    return path


def _without_probes(probed: Path, path: Path, schema: int) -> Path:
    """The probed audit as an audit without a model: no knowledge, no probe or membership evidence (and, for
    schema 2, no knowledge keys at all; before schema 4, no languages seen in)."""
    audit = read_audit(probed)
    manifest = _manifest(audit) | {"signals": ["ngram", "minhash"], "signal_runs": [r for r in audit.manifest["signal_runs"] if r["signal"] not in ("probe", "membership")]}
    manifest.pop("models")
    manifest["summary"] = {k: v for k, v in manifest["summary"].items() if not k.startswith(("knowledge", "membership"))}
    records = [
        {k: v for k, v in record.items() if k not in ("record", "knowledge", "knowledge_decided_by", "membership", "membership_decided_by") and (schema >= 4 or k not in ("seen_in_languages", "seen_in", "asked_in"))}
        | ({"knowledge": None, "knowledge_decided_by": []} if schema >= 3 else {})
        | {"evidence": [e for e in record["evidence"] if e["signal"] not in ("probe", "membership")]}
        for record in audit.records
    ]
    write_audit(path, manifest, records)
    if schema != 4:
        header, rest = path.read_text(encoding="utf-8").split("\n", 1)
        path.write_text(json.dumps(json.loads(header) | {"schema_version": schema}) + "\n" + rest, encoding="utf-8")
    return path


def _report(audit: Path, bench: Path, out: Path, predictions: Path | None = None) -> dict:
    args = ["report", "--audit", str(audit), "--bench", str(bench), "--out", str(out), "--bootstrap", "200"]
    result = CliRunner().invoke(main, args + (["--predictions", str(predictions)] if predictions else []))
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def edited_report(edited, bench, predictions, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("knowledge-report") / "report"
    return out, _report(edited, bench, out, predictions)


def _figures(split: dict) -> dict:
    return {label: (s["overall_success"]["value"], s["transfer_score"]["value"], s["overall_success"]["n"]) for label, s in split.items()}


# The knowledge section ------------------------------------------------------------------------


def test_a_probe_run_has_a_knowledge_section_that_counts_its_records(probed, bench, tmp_path):
    records = read_audit(probed).records
    data = _report(probed, bench, tmp_path / "r")
    knowledge = data["knowledge"]
    for lang in LANGS:
        counts = Counter(r["knowledge"] for r in records if r["lang"] == lang)
        assert set(counts) <= {"known", "not_known"} and counts.total() == 4
        assert knowledge["per_language"][lang] == {"known": counts["known"], "not_known": counts["not_known"], "undetermined": 0, "total": 4, "known_rate": counts["known"] / 4}
    assert knowledge["models"]["probe"]["name"] == MODEL and knowledge["models"]["probe"]["model_id"].startswith(f"{MODEL}@")
    assert knowledge["models"]["judge"] == knowledge["models"]["probe"] and len(knowledge["prompts"]["digest"]) == 64
    # The judge scored every summary: none is unparsed, and each verdict's summaries are the records'.
    summaries = [e["figures"] for r in records for e in r["evidence"] if (e["signal"], e["field"]) == ("probe", "summary")]
    verdicts = knowledge["calibration"]["verdicts"]
    assert verdicts["unparsed"]["summaries"] == 0 and sum(v["summaries"] for v in verdicts.values()) == len(records)
    for verdict in ("known", "not_known"):
        chrf = [f["chrf"] for f in summaries if f["judge"] == verdict]
        assert verdicts[verdict]["summaries"] == len(chrf)
        if chrf:
            assert verdicts[verdict]["mean_chrf"] == pytest.approx(sum(chrf) / len(chrf))


def test_knowledge_counts_and_crosstab_are_the_records(edited, edited_report):
    _, data = edited_report
    records = read_audit(edited).records
    knowledge = data["knowledge"]
    expected = Counter((r["lang"], r.get("knowledge") or "undetermined") for r in records)
    for lang in LANGS:
        assert {k: knowledge["per_language"][lang][k] for k in ("known", "not_known", "undetermined")} == {k: expected[(lang, k)] for k in ("known", "not_known", "undetermined")}
    assert knowledge["per_language"]["fr"] == {"known": 2, "not_known": 2, "undetermined": 0, "total": 4, "known_rate": 0.5}
    assert knowledge["total"]["known"] == 5 and knowledge["total"]["undetermined"] == 2
    cells = Counter((r["lang"], r.get("knowledge") or "undetermined", r["exposure"]) for r in records)
    for lang in LANGS:
        for k, row in knowledge["crosstab"]["languages"][lang].items():
            assert row == {tag: cells[(lang, k, tag)] for tag in ("seen", "unseen", "unknown")} | {"total": expected[(lang, k)]}
    assert knowledge["crosstab"]["total"]["known"]["total"] == 5
    unseen = {(r["item_id"], r["lang"]) for r in records if r["exposure"] == "unseen"}
    assert {(v["item_id"], v["lang"]) for v in knowledge["known_unseen"]} == {key for key, k in KNOWLEDGE.items() if k == "known" and key in unseen}
    assert knowledge["known_unseen"], "some target the corpus never showed is known to the model"


def test_calibration_of_the_judge_by_hand(edited_report):
    _, data = edited_report
    calibration = data["knowledge"]["calibration"]
    assert calibration["bands"] == ["0", "(0, 0.5)", "[0.5, 1)", "1"]
    verdicts = calibration["verdicts"]
    assert verdicts["known"]["answer_recall"] == {"0": 1, "(0, 0.5)": 0, "[0.5, 1)": 1, "1": 1}
    assert (verdicts["known"]["summaries"], verdicts["known"]["mean_answer_recall"], verdicts["known"]["mean_chrf"]) == (3, 0.5, pytest.approx(0.5))
    assert verdicts["not_known"]["answer_recall"] == {"0": 1, "(0, 0.5)": 1, "[0.5, 1)": 0, "1": 0} and verdicts["not_known"]["no_answer"] == 1
    assert verdicts["not_known"]["mean_answer_recall"] == 0.125 and verdicts["not_known"]["mean_chrf"] == pytest.approx(0.2)
    # 55/de is left out: its judge was never asked.
    assert verdicts["unparsed"]["answer_recall"] == {"0": 2, "(0, 0.5)": 1, "[0.5, 1)": 1, "1": 1} and verdicts["unparsed"]["summaries"] == 5
    assert verdicts["unparsed"]["mean_answer_recall"] == pytest.approx(0.37) and verdicts["unparsed"]["mean_chrf"] == pytest.approx(0.18)


def test_the_knowledge_section_renders_as_report_json_says(edited_report, browser, tmp_path):  # noqa: F811
    out, data = edited_report
    knowledge = data["knowledge"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "report.html").as_uri())
    section = page.locator("#knowledge")
    assert section.locator("h2").inner_text() == "What the model knows"
    assert MODEL in section.locator("#knowledge-models").inner_text()
    french = section.locator("#knowledge-table tr[data-lang=fr]").inner_text().split("\t")
    assert french[:5] == ["fr", "4", "2", "2", "0"]
    cell = section.locator("#knowledge-exposure tr[data-lang=all][data-knowledge=known] td.interesting")
    assert cell.inner_text() == str(knowledge["crosstab"]["total"]["known"]["unseen"])
    assert section.locator("#known-unseen a").count() == len(knowledge["known_unseen"])
    assert section.locator("#knowledge-calibration tr[data-verdict=known]").inner_text().split("\t")[1:6] == ["3", "1", "0", "1", "1"]
    assert images_rendered(page) and page.locator("img[alt='knowledge per language']").count() == 1
    page.close()
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## What the model knows" in markdown and "| fr | 4 | 2 | 2 | 0 | 50.0% |" in markdown
    assert "| known | 3 | 1 | 0 | 1 | 1 | 0 | 0.500 | 0.500 |" in markdown


# Evaluation -------------------------------------------------------------------------------------

# Scored pairs (source s, target t, target knowledge): 33-fr (1,1) not_known, 33-de (1,0) known,
# 30-fr (1,1) not_known, 30-de (1,1) not_known, 55-fr (0,1) known, 55-de (0,0) undetermined,
# 39-fr (1,0) known, 39-de (1,1) not_known.


def test_strata_by_what_the_model_knew(edited, bench, predictions):
    items = load_benchmark(bench).items
    result = evaluate(items, predictions, read_audit(edited), "given", bootstrap=200, seed=1).to_dict()
    strata = result["strata"]
    assert _figures(strata["target_knowledge"]) == {"known": (0.0, 0.0, 3), "not_known": (1.0, 1.0, 4), "undetermined": (0.0, None, 1)}
    assert _figures(strata["source_knowledge"]) == {"known": (0.25, 0.5, 4), "not_known": (1.0, 1.0, 2), "undetermined": (0.5, 0.5, 2)}
    unknown = strata["unknown_to_model"]
    assert (unknown["total"]["transfer_score"]["value"], unknown["total"]["transfer_score"]["n"]) == (1.0, 4)
    assert _figures(unknown["per_target"]) == {"de": (1.0, 1.0, 2), "fr": (1.0, 1.0, 2)}
    assert result["per_target"]["fr"]["transfer_score"]["value"] == pytest.approx(2 / 3)
    rows = {(r["item_id"], r["target"]): (r["source_knowledge"], r["target_knowledge"]) for r in result["rows"]}
    assert rows[("55", "de")] == ("known", "undetermined") and rows[("39", "fr")] == ("undetermined", "known")
    tests = {(d["split"], d["metric"]): d for d in strata["differences"]}
    target = tests[("target_knowledge", "transfer_score")]
    assert (target["a"], target["b"], target["difference"], target["test"]) == ("not_known", "known", 1.0, "permutation within questions")
    assert 0 < target["p_value"] <= 1 and ("source_knowledge", "overall_success") in tests


def test_knowledge_leaves_every_exposure_figure_as_it_was(edited, probed, bench, predictions, tmp_path):
    """The same audit without a model: the same exposure strata, and the knowledge and
    membership tests come after every other one, so the others' permutation draws and p-values
    do not move."""
    items = load_benchmark(bench).items
    plain = evaluate(items, predictions, read_audit(_without_probes(probed, tmp_path / "plain.audit.jsonl", 3)), "given", bootstrap=200, seed=1).to_dict()
    known = evaluate(items, predictions, read_audit(edited), "given", bootstrap=200, seed=1).to_dict()
    model_strata = ("target_knowledge", "source_knowledge", "unknown_to_model", "target_membership", "source_membership", "all_evidence", "differences")
    assert {k: v for k, v in known["strata"].items() if k not in model_strata} == {
        k: v for k, v in plain["strata"].items() if k != "differences"
    }
    assert known["strata"]["differences"][: len(plain["strata"]["differences"])] == plain["strata"]["differences"]
    assert {d["split"] for d in known["strata"]["differences"][len(plain["strata"]["differences"]):]} == {"target_knowledge", "source_knowledge"}
    assert not set(model_strata[:-1]) & set(plain["strata"])
    assert all(r["target_knowledge"] is None and r["source_knowledge"] is None for r in plain["rows"])
    assert {d["split"] for d in plain["strata"]["differences"]}.isdisjoint({"target_knowledge", "source_knowledge"})


def test_the_probe_model_is_no_corpus_source(edited_report):
    _, data = edited_report
    strata = data["evaluation"]["strata"]
    assert strata["sources"] == ["demo"] and list(strata["by_source"]) == ["demo"]
    assert strata["signals"] == ["ngram", "minhash"] and "probe" not in strata["by_signal"]
    assert strata["signal_combination"]["signals"] == ["ngram", "minhash"]
    assert list(data["exposure"]["per_source"]) == ["demo"] and "probe" not in data["exposure"]["per_signal"]
    assert data["audit"]["signals"] == ["ngram", "minhash", "probe"]


def test_the_report_shows_knowledge_strata_and_transfer_unknown_to_model(edited_report, browser, tmp_path):  # noqa: F811
    out, data = edited_report
    evaluation = data["evaluation"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "report.html").as_uri())
    assert page.locator("#strata h2").inner_text() == "Stratified by measured exposure and by what the model knew"
    assert page.locator("#strata-table tr[data-split=target_knowledge]").count() == 3
    assert page.locator("#strata-table tr[data-split=source_knowledge]").count() == 3
    row = page.locator("#strata-table tr[data-split=target_knowledge][data-stratum=not_known]").inner_text().split("\t")
    assert row[2] == "1.000" and row[-1] == "4"
    french = page.locator("#unknown-to-model tr[data-lang=fr]").inner_text().split("\t")
    assert french == ["fr", "0.667", french[2], "4", "1.000", french[5], "2"]
    assert page.locator("#unknown-to-model tbody tr").count() == len(evaluation["per_target"]) + 1
    assert "not_known − known" in page.locator("#differences").inner_text()
    assert page.locator("img[alt='scores by what the model knew of the target']").count() == 1 and images_rendered(page)
    page.close()
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "| target knowledge | not_known | 1.000 |" in markdown and "#### Transfer to what the model did not know" in markdown
    assert "| fr | 0.667 |" in markdown


# Item pages -------------------------------------------------------------------------------------


def test_an_item_page_shows_every_prompt_and_raw_output_escaped(edited_report, browser):  # noqa: F811
    out, _ = edited_report
    raw = (out / "items" / "33.html").read_text(encoding="utf-8")
    assert SCRIPT not in raw and "&lt;script&gt;" in raw
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "items" / "33.html").as_uri())
    assert page.title().startswith("Item 33")
    french = page.locator("#lang-fr")
    assert french.locator(".tag.known").count() == 0 and french.locator(".tag.not_known").inner_text() == "model: not_known"
    probe = french.locator(".signal[data-signal=probe]")
    assert [probe.locator(".field").nth(k).get_attribute("data-field") for k in range(4)] == ["summary", "direct", "cloze", "prefix"]
    summary = probe.locator(".field[data-field=summary] .source[data-source='llama-2-tiny-random']")
    for details in summary.locator("details").all():
        details.evaluate("e => e.open = true")
    asked = summary.locator("details.asked")
    assert "Que sais-tu de « AFN Bremerhaven »" in asked.locator("pre.prompt").inner_text()
    assert asked.locator("pre.output").inner_text() == f"AFN Bremerhaven {SCRIPT} & <b>radio</b>"
    assert asked.locator("pre.output b, pre.output script").count() == 0
    judged = summary.locator("details.judged")
    assert judged.locator(".verdict.known").count() == 1 and "Entity: AFN Bremerhaven" in judged.locator("pre.prompt").inner_text()
    assert judged.locator("pre.output").inner_text() == '<i>{"verdict": "known"}</i>' and judged.locator("pre.output i").count() == 0
    assert "answer recall 0.500 · chrF 0.500" in summary.locator(".probe-figures").inner_text()
    # The other tasks: a prompt and raw output each, and the figures their rules read.
    for task in ("direct", "cloze", "prefix"):
        assert probe.locator(f".field[data-field={task}] details.asked pre.prompt").count() == 1
    assert "not matched" in probe.locator(".field[data-field=cloze] .probe-figures").inner_text()
    # An unparsed judge reply: the parse error beside it, and what decided `undetermined`.
    page.goto((out / "items" / "39.html").as_uri())
    english = page.locator("#lang-en")
    assert "no JSON object in the output" in english.locator(".field[data-field=summary] details.judged summary").inner_text()
    assert english.locator(".knowledge-decided-by .verdict.undetermined").count() == 1
    # Judged alone: the corpus signals and sources only.
    assert english.locator(".alone [data-source='llama-2-tiny-random'], .alone [data-signal=probe]").count() == 0
    page.close()


# Audits without a model -------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [4, 3, 2])
def test_no_knowledge_section_or_splits_without_a_probed_model(schema, probed, bench, predictions, tmp_path, browser):  # noqa: F811
    audit = _without_probes(probed, tmp_path / "plain.audit.jsonl", schema)
    assert json.loads(audit.read_text(encoding="utf-8").split("\n", 1)[0])["schema_version"] == schema
    data = _report(audit, bench, tmp_path / "r", predictions)
    assert data["knowledge"] is None
    strata = data["evaluation"]["strata"]
    assert not {"target_knowledge", "source_knowledge", "unknown_to_model"} & set(strata)
    markdown = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "What the model knows" not in markdown and "target knowledge" not in markdown and "the model knew" not in markdown and "did not know" not in markdown
    page = browser.new_page()
    page.goto((tmp_path / "r" / "report.html").as_uri())
    assert page.locator("#knowledge, #unknown-to-model, #strata-table tr[data-split]").count() == 0
    assert page.locator("#strata-table tbody tr").count() > 0
    page.goto((tmp_path / "r" / "items" / "33.html").as_uri())
    assert page.locator(".knowledge-decided-by, .signal[data-signal=probe]").count() == 0
    page.close()


def test_a_version_1_audit_has_no_knowledge_section(tmp_path):
    fixture = FIXTURES / "audit-v1"
    data = _report(fixture / "v1.audit.jsonl", fixture / "bench.jsonl", tmp_path / "v1")
    assert data["knowledge"] is None and data["audit"]["signals"] == ["ngram"]
    assert "What the model knows" not in (tmp_path / "v1" / "report.md").read_text(encoding="utf-8")


def test_filter_drops_what_the_model_knows_on_request(edited, probed, bench, tmp_path):
    """LiveCLKTBench's construction rule: an item the probed model already knows, in any
    language, is dropped with --drop-known (after the exposure rules, which come first)."""
    audit = read_audit(edited)
    args = ["filter", str(edited), "--bench", str(bench), "--flag"]
    plain = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "kept.csv")])
    assert plain.exit_code == 0, plain.output
    flagged = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "known.csv"), "--drop-known"])
    assert flagged.exit_code == 0, flagged.output
    assert "known to the model counts as leaky" in flagged.output
    before = json.loads((tmp_path / "kept.csv.manifest.json").read_text(encoding="utf-8"))
    after = json.loads((tmp_path / "known.csv.manifest.json").read_text(encoding="utf-8"))
    assert after["policy"] == {"rule": "target-seen", "drop_unknown": False, "drop_known": True, "drop_member": False}
    by_item = {v["item_id"]: v for v in after["leaky_items"]}
    known_items = {item for (item, _), tag in KNOWLEDGE.items() if tag == "known"}
    exposure_leaky = {r["item_id"] for r in audit.records if r["exposure"] == "seen" and r.get("role") == "target"}
    assert {v["item_id"] for v in before["leaky_items"]} == exposure_leaky and "drop_known" in before["policy"] and not before["policy"]["drop_known"]
    assert set(by_item) == exposure_leaky | known_items and known_items - exposure_leaky
    assert after["counts"]["by_reason"]["known to the probed model"] == len(known_items - exposure_leaky)
    for item in known_items - exposure_leaky:
        assert by_item[item]["reason"] == "known to the probed model"
        assert sorted(by_item[item]["known_languages"]) == sorted(lang for (i, lang), tag in KNOWLEDGE.items() if i == item and tag == "known")
        assert set(by_item[item]["knowledge_decided_by"]) == set(by_item[item]["known_languages"])
    refused = CliRunner().invoke(main, ["filter", str(_without_probes(probed, tmp_path / "plain.audit.jsonl", 4)), "--bench", str(bench),
                                        "--out", str(tmp_path / "x.csv"), "--drop-known"])
    assert refused.exit_code == 2 and "made without a probe model" in refused.output and not (tmp_path / "x.csv").exists()
