"""Where a request's names are opened: from the registry and the filesystem (the command line,
the Python API), or from what a server already holds (a job names only what it serves)."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

from audit.corpora.base import Corpus
from audit.corpora.registry import open_corpus
from audit.executors import Executor
from audit.links.sources import LinkSource, open_links
from audit.policyfile import Policy, load_policy
from audit.readers import ColumnMap, parse_mapping
from audit.readers.columns import parse_inline
from audit.run.progress import BuildHook
from audit.run.request import AuditRequest
from audit.signals.probe import Prober, open_prober


class Opener(Protocol):
    """Opens what a request names.  `fork`: whether variants may be checked on forked
    processes (not from a server's threads)."""

    fork: bool

    def policy(self, path: Path | None) -> Policy: ...

    def mapping(self, text: str) -> ColumnMap: ...

    def corpus(self, name: str, build: BuildHook | None) -> Corpus: ...

    def links(self, name: str) -> LinkSource: ...

    def prober(self, request: AuditRequest) -> Prober | None: ...


class RegistryOpener:
    """Corpora, link sources and models by the registry's names or by path, as `audit check`
    opens them; a policy file merged over the built-in one; a mapping inline or from a file."""

    fork = True

    def __init__(self, request: AuditRequest, where: Executor) -> None:
        self.request = request
        self.where = where

    def policy(self, path: Path | None) -> Policy:
        return load_policy(path)

    def mapping(self, text: str) -> ColumnMap:
        return parse_mapping(text)

    def corpus(self, name: str, build: BuildHook | None) -> Corpus:
        request = self.request
        return open_corpus(name, request.registry, progress=build, offline=request.offline, profile=request.profile, executor=self.where, actors=request.actors)

    def links(self, name: str) -> LinkSource:
        return open_links(name, self.request.registry, offline=self.request.offline)

    def prober(self, request: AuditRequest) -> Prober | None:
        if not request.probe_model:
            return None
        return open_prober(request.probe_model, request.judge_model, request.probe_prompts, request.registry, offline=request.offline, batch_size=request.probe_batch_size,
                           reference=request.reference_model)


class ServedOpener:
    """What a server holds, by the names its jobs give: its corpora, link sources and probe
    models, the policy the job named; a mapping only inline (a client never names a server's
    file)."""

    fork = False

    def __init__(self, corpora: dict[str, Corpus], links: dict[str, LinkSource], probers: dict[str, Prober], policy: Policy) -> None:
        self.corpora, self.link_sources, self.probers, self.chosen = corpora, links, probers, policy

    def policy(self, path: Path | None) -> Policy:
        return self.chosen

    def mapping(self, text: str) -> ColumnMap:
        return parse_inline(text, "map")

    def corpus(self, name: str, build: BuildHook | None) -> Corpus:
        return self.corpora[name]

    def links(self, name: str) -> LinkSource:
        return self.link_sources[name]

    def prober(self, request: AuditRequest) -> Prober | None:
        return self.probers[request.probe_model] if request.probe_model else None
