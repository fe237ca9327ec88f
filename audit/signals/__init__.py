"""Signals: each module turns an item's language variant into Evidence against one source (a
corpus, a link graph, a model).  Signals never import each other; this registry is the one place
that knows them all, so the command line, the server's jobs and the policy schema loop over it.

A signal is registered with:
- its parameters (`config`, the policy's `[NAME]` table) and the rules a policy may state on its
  figures (`rules`, the policy's `[rules.NAME]` tables), both typed models;
- `attach`, which says whether it can ask a given corpus anything (and what: the corpus itself,
  or an index beside it), or why not;
- `run`, which returns the evidence for one (item, language) from what `attach` gave, its
  parameters and the policy's rules on its fields for that source;
- the fields it reports for an item (they depend on the item's kind);
- its granularity: per variant (the n-gram signal), once per item, or in batches (the langlinks
  signal resolves every item's article in batches before any variant is checked: `prepare`);
- what it asks: a corpus (`--corpus`), a wiki snapshot (`--links`), or a model
  (`--probe-model`).  A model's evidence says what the model knows, not what its corpus holds:
  the policy judges it into a separate verdict, `knowledge` (`KNOWLEDGE_SIGNALS`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from enum import StrEnum
from functools import partial
from typing import Any

from pydantic import Field, create_model

from audit.errors import AuditError
from audit.evidence import FAILED, Evidence, SignalRun
from audit.items import Item
from audit.rules import FieldRules, Table
from audit.signals import langlinks, minhash, ngram, probe


class Granularity(StrEnum):
    VARIANT = "variant"
    ITEM = "item"
    BATCH = "batch"


class Asks(StrEnum):
    """What a signal's sources are: corpora (`--corpus`), link sources (`--links`) or a model
    (`--probe-model`)."""

    CORPUS = "corpus"
    LINKS = "links"
    MODEL = "model"


@dataclass(frozen=True)
class Skip:
    """Why a signal cannot ask a corpus anything (no index of its kind beside it, say)."""

    reason: str


@dataclass(frozen=True)
class Signal:
    name: str
    description: str
    config: type[Table]
    rules: type[Table]
    fields: Callable[[Item], tuple[str, ...]]
    granularity: Granularity
    attach: Callable[[Any], Any]
    run: Callable[..., list[Evidence]]
    asks: Asks = Asks.CORPUS


SIGNALS: dict[str, Signal] = {
    ngram.NAME: Signal(
        name=ngram.NAME,
        description="exact counts, longest matches and window coverage of each checked text and form; question-answer, subject-answer and options co-occurrence",
        config=ngram.NgramConfig,
        rules=ngram.Rules,
        fields=ngram.fields_for,
        granularity=Granularity.VARIANT,
        attach=lambda corpus: corpus,
        run=ngram.run,
    ),
    minhash.NAME: Signal(
        name=minhash.NAME,
        description="near-duplicates: containment and Jaccard of a field's shingles in one span of a document, after MinHash LSH",
        config=minhash.MinhashConfig,
        rules=minhash.Rules,
        fields=minhash.fields_for,
        granularity=Granularity.VARIANT,
        attach=lambda corpus: _skip_unsupported(minhash.index_for, minhash.Unsupported, corpus),
        run=minhash.run,
    ),
    langlinks.NAME: Signal(
        name=langlinks.NAME,
        description="whether an article on the item's subject existed in each language's Wikipedia (at the cutoff, with --as-of): langlinks dumps, the MediaWiki API, Wikidata sitelinks",
        config=langlinks.LanglinksConfig,
        rules=langlinks.Rules,
        fields=langlinks.fields_for,
        granularity=Granularity.BATCH,
        attach=lambda source: source,
        run=langlinks.run,
        asks=Asks.LINKS,
    ),
    probe.NAME: Signal(
        name=probe.NAME,
        description="what the model itself knows: a self-summary of the item's entity judged against its passage and answer, and OWL's direct, name-cloze and prefix memorisation probes, in each language",
        config=probe.ProbeConfig,
        rules=probe.Rules,
        fields=probe.fields_for,
        granularity=Granularity.BATCH,
        attach=lambda model: model,
        run=probe.run,
        asks=Asks.MODEL,
    ),
}
# Signals whose evidence says what a model knows: judged into `knowledge`, never into exposure.
KNOWLEDGE_SIGNALS = frozenset(name for name, signal in SIGNALS.items() if signal.asks is Asks.MODEL)


def _skip_unsupported(attach: Callable[[Any], Any], unsupported: type[Exception], corpus: Any) -> Any:
    try:
        return attach(corpus)
    except unsupported as reason:
        return Skip(str(reason))


def _policy_schema() -> type[Table]:
    """The schema of a whole policy file: `name`, `[rules.SIGNAL.FIELD]` for every signal, and
    every signal's `[SIGNAL]` parameters."""
    rules = create_model("Rules", __base__=Table, **{name: (s.rules, Field(default_factory=s.rules)) for name, s in SIGNALS.items()})
    return create_model(
        "PolicyFile",
        __base__=Table,
        __doc__="A policy file after merging over the built-in one.",
        name=(str, ...),
        rules=(rules, Field(default_factory=rules)),
        **{name: (s.config, Field(default_factory=s.config)) for name, s in SIGNALS.items()},
    )


PolicyFile = _policy_schema()


class SignalError(AuditError):
    """A signal asked for that cannot run, or that no corpus supports."""


@dataclass(frozen=True)
class Runner:
    """One signal asking one source about a variant.  A source that fails (unreachable, damaged)
    fails only its own evidence: every field the signal reports comes back `failed`, with the
    error, and the policy reads that as `unknown`."""

    signal: str
    source: str
    fields: Callable[[Item], tuple[str, ...]]
    ask: Callable[[Item, str], list[Evidence]]
    prepare: Callable[..., None] | None = None
    # Whether it can be sent to another process of a cluster: its source re-opens there.
    portable: bool = False

    def __call__(self, item: Item, lang: str) -> list[Evidence]:
        try:
            return self.ask(item, lang)
        except Exception as error:  # any failure of one source must leave the others' evidence standing
            return self.failed(item, error)

    def failed(self, item: Item, error: Exception) -> list[Evidence]:
        """Every field the signal reports, `failed` with the error: the policy reads `unknown`."""
        message = f"{type(error).__name__}: {error}"
        return [Evidence(self.signal, self.source, name, status=FAILED, error=message) for name in self.fields(item)]


def _raise(error: Exception, item: Item, lang: str) -> list[Evidence]:
    raise error


def parse_signals(option: str | None) -> list[str] | None:
    """`--signals a,b` as names, each a registered signal; None means every signal that can run."""
    if option is None:
        return None
    names = [part.strip() for part in option.split(",") if part.strip()]
    unknown = [name for name in names if name not in SIGNALS]
    if unknown or not names:
        raise SignalError(f"--signals: {', '.join(unknown) or 'nothing'} is not a signal; expected some of {', '.join(SIGNALS)}")
    return names


def plan(
    corpora: list[Any],
    wanted: list[str] | None,
    configs: dict[str, Any],
    rules: Mapping[str, Mapping[str, FieldRules]] | None = None,
    links: list[Any] | None = None,
    cutoff: date | None = None,
    probe_setup: probe.Prober | None = None,
) -> tuple[list[Runner], list[SignalRun]]:
    """A runner for every (signal, source) pair that can run, and a record of every pair. A
    signal asked for by name that no source supports is an error; by default it is skipped, and
    the manifest says why.  Each runner is given the policy's `rules` on its signal's fields
    for its source, so a signal whose source answers slowly can ask only what decides them.
    Corpus signals ask every corpus, link signals every link source (`links`, judged at
    `cutoff`), model signals the probe model (`probe_setup`, given the policy's `[probe]`)."""
    runners, runs = [], []
    for name in wanted or list(SIGNALS):
        signal = SIGNALS[name]
        if signal.asks is Asks.MODEL:
            if probe_setup is not None:
                prober = replace(probe_setup, config=configs[name])
                runners.append(Runner(name, prober.source, signal.fields, partial(signal.run, prober, config=configs[name]), prober.prepare))
                runs.append(SignalRun(name, prober.source, ran=True))
            else:
                runs.append(SignalRun(name, "", ran=False, reason="no model to probe"))
        elif signal.asks is Asks.LINKS:
            for source in links or []:
                checker = langlinks.LinkChecker(source, cutoff, configs[name].ask_created)
                runners.append(Runner(name, source.name, signal.fields, partial(signal.run, checker, config=configs[name]), checker.prepare))
                runs.append(SignalRun(name, source.name, ran=True))
            if not links:
                runs.append(SignalRun(name, "", ran=False, reason="no link source (--links)"))
        else:
            for corpus in corpora:
                runner, run = _corpus_runner(signal, corpus, configs[name], rules)
                runs.append(run)
                if runner is not None:
                    runners.append(runner)
        if wanted and not any(run.ran for run in runs if run.signal == name):
            if signal.asks is Asks.LINKS:
                raise SignalError(f"--signals {name}: it asks a link source, and none is given (--links)")
            if signal.asks is Asks.MODEL:
                raise SignalError(f"--signals {name}: it asks a model, and none is given (--probe-model)")
            reasons = "; ".join(f"{run.source}: {run.reason}" for run in runs if run.signal == name)
            raise SignalError(f"--signals {name}: no corpus supports it ({reasons})")
    return runners, runs


def _corpus_runner(signal: Signal, corpus: Any, config: Any, rules: Mapping[str, Mapping[str, FieldRules]] | None) -> tuple[Runner | None, SignalRun]:
    name = signal.name
    try:
        attached = signal.attach(corpus)
    except Exception as error:  # a damaged index beside a corpus fails that signal's evidence, not the run
        return Runner(name, corpus.info.name, signal.fields, partial(_raise, error)), SignalRun(name, corpus.info.name, ran=True, reason=f"failed: {error}")
    if isinstance(attached, Skip):
        return None, SignalRun(name, corpus.info.name, ran=False, reason=attached.reason)
    mine = {field: table.for_source(corpus.info.name) for field, table in (rules or {}).get(name, {}).items()}
    portable = getattr(corpus, "ships_to_workers", False)
    return Runner(name, corpus.info.name, signal.fields, partial(signal.run, attached, config=config, rules=mine), portable=portable), SignalRun(name, corpus.info.name, ran=True)


def configure(settings: dict[str, Any]) -> dict[str, Any]:
    """Every signal's parameters from a policy's validated settings (its `[NAME]` table)."""
    return {name: signal.config.model_validate(settings.get(name, {})) for name, signal in SIGNALS.items()}
