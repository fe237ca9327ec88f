"""The probe signal: does the model itself know the item's entity, or remember its passage,
in each language?  Model-level evidence, judged by the policy into a `knowledge` verdict
(`known` / `not_known` / `undetermined`) kept apart from corpus exposure.

Four fields, each a task asked of the model in the variant's language:
- `summary` (LiveCLKTBench's self-summary probe): what does the model know about the entity
  (the variant's title, else the item's)?  Its answer is judged against the variant's passage
  and gold answer by a judge model's structured verdict (`judge`: known / not_known; a reply
  that cannot be parsed leaves the evidence `unknown`, never `not_known`), with answer recall
  and chrF beside it, for calibration.  With `samples = k` (and a temperature above 0) k
  seeded samples are judged and the strict majority decides.
- `direct` (OWL's direct probing): the passage with the article's title hidden; does the
  model name the title?
- `cloze` (OWL's name cloze): the passage with a name masked (the gold answer when the passage
  holds it, else a capitalised name); does the model fill it in?
- `prefix` (OWL's prefix probing): the first half of the passage; how close is the model's
  continuation to the true second half?

Every prompt is built and asked in a `prepare` step, in batches, before any variant is checked
(a progress bar with an ETA), through the probe cache; checking a variant then reads results.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from audit.evidence import ABSENT, OK, UNKNOWN, Evidence, Json, Status
from audit.items import Item
from audit.langcodes import describe_lang
from audit.probes.cache import CachedModel
from audit.probes.generation import Decoding, Output, ProbeError, Request, chat
from audit.probes.judge import JUDGE_CHOICES, NO_SUMMARY, VERDICT_SCHEMA, JudgeReading, majority, parse_verdict, scored_verdict
from audit.probes.models import open_model
from audit.probes.prompts import Task, Templates, load_templates
from audit.probes.scoring import answer_recall, best_match, chrf, cloze_entity, mask, probe_passage, similarity, split_passage
from audit.rules import Rule
from audit.signals.probe_spec import CLOZE, DIRECT, FIELDS, NAME, PREFIX, SUMMARY, ProbeConfig, Rules, fields_for
from audit.signals.spec import Opening, Runner

__all__ = ["CLOZE", "DIRECT", "FIELDS", "NAME", "PREFIX", "SUMMARY", "ProbeConfig", "Prober", "Rules", "fields_for", "open_prober", "open_runner", "run"]

HIDDEN_TITLE = "___"
# The sample number of a scoring judge's baseline request (no summary) among its judged samples.
BASELINE = -1


@dataclass(frozen=True)
class Asked:
    """One task's prompts for one variant, with what its answers are scored against; or why the
    variant cannot be asked it (`absent`)."""

    task: str
    requests: tuple[Request, ...] = ()
    targets: tuple[str, ...] = ()
    reference: str | None = None
    details: dict[str, Json] = field(default_factory=dict)
    absent: str | None = None


def entity_names(item: Item, lang: str) -> list[str]:
    """The entity's names to ask about and to hide: the variant's own title, then the item's
    (its source-language title), without repeats."""
    variant = item.variants[lang]
    source = item.variants.get(item.source_lang)
    names = [variant.title, item.meta.get("title") if isinstance(item.meta.get("title"), str) else None, source.title if source else None]
    return list(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def _decoding(config: ProbeConfig, task: str, sample: int = 0) -> Decoding:
    max_tokens = getattr(config.max_tokens, task)
    return Decoding(temperature=config.temperature, max_tokens=max_tokens, top_p=config.top_p, seed=config.seed + sample)


def plan_variant(item: Item, lang: str, templates: Templates, config: ProbeConfig) -> dict[str, Asked]:
    """Every task's prompts for one variant (`absent` where the variant lacks what it needs)."""
    variant = item.variants[lang]
    language = describe_lang(lang)
    names = entity_names(item, lang)
    passage = variant.context.strip() if variant.context and variant.context.strip() else None
    asked: dict[str, Asked] = {}
    for task in config.tasks:
        if task == SUMMARY:
            asked[task] = _summary(names, language, lang, variant.answer, passage, templates, config)
        elif passage is None:
            asked[task] = Asked(task, absent="the variant has no passage")
        elif task == DIRECT:
            asked[task] = _direct(names, passage, variant.title, lang, language, templates, config)
        elif task == CLOZE:
            asked[task] = _cloze(variant.answer, variant.aliases, passage, lang, language, templates, config)
        else:
            asked[task] = _prefix(passage, lang, language, templates, config)
    return asked


def _summary(names: list[str], language: str, lang: str, answer: str | None, passage: str | None, templates: Templates, config: ProbeConfig) -> Asked:
    if not names:
        return Asked(SUMMARY, absent="the item names no entity (no title)")
    prompt = templates.for_lang(Task.SUMMARY, lang).render(entity=names[0], language=language)
    requests = tuple(chat(prompt, decoding=_decoding(config, SUMMARY, sample)) for sample in range(config.samples))
    # The judge's reference is cut like the other tasks' passages: a whole article would make every judge prompt slow to read.
    reference = probe_passage(passage, config.passage_chars) if passage else None
    return Asked(SUMMARY, requests, targets=(answer,) if answer else (), reference=reference, details={"entity": names[0]})


def _direct(names: list[str], passage: str, own_title: str | None, lang: str, language: str, templates: Templates, config: ProbeConfig) -> Asked:
    shown = probe_passage(passage, config.passage_chars)
    present = [name for name in sorted(names, key=len, reverse=True) if name.casefold() in shown.casefold()]
    if not own_title and not present:
        return Asked(DIRECT, absent="the article's title in this language is unknown and no known title occurs in the passage, so it can be neither hidden nor matched")
    for name in present:
        shown = mask(shown, name, HIDDEN_TITLE)
    prompt = templates.for_lang(Task.DIRECT, lang).render(passage=shown, language=language)
    return Asked(DIRECT, (chat(prompt, decoding=_decoding(config, DIRECT)),), targets=tuple(names), details={"hidden": present})


def _cloze(answer: str | None, aliases: Sequence[str], passage: str, lang: str, language: str, templates: Templates, config: ProbeConfig) -> Asked:
    shown = probe_passage(passage, config.passage_chars)
    forms = [form for form in (answer, *aliases) if form]
    entity = cloze_entity(shown, forms, lang)
    if entity is None:
        return Asked(CLOZE, absent="no name to mask in the passage (neither the answer nor a capitalised name)")
    prompt = templates.for_lang(Task.CLOZE, lang).render(masked_passage=mask(shown, entity), language=language)
    targets = tuple(forms) if entity in forms else (entity,)
    return Asked(CLOZE, (chat(prompt, decoding=_decoding(config, CLOZE)),), targets=targets, details={"masked": entity})


def _prefix(passage: str, lang: str, language: str, templates: Templates, config: ProbeConfig) -> Asked:
    halves = split_passage(passage, config.passage_chars)
    if halves is None:
        return Asked(PREFIX, absent="the passage is too short to split")
    prefix, suffix = halves
    prompt = templates.for_lang(Task.PREFIX, lang).render(prefix=prefix, language=language)
    return Asked(PREFIX, (chat(prompt, decoding=_decoding(config, PREFIX)),), reference=suffix)


@dataclass
class Prober:
    """The probe model, its judge, the prompt templates and every variant's evidence, filled in
    by `prepare`."""

    model: CachedModel
    judge: CachedModel
    templates: Templates
    prompts_file: Path | None = None
    config: ProbeConfig = field(default_factory=ProbeConfig)
    # A second model the membership signal reads each text with, for its reference score.
    reference: CachedModel | None = None
    evidence: dict[tuple[str, str], list[Evidence]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.model.name

    def describe(self) -> dict[str, Json]:
        """For the audit manifest: the models (the reference model's when there is one) and the
        prompt templates."""
        prompts = {"file": str(self.prompts_file) if self.prompts_file else None, "digest": self.templates.digest}
        reference = {"reference": self.reference.describe()} if self.reference is not None else {}
        return {"probe": self.model.describe(), "judge": self.judge.describe(), **reference, "prompts": prompts}

    def prepare(self, items: Sequence[Item], langs: Sequence[str] | None, progress: Callable[[str, int | None], Callable[[int], None]]) -> None:
        """Ask every prompt (batched, through the cache), then the judge about every summary."""
        plans = {(item.item_id, lang): plan_variant(item, lang, self.templates, self.config)
                 for item in items for lang in item.variants if langs is None or lang in langs}
        requests = [request for asked in plans.values() for one in asked.values() for request in one.requests]
        outputs = iter(self.model.generate(requests, progress(f"probe: {len(requests)} prompts to {self.model.name}", len(requests))))
        answered = {key: {task: [next(outputs) for _ in one.requests] for task, one in asked.items()} for key, asked in plans.items()}
        judging = self._judge_requests(plans, answered) if self.config.judge else {}
        flat = [request for pairs in judging.values() for _, request in pairs]
        verdicts = iter(self.judge.generate(flat, progress(f"probe: {len(flat)} answers to judge with {self.judge.name}", len(flat))) if flat else [])
        judged = {key: [(sample, request, next(verdicts)) for sample, request in pairs] for key, pairs in judging.items()}
        for key, asked in plans.items():
            self.evidence[key] = [self._evidence(one, answered[key][task], judged.get(key, [])) for task, one in asked.items()]

    def _judge_requests(self, plans: dict[tuple[str, str], dict[str, Asked]], answered: dict[tuple[str, str], dict[str, list[Output]]]) -> dict[tuple[str, str], list[tuple[int, Request]]]:
        """A judge prompt for every summary sample the model answered, and for a scoring judge
        the same prompt without a summary, its baseline (see `audit.probes.judge`)."""
        judging = {}
        for key, asked in plans.items():
            one = asked.get(SUMMARY)
            if one is None or one.absent:
                continue
            pairs = [(sample, self._judge_request(one, key[1], output.text)) for sample, output in enumerate(answered[key][SUMMARY]) if output.ok and output.text is not None]
            scoring = self.judge.reads_probabilities and pairs
            judging[key] = pairs + ([(BASELINE, self._judge_request(one, key[1], NO_SUMMARY))] if scoring else [])
        return judging

    def _judge_request(self, one: Asked, lang: str, summary: str) -> Request:
        prompt = self.templates.for_lang(Task.JUDGE, lang).render(entity=one.details["entity"], summary=summary, reference=one.reference or "(none)",
                                                                   answer=one.targets[0] if one.targets else "(none)", language=describe_lang(lang))
        if self.judge.reads_probabilities:
            return chat(prompt, decoding=Decoding(max_tokens=self.config.max_tokens.judge), choices=JUDGE_CHOICES)
        return chat(prompt, decoding=Decoding(max_tokens=self.config.max_tokens.judge), schema=VERDICT_SCHEMA if self.judge.follows_schemas else "")

    def _record(self, task: str, status: Status, figures: dict[str, Json], provenance: list[dict[str, Json]], error: str | None = None) -> Evidence:
        return Evidence(NAME, self.source, task, status=status, figures={"model": self.model.model_id, **figures}, provenance=provenance, error=error)

    def _evidence(self, asked: Asked, outputs: list[Output], judged: list[tuple[int, Request, Output]]) -> Evidence:
        if asked.absent:
            return Evidence(NAME, self.source, asked.task, status=ABSENT, figures={"reason": asked.absent})
        provenance = [_shown(request, output) for request, output in zip(asked.requests, outputs, strict=True)]
        failed = [output.error for output in outputs if not output.ok]
        if failed:
            return self._record(asked.task, UNKNOWN, dict(asked.details), provenance, error=f"the model gave no answer: {failed[0]}")
        texts = [output.text or "" for output in outputs]
        if asked.task == SUMMARY:
            return self._summary(asked, texts, provenance, judged)
        if asked.task == PREFIX:
            continuation = texts[0].strip()
            reference = asked.reference or ""
            # Cut to the reference's length: a continuation that runs on past it is not less of a copy.
            continuation = continuation[: len(reference)]
            figures = {"similarity": round(similarity(continuation, reference), 4), "chrf": round(chrf(continuation, reference), 4), "reference": reference}
            return self._record(PREFIX, OK, figures, provenance)
        match = best_match(texts[0], asked.targets, self.config.title_threshold if asked.task == DIRECT else self.config.name_threshold)
        figures = {**asked.details, "matched": match.matched, "similarity": round(match.similarity, 4), "expected": match.target}
        return self._record(asked.task, OK, figures, provenance)

    def _summary(self, asked: Asked, texts: list[str], provenance: list[dict[str, Json]], judged: list[tuple[int, Request, Output]]) -> Evidence:
        figures: dict[str, Json] = {**asked.details, "samples": len(texts)}
        if asked.targets:
            figures["answer_recall"] = round(sum(answer_recall(asked.targets, text) for text in texts) / len(texts), 4)
        if asked.reference:
            figures["chrf"] = round(sum(chrf(text, asked.reference) for text in texts) / len(texts), 4)
        if not self.config.judge:
            return self._record(SUMMARY, OK, figures, provenance)
        readings: list[JudgeReading] = []
        unanswered = []
        baseline = next((output for sample, _, output in judged if sample == BASELINE), None)
        for sample, request, output in judged:
            if sample == BASELINE:
                continue
            reading = _reading(output, baseline)
            provenance[sample] |= {"judge": _shown(request, output) | (_read(reading, baseline) if reading else {})}
            if reading is None:
                unanswered.append(output.error or (baseline.error if baseline else None))
            else:
                readings.append(reading)
        if unanswered:
            return self._record(SUMMARY, UNKNOWN, figures, provenance, error=f"the judge gave no answer: {unanswered[0]}")
        chosen, votes = majority(readings)
        figures |= {"judge": chosen.value if chosen else None, "judge_votes": votes}
        chances = [reading.p_known for reading in readings if reading.p_known is not None]
        if chances:
            figures["judge_p_known"] = round(sum(chances) / len(chances), 4)
        if chosen is None:
            errors = [r.parse_error for r in readings if r.parse_error]
            why = f"the judge's reply could not be parsed: {errors[0]}" if errors and len(readings) == 1 else f"no strict majority of the judge's verdicts ({votes})"
            return self._record(SUMMARY, UNKNOWN, figures, provenance, error=why)
        return self._record(SUMMARY, OK, figures, provenance)


def open_prober(model: str, judge: str | None = None, prompts: Path | None = None, registry: Path | None = None, *, offline: bool = False, batch_size: int | None = None,
                reference: str | None = None) -> Prober:
    """The probe model, its judge (the probe model itself unless another is named), the
    membership signal's reference model when one is named, and the templates, checked before
    any item is read by a model."""
    probed = open_model(model, registry, offline=offline, batch_size=batch_size)
    judging = probed if judge in (None, model) else open_model(judge, registry, offline=offline, batch_size=batch_size)
    if reference == model:
        raise ProbeError(f"--reference-model {reference}: is the probe model itself; a reference is a second model, whose loss the probe model's is compared with")
    referring = open_model(reference, registry, offline=offline, batch_size=batch_size) if reference else None
    return Prober(probed, judging, load_templates(prompts), prompts, reference=referring)


def _reading(output: Output, baseline: Output | None) -> JudgeReading | None:
    """The judge's verdict on one sample: scored against the baseline, or parsed from its reply;
    None without an answer (or without the baseline's scores)."""
    if not output.ok or output.text is None:
        return None
    if output.logprobs is None:
        return parse_verdict(output.text)
    if baseline is None or baseline.logprobs is None:
        return None
    return scored_verdict(output.logprobs, baseline.logprobs)


def _read(reading: JudgeReading, baseline: Output | None) -> dict[str, Json]:
    shown: dict[str, Json] = {"verdict": reading.verdict, "parse_error": reading.parse_error}
    if reading.p_known is not None and baseline is not None and baseline.logprobs is not None:
        shown |= {"p_known": round(reading.p_known, 6), "baseline_logprobs": [round(value, 6) for value in baseline.logprobs], "baseline_cached": baseline.cached}
    return shown


def _shown(request: Request, output: Output) -> dict[str, Json]:
    """A prompt and its raw answer, as the audit file keeps them."""
    shown: dict[str, Json] = {"prompt": request.messages[-1].content, "decoding": request.to_dict()["decoding"], "output": output.text, "cached": output.cached}
    if output.error:
        shown["error"] = output.error
    if output.finish_reason:
        shown["finish_reason"] = output.finish_reason
    if output.logprobs is not None:
        shown["choices"] = list(request.choices)
        shown["logprobs"] = [round(value, 6) for value in output.logprobs]
    if request.schema:
        shown["schema"] = request.to_dict()["schema"]
    return shown


def run(prober: Prober, item: Item, lang: str, config: ProbeConfig, rules: Mapping[str, Sequence[Rule]] | None = None) -> list[Evidence]:
    found = prober.evidence.get((item.item_id, lang))
    if found is None:
        return [Evidence(NAME, prober.source, task, status=UNKNOWN, error="this variant was not probed (prepare did not see it)") for task in prober.config.tasks]
    return list(found)


def open_runner(prober: Prober, opening: Opening) -> Runner:
    """A runner on the probe model, given the policy's `[probe]`; its `prepare` asks every
    prompt in batches before any variant is checked."""
    configured = replace(prober, config=opening.config)
    return Runner(NAME, configured.source, fields_for, partial(run, configured, config=opening.config), configured.prepare)
