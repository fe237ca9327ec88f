"""A provenance page's language sections: for each language variant, its tag and the checks
that decided it, what each signal and each source decides alone, and each signal's evidence on
each field from each source, drawn by that signal's view.

Written in Python rather than in the page's template, as `checks` and `ngramview` are: a
BMLAMA-17 page has seventeen of these sections and some two thousand values to escape, and the
template's loops were a third of the page's time.  Every value from the audit is escaped here,
as the templates' autoescaping would.
"""
from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup

from audit.records import Json, JsonObject
from audit.report.checks import checks_html
from audit.report.escaping import html_text

View = Callable[[JsonObject], Markup]


def _joined(values: Json) -> str:
    """`{{ values | join(", ") or "no language" }}`."""
    return ", ".join(html_text(value) for value in values) if isinstance(values, list) and values else "no language"


def _heading(language: JsonObject) -> str:
    exposure, knowledge = html_text(language["exposure"]), language.get("knowledge")
    model = f' <span class="tag {html_text(knowledge)}" title="what the probed model knows">model: {html_text(knowledge)}</span>' if knowledge else ""
    return (
        f'  <div class="lang {exposure}" id="lang-{html_text(language["lang"])}">\n'
        f'    <h2>{html_text(language["lang"])} <span class="tag {exposure}">{exposure}</span>{model} <span class="muted" style="font-size:13px">{html_text(language["role"])}</span></h2>\n'
        f'    <div class="muted decided-by">decided by:\n    {checks_html(language["decided_by"])}\n    </div>\n'
    )


def _verdicts(language: JsonObject) -> str:
    """What the model knows, and what each signal and each source decides alone."""
    parts = []
    seen_in = language.get("seen_in_languages")
    if seen_in is not None:
        parts.append(f'    <div class="muted seen-in-languages">seen in: {_joined(seen_in)}</div>\n')
    knowledge = language.get("knowledge")
    if knowledge:
        parts.append(
            f'    <div class="muted knowledge-decided-by">model knowledge <span class="verdict {html_text(knowledge)}">{html_text(knowledge)}</span>, decided by:\n'
            f"    {checks_html(language.get('knowledge_decided_by') or [])}\n    </div>\n"
        )
    alone = language["alone"]
    if alone["signal"] or alone["source"]:
        signals = "".join(f'signal <code>{html_text(name)}</code> <span class="verdict {html_text(label)}" data-signal="{html_text(name)}">{html_text(label)}</span> · ' for name, label in alone["signal"].items())
        sources = " · ".join(f'source {html_text(name)} <span class="verdict {html_text(label)}" data-source="{html_text(name)}">{html_text(label)}</span>' for name, label in alone["source"].items())
        parts.append(f'    <div class="muted alone">judged alone:\n{signals}{sources}    </div>\n')
    return "".join(parts)


def _field(signal: str, field: str, sources: list[tuple[str, list[JsonObject]]], show: View) -> str:
    """One field's evidence from every source of the signal, or a line saying a source has none."""
    parts = [f'      <div class="field" data-field="{html_text(field)}">\n        <h4>{html_text(field)}</h4>\n        <div class="sources">\n']
    for source, entries in sources:
        parts.append(f'          <div class="source" data-source="{html_text(source)}">\n            <div class="source-name">{html_text(source)}</div>\n')
        if entries:
            parts.extend(show(evidence) for evidence in entries)
        else:
            parts.append(f'            <div class="muted">no {html_text(signal)} evidence on {html_text(field)} from {html_text(source)}</div>\n')
        parts.append("          </div>\n")
    parts.append("        </div>\n      </div>\n")
    return "".join(parts)


def _signal(signal: str, fields: list[tuple[str, list[tuple[str, list[JsonObject]]]]], runs: Json, view: Callable[[str], View]) -> str:
    """One signal's section: where it did not run, then its evidence field by field."""
    parts = [f'    <div class="signal" data-signal="{html_text(signal)}">\n      <h3>signal <code>{html_text(signal)}</code></h3>\n']
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and run.get("signal") == signal and not run.get("ran"):
            parts.append(f'      <div class="muted">did not run on {html_text(run.get("source", ""))}: {html_text(run.get("reason", ""))}</div>\n')
    show = view(signal)
    parts.extend(_field(signal, field, sources, show) for field, sources in fields)
    parts.append("    </div>\n")
    return "".join(parts)


def language_sections(languages: list[JsonObject], runs: Json, view: Callable[[str], View]) -> Markup:
    """Every language's section, in the page's order; `runs` the audit's signal runs, `view`
    a signal's evidence view (`render._evidence_views`)."""
    parts = []
    for language in languages:
        parts.append(_heading(language))
        parts.append(_verdicts(language))
        parts.extend(_signal(signal, fields, runs, view) for signal, fields in language["signals"])
        parts.append("  </div>\n")
    return Markup("".join(parts))
