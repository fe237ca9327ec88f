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

The signal declares its part of the policy file: `MinhashConfig` is the `[minhash]` table (its
query-time parameters, and the build parameters the index must have if the policy names them),
`Rules` the fields and figures `[rules.minhash]` may name.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from audit import forms
from audit.corpora.base import DocumentHit, Occurrence, UnknownLanguage
from audit.corpora.local import LocalIndex
from audit.evidence import ABSENT, FAILED, Evidence
from audit.forms import Checked
from audit.items import Item, ItemKind
from audit.neardup import NEARDUP_DIR, Match, NearDupError, NearDuplicateIndex, NearDupParams, QueryResult, ShingleSizes, check_expected
from audit.neardup.rarity import CommonShingles
from audit.neardup.verify import SetAside
from audit.rules import Count, Fraction, Op, Rule, Table, threshold
from audit.signals.minhash_language import DocumentFilter
from audit.text import dominant_script, normalize

NAME = "minhash"
# The fields worth shingling, by kind.  A cloze's filled statement is not among them: a
# sentence is a handful of shingles, most of them the prompt's, so a copied prompt without its
# answer would look like a near-duplicate of the fact; the n-gram signal checks it exactly.
# A question with an option is left to the n-gram signal for the same reason.
TEXT_FIELDS: dict[ItemKind, tuple[str, ...]] = {
    ItemKind.OPEN: (forms.QUESTION, forms.CONTEXT),
    ItemKind.CLOZE: (forms.CONTEXT,),
    ItemKind.MULTIPLE_CHOICE: (forms.QUESTION, forms.CONTEXT),
}


class ExpectedIndex(Table):
    """Build parameters the near-duplicate index must have; unset ones are not checked.  An
    index built otherwise is refused, since its figures would not mean what the thresholds
    were set for.  `audit index build/minhash --policy FILE` builds with them (unset ones at
    their defaults), so an index and the policy that reads it never disagree."""

    sketcher: Literal["datasketch", "rensa"] | None = None
    num_perm: Count | None = None
    bands: Count | None = None
    rows: Count | None = None
    seed: int | None = Field(None, ge=0)
    window: Count | None = None
    stride: Count | None = None
    shingle: ShingleSizes = Field(default_factory=ShingleSizes)

    def build_params(self, **overrides: Any) -> NearDupParams:
        """The parameters to build an index with: these, the rest at their defaults; a
        ValidationError when they do not fit together (more bands x rows than permutations)."""
        return NearDupParams.model_validate({**self.model_dump(exclude_none=True), **{k: v for k, v in overrides.items() if v is not None}})


class Floors(Table):
    """Distinct shingles a field must have, not counting those shared with the source variant
    or common in the corpus, before its containment and Jaccard may decide, by the field's
    script; a script left unset uses `default`.  Below it the figures are still reported, and
    listed in `below_floor`."""

    default: Count = 4
    arabic: Count | None = 3
    cyrillic: Count | None = None
    devanagari: Count | None = None
    greek: Count | None = None
    hangul: Count | None = 3
    hebrew: Count | None = 3
    latin: Count | None = None
    han: Count | None = 9
    kana: Count | None = 9
    thai: Count | None = None
    lao: Count | None = None
    khmer: Count | None = None
    myanmar: Count | None = None
    tibetan: Count | None = None

    def needed(self, script: str) -> int:
        value = getattr(self, script) if script in type(self).model_fields else None
        return value or self.default


class Common(Table):
    """When a shingle is too common in the corpus to be evidence (`audit.neardup.rarity`): held
    more than `per_million_bytes` times per million bytes of the corpus's text, and more than
    `at_least` times."""

    per_million_bytes: float = Field(1.0, gt=0)
    at_least: Count = 20


class MinhashConfig(Table):
    """The signal's parameters (the policy's `[minhash]` table)."""

    candidates: int = Field(50, ge=1)
    provenance_docs: int = Field(3, ge=1)
    snippet_chars: int = Field(80, ge=0)
    unknown_language: Literal["count", "ignore"] = "count"
    floor: Floors = Field(default_factory=Floors)
    min_matched: int = Field(3, ge=1)
    common: Common = Field(default_factory=Common)
    index: ExpectedIndex = Field(default_factory=ExpectedIndex)


class FieldRules(Table):
    """Thresholds on the exact figures of one field; the estimates and counts describe the
    query, so no rule may name them."""

    containment: threshold(Fraction, "Containment") = None
    jaccard: threshold(Fraction, "Jaccard") = None


class Rules(Table):
    """The policy's `[rules.minhash]`: the fields this signal reports.  Answers are not among
    them: one or two words are shorter than a shingle."""

    question: FieldRules = Field(default_factory=FieldRules)
    context: FieldRules = Field(default_factory=FieldRules)


class Unsupported(NearDupError):
    """The corpus has no near-duplicate index at all (another backend, or an index built
    without one): the signal is skipped for it, which is not a failure."""


def index_for(corpus: Any) -> NearDuplicateIndex:
    """The near-duplicate index beside a local corpus, opened after its checks (through Redis
    when the corpus's registry entry names one).  Unsupported says why there is none; any other
    NearDupError is a damaged or mismatched index, which fails the signal's evidence."""
    if not isinstance(corpus, LocalIndex):
        raise Unsupported(f"a {corpus.info.backend} corpus has no near-duplicate index")
    if not (corpus.path / NEARDUP_DIR).exists():
        raise Unsupported(f"{corpus.path} has no near-duplicate index; add one with `audit index minhash {corpus.path}`")
    return NearDuplicateIndex.open(corpus.path, corpus=corpus, redis=corpus.neardup_redis)


RULE_FIGURES = ("containment", "jaccard")


def _rule_figures(matches: list[Match]) -> dict[str, Any]:
    best = matches[0] if matches else None
    return {"containment": best.containment if best else 0.0, "jaccard": best.jaccard if best else 0.0, "documents": len(matches)}


def _figures(text: str, result: QueryResult, documents: DocumentFilter, floor: int, min_matched: int) -> dict[str, Any]:
    best = result.best
    figures = {
        **_rule_figures(result.matches),
        "estimated_containment": best.estimated_containment if best else 0.0,
        "estimated_jaccard": best.estimated_jaccard if best else 0.0,
        "matched_shingles": best.matched if best else [],
        "script": dominant_script(text),
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
        text, exclude=asked.shared, candidates=config.candidates, limit=config.provenance_docs, allowed=documents.counts, reach=_reach(asked.rules), common=asked.common
    )
    result = _with_quotations(index, result, documents, config.snippet_chars)
    floor = config.floor.needed(dominant_script(text))
    evidence = Evidence(signal=NAME, source=source, field=name, figures=_figures(text, result, documents, floor, config.min_matched))
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


def fields_for(item: Item) -> tuple[str, ...]:
    return TEXT_FIELDS[item.kind]


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


def run(index: NearDuplicateIndex, item: Item, lang: str, config: MinhashConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    """Near-duplicate evidence for each text field the item's kind shingles, counted in the
    documents of the field's language (`variant.language_of`); a field the variant lacks is
    absent, and an index or query failure (damage, a mismatching build, Redis down) is failed,
    never "no match".  The policy's `rules` set the containment a document must reach to be
    listed among the languages the field was found in."""
    source = index.corpus.info.name
    try:
        check_expected(index.directory, index.params, config.index.model_dump(exclude_none=True))
        mismatch = None
    except NearDupError as error:
        mismatch = str(error)
    shared = index.distinct_shingles(forms.source_texts(item, lang))
    common = CommonShingles(index.corpus, config.common.per_million_bytes, config.common.at_least)
    variant = item.variants[lang]
    wanted = set(fields_for(item))
    results = []
    for checked in forms.text_fields(item, lang):
        if checked.field in wanted:
            documents = DocumentFilter.of(index.corpus, variant.language_of(checked.field, lang), UnknownLanguage(config.unknown_language))
            asked = FieldQuery(shared, documents, (rules or {}).get(checked.field, ()), common)
            results += _checked(index, source, checked, asked, config, mismatch)
    return results
