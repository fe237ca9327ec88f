"""Language codes as benchmarks write them: ISO 639-1, 639-2/T and /B, 639-3 with FLORES-200
script suffixes, BCP-47 and MKQA-style underscores all reach one canonical tag."""
from __future__ import annotations

import re

import pytest

from audit import langcodes
from audit.langcodes import ISO_639_1, SUPPRESS_SCRIPT, describe_lang, normalise_lang

TABLE = langcodes._table()


def cases(*pairs: str) -> list[tuple[str, str]]:
    return [tuple(pair.split()) for pair in pairs]


@pytest.mark.parametrize(("given", "expected"), cases(
    "it it", "IT it", " it it", "iw he", "in id", "ji yi", "jw jv", "mo ro",
))
def test_two_letter_and_withdrawn_codes(given, expected):
    assert normalise_lang(given) == expected


@pytest.mark.parametrize(("given", "expected"), cases(
    "ita it", "zho zh", "chi zh", "fra fr", "fre fr", "deu de", "ger de", "ell el", "gre el",
    "nld nl", "dut nl", "ces cs", "cze cs", "fas fa", "per fa", "msa ms", "may ms", "ENG en",
    "nob nb", "twi tw", "bih bh",
))
def test_iso_639_2_terminology_and_bibliographic_codes(given, expected):
    assert normalise_lang(given) == expected


@pytest.mark.parametrize(("given", "expected"), cases(
    "arb ar", "cmn zh", "pes fa", "zsm ms", "swh sw", "npi ne", "ekk et", "lvs lv", "khk mn",
    "uzn uz", "azj az", "plt mg", "gaz om", "ory or", "pbt ps", "quy qu", "als sq", "ydd yi",
))
def test_individual_languages_merge_into_their_macrolanguage(given, expected):
    assert normalise_lang(given) == expected


@pytest.mark.parametrize("code", ["yue", "ary", "arz", "prs", "azb", "ckb", "ltg", "wuu"])
def test_sister_varieties_keep_their_own_code(code):
    assert normalise_lang(code) == code
    assert TABLE[code].macrolanguage == normalise_lang(TABLE[code].macrolanguage)


@pytest.mark.parametrize("code", ["ceb", "war", "ilo", "yue", "ast", "haw", "fil", "hmn", "nso", "tpi", "lus", "mni", "sat", "kab"])
def test_languages_without_a_two_letter_code_keep_the_three_letter_one(code):
    assert normalise_lang(code.upper()) == code


@pytest.mark.parametrize(("given", "expected"), cases(
    # The script is the language's only usual one: dropped.
    "ita_Latn it", "rus_Cyrl ru", "jpn_Jpan ja", "kor_Hang ko", "kor_Kore ko", "arb_Arab ar",
    "pes_Arab fa", "npi_Deva ne", "swh_Latn sw", "zsm_Latn ms", "ell_Grek el", "tha_Thai th",
    "heb_Hebr he", "ben_Beng bn", "tpi_Latn tpi", "mai_Deva mai", "it-latn it",
    # The script tells variants apart, or is unusual for the language: kept.
    "zho_Hans zh-Hans", "zho_Hant zh-Hant", "zho_hant zh-Hant", "cmn_Hans zh-Hans", "yue_Hant yue-Hant",
    "srp_Cyrl sr-Cyrl", "srp_Latn sr-Latn", "uzb_Latn uz-Latn", "uzn_Cyrl uz-Cyrl", "arb_Latn ar-Latn",
    "kas_Deva ks-Deva", "ceb_Latn ceb-Latn", "rus_Latn ru-Latn",
))
def test_flores_style_codes_with_scripts(given, expected):
    assert normalise_lang(given) == expected


@pytest.mark.parametrize(("given", "expected"), cases(
    "pt-BR pt-BR", "pt-br pt-BR", "pt_br pt-BR", "zh_cn zh-CN", "zh_TW zh-TW", "zh-Hant zh-Hant",
    "zh-hant-tw zh-Hant-TW", "sr-Latn sr-Latn", "es-419 es-419", "de-1901 de-1901",
    "en-US-x-Twain en-US-x-twain", "por_BR pt-BR", "fil-PH fil-PH", "ita-Latn-IT it-IT",
    # Extended language subtags: the individual language wins.
    "zh-yue yue", "zh-yue-HK yue-HK", "zh-cmn-Hans zh-Hans", "ar-arb ar", "ar-ary ary",
    # Other three-letter subtags in that place are passed through, as before.
    "zh-min-nan-TW zh-min-nan-TW", "en-abc-us en-abc-US",
))
def test_bcp47_tags(given, expected):
    assert normalise_lang(given) == expected


def test_existing_two_letter_results_are_unchanged():
    assert [normalise_lang(code) for code in ("EN", "zh_TW", "zh-hans", "pt-br", "iw", "es-419")] == [
        "en", "zh-TW", "zh-Hans", "pt-BR", "he", "es-419",
    ]
    assert all(normalise_lang(code) == code for code in ISO_639_1)


def test_every_table_code_is_accepted_and_normalising_twice_changes_nothing():
    for code, entry in TABLE.items():
        canonical = normalise_lang(code)
        assert canonical == entry.canonical
        assert normalise_lang(canonical) == canonical
        for script in ("Latn", "Cyrl", "Arab", "Hans"):
            tagged = normalise_lang(f"{code}_{script}")
            assert normalise_lang(tagged) == tagged


def test_the_table_is_consistent():
    for code, entry in TABLE.items():
        assert len(code) == 3 and code.isalpha() and code.islower(), code
        assert entry.name, code
        if len(entry.canonical) == 3:
            assert TABLE[entry.canonical].canonical == entry.canonical, code
        else:
            assert entry.canonical in ISO_639_1, code
        if entry.macrolanguage:
            assert normalise_lang(entry.macrolanguage) == entry.macrolanguage, code
            assert entry.canonical in (code, entry.macrolanguage) or len(entry.canonical) == 2, code
    assert {entry.canonical for entry in TABLE.values()} >= set(ISO_639_1)


def test_suppressed_scripts_name_known_languages_and_scripts():
    for lang, scripts in SUPPRESS_SCRIPT.items():
        assert normalise_lang(lang) == lang
        assert scripts and all(len(script) == 4 and script.istitle() for script in scripts)
    assert "zh" not in SUPPRESS_SCRIPT and "sr" not in SUPPRESS_SCRIPT and "uz" not in SUPPRESS_SCRIPT


@pytest.mark.parametrize(("given", "expected"), [
    ("zh-Hant", "Chinese (Hant)"), ("zho_Hant", "Chinese (Hant)"), ("pt_br", "Portuguese (BR)"),
    ("zh-Hant-TW", "Chinese (Hant, TW)"), ("ita_Latn", "Italian"), ("ceb", "Cebuano"), ("cmn", "Chinese"),
    ("yue_Hant", "Cantonese (Hant)"),
])
def test_describe_lang(given, expected):
    assert describe_lang(given) == expected


@pytest.mark.parametrize(("given", "message"), [
    ("zh-Hans-Hant", "ambiguous language tag 'zh-Hans-Hant': a second script 'Hant'"),
    ("pt-BR-PT", "ambiguous language tag 'pt-BR-PT': a second region 'PT'"),
    ("zh-TW-Hant", "the script 'Hant' comes after the region"),
    ("de-1901-DE", "the region 'DE' comes after a variant"),
    ("zho_", "subtag '' must be 1-8 letters or digits"),
    ("zh--CN", "subtag '' must be 1-8 letters or digits"),
    ("en-toolongsubtag", "subtag 'toolongsubtag' must be 1-8 letters or digits"),
    ("", "empty language code"),
    ("  ", "empty language code"),
    ("und", "'und' is not an ISO 639-2 or 639-3 code listed in"),
    ("latn", "'latn' is not an ISO 639 code"),
])
def test_malformed_and_ambiguous_tags(given, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        normalise_lang(given)


@pytest.mark.parametrize("value", [None, 3, ["en"]])
def test_non_strings_are_refused_with_a_value_error(value):
    with pytest.raises(ValueError, match="must be a string"):
        normalise_lang(value)


@pytest.mark.parametrize(("given", "suggestion"), [
    ("jp", "'ja' (Japanese)"), ("cn", "'zh' (Chinese)"), ("chn", "'zh' (Chinese)"), ("usa", "'en' (English)"),
    ("bengali", "'bn' (Bengali)"), ("English", "'en' (English)"), ("cebuano", "'ceb' (Cebuano)"),
    ("cantonese", "'yue' (Cantonese)"), ("mandarin", "'zh' (Chinese)"), ("filipino", "'fil' (Filipino)"),
    ("jap", "'ja' (Japanese)"), ("jp_JP", "'ja' (Japanese)"),
])
def test_unknown_codes_suggest_a_fix_but_names_are_never_accepted(given, suggestion):
    with pytest.raises(ValueError, match=re.escape(f"did you mean {suggestion}?")):
        normalise_lang(given)


@pytest.mark.parametrize(("given", "message"), [
    ("qq", r"'qq' is not an ISO 639-1 code$"),
    ("xyz", r"'xyz' is not an ISO 639-2 or 639-3 code listed in audit/data/iso639.tsv$"),
])
def test_unknown_codes_without_a_likely_fix(given, message):
    with pytest.raises(ValueError, match=message):
        normalise_lang(given)
