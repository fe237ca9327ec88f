"""`audit probe plant` end to end, marked slow: SmolLM2 trained further on the member variants'
texts of four ECLeKTic items in three scripts, audited with the saved directory as the probe
model (and the untrained GGUF as the reference), calibrated on the same truth; the thresholds
written then call every planted variant a member and every held-out one not.  The refusals run
without training."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import sample_subset

from audit.cli import main

ITEMS, MEMBERS, LANGS = ("33", "39", "46", "30"), ("33", "39"), ("en", "ja", "he")


def truth_file(path: Path) -> Path:
    path.write_text("".join(json.dumps({"item_id": i, "lang": lang, "member": i in MEMBERS}) + "\n" for i in ITEMS for lang in LANGS), encoding="utf-8")
    return path


def run(*args: str, cache: Path) -> str:
    result = CliRunner().invoke(main, list(args), env={"AUDIT_CACHE_DIR": str(cache)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_a_planted_model_scores_its_planted_texts_apart_per_language(tmp_path):
    pytest.importorskip("transformers")
    bench = sample_subset(tmp_path / "four.csv", ITEMS, LANGS)
    truth, cache, model = truth_file(tmp_path / "truth.jsonl"), tmp_path / "cache", tmp_path / "planted"
    run("probe", "plant", str(bench), "--truth", str(truth), "--probe-model", "smollm2", "--epochs", "4", "--max-tokens", "96", "--out", str(model), cache=cache)
    planted = [json.loads(line) for line in (model / "planted.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {(row["item_id"], row["lang"]) for row in planted} == {(i, lang) for i in MEMBERS for lang in LANGS}
    settings = json.loads((model / "plant.json").read_text(encoding="utf-8"))
    assert settings["texts"] == len(planted) == 12 and settings["loss_per_epoch"][-1] < settings["loss_per_epoch"][0]
    policy = tmp_path / "p96.toml"
    policy.write_text("[membership]\nmax_tokens = 96\n", encoding="utf-8")
    common = ["--corpus", "demo", "--signals", "membership", "--probe-model", str(model), "--reference-model", "smollm2", "--no-report"]
    run("check", str(bench), *common, "--policy", str(policy), "--out", str(tmp_path / "a.audit.jsonl"), cache=cache)
    run("calibrate", "--audit", str(tmp_path / "a.audit.jsonl"), "--truth", str(truth), "--out", str(tmp_path / "cal"), cache=cache)
    groups = json.loads((tmp_path / "cal" / "calibration.json").read_text(encoding="utf-8"))["groups"]
    for group in groups:
        best = max(score["auroc"] for score in group["scores"].values() if score["auroc"] is not None)
        assert best == 1.0, group
    thresholds = (tmp_path / "cal" / "thresholds.toml").read_text(encoding="utf-8")
    policy.write_text("[membership]\nmax_tokens = 96\n" + thresholds, encoding="utf-8")
    assert tomllib.loads(policy.read_text(encoding="utf-8"))["membership"]["max_tokens"] == 96
    run("check", str(bench), *common, "--policy", str(policy), "--offline", "--out", str(tmp_path / "b.audit.jsonl"), cache=cache)
    records = [json.loads(line) for line in (tmp_path / "b.audit.jsonl").read_text(encoding="utf-8").splitlines()[1:]]
    assert {(r["item_id"], r["lang"]): r["membership"] for r in records} == {(i, lang): "member" if i in MEMBERS else "non_member" for i in ITEMS for lang in LANGS}


def test_plant_refuses_what_it_cannot_train_on(tmp_path):
    bench = sample_subset(tmp_path / "four.csv", ITEMS, LANGS)
    truth = tmp_path / "truth.jsonl"
    truth.write_text(json.dumps({"item_id": "999", "lang": "en", "member": True}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["probe", "plant", str(bench), "--truth", str(truth), "--probe-model", "openai:x", "--out", str(tmp_path / "m")])
    assert result.exit_code == 2 and "an endpoint cannot be trained" in result.output and not (tmp_path / "m").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "33", "lang": "en"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["probe", "plant", str(bench), "--truth", str(bad), "--probe-model", "smollm2", "--out", str(tmp_path / "m")])
    assert result.exit_code == 2 and f"{bad}, line 1, field 'member'" in result.output
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf-8")
    result = CliRunner().invoke(main, ["probe", "plant", str(bench), "--truth", str(truth_file(tmp_path / "t.jsonl")), "--probe-model", "smollm2", "--out", str(tmp_path / "mine")])
    assert result.exit_code == 2 and "was not written by audit" in result.output and (tmp_path / "mine" / "notes.txt").read_text(encoding="utf-8") == "keep"
