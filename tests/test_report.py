"""Reports, opened in a real headless Chromium: tables and images must render, and every
item's provenance page must show the matched spans and their documents."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import chromium_path, summary_of
from playwright.sync_api import sync_playwright

from audit.auditfile import read_audit, write_audit
from audit.cli import main
from audit.evidence import Evidence
from audit.exposure import decide, item_exposure
from audit.outputs import MARKER
from audit.policyfile import compile_policy, load_policy

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        yield instance
        instance.close()


def images_rendered(page) -> bool:
    return page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")


def test_check_writes_an_exposure_report_that_renders(planted_audit, browser, tmp_path: Path):
    report = planted_audit["root"] / "sample.report"
    assert {p.name for p in report.iterdir()} == {"report.html", "report.md", "report.json", "items", MARKER}
    data = json.loads((report / "report.json").read_text())
    assert data["exposure"]["item_summary"] == {"seen_in_target": 2, "unseen_everywhere": 37}
    assert data["exposure"]["per_language"]["fr"]["seen"] == 1
    assert data["evaluation"] is None
    assert "| fr | 39 | 1 | 38 | 0 | 2.6% |" in (report / "report.md").read_text()

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((report / "report.html").as_uri())
    assert page.locator("#exposure-table tbody tr").count() == 12
    assert page.locator("#items-table tbody tr").count() == 39
    assert page.locator("img").count() == 2 and images_rendered(page)
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 20_000

    page.click("#items-table a:text-is('39')")
    assert page.url.endswith("items/39.html")
    assert page.locator(".lang").count() == 12
    french = page.locator("#lang-fr")
    assert french.locator(".tag.seen").count() == 1
    assert "context.coverage" in french.inner_text()
    assert french.locator("mark").count() >= 2
    assert "planted-fr" in french.inner_text()
    assert page.locator("#lang-de .tag.unseen").count() == 1
    page.close()


def test_report_text_is_escaped(tmp_path: Path, planted_audit, browser):
    bench = tmp_path / "tricky.jsonl"
    bench.write_text(
        json.dumps({"item_id": "<b>x</b>", "source_lang": "en", "variants": {"en": {"question": "<script>document.title='owned'</script> What?", "answer": "<i>a</i>"}}}) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "tricky.audit.jsonl"
    result = CliRunner().invoke(main, ["check", str(bench), "--corpus", str(planted_audit["index"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = tmp_path / "tricky.report"
    page = browser.new_page()
    page.goto((report / "report.html").as_uri())
    assert page.locator("#items-table b").count() == 0
    page.click("#items-table a")
    assert page.title().startswith("Item <b>x</b>")
    assert "<script>" in page.locator("#lang-en").inner_text()
    page.close()


def test_transfer_report_with_predictions_renders(planted_audit, browser, tmp_path: Path):
    from audit.readers import load_benchmark

    predictions = tmp_path / "predictions.jsonl"
    with open(predictions, "w", encoding="utf-8") as out:
        for n, item in enumerate(load_benchmark(planted_audit["bench"]).items):
            for lang in item.variants:
                correct = n % 4 != 0 if lang == item.source_lang else (n + len(lang) + ord(lang[0])) % 3 == 0
                out.write(json.dumps({"item_id": item.item_id, "lang": lang, "prediction": "…", "correct": correct}) + "\n")
    out_dir = tmp_path / "transfer"
    result = CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--predictions", str(predictions), "--out", str(out_dir), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    assert "overall success" in result.output and "clean transfer" in result.output
    evaluation = json.loads((out_dir / "report.json").read_text())["evaluation"]
    assert evaluation["method"] == "given"
    assert len(evaluation["per_target"]) == 11
    assert evaluation["strata"]["target_exposure"]["seen"]["overall_success"]["n"] == 2
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out_dir / "report.html").as_uri())
    assert page.locator("#totals tbody tr").count() == 2
    assert page.locator("#per-target tbody tr").count() == 11
    assert page.locator("#strata-table tbody tr").count() >= 7
    assert page.locator("img").count() >= 5 and images_rendered(page)
    page.screenshot(path=str(tmp_path / "transfer.png"), full_page=True)
    page.close()


def test_bad_predictions_are_input_errors(planted_audit, tmp_path: Path):
    predictions = tmp_path / "bad.jsonl"
    predictions.write_text('{"item_id": "39", "lang": "fr", "prediction": "x"}\n{"item_id": "nope", "lang": "fr", "prediction": "x"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--predictions", str(predictions), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "bad.jsonl:2: field 'item_id'" in result.output
    assert not (tmp_path / "r").exists()


def test_a_second_report_links_the_first_ones_provenance_pages(planted_audit, browser, tmp_path: Path):
    first, second = tmp_path / "exposure", tmp_path / "elsewhere" / "second"
    second.parent.mkdir()
    assert CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--out", str(first)]).exit_code == 0
    result = CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--out", str(second), "--item-pages", str(first)])
    assert result.exit_code == 0, result.output
    assert not (second / "items").exists()
    rows = json.loads((second / "report.json").read_text())["exposure"]["items"]
    assert rows and all(row["page"].startswith("../../exposure/items/") for row in rows)
    page = browser.new_page()
    page.goto((second / "report.html").as_uri())
    page.locator(f"a[href='{rows[0]['page']}']").first.click()
    page.wait_for_load_state()
    assert page.url == (first / rows[0]["page"].removeprefix("../../exposure/")).as_uri()
    assert page.locator("h1").inner_text() == f"Item {rows[0]['item_id']}"
    page.close()

    (tmp_path / "empty").mkdir()
    refused = CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--out", str(tmp_path / "r"), "--item-pages", str(tmp_path / "empty")])
    assert refused.exit_code == 2 and "not a report written by `audit report`" in refused.output
    assert not (tmp_path / "r").exists()


# Two signals on two corpora ------------------------------------------------------------------

BUILTIN = load_policy()
TWO = compile_policy({**BUILTIN.settings, "name": "two-signals", "rules": {**BUILTIN.settings["rules"], "minhash": {"context": {"containment": 0.5}}}}, "test")
NEAR_DUPLICATES = {("39", "fr"): 0.97, ("33", "de"): 0.8}


def near_duplicate(record: dict, context: str) -> Evidence:
    containment = NEAR_DUPLICATES.get((record["item_id"], record["lang"]), 0.05)
    evidence = Evidence("minhash", "mirror", "context", figures={"containment": containment, "jaccard": round(containment * 0.8, 4), "candidates": int(containment >= 0.5)})
    if containment >= 0.5:
        evidence.provenance = [{"document": 775, "metadata": {"path": "docs.jsonl", "linenum": 775, "metadata": {"id": f"planted-{record['lang']}"}},
                                "snippet": context[:120], "snippet_match": [0, 60]}]
    return evidence


# Evidence of a signal with no template of its own, shown by the default one.
PAGEVIEWS = Evidence("pageviews", "mirror", "title", figures={"article_exists": True, "languages": 3},
                    provenance=[{"url": "https://fr.wikipedia.org/wiki/Bremerhaven", "snippet": "Bremerhaven est une ville", "snippet_match": [0, 12]}])  # fmt: skip


def two_signal_audit(planted: dict[str, Path], path: Path) -> Path:
    """The planted audit as if run with two signals on two corpora: the n-gram evidence from
    `index` and again from `mirror` (the same documents served elsewhere, which timed out on
    item 46 in Japanese), and near-duplicate evidence on the context from `mirror` alone (the
    signal could not run on `index`); item 39's French passage and item 33's German one are
    near-duplicates."""
    from audit.readers import load_benchmark

    audit = read_audit(planted["audit"])
    items = {item.item_id: item for item in load_benchmark(planted["bench"]).items}
    records = []
    for record in audit.records:
        ngram = [Evidence(**{k: v for k, v in e.items()}) for e in record["evidence"]]
        if (record["item_id"], record["lang"]) == ("46", "ja"):
            mirror = [Evidence("ngram", "mirror", e.field, status="failed", error="TimeoutError: mirror did not answer") for e in ngram]
        else:
            mirror = [Evidence(**{**e.to_dict(), "source": "mirror"}) for e in ngram]
        evidence = [*ngram, *mirror, near_duplicate(record, items[record["item_id"]].variants[record["lang"]].context)]
        if (record["item_id"], record["lang"]) == ("39", "fr"):
            evidence.append(PAGEVIEWS)
        decision = decide(TWO, evidence)
        records.append({**record, "exposure": decision.exposure, "decided_by": decision.decided_by, "evidence": [e.to_dict() for e in evidence]})
    by_item: dict[str, dict[str, str]] = {}
    for record in records:
        by_item.setdefault(record["item_id"], {})[record["lang"]] = record["exposure"]
    languages: dict[str, Counter] = {}
    for record in records:
        record["item_exposure"] = item_exposure(record["source_lang"], by_item[record["item_id"]])
        languages.setdefault(record["lang"], Counter())[record["exposure"]] += 1
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    manifest["corpora"] = [*manifest["corpora"], {"name": "mirror", "backend": "api", "location": "https://mirror.example/api", "fingerprint": "f" * 32, "documents": 776}]
    manifest["signals"] = ["ngram", "minhash"]
    manifest["signal_runs"] = [
        {"signal": "ngram", "source": "index", "ran": True, "reason": None},
        {"signal": "ngram", "source": "mirror", "ran": True, "reason": None},
        {"signal": "minhash", "source": "index", "ran": False, "reason": "no MinHash index beside it"},
        {"signal": "minhash", "source": "mirror", "ran": True, "reason": None},
    ]
    manifest["policy"] = {"name": TWO.name, "source": TWO.source, "hash": TWO.digest, "settings": TWO.settings}
    manifest["summary"] = {
        "languages": {lang: {tag: c[tag] for tag in ("seen", "unseen", "unknown")} | {"total": c.total()} for lang, c in languages.items()},
        "items": dict(Counter(r["item_exposure"] for r in records if r["lang"] == r["source_lang"])),
    }
    write_audit(path, manifest, records)
    return path


def given_predictions(planted: dict[str, Path], path: Path) -> Path:
    """Every target answered right, every source answer right except item 33's."""
    from audit.readers import load_benchmark

    with open(path, "w", encoding="utf-8") as out:
        for item in load_benchmark(planted["bench"]).items:
            for lang in item.variants:
                correct = item.item_id != "33" or lang != item.source_lang
                out.write(json.dumps({"item_id": item.item_id, "lang": lang, "prediction": "…", "correct": correct}) + "\n")
    return path


@pytest.fixture(scope="module")
def two_signal_report(planted_audit, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two-signals")
    audit = two_signal_audit(planted_audit, root / "two.audit.jsonl")
    predictions = given_predictions(planted_audit, root / "predictions.jsonl")
    out = root / "report"
    result = CliRunner().invoke(main, ["report", "--audit", str(audit), "--bench", str(planted_audit["bench"]), "--predictions", str(predictions), "--out", str(out), "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    return out


def test_strata_by_signal_combination_and_by_source(two_signal_report):
    data = json.loads((two_signal_report / "report.json").read_text())
    strata = data["evaluation"]["strata"]
    combination = strata["signal_combination"]
    assert combination["signals"] == ["ngram", "minhash"]
    n = {label: split["overall_success"]["n"] for label, split in combination["strata"].items()}
    # 39 items x 11 targets; 46-ja seen by the n-gram signal in `index` (its `mirror` timed out), 39-fr by both, 33-de by minhash alone.
    assert n == {"ngram only": 1, "minhash only": 1, "ngram+minhash": 1, "neither": 426, "unknown": 0}
    # Every target right: a pair scores when its source does, and item 33's source does not.
    assert combination["strata"]["minhash only"]["overall_success"]["value"] == 0.0
    assert combination["strata"]["minhash only"]["transfer_score"]["value"] is None
    assert combination["strata"]["ngram+minhash"]["transfer_score"]["value"] == 1.0
    assert combination["strata"]["neither"]["overall_success"]["value"] == pytest.approx(416 / 426)
    assert strata["sources"] == ["index", "mirror"]
    index, mirror = strata["by_source"]["index"], strata["by_source"]["mirror"]
    assert (index["seen"]["overall_success"]["n"], index["unknown"]["overall_success"]["n"]) == (2, 0)
    assert (mirror["seen"]["overall_success"]["n"], mirror["unknown"]["overall_success"]["n"]) == (2, 1)

    exposure = data["exposure"]
    assert exposure["per_signal"]["minhash"]["languages"]["de"]["seen"] == 1
    assert exposure["per_source"]["mirror"]["languages"]["ja"] == {"seen": 0, "unseen": 38, "unknown": 1, "total": 39, "seen_rate": 0.0}
    assert exposure["rule_fires"]["minhash.context.containment"] == 2
    assert data["audit"]["signal_runs"][2] == {"signal": "minhash", "source": "index", "ran": False, "reason": "no MinHash index beside it"}
    markdown = (two_signal_report / "report.md").read_text()
    assert "| ngram+minhash | 1.000 |" in markdown and "| `minhash` | index | no | no MinHash index beside it |" in markdown


def test_report_shows_each_signal_and_source(two_signal_report, browser, tmp_path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((two_signal_report / "report.html").as_uri())
    assert page.locator("#exposure-alone tbody tr").count() == 5, "ngram, minhash and pageviews; index and mirror"
    assert page.locator("#exposure-alone tr[data-kind=source][data-name=mirror]").inner_text().split("\t")[1:4] == ["2", "465", "1"]
    assert page.locator("#signal-runs tbody tr").count() == 4 and "no MinHash index beside it" in page.locator("#signal-runs").inner_text()
    assert page.locator("#combination-table tbody tr").count() == 5
    assert page.locator("#strata-table tr[data-source=mirror]").count() == 3
    assert page.locator("img[alt='scores by the signals that saw the target']").count() == 1
    assert page.locator("img[alt^='scores by target exposure in']").count() == 2 and images_rendered(page)
    page.screenshot(path=str(tmp_path / "two-signals.png"), full_page=True)
    page.close()


def test_provenance_page_has_a_section_per_signal_and_source(two_signal_report, browser, tmp_path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((two_signal_report / "items" / "39.html").as_uri())
    french = page.locator("#lang-fr")
    assert french.locator(".tag.seen").count() == 1
    assert [french.locator(".signal").nth(k).get_attribute("data-signal") for k in range(2)] == ["ngram", "minhash"]
    # The n-gram template: the same field from both corpora side by side, its spans highlighted in each.
    context = french.locator(".signal[data-signal=ngram] .field[data-field=context]")
    sources = context.locator(".source")
    assert [sources.nth(k).get_attribute("data-source") for k in range(2)] == ["index", "mirror"]
    left, right = sources.nth(0).bounding_box(), sources.nth(1).bounding_box()
    assert left["y"] == right["y"] and left["x"] + left["width"] <= right["x"]
    assert sources.nth(0).locator(".text mark").count() >= 1 and sources.nth(1).locator(".text mark").count() >= 1
    assert "planted-fr" in sources.nth(1).inner_text() and "coverage" in sources.nth(0).inner_text()
    assert french.locator(".signal[data-signal=ngram] .figures-table").count() == 0
    assert french.locator(".signal[data-signal=ngram] .field").count() == 4
    # The near-duplicate template: exact figures, then each document with its span marked.
    minhash = french.locator(".signal[data-signal=minhash]")
    assert minhash.locator(".source").count() == 1 and minhash.locator(".source").get_attribute("data-source") == "mirror"
    assert "containment 97.0% · Jaccard 77.6%" in minhash.locator(".figures-line").first.inner_text()
    assert "near-duplicate in document 775" in minhash.inner_text() and "planted-fr" in minhash.inner_text()
    assert minhash.locator(".snippet mark").count() == 1
    # A signal without a template of its own: the default one lists every figure and document field.
    links = french.locator(".signal[data-signal=pageviews]")
    assert "article_exists" in links.locator(".figures-table").inner_text() and "languages" in links.locator(".figures-table").inner_text()
    assert links.locator(".documents a[href='https://fr.wikipedia.org/wiki/Bremerhaven']").count() == 1
    assert links.locator(".documents mark").inner_text() == "Bremerhaven "
    assert "did not run on index: no MinHash index beside it" in minhash.inner_text()
    assert french.locator(".verdict[data-signal=minhash].seen").count() == 1 and french.locator(".verdict[data-source=index].seen").count() == 1
    assert "minhash.context.containment = 0.97" in french.locator(".decided-by").inner_text()
    page.screenshot(path=str(tmp_path / "item-39.png"), full_page=True)

    page.goto((two_signal_report / "items" / "46.html").as_uri())
    japanese = page.locator("#lang-ja .signal[data-signal=ngram] .field[data-field=question] .source[data-source=mirror]")
    assert "failed: TimeoutError: mirror did not answer" in japanese.inner_text()
    assert page.locator("#lang-ja .verdict[data-source=mirror].unknown").count() == 1
    page.close()


def test_provenance_pages_of_a_version_1_audit(browser, tmp_path: Path):
    fixture = Path(__file__).resolve().parent / "fixtures" / "audit-v1"
    out = tmp_path / "v1.report"
    result = CliRunner().invoke(main, ["report", "--audit", str(fixture / "v1.audit.jsonl"), "--bench", str(fixture / "bench.jsonl"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    assert data["audit"]["signal_runs"] == [{"signal": "ngram", "source": "index", "ran": True, "reason": None}]
    page = browser.new_page()
    page.goto((out / "items" / "33.html").as_uri())
    english = page.locator("#lang-en .signal[data-signal=ngram]")
    assert english.locator(".source[data-source=index]").count() == 4
    assert english.locator(".field[data-field=answer] .text mark").inner_text() == "Germany"
    assert "question.exact_count = 0" in page.locator("#lang-en").inner_text()
    page.close()


# The languages an item was seen in ------------------------------------------------------------

HOSTILE_LANG = "<img src=x onerror=\"document.title='owned'\">"


def seen_elsewhere_audit(planted: dict[str, Path], path: Path) -> Path:
    """The planted audit with item 33's German and Japanese questions found verbatim only in
    documents of other languages: English (and, for German, a language whose recorded name is
    markup), as the n-gram signal reports it when its rules count the variant's language."""
    from audit.exposure import seen_in

    audit = read_audit(planted["audit"])
    elsewhere = {"de": {"en": 2, HOSTILE_LANG: 1, "und": 1}, "ja": {"en": 1}}
    records = []
    for record in audit.records:
        evidence = [Evidence(**e) for e in record["evidence"]]
        if record["item_id"] == "33" and record["lang"] in elsewhere:
            figures = {"exact_count": 0, "coverage": 0.0, "longest_match_fraction": 0.0, "any_language": {"exact_count": 2, "coverage": 1.0, "longest_match_fraction": 1.0},
                       "language": {"lang": record["lang"], "by": "table", "unknown_language": "count", "unknown_documents": 0}, "languages": elsewhere[record["lang"]]}  # fmt: skip
            evidence.append(Evidence("ngram", "index", "question", figures=figures))
        decision = decide(BUILTIN, evidence, record["lang"])
        records.append({**record, "exposure": decision.exposure, "decided_by": decision.decided_by, "seen_in_languages": decision.seen_in_languages, "evidence": [e.to_dict() for e in evidence]})
    by_item: dict[str, list[dict]] = {}
    for record in records:
        by_item.setdefault(record["item_id"], []).append(record)
    for group in by_item.values():
        tag, found = item_exposure(group[0]["source_lang"], {r["lang"]: r["exposure"] for r in group}), seen_in([r["seen_in_languages"] for r in group])
        for record in group:
            record.update(item_exposure=tag, seen_in=found)
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    write_audit(path, manifest | {"summary": summary_of(records)}, records)
    return path


def test_the_report_shows_where_an_item_was_seen_beside_where_it_was_asked(planted_audit, browser, tmp_path: Path):
    audit = seen_elsewhere_audit(planted_audit, tmp_path / "elsewhere.audit.jsonl")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", "--audit", str(audit), "--bench", str(planted_audit["bench"]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    row = next(r for r in data["exposure"]["items"] if r["item_id"] == "33")
    assert "en" in row["seen_in"] and HOSTILE_LANG in row["seen_in"] and not {"de", "ja"} & set(row["seen_in"])
    assert row["asked_in"] == sorted(row["asked_in"]) and {"de", "en", "ja", "fr"} <= set(row["asked_in"])
    elsewhere = data["exposure"]["seen_elsewhere"]
    assert elsewhere["per_target"]["de"]["only_elsewhere"] == 1 and elsewhere["per_target"]["ja"]["only_elsewhere"] == 1
    assert {(p["target"], p["seen_in"], p["targets"], p["only"]) for p in elsewhere["pairs"]} == {("de", "en", 1, 0), ("de", HOSTILE_LANG, 1, 0), ("ja", "en", 1, 1)}
    markdown = (out / "report.md").read_text()
    assert "| ja | en | 1 | 1 |" in markdown and "\\<img" in markdown and not re.search(r"(?<!\\)<img", markdown)

    page = browser.new_page()
    page.goto((out / "report.html").as_uri())
    assert page.title() != "owned" and page.locator("#seen-elsewhere-pairs img, #items-table img").count() == 0
    assert page.locator("#seen-elsewhere-pairs tbody tr").count() == 3
    assert HOSTILE_LANG in page.locator("#seen-elsewhere-pairs").inner_text()
    cells = page.locator("#items-table tbody tr", has=page.locator("a:text-is('33')"))
    assert HOSTILE_LANG in cells.locator("td.seen-in").inner_text() and "en" in cells.locator("td.seen-in").inner_text()
    assert cells.locator("td.asked-in").inner_text() == ", ".join(row["asked_in"])
    page.goto((out / "items" / "33.html").as_uri())
    assert page.title() != "owned" and page.locator("img").count() == 0
    assert page.locator("#lang-ja .seen-in-languages").inner_text() == "seen in: en"
    assert HOSTILE_LANG in page.locator("header .seen-in").inner_text()
    assert page.locator("header .asked-in").inner_text() == "asked in " + ", ".join(row["asked_in"])
    page.close()


def test_a_report_of_an_audit_without_languages_says_they_were_not_recorded(browser, tmp_path: Path):
    fixture = Path(__file__).resolve().parent / "fixtures" / "audit-v1"
    out = tmp_path / "v1.report"
    result = CliRunner().invoke(main, ["report", "--audit", str(fixture / "v1.audit.jsonl"), "--bench", str(fixture / "bench.jsonl"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    assert data["exposure"]["seen_elsewhere"] is None and all(row["seen_in"] is None for row in data["exposure"]["items"])
    assert "| not recorded |" in (out / "report.md").read_text()
    page = browser.new_page()
    page.goto((out / "report.html").as_uri())
    assert page.locator("#seen-elsewhere-table").count() == 0
    assert set(page.locator("#items-table td.seen-in").all_inner_texts()) == {"not recorded"}
    page.close()
