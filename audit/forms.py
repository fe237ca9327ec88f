"""What of a language variant is checked against a corpus, by the item's kind.

An open question is checked as it is written.  A cloze prompt is not: its mask never occurs in
a corpus, so it is checked as the statement it stands for (each answer and alias in the mask)
and as the prompt around the mask.  A multiple-choice question is checked with its correct
option and with each distractor.  Every text is a `Form` of a field, labelled so a record can
say which form matched; signals pick the fields they can measure and never see a mask.

Pairs are checked apart from texts: two strings near each other in one document (the question
and the answer, the subject and the answer, all the options together).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from audit.items import Item, ItemKind, Variant
from audit.text import normalize

T = TypeVar("T")

QUESTION, ANSWER, CONTEXT = "question", "answer", "context"
STATEMENT, PROMPT = "statement", "prompt"
QUESTION_CORRECT, QUESTION_DISTRACTOR = "question+correct", "question+distractor"
QUESTION_ANSWER, SUBJECT_ANSWER, OPTIONS = "question+answer", "subject+answer", "options"

TEXT_FIELDS: dict[ItemKind, tuple[str, ...]] = {
    ItemKind.OPEN: (QUESTION, ANSWER, CONTEXT),
    ItemKind.CLOZE: (STATEMENT, PROMPT, ANSWER, CONTEXT),
    ItemKind.MULTIPLE_CHOICE: (QUESTION, QUESTION_CORRECT, QUESTION_DISTRACTOR, ANSWER, CONTEXT),
}
PAIR_FIELD: dict[ItemKind, str] = {
    ItemKind.OPEN: QUESTION_ANSWER,
    ItemKind.CLOZE: SUBJECT_ANSWER,
    ItemKind.MULTIPLE_CHOICE: OPTIONS,
}
# A tokenised template's space before a full stop, comma or closing bracket (`born in [Y] .`),
# which no corpus writes.
_SPACED_PUNCTUATION = re.compile(r"\s+([.,)])(?=\s|$)")
# Fields checked in more than one form: their evidence names the form and carries its text.
FORM_FIELDS = frozenset({STATEMENT, PROMPT, QUESTION_CORRECT, QUESTION_DISTRACTOR})


@dataclass(frozen=True)
class Form:
    """One text checked for a field: `label` says which (`answer`, `alias 2`, `option 3`,
    `before mask`), `text` is normalised."""

    label: str
    text: str


@dataclass(frozen=True)
class Checked:
    """A field of a variant and its forms; no forms means the variant has no such text."""

    field: str
    forms: tuple[Form, ...]


def _form(label: str, raw: str | None) -> tuple[Form, ...]:
    text = normalize(raw) if raw else ""
    return (Form(label, text),) if text else ()


def _named(label: str, name: str | None, aliases: tuple[str, ...], alias_label: str) -> tuple[Form, ...]:
    """A name and each alias, once each, in the order the benchmark gives them."""
    seen: dict[str, Form] = {}
    for form_label, raw in ((label, name), *((f"{alias_label} {n}", a) for n, a in enumerate(aliases, 1))):
        for form in _form(form_label, raw):
            seen.setdefault(form.text, form)
    return tuple(seen.values())


def answers(variant: Variant) -> tuple[Form, ...]:
    return _named("answer", variant.answer, variant.aliases, "alias")


def subjects(variant: Variant) -> tuple[Form, ...]:
    return _named("subject", variant.subject, variant.subject_aliases, "subject alias")


def as_written(text: str) -> str:
    """Normalised, without the spaces a tokenised template leaves before punctuation."""
    return _SPACED_PUNCTUATION.sub(r"\1", normalize(text))


def statements(prompt: str | None, mask: str | None, fillers: tuple[Form, ...]) -> tuple[Form, ...]:
    """The cloze prompt with each filler in its mask: the fact as a corpus would state it."""
    if not prompt or not mask or mask not in prompt:
        return ()
    return tuple(Form(filler.label, as_written(prompt.replace(mask, filler.text))) for filler in fillers)


def around_mask(prompt: str | None, mask: str | None) -> tuple[Form, ...]:
    """The prompt's text either side of the mask, each piece with a letter or digit in it."""
    if not prompt or not mask or mask not in prompt:
        return ()
    pieces = [as_written(piece) for piece in prompt.split(mask)]
    labels = ("before mask", "after mask") if len(pieces) == 2 else tuple(f"piece {n}" for n in range(1, len(pieces) + 1))
    return tuple(Form(label, piece) for label, piece in zip(labels, pieces, strict=True) if any(c.isalnum() for c in piece))


def with_options(question: str | None, variant: Variant) -> tuple[tuple[Form, ...], tuple[Form, ...]]:
    """The question followed by the correct option, and by each other option (distractor)."""
    text = normalize(question) if question else ""
    if not text:
        return (), ()
    correct = normalize(variant.answer) if variant.answer else None
    right, wrong = [], []
    for number, option in enumerate(variant.options, 1):
        option_text = normalize(option)
        form = Form(f"option {number}", f"{text} {option_text}")
        (right if option_text == correct else wrong).append(form)
    return tuple(right[:1]), tuple(wrong)


class PerVariant(Generic[T]):
    """The last answers of a function of (item, language), kept by the item's identity (and
    the item with them, so its identity is not reused while kept): every signal asks for the
    same variant's forms, and each target variant for its source's."""

    def __init__(self, compute: Callable[[Item, str], T], size: int = 64) -> None:
        self.compute, self.size = compute, size
        self.kept: dict[tuple[int, str], tuple[Item, T]] = {}

    def __call__(self, item: Item, lang: str) -> T:
        found = self.kept.get((id(item), lang))
        if found is not None and found[0] is item:
            return found[1]
        value = self.compute(item, lang)
        if len(self.kept) >= self.size:
            self.kept.clear()
        self.kept[(id(item), lang)] = (item, value)
        return value


def _text_fields(item: Item, lang: str) -> tuple[Checked, ...]:
    """Every text field the item's kind checks, in a fixed order, with its forms."""
    variant = item.variants[lang]
    if item.kind is ItemKind.CLOZE:
        found = {STATEMENT: statements(variant.question, item.mask, answers(variant)), PROMPT: around_mask(variant.question, item.mask)}
    elif item.kind is ItemKind.MULTIPLE_CHOICE:
        correct, distractors = with_options(variant.question, variant)
        found = {QUESTION: _form(QUESTION, variant.question), QUESTION_CORRECT: correct, QUESTION_DISTRACTOR: distractors}
    else:
        found = {QUESTION: _form(QUESTION, variant.question)}
    found[ANSWER] = _form(ANSWER, variant.answer)
    found[CONTEXT] = _form(CONTEXT, variant.context)
    return tuple(Checked(name, found[name]) for name in TEXT_FIELDS[item.kind])


text_fields = PerVariant(_text_fields)


def option_forms(variant: Variant) -> tuple[Form, ...]:
    return tuple(form for number, option in enumerate(variant.options, 1) for form in _form(f"option {number}", option))


def _source_texts(item: Item, lang: str) -> tuple[str, ...]:
    """The source-language text a target variant is compared against (none for the source
    itself): its fields and every form checked of it (a cloze's filled statements, not its mask)."""
    source = item.variants.get(item.source_lang)
    if lang == item.source_lang or source is None:
        return ()
    texts = [normalize(t) for t in (source.question, source.answer, source.context, source.title, source.subject) if t]
    texts += [form.text for checked in text_fields(item, item.source_lang) for form in checked.forms]
    texts += [form.text for form in (*answers(source), *subjects(source), *option_forms(source))]
    return tuple(dict.fromkeys(t for t in texts if t))


source_texts = PerVariant(_source_texts)
