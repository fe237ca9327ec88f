"""Wikipedia editions and the languages benchmarks name them by.

A wiki's subdomain (and the `lang` of its langlinks) is usually the language's code, but not
always: `als` is Alemannic (`gsw`), not Tosk Albanian as ISO 639-3 reads it; `no` is Bokmål
(`nb`); `zh-yue`, `zh-min-nan` and `zh-classical` are Cantonese, Min Nan and Classical Chinese;
`simple` is Simple English, which must never count as English.  This table is the one place
that knows; every other module asks it.
"""
from __future__ import annotations

import re

from audit.errors import AuditError
from audit.langcodes import normalise_lang

# Wiki prefixes whose language code differs, and the language each holds.
WIKI_LANGUAGE: dict[str, str] = {
    "als": "gsw",
    "bat-smg": "sgs",
    "be-tarask": "be-tarask",
    "be-x-old": "be-tarask",
    "cbk-zam": "cbk",
    "fiu-vro": "vro",
    "nds-nl": "nds-NL",
    "no": "nb",
    "roa-rup": "rup",
    "zh-classical": "lzh",
    "zh-min-nan": "nan",
    "zh-yue": "yue",
}
# Languages whose wiki is named otherwise (the reverse of the table, `be-tarask` kept as is).
LANGUAGE_WIKI: dict[str, str] = {lang: wiki for wiki, lang in WIKI_LANGUAGE.items() if wiki != "be-x-old"}
# Wikis that are not a language a benchmark could name.
NOT_A_LANGUAGE: dict[str, str] = {
    "simple": "Simple English (not English: an article there says nothing of the English Wikipedia)",
    "map-bms": "Banyumasan, a Javanese dialect with no ISO 639 code",
    "roa-tara": "Tarantino, an Italian dialect with no ISO 639 code",
}


class WikiError(AuditError, ValueError):
    """A language or wiki prefix that has no counterpart."""


def wiki_for(lang: str) -> str:
    """The wiki prefix holding a benchmark language's articles: `yue` → `zh-yue`, `nb` → `no`,
    `zh-Hans` → `zh`, `pt-BR` → `pt`."""
    code = lang if lang in LANGUAGE_WIKI else normalise_lang(lang)
    if code in LANGUAGE_WIKI:
        return LANGUAGE_WIKI[code]
    return code.split("-")[0].lower()


def wiki_language(wiki: str) -> str | None:
    """The benchmark language a wiki prefix (a langlinks `lang`) holds, normalised; None for a
    wiki that is no language a benchmark names (`simple`).  WikiError for a prefix no table
    knows."""
    prefix = wiki.strip().lower()
    if prefix in WIKI_LANGUAGE:
        return WIKI_LANGUAGE[prefix]
    if prefix in NOT_A_LANGUAGE:
        return None
    try:
        return normalise_lang(prefix)
    except ValueError as error:
        raise WikiError(f"wiki {wiki!r}: {error}") from None


# A Wikipedia database name (`enwiki`, `zh_min_nanwiki`) and a wiki prefix (`en`, `zh-min-nan`).
_DBNAME = re.compile(r"[a-z][a-z0-9_]*wiki")
_PREFIX = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def dbname_language(dbname: str) -> str:
    """`enwiki` → `en`, `zh_yuewiki` → `zh-yue`: the wiki prefix of a database name, as dump
    files are named (`enwiki-20230701-langlinks.sql.gz`)."""
    if not dbname.endswith("wiki") or len(dbname) <= 4:
        raise WikiError(f"{dbname!r} is not a Wikipedia database name (like enwiki or zh_yuewiki)")
    return dbname.removesuffix("wiki").replace("_", "-")


def wiki_prefix(value: str) -> str:
    """A wiki as a user names one (`en`, `zh-yue`, or the database name `enwiki`), as its prefix,
    or WikiError: a name that is no Wikipedia's would file every row under a wiki no question
    ever asks about."""
    name = value.strip()
    if _DBNAME.fullmatch(name):
        name = dbname_language(name)
    if not _PREFIX.fullmatch(name):
        raise WikiError(f"wiki {value!r}: not a Wikipedia's prefix (like en or zh-yue) nor its database name (like enwiki)")
    wiki_language(name)
    return name
