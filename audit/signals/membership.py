"""The membership signal: each text of a variant read once by the probe model, and its
membership-inference scores (`audit.probes.membership`) recorded as evidence per field and
language.  No generation, no judge: one forward pass per text, every text read in `prepare`
(through the probe cache, so a re-run or `--offline` replays the same readings)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from audit.evidence import ABSENT, OK, UNKNOWN, Evidence, Json
from audit.forms import STATEMENT
from audit.items import Item
from audit.probes.cache import CachedModel
from audit.probes.membership import TokenScores, scores
from audit.signals.membership_spec import NAME, MembershipConfig, fields_for
from audit.signals.spec import Opening, Runner, Skip

Key = tuple[str, str, str]


class Probed(Protocol):
    """The source a model signal is opened with (the probe signal's `Prober`): its model, and
    the reference model when one was named."""

    model: CachedModel
    reference: CachedModel | None


def field_text(item: Item, lang: str, name: str) -> str | None:
    """The text of a field as written (a cloze statement: the prompt with the answer in its mask)."""
    variant = item.variants[lang]
    if name == STATEMENT:
        prompt, mask = variant.question, item.mask
        if not prompt or not variant.answer or not mask or mask not in prompt:
            return None
        return prompt.replace(mask, variant.answer)
    value = variant.text(name)
    return value.strip() if value and value.strip() else None


@dataclass
class Reader:
    """The probe model reading every text of the variants `prepare` is given."""

    prober: Probed
    config: MembershipConfig
    found: dict[Key, Evidence] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.prober.model.name

    def prepare(self, items: Sequence[Item], langs: Sequence[str] | None, progress: Callable[[str, int | None], Callable[[int], None]]) -> None:
        texts: dict[Key, str] = {}
        for item in items:
            for lang in item.variants:
                if langs is None or lang in langs:
                    texts.update({(item.item_id, lang, name): text for name in fields_for(item) if (text := field_text(item, lang, name))})
        read = self._read(self.prober.model, list(texts.values()), progress)
        reference = self._read(self.prober.reference, list(texts.values()), progress) if self.prober.reference else [None] * len(texts)
        for (key, text), reading, against in zip(texts.items(), read, reference, strict=True):
            self.found[key] = self._evidence(key[2], text, reading, against)

    def _read(self, model: CachedModel, texts: list[str], progress: Callable[[str, int | None], Callable[[int], None]]) -> list[TokenScores | str]:
        return model.token_scores(texts, self.config.max_tokens, progress(f"membership: {len(texts)} texts read by {model.name}", len(texts)))

    def _evidence(self, name: str, text: str, reading: TokenScores | str, reference: TokenScores | str | None) -> Evidence:
        """The text's scores; with a reference model, also its loss under that model and the
        difference, or the reason the reference could not read it (the other scores stand)."""
        model = self.prober.model.model_id
        if isinstance(reading, str):
            return Evidence(NAME, self.source, name, status=UNKNOWN, figures={"model": model}, error=f"the text could not be read: {reading}")
        found = scores(text, reading, self.config.k, reference if isinstance(reference, TokenScores) else None)
        if found is None:
            return Evidence(NAME, self.source, name, status=ABSENT, figures={"reason": "the model predicted no token of the text (one token long)"})
        figures: dict[str, Json] = {"model": model, "tokens": reading.tokens, "k": self.config.k, **{str(score): round(value, 6) for score, value in found.items()}}
        if self.prober.reference is not None:
            figures["reference_model"] = self.prober.reference.model_id
            if isinstance(reference, TokenScores) and reference.tokens:
                figures["reference_loss"] = round(float(-reference.logprobs.mean()), 6)
            else:
                figures["reference_error"] = reference if isinstance(reference, str) else "the reference model predicted no token of the text"
        return Evidence(NAME, self.source, name, status=OK, figures=figures)

    def ask(self, item: Item, lang: str) -> list[Evidence]:
        answered = []
        for name in fields_for(item):
            found = self.found.get((item.item_id, lang, name))
            if found is None and field_text(item, lang, name) is None:
                found = Evidence(NAME, self.source, name, status=ABSENT, figures={"reason": "the variant has no such text"})
            elif found is None:
                found = Evidence(NAME, self.source, name, status=UNKNOWN, error="this variant was not read (prepare did not see it)")
            answered.append(found)
        return answered


def open_runner(prober: Probed, opening: Opening) -> Runner | Skip:
    """A runner on the probe model, given the policy's `[membership]`; its `prepare` reads every
    text before any variant is checked.  A model behind an OpenAI-compatible endpoint gives no
    probabilities of a given text, so the signal skips it."""
    if not prober.model.reads_probabilities:
        return Skip(NAME, prober.model.name, "the model's endpoint gives no per-token probabilities of a given text")
    if prober.reference is not None and not prober.reference.reads_probabilities:
        return Skip(NAME, prober.model.name, f"the reference model {prober.reference.name}'s endpoint gives no per-token probabilities of a given text")
    reader = Reader(prober, opening.config)
    return Runner(NAME, reader.source, fields_for, reader.ask, reader.prepare)
