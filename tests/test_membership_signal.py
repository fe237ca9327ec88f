"""The membership signal through `audit check --probe-model` on the random-weight GGUF fixture
(each text read once, through the probe cache), and `audit calibrate` on its audit with a truth
file and with the corpus's exposure as the truth."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, sample_subset

import audit
from audit.cli import main
from audit.evaluate.membership import CalibrationError, Grouping, ScoredText, calibrate, markdown, read_truth, scored_texts
from audit.memberscore import Score
from audit.probes.llamacpp import LlamaCppModel
from audit.probes.membership import scores
from audit.readers import load_benchmark

pytest.importorskip("llama_cpp")

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"
ITEMS = ("33", "39", "46", "30")
LANGS = ("en", "fr", "ja")


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return sample_subset(tmp_path_factory.mktemp("membership-bench") / "four.csv", ITEMS)


def check(root: Path, bench: Path, *extra: str, name: str = "a") -> tuple[dict, dict[tuple[str, str], dict], str]:
    out = root / f"{name}.audit.jsonl"
    args = ["check", str(bench), "--corpus", "demo", "--langs", ",".join(LANGS), "--out", str(out), "--no-report", "--probe-model", str(TINY), *extra]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(root / "cache")})
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return lines[0], {(r["item_id"], r["lang"]): r for r in lines[1:]}, result.output


@pytest.fixture(scope="module")
def audited(tmp_path_factory, bench) -> tuple[Path, dict, dict[tuple[str, str], dict]]:
    root = tmp_path_factory.mktemp("membership-audit")
    manifest, records, _ = check(root, bench, "--signals", "ngram,membership")
    return root, manifest, records


def membership(record: dict) -> dict[str, dict]:
    return {e["field"]: e for e in record["evidence"] if e["signal"] == "membership"}


def test_each_text_is_read_once_and_scored_as_the_model_reads_it(audited, bench):
    _, manifest, records = audited
    assert {"signal": "membership", "source": "llama-2-tiny-random", "ran": True, "reason": None} in manifest["signal_runs"]
    items = {item.item_id: item for item in load_benchmark(bench).items}
    model = LlamaCppModel.load(TINY, model_id="tiny", parallel=1)
    for (item_id, lang), record in records.items():
        found = membership(record)
        assert set(found) == {"question", "context"}
        # Membership decides nothing: the record has no knowledge verdict, and exposure is the corpus's.
        assert record["knowledge"] is None and all(c["signal"] != "membership" for c in record["decided_by"])
        for name, evidence in found.items():
            text = getattr(items[item_id].variants[lang], name).strip()
            (read,) = model.token_scores([text], 256)
            expected = scores(text, read, 0.2)
            assert evidence["status"] == "ok" and evidence["figures"]["tokens"] == read.tokens and evidence["figures"]["k"] == 0.2
            assert evidence["figures"]["model"].endswith("+llama.cpp")
            for score, value in expected.items():
                assert evidence["figures"][score] == pytest.approx(value, abs=1e-5)


def test_a_rerun_offline_replays_the_readings(audited, bench):
    root, _, records = audited
    _, again, _ = check(root, bench, "--signals", "ngram,membership", "--offline", name="again")
    assert {key: membership(r) for key, r in again.items()} == {key: membership(r) for key, r in records.items()}


def test_offline_without_readings_leaves_the_scores_unknown_and_exposure_alone(bench, tmp_path):
    _, records, output = check(tmp_path, bench, "--signals", "ngram,membership", "--offline")
    for record in records.values():
        assert all(e["status"] == "unknown" and "offline" in e["error"] for e in membership(record).values())
        assert record["exposure"] in ("seen", "unseen")
    (line,) = [line for line in output.splitlines() if line.startswith("unknown membership")]
    assert line == "unknown membership on llama-2-tiny-random: 24 field(s) could not be told; first error: the text could not be read: offline: this text's reading is not in the probe cache"


def _truth(path: Path, members: set[str]) -> Path:
    path.write_text("".join(json.dumps({"item_id": item, "lang": lang, "member": item in members}) + "\n" for item in ITEMS for lang in LANGS), encoding="utf-8")
    return path


def test_calibrate_writes_figures_per_language_and_script(audited, tmp_path):
    root, _, records = audited
    truth = _truth(tmp_path / "truth.jsonl", {"33", "39"})
    out = tmp_path / "calibration"
    result = CliRunner().invoke(main, ["calibrate", "--audit", str(root / "a.audit.jsonl"), "--truth", str(truth), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert data["fpr"] == 0.05 and data["truth"] == str(truth)
    groups = {(g["grouping"], g["group"], g["field"]): g for g in data["groups"]}
    assert set(groups) == {(grouping, group, name) for name in ("question", "context") for grouping, group in
                           [*((Grouping.LANGUAGE, lang) for lang in LANGS), (Grouping.SCRIPT, "Latn"), (Grouping.SCRIPT, "Jpan")]}
    english = groups["language", "en", "context"]
    assert english["members"] == 2 and english["non_members"] == 2
    members = [membership(records[item, "en"])["context"]["figures"]["min_k_plus"] for item in ("33", "39")]
    others = [membership(records[item, "en"])["context"]["figures"]["min_k_plus"] for item in ("46", "30")]
    wins = sum((m > o) + 0.5 * (m == o) for m in members for o in others) / 4
    assert english["scores"]["min_k_plus"]["auroc"] == pytest.approx(wins)
    assert groups["script", "Latn", "context"]["members"] == 4
    for name in ("question", "context"):
        for grouping in ("language", "script"):
            assert (out / f"auroc-{name}-by-{grouping}.png").read_bytes().startswith(b"\x89PNG")
    assert "| language | en | 2 | 2 |" in (out / "calibration.md").read_text(encoding="utf-8")
    again = CliRunner().invoke(main, ["calibrate", "--audit", str(root / "a.audit.jsonl"), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "calibration.json").read_text(encoding="utf-8"))["truth"] == "exposure"


def test_calibrate_refuses_bad_truth_and_foreign_directories(audited, tmp_path):
    root, _, _ = audited
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "33", "lang": "en", "member": true}\n{"item_id": "39", "lang": "en", "member": "yes"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--audit", str(root / "a.audit.jsonl"), "--truth", str(bad), "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and f"{bad}, line 2, field 'member': expected bool" in result.output and not (tmp_path / "c").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--audit", str(root / "a.audit.jsonl"), "--out", str(foreign)])
    assert result.exit_code == 2 and "was not written by audit" in result.output
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
    with pytest.raises(CalibrationError, match="line 2: item '33' in 'en' is given twice"):
        bad.write_text('{"item_id": "33", "lang": "en", "member": true}\n' * 2, encoding="utf-8")
        read_truth(bad)


def test_calibration_figures_on_known_scores():
    texts = [ScoredText(str(k), "hi", "context", k < 10, {Score.LOSS: float(k), Score.MIN_K_PLUS: float(-k)}) for k in range(30)]
    (language, script) = sorted(calibrate(texts, 0.05), key=lambda g: g.grouping)
    assert (language.grouping, language.group, script.group) == (Grouping.LANGUAGE, "hi", "Deva")
    loss = language.scores[Score.LOSS]
    assert not loss.member_scores_higher and loss.auroc == 1.0 and loss.tpr_at_fpr == {"0.01": 1.0, "0.05": 1.0}
    # 20 non-members: 5% FPR allows one of them (loss 10) at or below the threshold, just under 11.
    assert 10.99 < loss.threshold < 11 and loss.fpr_reached == 0.05 and loss.tpr_reached == 1.0
    assert language.scores[Score.MIN_K_PLUS].auroc == 1.0 and language.scores[Score.MIN_K_PLUS].member_scores_higher
    hostile = [ScoredText("1", "x|<b>", "context", True, {Score.LOSS: 1.0}), ScoredText("2", "x|<b>", "context", False, {Score.LOSS: 2.0})]
    assert "x\\|&lt;b&gt;" in markdown(calibrate(hostile, 0.05), 0.05)


def test_only_the_signals_own_fields_are_read():
    record = {"item_id": "1", "lang": "en", "exposure": "seen", "evidence": [
        {"signal": "membership", "field": "../../escape", "status": "ok", "figures": {"loss": 1.0}},
        {"signal": "membership", "field": "context", "status": "ok", "figures": {"loss": 2.0, "min_k": "x"}},
        {"signal": "membership", "field": "question", "status": "unknown", "figures": {}},
    ]}
    (text,) = scored_texts([record], None)
    assert (text.field, text.member, dict(text.figures)) == ("context", True, {Score.LOSS: 2.0})
    assert scored_texts([record | {"exposure": "unknown"}], None) == []


def test_a_model_behind_an_endpoint_is_skipped_with_the_reason(tmp_path):
    from audit.probes.models import open_model
    from audit.probes.prompts import load_templates
    from audit.signals.membership import open_runner
    from audit.signals.membership_spec import MembershipConfig
    from audit.signals.probe import Prober
    from audit.signals.spec import Opening, Skip

    remote = open_model("openai:some-model", cache=tmp_path / "c.sqlite", offline=True)
    skipped = open_runner(Prober(remote, remote, load_templates()), Opening(MembershipConfig(), {}))
    assert isinstance(skipped, Skip) and skipped.record().reason == "the model's endpoint gives no per-token probabilities of a given text"
    (why,) = remote.token_scores(["a text"], 8)
    assert why == "offline: this text's reading is not in the probe cache"


@pytest.fixture(scope="module")
def verdicts(audited, bench, tmp_path_factory) -> tuple[Path, dict, dict[tuple[str, str], dict], dict, str]:
    """The audit calibrated on a truth file (items 33 and 39 members) and checked again, offline,
    with the thresholds.toml that calibration wrote as its policy."""
    root, _, _ = audited
    here = tmp_path_factory.mktemp("membership-verdicts")
    truth = _truth(here / "truth.jsonl", {"33", "39"})
    out = here / "calibration"
    assert CliRunner().invoke(main, ["calibrate", "--audit", str(root / "a.audit.jsonl"), "--truth", str(truth), "--out", str(out)]).exit_code == 0
    thresholds = tomllib.loads((out / "thresholds.toml").read_text(encoding="utf-8"))["membership"]["thresholds"]
    manifest, checked, output = check(root, bench, "--signals", "ngram,membership", "--offline", "--policy", str(out / "thresholds.toml"), name="verdicts")
    return root / "verdicts.audit.jsonl", manifest, checked, thresholds, output


def test_calibrated_thresholds_make_the_membership_verdict(audited, verdicts):
    """Every variant's verdict is its scores against the thresholds of its language, and the
    manifest and the printed table count them."""
    _, _, records = audited
    _, manifest, checked, thresholds, output = verdicts
    assert set(thresholds) == {"question", "context"} and set(thresholds["context"]) == {*LANGS, "script:Latn", "script:Jpan"}
    assert "What the probed model's membership scores say" in output
    for key, record in checked.items():
        assert record["exposure"] == records[key]["exposure"]
        fired = []
        for name, evidence in membership(record).items():
            rule = thresholds[name][key[1]]
            value = evidence["figures"][rule["score"]]
            fired.append(value >= rule["value"] if rule["score"] in ("min_k", "min_k_plus") else value <= rule["value"])
        assert record["membership"] == ("member" if any(fired) else "non_member")
        assert {(c["field"], c["group"]) for c in record["membership_decided_by"]} <= {("question", key[1]), ("context", key[1])}
    counted = {lang: sum(r["membership"] == "member" for (_, l), r in checked.items() if l == lang) for lang in LANGS}
    assert {lang: c["member"] for lang, c in manifest["summary"]["membership"].items()} == counted
    assert any(r["membership"] == "member" for r in checked.values()), "at 5% FPR on 2 non-members the thresholds call every member in"
    frame = audit.read(verdicts[0]).to_pandas()
    assert {(row.item_id, row.lang): row.membership for row in frame.itertuples()} == {key: r["membership"] for key, r in checked.items()}
    assert all(row.membership_decided_by.startswith("membership.") for row in frame.itertuples())
    assert any(column.startswith("membership.llama-2-tiny-random.context.") for column in frame.columns)


def test_filter_drops_the_members_on_request(verdicts, bench, tmp_path):
    audit, _, checked, _, _ = verdicts
    result = CliRunner().invoke(main, ["filter", str(audit), "--bench", str(bench), "--rule", "any-seen", "--out", str(tmp_path / "kept.csv"), "--drop-member"])
    assert result.exit_code == 0, result.output
    dropped = json.loads((tmp_path / "kept.csv.manifest.json").read_text(encoding="utf-8"))
    assert dropped["policy"]["drop_member"] is True
    by_item = {v["item_id"]: v for v in dropped["leaky_items"]}
    seen = {item for (item, _), r in checked.items() if r["exposure"] == "seen"}
    members = {item for (item, _), r in checked.items() if r["membership"] == "member"}
    assert set(by_item) == seen | members
    for item in members - seen:
        assert by_item[item]["reason"].startswith("a member of the probed model's training data")
        assert by_item[item]["member_languages"] == sorted(lang for (i, lang), r in checked.items() if i == item and r["membership"] == "member")


def test_the_report_counts_membership_calibrates_it_per_language_and_stratifies_by_it(verdicts, bench, tmp_path):
    audit, _, checked, _, _ = verdicts
    predictions = tmp_path / "given.jsonl"
    predictions.write_text("".join(json.dumps({"item_id": i, "lang": l, "prediction": "…", "correct": (int(i) + len(l)) % 2 == 0}) + "\n" for i, l in checked), encoding="utf-8")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", "--audit", str(audit), "--bench", str(bench), "--out", str(out), "--bootstrap", "50", "--predictions", str(predictions)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    section = data["membership"]
    for lang in LANGS:
        verdicts_here = [r["membership"] for (_, l), r in checked.items() if l == lang]
        assert section["per_language"][lang]["member"] == verdicts_here.count("member") and section["per_language"][lang]["total"] == len(verdicts_here)
    expected = {g.group: g for g in calibrate(scored_texts(checked.values(), None), 0.05) if g.grouping is Grouping.LANGUAGE and g.field == "context"}
    for lang, group in section["calibration"]["fields"].get("context", {}).items():
        assert (group["members"], group["non_members"]) == (expected[lang].members, expected[lang].non_members)
        assert group["auroc"] == {str(s): f.auroc for s, f in expected[lang].scores.items()}
    strata = data["evaluation"]["strata"]
    rows = data["evaluation"]["rows"]
    for label in ("member", "non_member"):
        assert strata["target_membership"][label]["overall_success"]["n"] == sum(r["target_membership"] == label for r in rows)
    assert strata["all_evidence"]["parts"] == ["exposure", "membership"]
    assert sum(s["overall_success"]["n"] for s in strata["all_evidence"]["strata"].values()) == len(rows)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="membership-table"' in html and 'id="membership-calibration"' in html and 'data-split="target_membership"' in html


def test_filter_refuses_drop_member_when_no_verdict_could_drop(audited, bench, tmp_path):
    root, _, _ = audited
    args = ["filter", str(root / "a.audit.jsonl"), "--bench", str(bench), "--out", str(tmp_path / "x.csv"), "--drop-member"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "every membership verdict" in result.output and "audit calibrate" in result.output
    assert not (tmp_path / "x.csv").exists()


def test_a_reference_model_adds_its_loss_and_the_difference(bench, tmp_path):
    """The same GGUF file on transformers as the reference: a second model, whose loss is the
    probe model's own up to the runtimes' arithmetic, so `loss_minus_reference` is near 0 and
    is the difference of the two recorded losses."""
    registry = tmp_path / "models.toml"
    registry.write_text(f'[models.tiny-ref]\nbackend = "local"\npath = "{TINY}"\nruntime = "transformers"\n', encoding="utf-8")
    manifest, records, _ = check(tmp_path, bench, "--signals", "membership", "--reference-model", "tiny-ref", "--registry", str(registry), "--langs", "en")
    assert manifest["models"]["reference"]["name"] == "tiny-ref" and not manifest["models"]["reference"]["model_id"].endswith("+llama.cpp")
    for record in records.values():
        for evidence in membership(record).values():
            figures = evidence["figures"]
            assert figures["reference_model"] == manifest["models"]["reference"]["model_id"]
            assert figures["loss_minus_reference"] == pytest.approx(figures["loss"] - figures["reference_loss"], abs=2e-6)
            assert abs(figures["loss_minus_reference"]) < 0.05 * figures["loss"]


def test_a_reference_model_needs_the_membership_signal_and_a_second_model(bench, tmp_path):
    args = ["check", str(bench), "--corpus", "demo", "--out", str(tmp_path / "a.audit.jsonl"), "--no-report"]
    alone = CliRunner().invoke(main, [*args, "--reference-model", str(TINY)])
    assert alone.exit_code == 2 and "--reference-model" in alone.output and "only with --probe-model" in alone.output
    unread = CliRunner().invoke(main, [*args, "--probe-model", str(TINY), "--reference-model", "smollm2", "--signals", "ngram,probe"])
    assert unread.exit_code == 2 and "--reference-model: the reference model is read by the membership signal" in unread.output
    itself = CliRunner().invoke(main, [*args, "--probe-model", str(TINY), "--reference-model", str(TINY)])
    assert itself.exit_code == 2 and "is the probe model itself" in itself.output
    assert not (tmp_path / "a.audit.jsonl").exists()
