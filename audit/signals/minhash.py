"""The near-duplicate signal: how much of each text field of a language variant one window of
the corpus holds, after light edits, reordering or partial copying that exact n-gram matching
misses, from the corpus's near-duplicate index (`audit.neardup`).

For each field the figures are exact, computed from the corpus text of the best candidates:
`containment` (the share of the field's shingles found in one span of the field's length) and
`jaccard` (the two shingle sets' overlap over their union), with the sketch's estimates beside
them and the documents as provenance.  Shingles that the variant shares with its
source-language variant (names, titles, numbers) are left out of both: they say nothing about
this language.  Shingles common in the corpus count in the field but never match.

Only documents of the field's language count (`audit.signals.minhash_language`); the same
figures over every document are `any_language`, and the languages of the documents that reach
the threshold are `languages`.  A field with fewer distinct shingles than its script's floor
lists its figures in `below_floor`: they are reported, and must not decide.

Its part of the policy file (`MinhashConfig`, `Rules`) is declared in `minhash_spec`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from audit import forms
from audit.corpora.base import Corpus, DocumentHit, Occurrence, UnknownLanguage
from audit.corpora.local import LocalIndex
from audit.evidence import ABSENT, FAILED, Evidence, Json
from audit.forms import Checked
from audit.items import Item
from audit.neardup import NEARDUP_DIR, Match, NearDupError, NearDuplicateIndex, QueryResult, check_expected
from audit.neardup.rarity import CommonShingles
from audit.neardup.verify import SetAside
from audit.rules import Op, Rule
from audit.signals.minhash_language import DocumentFilter
from audit.signals.minhash_spec import NAME, TEXT_FIELDS, Common, ExpectedIndex, FieldRules, Floors, MinhashConfig, Rules, fields_for
from audit.signals.spec import Opening, Runner, Skip, broken
from audit.text import dominant_script, normalize

__all__ = ["NAME", "TEXT_FIELDS", "Common", "ExpectedIndex", "FieldRules", "Floors", "MinhashConfig", "Rules", "fields_for", "open_runner", "run"]


class Unsupported(NearDupError):
    """The corpus has no near-duplicate index at all (another backend, or an index built
    without one): the signal is skipped for it, which is not a failure."""


def index_for(corpus: Corpus) -> NearDuplicateIndex:
    """The near-duplicate index beside a local corpus, opened after its checks (through Redis
    when the corpus's registry entry names one).  Unsupported says why there is none; any other
    NearDupError is a damaged or mismatched index, which fails the signal's evidence."""
    if not isinstance(corpus, LocalIndex):
        raise Unsupported(f"a {corpus.info.backend} corpus has no near-duplicate index")
    if not (corpus.path / NEARDUP_DIR).exists():
        raise Unsupported(f"{corpus.path} has no near-duplicate index; add one with `audit index minhash {corpus.path}`")
    return NearDuplicateIndex.open(corpus.path, corpus=corpus, redis=corpus.neardup_redis)


RULE_FIGURES = ("containment", "jaccard")


def _rule_figures(matches: list[Match]) -> dict[str, Json]:
    best = matches[0] if matches else None
    return {"containment": best.containment if best else 0.0, "jaccard": best.jaccard if best else 0.0, "documents": len(matches)}


def _figures(script: str, result: QueryResult, documents: DocumentFilter, floor: int, min_matched: int) -> dict[str, Json]:
    best = result.best
    figures = {
        **_rule_figures(result.matches),
        "estimated_containment": best.estimated_containment if best else 0.0,
        "estimated_jaccard": best.estimated_jaccard if best else 0.0,
        "matched_shingles": best.matched if best else [],
        "script": script,
        "shingles": result.shingles,
        "shingles_shared_with_source": result.shared_with_source,
        "shingles_common": result.common,
        "chunks": result.chunks,
        "candidates": result.candidates,
        "verified": result.verified,
        "exhaustive": result.verified == result.candidates,
        "language": documents.describe(result.matches),
        "any_language": _rule_figures(result.any_matches),
        "languages": documents.languages(result.reaching),
    }
    rare = result.shingles - result.common
    if rare < floor:
        figures["below_floor"] = list(RULE_FIGURES)
        figures["floor"] = {name: {"needed": floor, "had": rare, "unit": "shingles"} for name in RULE_FIGURES}
    elif best is not None and best.shingles < min_matched:
        figures["below_floor"] = list(RULE_FIGURES)
        figures["floor"] = {name: {"needed": min_matched, "had": best.shingles, "unit": "matched shingles"} for name in RULE_FIGURES}
    return figures


def _reach(rules: Sequence[Rule]) -> float | None:
    """The containment a document must reach to be listed in `languages`: the least one a rule
    on this field fires at (None: no rule, every verified document is listed)."""
    found = [float(r.value) for r in rules if r.figure == "containment" and r.op is Op.AT_LEAST]
    return min(found) if found else None


@dataclass(frozen=True)
class FieldQuery:
    """What a field is asked with, besides its text."""

    shared: SetAside
    documents: DocumentFilter
    rules: Sequence[Rule]
    common: CommonShingles


def _hit(index: NearDuplicateIndex[LocalIndex], match: Match, snippet_chars: int) -> DocumentHit:
    return index.corpus.document_hit(Occurrence(match.document, match.offset), match.length, snippet_chars)


def _with_quotations(index: NearDuplicateIndex, result: QueryResult, documents: DocumentFilter, snippet_chars: int) -> QueryResult:
    """The result with the matches in other languages' documents that quote the field in its
    own language counted among its matches (a Portuguese page quoting a Russian question)."""
    counted = {m.document for m in result.matches}
    quoted = []
    for match in result.any_matches:
        hit = _hit(index, match, snippet_chars) if match.document not in counted else None
        if hit is not None and documents.quotes(match.document, hit.snippet[hit.snippet_match_start : hit.snippet_match_end]):
            quoted.append(match)
    if not quoted:
        return result
    matches = sorted([*result.matches, *quoted], key=lambda m: (-m.containment, -m.jaccard, m.document))
    return replace(result, matches=matches)


def field_evidence(index: NearDuplicateIndex, source: str, name: str, raw: str, asked: FieldQuery, config: MinhashConfig) -> Evidence:
    text = normalize(raw)
    documents = asked.documents
    result = index.query(
        text, exclude=asked.shared, candidates=config.candidates, limit=config.provenance_docs, allowed=documents, reach=_reach(asked.rules), common=asked.common
    )
    result = _with_quotations(index, result, documents, config.snippet_chars)
    script = dominant_script(text)
    evidence = Evidence(signal=NAME, source=source, field=name, figures=_figures(script, result, documents, config.floor.needed(script), config.min_matched))
    counted = {m.document for m in result.matches}
    others = [m for m in result.any_matches if m.document not in counted]
    for match in [*result.matches, *others]:
        hit = _hit(index, match, config.snippet_chars)
        evidence.provenance.append(
            {
                "document": match.document,
                "metadata": hit.metadata,
                **documents.provenance_language(match.document),
                "counted": match.document in counted,
                "offset": match.offset,
                "length": match.length,
                "containment": match.containment,
                "jaccard": match.jaccard,
                "estimated_jaccard": match.estimated_jaccard,
                "matched_shingles": match.matched,
                "snippet": hit.snippet,
                "snippet_match": [hit.snippet_match_start, hit.snippet_match_end],
            }
        )
    return evidence


def _checked(index: NearDuplicateIndex, source: str, checked: Checked, asked: FieldQuery, config: MinhashConfig, mismatch: str | None) -> list[Evidence]:
    if not checked.forms:
        return [Evidence(signal=NAME, source=source, field=checked.field, status=ABSENT)]
    if mismatch is not None:
        return [Evidence(signal=NAME, source=source, field=checked.field, status=FAILED, error=mismatch)]
    results = []
    for form in checked.forms:
        try:
            evidence = field_evidence(index, source, checked.field, form.text, asked, config)
        except (NearDupError, OSError, ValueError) as error:
            evidence = Evidence(signal=NAME, source=source, field=checked.field, status=FAILED, error=str(error))
        results.append(evidence)
    return results


class MinhashRun:
    """The signal on one index, with what stays the same from variant to variant made once:
    whether the index was built as the policy expects, and the common-shingle cut's limit."""

    def __init__(self, index: NearDuplicateIndex, config: MinhashConfig, rules: Mapping[str, Sequence[Rule]]) -> None:
        self.index, self.config, self.rules = index, config, rules
        try:
            check_expected(index.directory, index.params, config.index.model_dump(exclude_none=True))
            self.mismatch: str | None = None
        except NearDupError as error:
            self.mismatch = str(error)
        self.common = CommonShingles(index.corpus, config.common.per_million_bytes, config.common.at_least)

    def __call__(self, item: Item, lang: str) -> list[Evidence]:
        index, config = self.index, self.config
        shared = index.distinct_shingles(forms.source_texts(item, lang))
        variant = item.variants[lang]
        wanted = set(fields_for(item))
        results = []
        for checked in forms.text_fields(item, lang):
            if checked.field in wanted:
                documents = DocumentFilter.of(index.corpus, variant.language_of(checked.field, lang), UnknownLanguage(config.unknown_language))
                asked = FieldQuery(shared, documents, self.rules.get(checked.field, ()), self.common)
                results += _checked(index, index.corpus.info.name, checked, asked, config, self.mismatch)
        return results


def run(index: NearDuplicateIndex, item: Item, lang: str, config: MinhashConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    """Near-duplicate evidence for each text field the item's kind shingles, counted in the
    documents of the field's language (`variant.language_of`); a field the variant lacks is
    absent, and an index or query failure (damage, a mismatching build, Redis down) is failed,
    never "no match".  The policy's `rules` set the containment a document must reach to be
    listed among the languages the field was found in."""
    return MinhashRun(index, config, rules or {})(item, lang)


def open_runner(corpus: Corpus, opening: Opening) -> Runner | Skip:
    """A runner on the corpus's near-duplicate index; skipped for a corpus that has none, and
    failing every variant's evidence (not the run) for one whose index is damaged."""
    name = corpus.info.name
    try:
        index = index_for(corpus)
    except Unsupported as reason:
        return Skip(NAME, name, str(reason))
    except Exception as error:  # a damaged index beside a corpus fails that signal's evidence, not the run
        return broken(NAME, name, fields_for, error)
    rules = {field: table.for_source(name) for field, table in opening.rules.items()}
    ask = MinhashRun(index, opening.config, rules)
    return Runner(NAME, name, fields_for, ask, portable=getattr(corpus, "ships_to_workers", False))
