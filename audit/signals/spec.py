"""The signal interface: what a signal is (its name, what it asks, its part of the policy file)
and what it opens for one source (a `Runner`, or a `Skip` saying why not).

This module and the `*_spec` modules beside it are all the policy, the report and the schema
need to know about signals; they import no implementation, HTTP client or model.  A signal's
code is the module its spec names (`Signal.implementation`), loaded only when a run opens it.

Writing a signal NAME takes two modules and one line:
- `NAME_spec.py`: its `config` and `rules` models (`audit.rules.Table`), `fields_for(item)`, and
  `SIGNAL = Signal(...)` naming them, what it `asks` and its implementation module;
- `NAME.py`: `open_runner(source, opening) -> Runner | Skip`, where `opening` carries its
  parameters, the policy's rules on its fields and the cutoff; the runner's `ask(item, lang)`
  returns its Evidence, and its optional `prepare(items, langs, progress)` does batched work
  once before any variant;
- its spec's entry in `audit.signals.SIGNALS`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from importlib import import_module
from typing import TYPE_CHECKING, Protocol

from audit.errors import AuditError
from audit.evidence import FAILED, Evidence, SignalRun
from audit.items import Item
from audit.rules import FieldRules, Table

if TYPE_CHECKING:
    from audit.corpora.base import Corpus
    from audit.links.sources import LinkSource
    from audit.signals.probe import Prober

    Source = Corpus | LinkSource | Prober

Progress = Callable[[str, int | None], Callable[[int], None]]
Prepare = Callable[[Sequence[Item], Sequence[str] | None, Progress], None]


class SignalError(AuditError):
    """A signal asked for that cannot run, or that no corpus supports."""


class Asks(StrEnum):
    """What a signal's sources are: corpora (`--corpus`), link sources (`--links`) or a model
    (`--probe-model`)."""

    CORPUS = "corpus"
    LINKS = "links"
    MODEL = "model"


# For a signal whose kind of source was not given at all: what the manifest records, and what
# a signal asked for by name is refused with.  A corpus signal with no corpus records nothing.
NONE_GIVEN: dict[Asks, tuple[str, str]] = {
    Asks.LINKS: ("no link source (--links)", "it asks a link source, and none is given (--links)"),
    Asks.MODEL: ("no model to probe", "it asks a model, and none is given (--probe-model)"),
}


@dataclass(frozen=True)
class Skip:
    """Why a signal cannot ask a source anything (no index of its kind beside a corpus, say)."""

    signal: str
    source: str
    reason: str

    def record(self) -> SignalRun:
        return SignalRun(self.signal, self.source, ran=False, reason=self.reason)


@dataclass(frozen=True)
class Runner:
    """One signal asking one source about a variant.  A source that fails (unreachable, damaged)
    fails only its own evidence: every field the signal reports comes back `failed`, with the
    error, and the policy reads that as `unknown`.  `prepare` is the batched work done once
    before any variant (resolving articles, asking a model every prompt)."""

    signal: str
    source: str
    fields: Callable[[Item], tuple[str, ...]]
    ask: Callable[[Item, str], list[Evidence]]
    prepare: Prepare | None = None
    # Whether it can be sent to another process of a cluster: its source re-opens there.
    portable: bool = False
    # Why a runner that runs can only fail (its source could not be opened), for the manifest.
    reason: str | None = None

    def __call__(self, item: Item, lang: str) -> list[Evidence]:
        try:
            return self.ask(item, lang)
        except Exception as error:  # any failure of one source must leave the others' evidence standing
            return self.failed(item, error)

    def failed(self, item: Item, error: Exception) -> list[Evidence]:
        """Every field the signal reports, `failed` with the error: the policy reads `unknown`."""
        message = f"{type(error).__name__}: {error}"
        return [Evidence(self.signal, self.source, name, status=FAILED, error=message) for name in self.fields(item)]

    def record(self) -> SignalRun:
        return SignalRun(self.signal, self.source, ran=True, reason=self.reason)


@dataclass(frozen=True)
class Broken:
    """The error a source raised when it was opened, raised again for each variant."""

    error: Exception

    def __call__(self, item: Item, lang: str) -> list[Evidence]:
        raise self.error


def broken(signal: str, source: str, fields: Callable[[Item], tuple[str, ...]], error: Exception) -> Runner:
    """A runner whose source could not be opened (a damaged index): every variant's evidence
    from it is `failed`, and the run goes on."""
    return Runner(signal, source, fields, Broken(error), reason=f"failed: {error}")


@dataclass(frozen=True)
class Opening:
    """What a signal is opened with besides its source: its parameters (the policy's `[NAME]`
    table), the policy's rules on its fields (so a slow source is asked only what decides
    them), and the cutoff a link source is judged at."""

    config: Table
    rules: Mapping[str, FieldRules]
    cutoff: date | None = None


class Implementation(Protocol):
    """A signal's module: it opens a runner for one source."""

    def open_runner(self, source: Source, opening: Opening) -> Runner | Skip: ...


@dataclass(frozen=True)
class Signal:
    """A signal as the policy and the command line know it.  `fields` are the fields it reports
    for an item (they depend on the item's kind); `implementation` is the module that runs it."""

    name: str
    description: str
    config: type[Table]
    rules: type[Table]
    fields: Callable[[Item], tuple[str, ...]]
    implementation: str
    asks: Asks = Asks.CORPUS
    # False for a signal whose evidence is recorded but judged into no verdict (membership
    # scores, until calibrated): the policy has no rules on it.
    decides: bool = True

    def open(self, source: Source, opening: Opening) -> Runner | Skip:
        module: Implementation = import_module(self.implementation)  # type: ignore[assignment]
        return module.open_runner(source, opening)
