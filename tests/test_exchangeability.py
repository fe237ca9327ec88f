"""Oren et al.'s exchangeability test (`audit exchangeability`): the statistic and p-values
against the model's own readings of each order (the random-weight GGUF fixture), the shards and
texts it is made of, refusals; and, marked slow, SmolLM2 telling a benchmark in its natural
order (ordinals that count up) from the same items written in a shuffled order."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, sample_subset
from scipy import stats

from audit.cli import main
from audit.evaluate.exchangeability import SEPARATOR, ExchangeabilityError, item_text, order_test, shards_of, texts_by_language
from audit.probes.llamacpp import LlamaCppModel
from audit.readers import load_benchmark

pytest.importorskip("llama_cpp")

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"


def counting(path: Path, shuffled: bool) -> Path:
    """Forty items whose natural order counts up; written in that order or shuffled."""
    rows = [{"item_id": str(n), "source_lang": "en", "variants": {"en": {"question": f"Which number comes after {n}?", "answer": str(n + 1)}}} for n in range(1, 41)]
    if shuffled:
        random.Random(5).shuffle(rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_shards_are_contiguous_and_even():
    assert shards_of(list("abcdefghij"), 3) == [list("abc"), list("defg"), list("hij")]
    assert [n for shard in shards_of(list(range(39)), 10) for n in shard] == list(range(39))


def test_items_are_written_as_a_file_line_gives_them(tmp_path):
    items = load_benchmark(counting(tmp_path / "c.jsonl", shuffled=False)).items
    assert item_text(items[0], "en") == "Which number comes after 1?\n2"
    assert texts_by_language(items, ["fr"]) == {}
    cloze = load_benchmark(FIXTURES / "bmlama17").items[:3]
    assert cloze
    for item in cloze:
        text = item_text(item, "en")
        assert text is not None and item.mask not in text and item.variants["en"].answer in text


def test_the_statistic_is_the_own_order_against_the_shuffles_as_the_model_reads_them(tmp_path):
    model = LlamaCppModel.load(TINY, model_id="tiny", parallel=1)
    texts = texts_by_language(load_benchmark(counting(tmp_path / "c.jsonl", shuffled=False)).items, None)["en"]
    asked: list[str] = []

    def read(batch: list[str], bound: int) -> list:
        asked.extend(batch)
        assert bound == max(len(text.encode("utf-8")) for text in batch) + 2
        return model.token_scores(batch, bound)

    result = order_test("en", texts, read, shards=4, permutations=5, seed=3, max_tokens=3500)
    assert len(asked) == 4 * 6 and [len(s) for s in shards_of(texts, 4)] == [shard.items for shard in result.shards]
    differences = []
    for index, shard in enumerate(result.shards):
        own, *shuffles = asked[index * 6:(index + 1) * 6]
        assert own == SEPARATOR.join(shards_of(texts, 4)[index])
        assert all(sorted(s.split(SEPARATOR)) == sorted(own.split(SEPARATOR)) for s in shuffles)
        totals = [float(r.logprobs.sum()) for r in model.token_scores([own, *shuffles], 3500)]
        assert shard.own_order == pytest.approx(totals[0], abs=1e-5) and shard.shuffled_mean == pytest.approx(np.mean(totals[1:]), abs=1e-5)
        assert shard.permutation_p == pytest.approx((1 + sum(t >= totals[0] for t in totals[1:])) / 6)
        differences.append(totals[0] - np.mean(totals[1:]))
    expected = stats.ttest_1samp(differences, 0.0, alternative="greater")
    assert result.t == pytest.approx(expected.statistic, rel=1e-4) and result.p_value == pytest.approx(expected.pvalue, rel=1e-4)
    again = order_test("en", texts, model.token_scores, shards=4, permutations=5, seed=3, max_tokens=3500)
    assert again == result


def test_too_few_items_or_too_long_shards_are_refused(tmp_path):
    model = LlamaCppModel.load(TINY, model_id="tiny", parallel=1)
    with pytest.raises(ExchangeabilityError, match="3 items make no 2 shards of two or more"):
        order_test("en", ["a", "b", "c"], model.token_scores, shards=2, permutations=2, seed=0, max_tokens=64)
    long = [f"Sentence number {n} is here to make the shard long." for n in range(40)]
    with pytest.raises(ExchangeabilityError, match="past what is read \\(64\\); use more shards"):
        order_test("en", long, model.token_scores, shards=2, permutations=2, seed=0, max_tokens=64)


def test_the_command_writes_every_language_and_refuses_to_overwrite(tmp_path):
    bench = sample_subset(tmp_path / "four.csv", ("33", "39", "46", "30"), ("en", "ja"))
    out = tmp_path / "ex.json"
    args = ["exchangeability", str(bench), "--probe-model", str(TINY), "--shards", "2", "--permutations", "3", "--out", str(out)]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["lang"] for r in data["languages"]] == ["en", "ja"] and data["model"]["model_id"].endswith("+llama.cpp")
    assert all(len(r["shards"]) == 2 and r["items"] == 4 for r in data["languages"])
    again = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert again.exit_code == 2 and "already exists" in again.output
    offline = CliRunner().invoke(main, [*args[:-2], "--out", str(tmp_path / "o.json"), "--offline"], env={"AUDIT_CACHE_DIR": str(tmp_path / "empty")})
    assert offline.exit_code == 2 and "could not read a shard: offline" in offline.output and not (tmp_path / "o.json").exists()


@pytest.mark.slow
def test_smollm2_finds_the_published_order_only_where_there_is_one(tmp_path):
    runs = {}
    for name, shuffled in (("ordered", False), ("shuffled", True)):
        out = tmp_path / f"{name}.json"
        args = ["exchangeability", str(counting(tmp_path / f"{name}.jsonl", shuffled)), "--probe-model", "smollm2", "--shards", "4", "--permutations", "9", "--out", str(out)]
        result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
        assert result.exit_code == 0, result.output
        (runs[name],) = json.loads(out.read_text(encoding="utf-8"))["languages"]
    assert runs["ordered"]["p_value"] < 0.001 and runs["ordered"]["difference"] > 10
    assert runs["shuffled"]["p_value"] > 0.05
