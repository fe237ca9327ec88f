"""Write a report directory: report.json, report.md, a self-contained report.html and one
provenance page per item under items/.  Everything is written beside the target directory
and renamed into place, so a report directory is always complete; an existing directory is
replaced only when it is a report this tool wrote (see `audit.outputs`)."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from audit.auditfile import AuditFile
from audit.children import WorkerPool, frozen_for_fork
from audit.items import Item
from audit.outputs import commit_directory, discard_staging, staging_directory
from audit.records import Json, JsonObject
from audit.report import inert, minhashview, ngramview
from audit.report.build import ReadAudit, read_records, report_data
from audit.report.checks import checks_html
from audit.report.itemrows import dump
from audit.report.languageview import language_sections
from audit.report.pages import ItemsById, inherited, pages_of, write_pages

DEFAULT_EVIDENCE = "evidence/_default.html.j2"


_DICT_ATTRIBUTES = frozenset(dir(dict))


class _ReportEnvironment(Environment):
    """Jinja's environment, reading a plain dict's keys first: Jinja tries the attribute first
    and a dict's key only after an AttributeError, which was a sixth of a large report's time.
    A dict has no attributes but its class's, so every name but those reads the same value."""

    def getattr(self, obj: object, attribute: str) -> object:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def _environment() -> Environment:
    environment = _ReportEnvironment(
        loader=PackageLoader("audit.report", "templates"),
        # The templates ship with the package: no page should stat them again.
        auto_reload=False,
        # Every template escapes, but the Markdown one, whose input passes the `md` filters.
        autoescape=select_autoescape(enabled_extensions=("html.j2",), disabled_extensions=("md.j2",), default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["pct"] = lambda v: "–" if v is None else f"{100 * v:.1f}%"
    environment.filters["num"] = lambda v, d=3: "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
    environment.filters["ci"] = lambda c: "–" if not c else f"[{c[0]:.3f}, {c[1]:.3f}]"
    environment.filters["figure"] = _figure
    environment.filters["flat"] = _flat
    environment.filters["checks"] = checks_html
    environment.filters["web_url"] = inert.web_url
    environment.filters["page_href"] = inert.page_href
    environment.filters["md"] = inert.markdown_text
    environment.filters["md_code"] = inert.markdown_code
    environment.globals["md_link"] = inert.markdown_link
    environment.globals["md_page"] = inert.markdown_page
    environment.globals["content_policy"] = inert.POLICY
    environment.globals["evidence_view"] = _evidence_views(environment)
    environment.globals["language_sections"] = language_sections
    return environment


# Views written in Python, for the evidence a large page shows most of (`ngramview`, `minhashview`).
PYTHON_VIEWS: dict[str, Callable[[JsonObject], Markup]] = {"ngram": ngramview.show, "minhash": minhashview.show}


def _evidence_views(environment: Environment) -> Callable[[str], Callable[[JsonObject], Markup]]:
    """A signal's evidence is shown by the `show(evidence)` macro of its own template,
    `evidence/SIGNAL.html.j2`, when it brings one, else of the default: adding a signal's view
    is adding that one file.  A macro, not an include: an include copies the page's whole
    context for each piece of evidence, which was a tenth of a large report's time.  The
    n-gram and near-duplicate signals' views are Python's (`PYTHON_VIEWS`), called the same way."""
    known = set(environment.list_templates())
    views: dict[str, Callable[[JsonObject], Markup]] = dict(PYTHON_VIEWS)

    def view(signal: str) -> Callable[[JsonObject], Markup]:
        if signal not in views:
            own = f"evidence/{signal}.html.j2"
            views[signal] = environment.get_template(own if own in known else DEFAULT_EVIDENCE).module.show
        return views[signal]

    return view


def _figure(value: Json) -> str:
    """One figure of any signal as text: numbers rounded, anything structured as JSON."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _flat(mapping: Json, prefix: str = "") -> list[tuple[str, Json]]:
    """A provenance entry's nested metadata as (dotted key, value) rows, for signals whose
    provenance the report knows nothing about."""
    if not isinstance(mapping, dict):
        return [(prefix or "value", mapping)]
    rows: list[tuple[str, Json]] = []
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        rows.extend(_flat(value, name) if isinstance(value, dict) and value else [(name, value)])
    return rows


def figures(data: JsonObject) -> JsonObject:
    # matplotlib is imported here, not with the module: it costs a second of every command's
    # start-up, and only a report draws.
    from audit.report import plots

    exposure = data["exposure"]
    result: JsonObject = {
        "exposure_bars": plots.exposure_bars(exposure["per_language"]),
        "exposure_grid": plots.exposure_grid(exposure["items"], exposure["languages"]),
    }
    if data["knowledge"]:
        result["knowledge_bars"] = plots.exposure_bars(data["knowledge"]["per_language"], plots.KNOWLEDGE)
    membership = data.get("membership")
    if membership:
        result["membership_bars"] = plots.exposure_bars(membership["per_language"], plots.MEMBERSHIP)
        result["membership_auroc"] = {
            name: plots.auroc_uri({lang: {s: v for s, v in g["auroc"].items() if v is not None} for lang, g in groups.items()}, f"{name}: AUROC by language, truth: corpus exposure")
            for name, groups in membership["calibration"]["fields"].items()
        }
    evaluation = data["evaluation"]
    if evaluation:
        result["transfer_heatmap"] = plots.transfer_heatmap(evaluation["pairs"], "transfer_score")
        result["success_heatmap"] = plots.transfer_heatmap(evaluation["pairs"], "overall_success")
        strata = evaluation.get("strata") or {}
        if strata:
            result["target_strata"] = plots.strata_bars(strata["target_exposure"], "by target-language exposure")
            result["source_strata"] = plots.strata_bars(strata["source_exposure"], "by source-language exposure")
            if strata.get("target_knowledge"):
                result["knowledge_strata"] = plots.strata_bars(strata["target_knowledge"], "by what the model knew of the target")
            if strata.get("target_membership"):
                result["membership_strata"] = plots.strata_bars(strata["target_membership"], "by the target's membership verdict")
            combination = strata.get("signal_combination") or {}
            if combination.get("strata"):
                result["combination_strata"] = plots.strata_bars(combination["strata"], "by the signals that saw the target", plots.combination_colors(combination["strata"]))
            by_source = strata.get("by_source") or {}
            if len(by_source) > 1:
                result["by_source"] = {source: plots.strata_bars(split, f"by target exposure in {source} alone") for source, split in by_source.items()}
    return result


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def _forked_pool(workers: int) -> Iterator[WorkerPool | None]:
    """A pool of forked processes for the figures and the pages, when forking is safe: on a
    platform that forks and with no other thread running (a server renders in its own thread,
    inline).  Its workers are forked at the first task, so what they inherit is set before."""
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        yield None
        return
    with frozen_for_fork(), WorkerPool(max_workers=max(1, workers), mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool


def link_item_pages(data: JsonObject, report: Path, out: Path) -> None:
    """Point every item row at the provenance page another report of the same audit already
    wrote (the pages depend on the audit alone), instead of writing copies."""
    try:
        other = json.loads((report / "report.json").read_text(encoding="utf-8"))["audit"]
    except (OSError, ValueError, KeyError, TypeError):
        raise FileNotFoundError(f"{report / 'report.json'}: not a report written by `audit report`") from None
    mine = data["audit"]
    if (other.get("config_hash"), other.get("created"), other.get("benchmark", {}).get("sha256")) != (mine["config_hash"], mine["created"], mine["benchmark"]["sha256"]):
        raise FileNotFoundError(f"{report / 'report.json'}: a report of another audit; its provenance pages would not match this one")
    data["exposure"]["items"].link(report, out)


REPORT = "report"


def write_report(
    out: Path,
    audit: AuditFile,
    audit_path: str,
    items: Sequence[Item] | ItemsById,
    evaluation: JsonObject | None = None,
    item_pages: Path | None = None,
    inputs: Iterable[Path] = (),
    workers: int | None = None,
    read: ReadAudit | None = None,
) -> JsonObject:
    """Render the whole report into `out` and return report.json's data.  An existing `out` is
    replaced only if it is a report this tool wrote and holds none of `inputs`.  With
    `item_pages` (another report's directory) its provenance pages are linked, not written.
    The figures are drawn and the pages rendered by `workers` forked processes (default: the
    available cores); with one, the pages are rendered here while one process draws.  `read`
    is the pass over the records when it was made as they were written (`aswritten`)."""
    out = Path(out)
    read = read if read is not None else read_records(audit, audit_path)
    data = report_data(audit, audit_path, evaluation, read)
    if item_pages is not None:
        link_item_pages(data, Path(item_pages).absolute(), out)
    environment = _environment()
    staging = staging_directory(out)
    try:
        # Written as encoded and rendered, a piece at a time: the report of a large benchmark
        # is tens of megabytes of text, which need not all be held at once.
        with (staging / "report.json").open("w", encoding="utf-8") as handle:
            dump(data, handle)
            handle.write("\n")
        environment.get_template("report.md.j2").stream(data=data).dump(str(staging / "report.md"), encoding="utf-8")
        workers = available_cores() if workers is None else workers
        pages = pages_of(staging, environment, data, read, items) if item_pages is None else None
        with inherited(pages), _forked_pool(workers) as pool:
            drawn = pool.submit(figures, data).result if pool else lambda: figures(data)
            if pages is not None:
                write_pages(pages, pool if workers > 1 else None, workers)
            shown = drawn()
        # After the pool is gone: its workers hold the pages they copied while they rendered.
        environment.get_template("report.html.j2").stream(data=data, figures=shown).dump(str(staging / "report.html"), encoding="utf-8")
        read.records.check_unchanged()
        commit_directory(staging, out, REPORT, inputs=[*inputs, Path(audit_path), *([Path(item_pages)] if item_pages else [])])
    except BaseException:
        discard_staging(staging)
        raise
    return data
