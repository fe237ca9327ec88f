"""The X-FACTR reader on the committed subset of the real benchmark (tests/fixtures/xfactr, see
tests/fixtures/SOURCES.md), and on copies of it broken on purpose."""
from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES

from audit.items import ItemKind
from audit.readers import BenchmarkError, ReadOptions, load_benchmark

XFACTR = FIXTURES / "xfactr"
FACTS = XFACTR / "mTRExf" / "sub"
ALIASES = XFACTR / "alias" / "mTRExf"


# Expectations read straight from the fixture files, without the reader ------------------------


def fixture_facts() -> list[dict]:
    return [json.loads(line) for file in sorted(FACTS.glob("P*.jsonl")) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def fixture_templates() -> dict[str, dict[str, str]]:
    with open(XFACTR / "TREx_prompts.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {row["pid"]: {lang: text for lang, text in row.items() if lang not in ("pid", "relation") and text.strip()} for row in rows}


def fixture_names(lang: str) -> dict[str, list[str]]:
    path = ALIASES / f"{lang}.txt"
    if not path.exists():
        return {}
    names = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, *rest = line.split("\t")
        names[qid] = [name.strip() for name in rest if name.strip()]
    return names


def expected_languages() -> Counter:
    """Per language, the facts with a template for their relation and a name for both entities
    (in English the facts carry their own labels)."""
    templates = fixture_templates()
    counts: Counter = Counter()
    names = {lang: fixture_names(lang) for lang in {lang for by_lang in templates.values() for lang in by_lang}}
    for fact in fixture_facts():
        for lang in templates[fact["predicate_id"]]:
            if lang == "en" or (names[lang].get(fact["sub_uri"]) and names[lang].get(fact["obj_uri"])):
                counts[lang] += 1
    return counts


@pytest.fixture(scope="module")
def report():
    return load_benchmark(XFACTR, "xfactr")


@pytest.fixture(scope="module")
def by_id(report):
    return {item.item_id: item for item in report.items}


def fact_id(sub_uri: str, predicate_id: str) -> str:
    return next(fact["uuid"] for fact in fixture_facts() if fact["sub_uri"] == sub_uri and fact["predicate_id"] == predicate_id)


def copy_fixture(tmp_path: Path) -> Path:
    return Path(shutil.copytree(XFACTR, tmp_path / "xfactr"))


# The whole subset ----------------------------------------------------------------------------


def test_one_item_per_fact_with_every_language_that_has_names(report):
    facts = fixture_facts()
    assert report.format == "xfactr"
    assert report.skipped == []
    assert len(report.items) == len(facts) == 30
    assert {item.item_id for item in report.items} == {fact["uuid"] for fact in facts}
    assert Counter(lang for item in report.items for lang in item.variants) == expected_languages()
    # Only the seven languages with an alias file in the fixture have names; en always does.
    assert set(report.languages) == {"en", "fr", "ru", "zh", "ja", "el", "tr"}


def test_items_are_cloze_prompts_with_the_mask_and_no_markup_left(report):
    facts = {fact["uuid"]: fact for fact in fixture_facts()}
    for item in report.items:
        fact = facts[item.item_id]
        assert item.kind is ItemKind.CLOZE and item.mask == "[Y]" and item.source_lang == "en"
        assert item.meta["relation"] == fact["predicate_id"]
        assert (item.meta["sub_uri"], item.meta["obj_uri"]) == (fact["sub_uri"], fact["obj_uri"])
        assert item.meta["facts"] == "mTRExf" and item.meta["count"] == fact["count"]
        assert item.origin.rows == ((str(FACTS / f"{fact['predicate_id']}.jsonl"), item.origin.lines[0]),)
        for lang, variant in item.variants.items():
            assert "[Y]" in variant.question, (lang, variant.question)
            assert re.sub(r"\[Y\]", "", variant.question).count("[") == 0, (lang, variant.question)
            assert variant.subject in variant.question
            assert variant.meta["template"] == fixture_templates()[fact["predicate_id"]][lang]


def test_detected_from_the_directory():
    # Passes once audit/readers/__init__.py registers "xfactr" with its detection.
    assert load_benchmark(XFACTR).format == "xfactr"


def test_source_language_can_be_overridden():
    # Every fact of the subset has French names, so every item keeps its French source variant.
    report = load_benchmark(XFACTR, "xfactr", options=ReadOptions(source_lang="fr"))
    assert {item.source_lang for item in report.items} == {"fr"}
    assert len(report.items) == 30


# Prompts, by hand from the fixture files ----------------------------------------------------


def test_english_prompt_and_answer_use_the_fact_labels(by_id):
    # P19.jsonl line 3: Lee Kuan Yew (Q131248) was born in Singapore (Q334).
    en = by_id[fact_id("Q131248", "P19")].variants["en"]
    assert en.question == "Lee Kuan Yew was born in [Y] ."
    assert en.answer == "Singapore"
    # en.txt: Q334  Garden City  Lion City  Republic of Singapore  SG  SGP  Singapore  Singapore City  sg  🇸🇬
    assert en.aliases == ("Garden City", "Lion City", "Republic of Singapore", "SG", "SGP", "Singapore City", "sg", "🇸🇬")
    # en.txt: Q131248  Harry Lee  LKY  Lee Kuan Yew  MM Lee
    assert en.subject_aliases == ("Harry Lee", "LKY", "MM Lee")


def test_french_prompt_takes_the_first_gender_form(by_id):
    # fr template of P19: "[X] est [né;X-Gender=MASC|née;X-Gender=FEM] [PREPLOC;Y] [Y] ."
    fr = by_id[fact_id("Q131248", "P19")].variants["fr"]
    assert fr.meta["template"] == "[X] est [né;X-Gender=MASC|née;X-Gender=FEM] [PREPLOC;Y] [Y] ."
    assert fr.question == "Lee Kuan Yew est né [Y] ."
    assert (fr.answer, fr.aliases) == ("Singapour", ())


def test_russian_prompt_drops_case_markup(by_id):
    # ru template of P19: "[X.Nom] [родился;X-Gender=MASC|родилась;X-Gender=FEM|родилось;X-Gender=NEUT] в [Y.Ess] ."
    # ru.txt: Q131248  Ли Кван Ю  Ли Куан Ю
    ru = by_id[fact_id("Q131248", "P19")].variants["ru"]
    assert ru.question == "Ли Кван Ю родился в [Y] ."
    assert ru.subject == "Ли Кван Ю" and ru.subject_aliases == ("Ли Куан Ю",)
    # ru template of P37: "Официальный язык [X.Gen] — [Y.Nom] ."; ru.txt lists Iran (Q794) as
    # "Iran  ИРИ  Иран  ...": the Latin name and the abbreviation are passed over.
    ru = by_id[fact_id("Q794", "P37")].variants["ru"]
    assert ru.question == "Официальный язык Иран — [Y] ."


def test_turkish_copula_slot_is_the_mask(by_id):
    # tr template of P37: "[X.Gen] resmi dili [Y;be] ."
    tr = by_id[fact_id("Q794", "P37")].variants["tr"]
    assert tr.question == "İran resmi dili [Y] ."


def test_answer_and_aliases_match_the_alias_file(by_id):
    # P166.jsonl line 3: Katharine Hepburn (Q56016) was awarded Best Actress (Q103618).
    item = by_id[fact_id("Q56016", "P166")]
    # ru.txt: Q103618  Премия Оскар за лучшую женскую роль  премия «Оскар» за лучшую женскую роль
    ru = item.variants["ru"]
    assert ru.answer == "Премия Оскар за лучшую женскую роль"
    assert ru.aliases == ("премия «Оскар» за лучшую женскую роль",)
    assert ru.question == "Кэтрин Хепбёрн был награждён [Y] ."
    # en: the fact's obj_label, then the other names of en.txt's Q103618 line.
    en = item.variants["en"]
    assert en.answer == "Best Actress"
    assert en.aliases == ("Academy Award for Best Actress", "Best Actress Oscar", "Oscar for Best Actress")
    # fr.txt: Q9168 (Persian)  fa  iranien  persan  perse: a two-letter code is not taken as the name.
    fr = by_id[fact_id("Q794", "P37")].variants["fr"]
    assert (fr.answer, fr.aliases) == ("iranien", ("fa", "persan", "perse"))


def test_language_without_a_name_for_the_object_is_left_out(by_id):
    # P166.jsonl line 5: Michael Jordan (Q41421) received NBA Finals MVP (Q739499), which el.txt
    # does not list although it lists Michael Jordan, and P166 has a Greek template.
    assert "Q739499" not in fixture_names("el") and "Q41421" in fixture_names("el")
    assert fixture_templates()["P166"]["el"]
    item = by_id[fact_id("Q41421", "P166")]
    assert "el" not in item.variants
    assert item.meta["unnamed_langs"] == ["el"]
    assert {"en", "fr", "ru", "zh", "ja", "tr"} <= set(item.variants)


# Broken copies ------------------------------------------------------------------------------


def test_truncated_fact_line_is_located(tmp_path):
    root = copy_fixture(tmp_path)
    facts = root / "mTRExf" / "sub" / "P37.jsonl"
    lines = facts.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"
    facts.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root, "xfactr")
    assert (info.value.path, info.value.line) == (str(facts), 3)
    assert f"{facts}:3: invalid JSON" in str(info.value)
    report = load_benchmark(root, "xfactr", skip_bad_rows=True)
    assert len(report.items) == 29 and len(report.skipped) == 1 and "P37.jsonl:3" in report.skipped[0]


def test_fact_without_a_key_is_located(tmp_path):
    root = copy_fixture(tmp_path)
    facts = root / "mTRExf" / "sub" / "P19.jsonl"
    lines = facts.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[1])
    del record["obj_uri"]
    lines[1] = json.dumps(record) + "\n"
    facts.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root, "xfactr")
    assert (info.value.path, info.value.line, info.value.field) == (str(facts), 2, "obj_uri")


def test_template_without_the_object_slot_names_line_and_column(tmp_path):
    root = copy_fixture(tmp_path)
    prompts = root / "TREx_prompts.csv"
    text = prompts.read_bytes().decode("utf-8")
    broken = text.replace("[X] est [né;X-Gender=MASC|née;X-Gender=FEM] [PREPLOC;Y] [Y] .", "[X] est [né;X-Gender=MASC|née;X-Gender=FEM] .")
    assert broken != text
    prompts.write_bytes(broken.encode("utf-8"))
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(root, "xfactr")
    assert (info.value.path, info.value.line, info.value.field) == (str(prompts), 2, "fr")
    assert "no [Y]" in info.value.message
    # Skipped, French is left out of the relation's facts only.
    report = load_benchmark(root, "xfactr", skip_bad_rows=True)
    assert len(report.skipped) == 1
    assert {item.meta["relation"] for item in report.items if "fr" not in item.variants} == {"P19"}


def test_missing_prompts_or_facts_directory(tmp_path):
    root = copy_fixture(tmp_path)
    (root / "TREx_prompts.csv").unlink()
    with pytest.raises(BenchmarkError, match=r"no TREx_prompts\.csv"):
        load_benchmark(root, "xfactr")
    root = copy_fixture(tmp_path / "second")
    shutil.rmtree(root / "mTRExf" / "sub")
    with pytest.raises(BenchmarkError, match=r"no mTRExf/sub/"):
        load_benchmark(root, "xfactr")


def test_mtrexf_is_preferred_to_mtrex(tmp_path):
    root = copy_fixture(tmp_path)
    # An mTREx beside it with one relation only: mTRExf is still the one read.
    (root / "mTREx" / "sub").mkdir(parents=True)
    shutil.copy(FACTS / "P19.jsonl", root / "mTREx" / "sub" / "P19.jsonl")
    shutil.copytree(ALIASES, root / "alias" / "mTREx")
    report = load_benchmark(root, "xfactr")
    assert len(report.items) == 30 and {item.meta["facts"] for item in report.items} == {"mTRExf"}
    # Without mTRExf, mTREx (and its alias directory) is read.
    shutil.rmtree(root / "mTRExf")
    report = load_benchmark(root, "xfactr")
    assert len(report.items) == 6 and {item.meta["facts"] for item in report.items} == {"mTREx"}
