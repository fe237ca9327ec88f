"""Label tables against plain dicts keyed by (item id, language): the same tags, order, counts,
fills and cross-counts, on random audits."""
from __future__ import annotations

import pickle
import random
from collections import Counter

import pytest

from audit.evaluate.stratify import KNOWLEDGE_STRATA, STRATA, UNDETERMINED, UNKNOWN
from audit.labels import LabelTable, Variants

LANGS = ["en", "fr", "de", "zh-Hans", "ar", "sw"]


def _audit(seed: int) -> tuple[list[tuple[str, str]], dict, dict]:
    """Pairs in record order (an item's languages need not be together), overall tags and a
    sparse table of knowledge."""
    rng = random.Random(seed)
    items = [f"item-{n}-ü" for n in range(rng.randint(1, 300))]
    pairs = list(dict.fromkeys((rng.choice(items), rng.choice(LANGS)) for _ in range(rng.randint(1, 900))))
    overall = {pair: rng.choice(STRATA) for pair in pairs}
    knowledge = {pair: rng.choice(KNOWLEDGE_STRATA) for pair in pairs if rng.random() < 0.3}
    return pairs, overall, knowledge


def _tables(pairs, overall, knowledge) -> tuple[LabelTable, LabelTable]:
    variants = Variants()
    held = LabelTable(variants, STRATA, ordering=True)
    known = LabelTable(variants, KNOWLEDGE_STRATA)
    for pair in pairs:
        held.put(pair, overall[pair])
        if pair in knowledge:
            known.put(pair, knowledge[pair])
    return held, known


@pytest.mark.parametrize("seed", range(25))
def test_a_table_reads_as_the_dict_it_replaces(seed):
    pairs, overall, knowledge = _audit(seed)
    held, known = _tables(pairs, overall, knowledge)
    assert list(held.items()) == list(overall.items()) and held == overall and len(held) == len(overall)
    assert list(known.items()) == list(knowledge.items()) and len(known) == len(knowledge)
    for pair in [*pairs, ("item-0-ü", "xx"), ("nobody", "en")]:
        assert (pair in known) == (pair in knowledge)
        assert known.get(pair) == knowledge.get(pair) and known.get(pair, "none") == knowledge.get(pair, "none")
        if pair not in overall:
            with pytest.raises(KeyError):
                held[pair]
    for lang in [*LANGS, "never", None]:
        assert held.counts(lang) == Counter(tag for (_, at), tag in overall.items() if lang is None or at == lang)
    assert pickle.loads(pickle.dumps(held)) == overall


@pytest.mark.parametrize("seed", range(25))
def test_fills_and_cross_counts_equal_the_dict_comprehensions_they_replace(seed):
    pairs, overall, knowledge = _audit(seed)
    held, known = _tables(pairs, overall, knowledge)
    everywhere = known.filled(held, UNDETERMINED)
    expected = {pair: knowledge.get(pair, UNDETERMINED) for pair in overall}
    assert list(everywhere.items()) == list(expected.items())
    for lang in [*LANGS, None]:
        assert everywhere.joint(held, lang, UNKNOWN) == Counter((tag, overall.get(pair, UNKNOWN)) for pair, tag in expected.items() if lang is None or pair[1] == lang)
    # Against a table that lacks some of the pairs: those are counted as `missing`.
    partial = LabelTable(held.variants, STRATA)
    for pair in pairs[::2]:
        partial.put(pair, overall[pair])
    assert known.joint(partial, None, UNKNOWN) == Counter((tag, overall[pair] if pair in pairs[::2] else UNKNOWN) for pair, tag in knowledge.items())


def test_setting_a_pair_again_replaces_its_tag_and_keeps_its_place():
    variants = Variants()
    table = LabelTable(variants, STRATA, ordering=True)
    table.put(("a", "en"), "seen")
    table.put(("b", "fr"), "unseen")
    table.put(("a", "en"), "unknown")
    assert list(table.items()) == [(("a", "en"), "unknown"), (("b", "fr"), "unseen")] and len(table) == 2
    with pytest.raises(KeyError):
        table.put(("c", "en"), "member")


def test_more_languages_than_sixteen_bits_number_keep_their_pairs_apart():
    """A hostile audit may name any number of languages: pairs stay distinct past 65,536."""
    variants = Variants()
    table = LabelTable(variants, STRATA, ordering=True)
    pairs = [(f"item-{n % 3}", f"lang-{n}") for n in range(70_000)]
    for n, pair in enumerate(pairs):
        table.put(pair, STRATA[n % 3])
    assert list(table) == pairs and table[pairs[65_537]] == STRATA[65_537 % 3] and ("item-0", "lang-1") not in table


@pytest.mark.parametrize("seed", range(25))
def test_each_items_languages_are_the_pairs_it_was_met_in(seed):
    pairs, overall, knowledge = _audit(seed)
    held, _ = _tables(pairs, overall, knowledge)
    variants = held.variants
    langs, starts = variants.langs_by_item()
    assert len(starts) == len(variants.item_ids) + 1 and starts[-1] == len(pairs)
    for item, item_id in enumerate(variants.item_ids):
        expected = sorted(variants.lang_number[lang] for at, lang in pairs if at == item_id)
        assert langs[starts[item] : starts[item + 1]].tolist() == expected
