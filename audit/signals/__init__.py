"""Signals: each module turns an item's language variant into Evidence against one source
(a corpus, a link graph, a model).  Signals never import each other.

`PolicyFile` is the schema of a whole policy file, assembled here from what each signal
declares (its rule figures and its parameters), so the policy loader knows no signal."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from audit.signals.ngram import NgramConfig, Rules


class PolicyFile(BaseModel):
    """A policy file after merging over the built-in one: `rules` are thresholds on the
    figures of the n-gram signal (the only signal rules apply to), `ngram` its parameters."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    rules: Rules = Field(default_factory=Rules)
    ngram: NgramConfig = Field(default_factory=NgramConfig)
