"""Language codes: the shortest ISO 639 code, optionally followed by BCP-47-style subtags.

Benchmarks spell languages inconsistently (`zh_TW`, `pt-br`, `iw`, FLORES-200's `arb_Arab` and
`zho_Hant`), so every loader passes codes through `normalise_lang`; afterwards a language is one
canonical string everywhere. ISO 639-1 codes live here; the three-letter ISO 639-2 and 639-3
codes are data, in `audit/data/iso639.tsv`.
"""
from __future__ import annotations

import difflib
import functools
import re
from importlib import resources
from typing import NamedTuple

ISO_639_1: dict[str, str] = {
    "aa": "Afar", "ab": "Abkhazian", "ae": "Avestan", "af": "Afrikaans", "ak": "Akan",
    "am": "Amharic", "an": "Aragonese", "ar": "Arabic", "as": "Assamese", "av": "Avaric",
    "ay": "Aymara", "az": "Azerbaijani",
    "ba": "Bashkir", "be": "Belarusian", "bg": "Bulgarian", "bh": "Bihari", "bi": "Bislama",
    "bm": "Bambara", "bn": "Bengali", "bo": "Tibetan", "br": "Breton", "bs": "Bosnian",
    "ca": "Catalan", "ce": "Chechen", "ch": "Chamorro", "co": "Corsican", "cr": "Cree",
    "cs": "Czech", "cu": "Church Slavic", "cv": "Chuvash", "cy": "Welsh",
    "da": "Danish", "de": "German", "dv": "Divehi", "dz": "Dzongkha",
    "ee": "Ewe", "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish",
    "et": "Estonian", "eu": "Basque",
    "fa": "Persian", "ff": "Fulah", "fi": "Finnish", "fj": "Fijian", "fo": "Faroese",
    "fr": "French", "fy": "Western Frisian",
    "ga": "Irish", "gd": "Scottish Gaelic", "gl": "Galician", "gn": "Guarani",
    "gu": "Gujarati", "gv": "Manx",
    "ha": "Hausa", "he": "Hebrew", "hi": "Hindi", "ho": "Hiri Motu", "hr": "Croatian",
    "ht": "Haitian Creole", "hu": "Hungarian", "hy": "Armenian", "hz": "Herero",
    "ia": "Interlingua", "id": "Indonesian", "ie": "Interlingue", "ig": "Igbo",
    "ii": "Sichuan Yi", "ik": "Inupiaq", "io": "Ido", "is": "Icelandic", "it": "Italian",
    "iu": "Inuktitut",
    "ja": "Japanese", "jv": "Javanese",
    "ka": "Georgian", "kg": "Kongo", "ki": "Kikuyu", "kj": "Kuanyama", "kk": "Kazakh",
    "kl": "Kalaallisut", "km": "Khmer", "kn": "Kannada", "ko": "Korean", "kr": "Kanuri",
    "ks": "Kashmiri", "ku": "Kurdish", "kv": "Komi", "kw": "Cornish", "ky": "Kyrgyz",
    "la": "Latin", "lb": "Luxembourgish", "lg": "Ganda", "li": "Limburgish", "ln": "Lingala",
    "lo": "Lao", "lt": "Lithuanian", "lu": "Luba-Katanga", "lv": "Latvian",
    "mg": "Malagasy", "mh": "Marshallese", "mi": "Maori", "mk": "Macedonian",
    "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi", "ms": "Malay", "mt": "Maltese",
    "my": "Burmese",
    "na": "Nauru", "nb": "Norwegian Bokmål", "nd": "North Ndebele", "ne": "Nepali",
    "ng": "Ndonga", "nl": "Dutch", "nn": "Norwegian Nynorsk", "no": "Norwegian",
    "nr": "South Ndebele", "nv": "Navajo", "ny": "Chichewa",
    "oc": "Occitan", "oj": "Ojibwa", "om": "Oromo", "or": "Odia", "os": "Ossetian",
    "pa": "Punjabi", "pi": "Pali", "pl": "Polish", "ps": "Pashto", "pt": "Portuguese",
    "qu": "Quechua",
    "rm": "Romansh", "rn": "Rundi", "ro": "Romanian", "ru": "Russian", "rw": "Kinyarwanda",
    "sa": "Sanskrit", "sc": "Sardinian", "sd": "Sindhi", "se": "Northern Sami", "sg": "Sango",
    "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian", "sm": "Samoan", "sn": "Shona",
    "so": "Somali", "sq": "Albanian", "sr": "Serbian", "ss": "Swati", "st": "Southern Sotho",
    "su": "Sundanese", "sv": "Swedish", "sw": "Swahili",
    "ta": "Tamil", "te": "Telugu", "tg": "Tajik", "th": "Thai", "ti": "Tigrinya",
    "tk": "Turkmen", "tl": "Tagalog", "tn": "Tswana", "to": "Tongan", "tr": "Turkish",
    "ts": "Tsonga", "tt": "Tatar", "tw": "Twi", "ty": "Tahitian",
    "ug": "Uyghur", "uk": "Ukrainian", "ur": "Urdu", "uz": "Uzbek",
    "ve": "Venda", "vi": "Vietnamese", "vo": "Volapük",
    "wa": "Walloon", "wo": "Wolof",
    "xh": "Xhosa",
    "yi": "Yiddish", "yo": "Yoruba",
    "za": "Zhuang", "zh": "Chinese", "zu": "Zulu",
}

# Withdrawn ISO 639-1 codes that older datasets (and some Google releases) still use.
LEGACY_CODES: dict[str, str] = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}

# Country codes often mistaken for language codes; only used to suggest a fix, never applied.
_COUNTRY_LOOKALIKES: dict[str, str] = {
    "jp": "ja", "cn": "zh", "tw": "zh", "gr": "el", "dk": "da", "kr": "ko", "ua": "uk",
    "cz": "cs", "vn": "vi", "il": "he", "gb": "en", "us": "en", "se": "sv", "ir": "fa",
    "chn": "zh", "twn": "zh", "usa": "en", "gbr": "en", "bra": "pt", "esp": "es", "mex": "es",
    "irn": "fa", "isr": "he", "vnm": "vi", "dnk": "da", "grl": "kl",
}

# A script subtag naming the language's one usual script says nothing, so it is dropped:
# `ita_Latn` and `it` must compare equal, while `zh-Hans`/`zh-Hant` and `sr-Cyrl`/`sr-Latn` stay
# apart. These are the Suppress-Script values of the IANA language subtag registry for the
# languages known here, plus Hang for Korean, which FLORES-200 writes as `kor_Hang` (the registry
# says Kore, Hangul with Han). A language not listed keeps whatever script it is given: dropping
# it would be a guess.
_SUPPRESSED: dict[str, str] = {
    "Latn": "af ay bs ca ch cs cy da de dsb en eo es et eu fi fj fo fr frr fy ga gl gn gsw gv hr hsb ht hu id is it"
            " kl la lb ln lt lv mg mh ms mt na nb nd nds nl nn no nr nso ny om pl pt qu rm rn ro rw sg sk sl sm so sq"
            " ss st sv sw tl tmh tn to tpi tr ts ve vi xh zu",
    "Cyrl": "ab be bg kk mk ru uk", "Arab": "ar fa ps ur", "Deva": "hi kok mai mr ne", "Beng": "as bn",
    "Ethi": "am ti", "Hebr": "he yi", "Kore": "ko", "Hang": "ko", "Jpan": "ja", "Armn": "hy", "Geor": "ka",
    "Grek": "el", "Gujr": "gu", "Guru": "pa", "Khmr": "km", "Knda": "kn", "Laoo": "lo", "Mlym": "ml",
    "Mymr": "my", "Orya": "or", "Sinh": "si", "Taml": "ta", "Telu": "te", "Thaa": "dv", "Thai": "th",
    "Tibt": "dz",
}
SUPPRESS_SCRIPT: dict[str, frozenset[str]] = {
    lang: frozenset(script for script, langs in _SUPPRESSED.items() if lang in langs.split())
    for lang in {lang for langs in _SUPPRESSED.values() for lang in langs.split()}
}

_SUBTAG = re.compile(r"[A-Za-z0-9]{1,8}")
_TABLE = "data/iso639.tsv"
_COLUMNS = ["code", "canonical", "name", "macrolanguage"]


class _Entry(NamedTuple):
    canonical: str
    name: str
    macrolanguage: str


@functools.cache
def _table() -> dict[str, _Entry]:
    """The three-letter codes, read on first use so importing this module stays cheap."""
    text = resources.files("audit").joinpath(_TABLE).read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not rows or rows[0] != _COLUMNS:
        raise RuntimeError(f"{_TABLE}: the first row must be the header {' '.join(_COLUMNS)}")
    table: dict[str, _Entry] = {}
    for fields in rows[1:]:
        if len(fields) not in (3, 4):
            raise RuntimeError(f"{_TABLE}: expected {len(_COLUMNS)} tab-separated columns in {fields!r}")
        code, canonical, name, macrolanguage = (*fields, "")[:4]
        table[code] = _Entry(canonical, name, macrolanguage)
    return table


@functools.cache
def _names() -> dict[str, str]:
    """Lower-cased English names to canonical codes, for suggestions only."""
    names = {entry.name.lower(): entry.canonical for entry in _table().values()}
    names.update((name.lower(), iso) for iso, name in ISO_639_1.items())
    return names


def normalise_lang(code: str) -> str:
    """Return the canonical spelling of a language tag, or raise ValueError explaining why not.

    The language becomes its shortest ISO 639 code: ISO 639-1 where there is one (withdrawn
    codes such as `iw` map to their replacements, three-letter codes such as `ita`, `ger` or
    FLORES-200's `arb` to the two-letter code), else the ISO 639-3 code (`ceb`). Later subtags
    keep BCP-47 casing so that `zh_hans`, `zh-Hans` and `zho_Hans` compare equal: scripts
    title-case, regions upper-case. A script that goes without saying (`ita_Latn`) is dropped.
    """
    if not isinstance(code, str):
        raise ValueError(f"language code must be a string, not {type(code).__name__}")
    return _normalise(code)


@functools.lru_cache(maxsize=1024)
def _normalise(code: str) -> str:
    tag = code.strip().replace("_", "-")
    if not tag:
        raise ValueError("empty language code")
    primary, *rest = tag.split("-")
    language = _language(code, primary.lower())
    if rest and len(rest[0]) == 3 and rest[0].isalpha():
        # BCP-47 extended language subtag (`zh-yue`, `ar-arb`): the individual language wins.
        member = _table().get(rest[0].lower())
        if member is not None and member.macrolanguage == language:
            language, rest = member.canonical, rest[1:]
    subtags = _case_subtags(code, rest)
    if subtags and subtags[0] in SUPPRESS_SCRIPT.get(language, ()):
        subtags = subtags[1:]
    return "-".join([language, *subtags])


# Languages written in more than one script together, or whose one script the registry does
# not suppress: the script their text is usually in.
_USUAL_SCRIPT = {"zh": "Hani", "ja": "Jpan", "ko": "Hang", "yue": "Hani", "sr": "Cyrl"}


def usual_script(code: str) -> str | None:
    """The script a language's text is written in (ISO 15924): the tag's own script subtag,
    else the language's usual one; None when not known here."""
    try:
        language, *subtags = normalise_lang(code).split("-")
    except ValueError:
        return None
    if subtags and len(subtags[0]) == 4 and subtags[0].isalpha():
        return subtags[0]
    if language in _USUAL_SCRIPT:
        return _USUAL_SCRIPT[language]
    scripts = sorted(SUPPRESS_SCRIPT.get(language, ()))
    return scripts[0] if len(scripts) == 1 else None


def describe_lang(code: str) -> str:
    """English name of a language tag for people to read, e.g. `zh-Hant` -> `Chinese (Hant)`."""
    language, *subtags = normalise_lang(code).split("-")
    name = ISO_639_1.get(language) or _table()[language].name
    return f"{name} ({', '.join(subtags)})" if subtags else name


def _language(code: str, primary: str) -> str:
    primary = LEGACY_CODES.get(primary, primary)
    if primary in ISO_639_1:
        return primary
    entry = _table().get(primary)
    if entry is None:
        raise ValueError(_unknown_message(code, primary))
    return entry.canonical


def _case_subtags(code: str, subtags: list[str]) -> list[str]:
    """Case the subtags after the language, refusing a script or region out of BCP-47 order:
    `zh-Hans-Hant` or `pt-BR-PT` does not say which one is meant."""
    cased: list[str] = []
    private = False
    stage = 0  # 0: only extended language subtags yet, 1: after the script, 2: after the region, 3: after a variant
    for subtag in subtags:
        if not _SUBTAG.fullmatch(subtag):
            raise ValueError(
                f"malformed language tag {code!r}: subtag {subtag!r} must be 1-8 letters or digits"
            )
        private = private or len(subtag) == 1
        region = (len(subtag) == 2 and subtag.isalpha()) or (len(subtag) == 3 and subtag.isdigit())
        if private or (stage == 0 and len(subtag) == 3 and subtag.isalpha()):
            cased.append(subtag.lower())
        elif len(subtag) == 4 and subtag.isalpha():
            if stage:
                raise ValueError(_misplaced(code, f"script {subtag!r}", stage, 1))
            cased.append(subtag.title())
            stage = 1
        elif region:
            if stage > 1:
                raise ValueError(_misplaced(code, f"region {subtag!r}", stage, 2))
            cased.append(subtag.upper())
            stage = 2
        else:
            cased.append(subtag.lower())
            stage = 3
    return cased


def _misplaced(code: str, what: str, stage: int, own: int) -> str:
    if stage == own:
        return f"ambiguous language tag {code!r}: a second {what}"
    after = {1: "the script", 2: "the region", 3: "a variant"}[stage]
    return f"malformed language tag {code!r}: the {what} comes after {after}; BCP-47 order is language-script-region-variant"


def _unknown_message(code: str, primary: str) -> str:
    if len(primary) == 2:
        message = f"unknown language code {code!r}: {primary!r} is not an ISO 639-1 code"
    elif len(primary) == 3:
        message = f"unknown language code {code!r}: {primary!r} is not an ISO 639-2 or 639-3 code listed in audit/{_TABLE}"
    else:
        message = f"unknown language code {code!r}: {primary!r} is not an ISO 639 code (two or three letters)"
    match = _suggest(primary)
    if match:
        message += f"; did you mean {match!r} ({describe_lang(match)})?"
    return message


def _suggest(primary: str) -> str | None:
    """Guess the intended code from the usual mistakes: country codes, misspelt three-letter
    codes, and English names (which are never accepted as codes, since names are ambiguous)."""
    if primary in _COUNTRY_LOOKALIKES:
        return _COUNTRY_LOOKALIKES[primary]
    names = _names()
    if primary in names:
        return names[primary]
    if len(primary) == 3 and primary[:2] in ISO_639_1:
        return primary[:2]
    prefixed = {iso for name, iso in names.items() if name.startswith(primary)}
    if len(primary) >= 3 and len(prefixed) == 1:
        return prefixed.pop()
    close = difflib.get_close_matches(primary, list(names), n=1, cutoff=0.8)
    return names[close[0]] if close else None
