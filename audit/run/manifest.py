"""The audit file's first line, wherever the audit ran (the CLI, a server job, the Python API)."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

from audit import __version__
from audit.auditfile import benchmark_digest
from audit.corpora.base import CorpusInfo
from audit.evidence import SignalRun
from audit.items import LoadReport
from audit.links.sources import LinkSource
from audit.policyfile import Policy
from audit.records import AuditManifest, BenchmarkRecord
from audit.run.summary import Tally
from audit.signals.probe import Prober
from audit.timestamps import utc_timestamp

LINK_KEYS = ("name", "backend", "endpoint", "path")


@dataclass(frozen=True)
class Checked:
    """What the audit checked against: the corpora, the signal runs (and why any was skipped),
    the link sources asked and the cutoff they were judged at, the probe model, and where
    variants ran when not on this machine, and the tally of the records written."""

    corpora: Sequence[CorpusInfo]
    runs: Sequence[SignalRun]
    links: Sequence[LinkSource] = ()
    cutoff: date | None = None
    prober: Prober | None = None
    executor: str | None = None
    tally: Tally = field(default_factory=Tally)


def audit_manifest(command: list[str], benchmark: LoadReport, path: Path, checked: Checked, policy: Policy, langs: list[str] | None) -> AuditManifest:
    """What was checked, against what, with which signals, under which policy, and a hash that
    says when two audits compare.  Where variants ran is recorded when not local, and is not
    part of the hash: it changes no record."""
    links = {"sources": [source.describe() for source in checked.links], "as_of": checked.cutoff.isoformat() if checked.cutoff else None} if checked.links else None
    models = checked.prober.describe() if checked.prober else None
    signals = list(dict.fromkeys(run.signal for run in checked.runs if run.ran))
    settings: dict[str, object] = {"policy": policy.settings, "corpus": [c.fingerprint for c in checked.corpora], "langs": langs, "signals": signals}
    if benchmark.mapping or benchmark.source_lang:
        settings["read"] = {"mapping": benchmark.mapping, "source_lang": benchmark.source_lang}
    if links is not None:
        settings["links"] = {"sources": [{k: v for k, v in source.items() if k in LINK_KEYS} for source in links["sources"]], "as_of": links["as_of"]}
    if models is not None:
        settings["models"] = {"probe": models["probe"]["model_id"], "judge": models["judge"]["model_id"], "prompts": models["prompts"]["digest"]}
        if "reference" in models:
            settings["models"]["reference"] = models["reference"]["model_id"]
    return AuditManifest(
        tool="corpus-audit",
        version=__version__,
        created=utc_timestamp(),
        command=command,
        benchmark=_benchmark(benchmark, path),
        corpora=[asdict(info) for info in checked.corpora],
        signals=signals,
        signal_runs=list(checked.runs),
        policy={"name": policy.name, "source": policy.source, "hash": policy.digest, "settings": policy.settings},
        config_hash=hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16],
        summary=checked.tally.summary().to_dict(),
        links=links,
        models=models,
        executor=checked.executor,
    )


def _benchmark(benchmark: LoadReport, path: Path) -> BenchmarkRecord:
    return BenchmarkRecord(
        path=str(path),
        absolute_path=str(Path(path).resolve()),
        format=benchmark.format,
        sha256=benchmark_digest(path),
        items=len(benchmark.items),
        languages=benchmark.languages,
        skipped_rows=benchmark.skipped,
        excluded_rows=benchmark.excluded,
        kinds=dict(Counter(str(item.kind) for item in benchmark.items)),
        language_codes=benchmark.language_codes,
        unused_fields=benchmark.unused_fields,
        mapping=benchmark.mapping,
        source_lang=benchmark.source_lang,
    )
