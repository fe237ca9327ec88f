"""Language codes: ISO 639-1 primary subtags, optionally followed by BCP-47-style subtags.

Benchmarks spell languages inconsistently (`zh_TW`, `pt-br`, `iw`), so every loader passes
codes through `normalise_lang`; afterwards a language is one canonical string everywhere.
"""
from __future__ import annotations

import difflib
import re

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
}

_SUBTAG = re.compile(r"[A-Za-z0-9]{1,8}")


def normalise_lang(code: str) -> str:
    """Return the canonical spelling of a language tag, or raise ValueError explaining why not.

    The primary subtag must be ISO 639-1 (lowercased; withdrawn codes such as `iw` map to
    their replacements). Later subtags keep BCP-47 casing conventions so that `zh_hans`,
    `zh-Hans` and `ZH-hans` compare equal: scripts title-case, regions upper-case.
    """
    if not isinstance(code, str):
        raise ValueError(f"language code must be a string, not {type(code).__name__}")
    tag = code.strip().replace("_", "-")
    if not tag:
        raise ValueError("empty language code")
    primary, *rest = tag.split("-")
    primary = LEGACY_CODES.get(primary.lower(), primary.lower())
    if primary not in ISO_639_1:
        raise ValueError(_unknown_message(code, primary))
    return "-".join([primary, *_case_subtags(code, rest)])


def _case_subtags(code: str, subtags: list[str]) -> list[str]:
    cased: list[str] = []
    private = False
    for subtag in subtags:
        if not _SUBTAG.fullmatch(subtag):
            raise ValueError(
                f"malformed language tag {code!r}: subtag {subtag!r} must be 1-8 letters or digits"
            )
        private = private or len(subtag) == 1
        region = (len(subtag) == 2 and subtag.isalpha()) or (len(subtag) == 3 and subtag.isdigit())
        if not private and len(subtag) == 4 and subtag.isalpha():
            cased.append(subtag.title())
        elif not private and region:
            cased.append(subtag.upper())
        else:
            cased.append(subtag.lower())
    return cased


def _unknown_message(code: str, primary: str) -> str:
    message = f"unknown language code {code!r}: {primary!r} is not an ISO 639-1 code"
    match = _suggest(primary)
    if match:
        message += f"; did you mean {match!r} ({ISO_639_1[match]})?"
    return message


def _suggest(primary: str) -> str | None:
    """Guess the intended code from the usual mistakes: country codes, 639-2 codes, names."""
    if primary in _COUNTRY_LOOKALIKES:
        return _COUNTRY_LOOKALIKES[primary]
    by_name = {name.lower(): iso for iso, name in ISO_639_1.items()}
    if primary in by_name:
        return by_name[primary]
    if len(primary) == 3 and primary[:2] in ISO_639_1:
        return primary[:2]
    prefixed = [iso for name, iso in by_name.items() if name.startswith(primary)]
    if len(primary) >= 3 and len(prefixed) == 1:
        return prefixed[0]
    close = difflib.get_close_matches(primary, list(by_name), n=1, cutoff=0.8)
    return by_name[close[0]] if close else None
