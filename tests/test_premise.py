"""The report's single-language premise section, end to end: lookups built by `audit langlinks
build` from dump rows written here, a small ECLeKTic benchmark with English and German source
items, `audit check --links` (with and without a cutoff, with one source and two), then
`audit report`.  The counts asserted follow from the rows below."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_langlinks import page_dump, whole_dump

from audit.auditfile import read_audit, write_audit
from audit.cli import main
from audit.report.premise import premise_section

LANGS = ("en", "de", "fr", "nb")
# item id: (source language, article title in the source language's wiki, or None for none)
ITEMS = {
    "101": ("en", "Harbour_Radio"),
    "102": ("en", "Quiet_Valley_Dam"),
    "103": ("en", "Ferris_Bay_Lighthouse"),
    "104": ("en", "Old_Mill_Bridge"),
    "105": ("en", "Unlisted_Article"),  # not in the page dump: unresolved, so unknown
    "106": ("en", None),  # names no article
    "201": ("de", "Kleiner_Hafen"),
    "202": ("de", "Stiller_Wald"),
}
EN_PAGES = [(11, "Harbour_Radio", 0), (12, "Quiet_Valley_Dam", 0), (13, "Ferris_Bay_Lighthouse", 0), (14, "Old_Mill_Bridge", 0)]
EN_LINKS = [(11, "de", "Hafenradio"), (12, "fr", "Barrage de Quiet Valley"), (12, "no", "Quiet Valley-demningen"), (13, "no", "Ferris Bay fyr")]
DE_PAGES = [(21, "Kleiner_Hafen", 0), (22, "Stiller_Wald", 0)]
DE_LINKS = [(21, "en", "Little Harbour")]
# A later English snapshot, where Old Mill Bridge has gained a French article.
LATER_EN_LINKS = [*EN_LINKS, (14, "fr", "Pont du Vieux Moulin")]


def benchmark(path: Path) -> Path:
    columns = ["original_lang", "original_content", "original_question", "original_answer", "content", "question", "answer", "language", "translated", "q_id", "title", "url"]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for item_id, (source, title) in ITEMS.items():
            name = title.replace("_", " ") if title else ""
            url = f"https://{source}.wikipedia.org/wiki/{title}" if title else ""
            context, question = f"{name or 'It'} opened in 1931 near the coast.", f"When did {name or 'it'} open?"
            for lang in LANGS:
                writer.writerow([source, context, question, "1931", f"[{lang}] {context}", f"[{lang}] {question}", "1931", lang, int(lang != source), item_id, name, url])
    return path


def lookup(root: Path, name: str, dumps: dict[str, str]) -> Path:
    root.mkdir()
    for file, text in dumps.items():
        (root / file).write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["langlinks", "build", *(str(root / file) for file in dumps), "--out", str(root / name)])
    assert result.exit_code == 0, result.output
    return root / name


@pytest.fixture(scope="module")
def setup(tmp_path_factory, planted_audit) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("premise")
    july = {
        "enwiki-20230701-page.sql": page_dump(EN_PAGES), "enwiki-20230701-langlinks.sql": whole_dump(EN_LINKS),
        "dewiki-20230701-page.sql": page_dump(DE_PAGES), "dewiki-20230701-langlinks.sql": whole_dump(DE_LINKS),
    }  # fmt: skip
    first = lookup(root / "first", "july", july)
    later = lookup(root / "later", "january", {"enwiki-20240101-page.sql": page_dump(EN_PAGES), "enwiki-20240101-langlinks.sql": whole_dump(LATER_EN_LINKS)})
    return {"root": root, "bench": benchmark(root / "bench.csv"), "corpus": planted_audit["index"], "first": first, "later": later}


def audit_and_report(setup: dict[str, Path], name: str, *options: str) -> tuple[Path, Path]:
    runner = CliRunner()
    audit = setup["root"] / f"{name}.audit.jsonl"
    checked = runner.invoke(main, ["check", str(setup["bench"]), "--corpus", str(setup["corpus"]), *options, "--out", str(audit), "--no-report"])
    assert checked.exit_code == 0, checked.output
    report = setup["root"] / f"{name}.report"
    reported = runner.invoke(main, ["report", "--audit", str(audit), "--out", str(report)])
    assert reported.exit_code == 0, reported.output
    return audit, report


def counts(summary: dict) -> tuple[int, ...]:
    return tuple(summary[key] for key in ("items", "resolved", "holds", "fails", "unknown", "no_article"))


def test_the_premise_at_the_snapshot(setup):
    _, report = audit_and_report(setup, "snapshot", "--links", str(setup["first"]))
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    premise = data["premise"]
    assert data["audit"]["links"] == {"sources": [{"name": "july", "backend": "dump", "path": str(setup["first"].resolve()), "wikis": {"en": "2023-07-01", "de": "2023-07-01"}}], "as_of": None}
    assert premise["cutoff"] is None and [s["name"] for s in premise["sources"]] == ["july"]
    en, de = premise["per_source_lang"]["en"], premise["per_source_lang"]["de"]
    assert counts(en) == (6, 4, 1, 3, 1, 1)
    assert en["fails_in"] == {"de": 1, "fr": 1, "nb": 2}
    assert en["since"] == {"created": None, "by": "2023-07-01", "exact": False}
    assert counts(de) == (2, 2, 1, 1, 0, 0) and de["fails_in"] == {"en": 1}
    assert counts(premise["total"]) == (8, 6, 2, 4, 1, 1)

    failing = {row["item_id"]: row for row in premise["items"]}
    assert list(failing) == ["101", "102", "103", "201"]
    assert failing["102"]["article"]["title"] == "Quiet Valley Dam"
    assert [(a["lang"], a["title"], a["url"]) for a in failing["102"]["articles"]] == [
        ("fr", "Barrage de Quiet Valley", "https://fr.wikipedia.org/wiki/Barrage_de_Quiet_Valley"),
        ("nb", "Quiet Valley-demningen", "https://no.wikipedia.org/wiki/Quiet_Valley-demningen"),
    ]

    html = (report / "report.html").read_text(encoding="utf-8")
    assert '<section id="premise">' in html and "Single-language premise" in html
    assert '<a href="items/101.html">101</a>' in html and '<a href="items/201.html">201</a>' in html
    assert '<a href="https://en.wikipedia.org/wiki/Little_Harbour">Little Harbour</a>' in html
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "## Single-language premise" in markdown and "Cutoff: none" in markdown
    assert "| en | 6 | 4 | 1 | 3 | 1 | 1 | de 1, fr 1, nb 2 | by 2023-07-01 |" in markdown
    assert "| all | 8 | 6 | 2 | 4 | 1 | 1 | de 1, en 1, fr 1, nb 2 | by 2023-07-01 |" in markdown
    assert "| [103](items/103.html) | en | [Ferris Bay Lighthouse](<https://en.wikipedia.org/wiki/Ferris_Bay_Lighthouse>) | nb [Ferris Bay fyr](<https://no.wikipedia.org/wiki/Ferris_Bay_fyr>) (existed by 2023-07-01) |" in markdown

    page = (report / "items" / "102.html").read_text(encoding="utf-8")
    assert 'class="verdict seen">existed</span> at 2023-07-01' in page
    assert '<a href="https://fr.wikipedia.org/wiki/Barrage_de_Quiet_Valley">Barrage de Quiet Valley</a>' in page
    assert "no article in this language's Wikipedia" in page  # German


def test_a_cutoff_before_the_snapshot_leaves_every_linked_item_unknown(setup):
    # A dump has no creation dates: an article it shows may postdate the cutoff, an absence holds.
    audit, report = audit_and_report(setup, "cutoff", "--links", str(setup["first"]), "--as-of", "2023-01-01")
    premise = json.loads((report / "report.json").read_text(encoding="utf-8"))["premise"]
    assert premise["cutoff"] == "2023-01-01" and premise["items"] == []
    assert counts(premise["per_source_lang"]["en"]) == (6, 4, 1, 0, 4, 1)
    assert counts(premise["per_source_lang"]["de"]) == (2, 2, 1, 0, 1, 0)
    assert "Cutoff: 2023-01-01." in (report / "report.md").read_text(encoding="utf-8")
    assert "creation date is unknown" in (report / "items" / "101.html").read_text(encoding="utf-8")

    # Were the creation dates known, the earliest would say since when the premise fails.
    parsed = read_audit(audit)
    for record in parsed.records:
        for evidence in record["evidence"]:
            if record["item_id"] == "102" and record["lang"] in ("fr", "nb") and evidence["signal"] == "langlinks":
                created = {"fr": "2021-05-02T10:00:00Z", "nb": "2019-11-30T08:00:00Z"}[record["lang"]]
                evidence.update(status="ok", error=None)
                evidence["figures"] |= {"created": created, "existed": True}
    row = premise_section(parsed)["per_source_lang"]["en"]
    assert row["fails"] == 1 and row["fails_in"] == {"fr": 1, "nb": 1}
    assert row["since"] == {"created": "2019-11-30T08:00:00Z", "by": "2023-07-01", "exact": True}
    dated = setup["root"] / "dated.audit.jsonl"
    write_audit(dated, {k: v for k, v in parsed.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}, parsed.records)
    result = CliRunner().invoke(main, ["report", "--audit", str(dated), "--out", str(setup["root"] / "dated.report")])
    assert result.exit_code == 0, result.output
    markdown = (setup["root"] / "dated.report" / "report.md").read_text(encoding="utf-8")
    assert "| en | 6 | 4 | 1 | 1 | 3 | 1 | fr 1, nb 1 | 2019-11-30 |" in markdown
    assert "nb [Quiet Valley-demningen](<https://no.wikipedia.org/wiki/Quiet_Valley-demningen>) (created 2019-11-30)" in markdown


def test_any_source_showing_another_article_breaks_the_premise(setup):
    _, report = audit_and_report(setup, "two", "--links", str(setup["first"]), "--links", str(setup["later"]))
    premise = json.loads((report / "report.json").read_text(encoding="utf-8"))["premise"]
    assert [(s["name"], s["wikis"]) for s in premise["sources"]] == [("july", {"en": "2023-07-01", "de": "2023-07-01"}), ("january", {"en": "2024-01-01"})]
    # Old Mill Bridge fails by the later snapshot; the German items, which it cannot answer,
    # are judged by the one that can.
    assert counts(premise["per_source_lang"]["en"]) == (6, 4, 0, 4, 1, 1)
    assert counts(premise["per_source_lang"]["de"]) == (2, 2, 1, 1, 0, 0)
    mill = next(row for row in premise["items"] if row["item_id"] == "104")
    assert [(a["lang"], a["source"], a["as_of"]) for a in mill["articles"]] == [("fr", "january", "2024-01-01")]
    assert "(existed by 2024-01-01, january)" in (report / "report.md").read_text(encoding="utf-8")


def test_no_premise_section_without_langlinks(setup):
    _, report = audit_and_report(setup, "plain")
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert data["premise"] is None and data["audit"]["links"] is None
    html = (report / "report.html").read_text(encoding="utf-8")
    assert 'id="premise"' not in html and "Single-language premise" not in html
    assert "Single-language premise" not in (report / "report.md").read_text(encoding="utf-8")
