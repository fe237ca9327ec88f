"""The near-duplicate signal: how much of each text field of a language variant one window of
the corpus holds, after light edits, reordering or partial copying that exact n-gram matching
misses, from the corpus's near-duplicate index (`audit.neardup`).

For each field the figures are exact, computed from the corpus text of the best candidates:
`containment` (the share of the field's shingles found in one span of the field's length) and
`jaccard` (the two shingle sets' overlap over their union), with the sketch's estimates beside
them and the documents as provenance.  Shingles that the variant shares with its
source-language variant (names, titles, numbers) are left out of both: they say nothing about
this language.

The signal declares its part of the policy file: `MinhashConfig` is the `[minhash]` table (its
query-time parameters, and the build parameters the index must have if the policy names them),
`Rules` the fields and figures `[rules.minhash]` may name.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from audit import forms
from audit.corpora.local import LocalIndex
from audit.evidence import ABSENT, FAILED, Evidence
from audit.forms import Checked
from audit.items import Item, ItemKind
from audit.neardup import NEARDUP_DIR, NearDupError, NearDuplicateIndex, NearDupParams, QueryResult, ShingleSizes, check_expected
from audit.rules import Count, Fraction, Rule, Table, threshold
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


class MinhashConfig(Table):
    """The signal's parameters (the policy's `[minhash]` table)."""

    candidates: int = Field(50, ge=1)
    provenance_docs: int = Field(3, ge=1)
    snippet_chars: int = Field(80, ge=0)
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


def _figures(text: str, result: QueryResult) -> dict[str, Any]:
    best = result.best
    return {
        "containment": best.containment if best else 0.0,
        "jaccard": best.jaccard if best else 0.0,
        "estimated_containment": best.estimated_containment if best else 0.0,
        "estimated_jaccard": best.estimated_jaccard if best else 0.0,
        "script": dominant_script(text),
        "shingles": result.shingles,
        "shingles_shared_with_source": result.shared_with_source,
        "chunks": result.chunks,
        "candidates": result.candidates,
        "verified": result.verified,
        "exhaustive": result.verified == result.candidates,
        "documents": len(result.matches),
    }


def field_evidence(index: NearDuplicateIndex, source: str, name: str, raw: str, shared: np.ndarray, config: MinhashConfig) -> Evidence:
    text = normalize(raw)
    result = index.query(text, exclude=shared, candidates=config.candidates, limit=config.provenance_docs)
    evidence = Evidence(signal=NAME, source=source, field=name, figures=_figures(text, result))
    for match in result.matches:
        hit = index.hit(match, config.snippet_chars)
        evidence.provenance.append(
            {
                "document": match.document,
                "metadata": hit.metadata,
                "offset": match.offset,
                "length": match.length,
                "containment": match.containment,
                "jaccard": match.jaccard,
                "estimated_jaccard": match.estimated_jaccard,
                "snippet": hit.snippet,
                "snippet_match": [hit.snippet_match_start, hit.snippet_match_end],
            }
        )
    return evidence


def fields_for(item: Item) -> tuple[str, ...]:
    return TEXT_FIELDS[item.kind]


def _checked(index: NearDuplicateIndex, source: str, checked: Checked, shared: np.ndarray, config: MinhashConfig, mismatch: str | None) -> list[Evidence]:
    if not checked.forms:
        return [Evidence(signal=NAME, source=source, field=checked.field, status=ABSENT)]
    if mismatch is not None:
        return [Evidence(signal=NAME, source=source, field=checked.field, status=FAILED, error=mismatch)]
    results = []
    for form in checked.forms:
        try:
            evidence = field_evidence(index, source, checked.field, form.text, shared, config)
        except (NearDupError, OSError, ValueError) as error:
            evidence = Evidence(signal=NAME, source=source, field=checked.field, status=FAILED, error=str(error))
        results.append(evidence)
    return results


def run(index: NearDuplicateIndex, item: Item, lang: str, config: MinhashConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    """Near-duplicate evidence for each text field the item's kind shingles; a field the variant lacks is absent, and an index or query failure (damage, a
    mismatching build, Redis down) is failed, never "no match".  The index answers every
    figure at once, so the policy's `rules` change nothing it asks."""
    source = index.corpus.info.name
    try:
        check_expected(index.directory, index.params, config.index.model_dump(exclude_none=True))
        mismatch = None
    except NearDupError as error:
        mismatch = str(error)
    shared = index.distinct_shingles(forms.source_texts(item, lang))
    wanted = set(fields_for(item))
    results = []
    for checked in forms.text_fields(item, lang):
        if checked.field in wanted:
            results += _checked(index, source, checked, shared, config, mismatch)
    return results
