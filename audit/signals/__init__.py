"""Signals: each turns an item's language variant into Evidence against one source (a corpus, a
link graph, a model).  This registry is the one place that knows them all, so the command line,
the server's jobs and the policy schema loop over it; it holds their specs only
(`audit.signals.spec`, one `*_spec` module per signal), never their code, so the policy and the
report import no HTTP client or model.  Signals never import each other.

A signal is registered with:
- its parameters (`config`, the policy's `[NAME]` table) and the rules a policy may state on its
  figures (`rules`, the policy's `[rules.NAME]` tables), both typed models;
- the fields it reports for an item (they depend on the item's kind);
- what it asks: a corpus (`--corpus`), a wiki snapshot (`--links`), or a model
  (`--probe-model`).  A model's evidence says what the model knows, not what its corpus holds:
  the policy judges it into a separate verdict, `knowledge` (`KNOWLEDGE_SIGNALS`), or, for a
  signal that `decides` nothing (membership scores), into no verdict at all;
- its implementation, which opens a runner for one source, or says why it skips it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING

from pydantic import Field, create_model

from audit.evidence import Json, SignalRun
from audit.rules import FieldRules, Table
from audit.signals import langlinks_spec, membership_spec, minhash_spec, ngram_spec, probe_spec
from audit.signals.spec import NONE_GIVEN, Asks, Opening, Runner, Signal, SignalError

if TYPE_CHECKING:
    from audit.corpora.base import Corpus
    from audit.links.sources import LinkSource
    from audit.signals.probe import Prober

SIGNALS: dict[str, Signal] = {spec.SIGNAL.name: spec.SIGNAL for spec in (ngram_spec, minhash_spec, langlinks_spec, probe_spec, membership_spec)}
# Signals that ask a model: their evidence is about the model, never judged into exposure.
MODEL_SIGNALS = frozenset(name for name, signal in SIGNALS.items() if signal.asks is Asks.MODEL)
# The model signals whose evidence says what the model knows: judged into `knowledge`.
KNOWLEDGE_SIGNALS = frozenset(name for name in MODEL_SIGNALS if SIGNALS[name].decides)


def _policy_schema() -> type[Table]:
    """The schema of a whole policy file: `name`, `[rules.SIGNAL.FIELD]` for every signal that
    decides a verdict, and every signal's `[SIGNAL]` parameters."""
    rules = create_model("Rules", __base__=Table, **{name: (s.rules, Field(default_factory=s.rules)) for name, s in SIGNALS.items() if s.decides})
    return create_model(
        "PolicyFile",
        __base__=Table,
        __doc__="A policy file after merging over the built-in one.",
        name=(str, ...),
        rules=(rules, Field(default_factory=rules)),
        **{name: (s.config, Field(default_factory=s.config)) for name, s in SIGNALS.items()},
    )


PolicyFile = _policy_schema()


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
    corpora: Sequence[Corpus],
    wanted: Sequence[str] | None,
    configs: Mapping[str, Table],
    rules: Mapping[str, Mapping[str, FieldRules]] | None = None,
    links: Sequence[LinkSource] | None = None,
    cutoff: date | None = None,
    probe_setup: Prober | None = None,
) -> tuple[list[Runner], list[SignalRun]]:
    """A runner for every (signal, source) pair that can run, and a record of every pair. A
    signal asked for by name that no source supports is an error; by default it is skipped, and
    the manifest says why.  Each signal is opened with its parameters (`configs`) and the
    policy's `rules` on its fields; corpus signals ask every corpus, link signals every link
    source (`links`, judged at `cutoff`), model signals the probe model (`probe_setup`)."""
    given = {Asks.CORPUS: list(corpora), Asks.LINKS: list(links or []), Asks.MODEL: [probe_setup] if probe_setup is not None else []}
    runners, runs = [], []
    for name in wanted or list(SIGNALS):
        signal = SIGNALS[name]
        opening = Opening(configs[name], (rules or {}).get(name, {}), cutoff)
        mine = []
        for source in given[signal.asks]:
            opened = signal.open(source, opening)
            if isinstance(opened, Runner):
                runners.append(opened)
            mine.append(opened.record())
        if not given[signal.asks] and signal.asks in NONE_GIVEN:
            mine.append(SignalRun(name, "", ran=False, reason=NONE_GIVEN[signal.asks][0]))
        runs += mine
        if wanted and not any(run.ran for run in mine):
            raise SignalError(f"--signals {name}: {_refusal(signal, mine)}")
    return runners, runs


def _refusal(signal: Signal, runs: list[SignalRun]) -> str:
    """Why a signal asked for by name cannot run: its kind of source was not given, or no corpus
    supports it (each corpus's reason)."""
    if signal.asks in NONE_GIVEN:
        return NONE_GIVEN[signal.asks][1]
    return f"no corpus supports it ({'; '.join(f'{run.source}: {run.reason}' for run in runs)})"


def configure(settings: Mapping[str, Json]) -> dict[str, Table]:
    """Every signal's parameters from a policy's validated settings (its `[NAME]` table)."""
    return {name: signal.config.model_validate(settings.get(name, {})) for name, signal in SIGNALS.items()}


__all__ = ["KNOWLEDGE_SIGNALS", "MODEL_SIGNALS", "SIGNALS", "Asks", "PolicyFile", "Runner", "Signal", "SignalError", "configure", "parse_signals", "plan"]
