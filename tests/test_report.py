"""Reports, opened in a real headless Chromium: tables and images must render, and every
item's provenance page must show the matched spans and their documents."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from playwright.sync_api import sync_playwright

from audit.cli import main
from audit.outputs import MARKER

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is required for the report tests: apt-get install chromium (.ci/run does)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
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
    from audit.loaders import load_benchmark

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
