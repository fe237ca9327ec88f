"""Hostile text from every input a report shows, rendered into every page and plot and opened in
a real Chromium: no script runs, no element of a payload exists, no link but http(s) (or one
the report made to its own pages) is followed, and every payload is shown as the text it is.

The world: a benchmark whose item ids, questions, answers, contexts, titles and URLs are
payloads; a corpus whose documents' ids, titles and URLs are payloads, indexed for the n-gram
and near-duplicate signals; a model behind an OpenAI-compatible endpoint on 127.0.0.1 that
answers every prompt (and every judge request) with markup and the prompt's own payload-laden
text; all audited by `audit check`.  Then, as a model and a link source could have answered,
probe evidence whose errors, finish reasons and parse failures are payloads and langlinks
evidence with payload titles and URLs are added to the audit; a predictions file of payloads.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import CHECK, TALLY, Case, run_case, write
from hostile_pages import BAD_URLS, ECHO, GOOD_URL, LANGS, PAYLOADS, build_world, endpoint, hostile_audit, odd_language  # noqa: F401  (endpoint is a fixture)
from markdown_it import MarkdownIt
from test_report import browser, images_rendered  # noqa: F401  (browser is a fixture)

from audit.cli import main
from audit.report.inert import markdown_code, markdown_link, markdown_text, web_url


@pytest.fixture(scope="module")
def reports(tmp_path_factory, endpoint) -> dict[str, Path]:  # noqa: F811
    """Four reports of the hostile world: the one `check` writes, a transfer report of the
    edited audit with predictions, one that links the transfer report's item pages, and one
    of the audit whose second language is named by a payload."""
    root = tmp_path_factory.mktemp("hostile-render")
    bench, index = build_world(root)
    runner = CliRunner()
    env = {"AUDIT_CACHE_DIR": str(root / "cache"), "OPENAI_BASE_URL": endpoint}
    assert runner.invoke(main, ["index", "minhash", str(index)], env=env).exit_code == 0
    args = ["check", str(bench), "--corpus", str(index), "--out", str(root / "bench.audit.jsonl"), "--probe-model", f"openai:{PAYLOADS['anchor']}"]
    checked = runner.invoke(main, args, env=env)
    assert checked.exit_code == 0, checked.output
    audit = hostile_audit(root / "bench.audit.jsonl", root / "hostile.audit.jsonl")
    predictions = root / "predictions.jsonl"
    rows = [{"item_id": p, "lang": lang, "prediction": p, "correct": (n + len(lang)) % 3 != 0} for n, p in enumerate(PAYLOADS.values()) for lang in LANGS]
    predictions.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    transfer = root / "javascript:window.__pwned=1 #?%20"
    args = ["report", "--audit", str(audit), "--bench", str(bench), "--predictions", str(predictions), "--out", str(transfer), "--bootstrap", "50"]
    reported = runner.invoke(main, args, env=env)
    assert reported.exit_code == 0, reported.output
    linked = root / "elsewhere" / "linked"
    linked.parent.mkdir()
    relinked = runner.invoke(main, ["report", "--audit", str(audit), "--bench", str(bench), "--out", str(linked), "--item-pages", str(transfer)], env=env)
    assert relinked.exit_code == 0, relinked.output
    odd = odd_language(audit, root / "odd.audit.jsonl")
    # A language can reach a page only through the benchmark's readers, which take language codes
    # alone; an audit relabelled with a payload language is refused before anything is drawn.
    languages = runner.invoke(main, ["report", "--audit", str(odd), "--bench", str(bench), "--out", str(root / "languages")], env=env)
    assert languages.exit_code == 2 and "field 'lang'" in languages.output and not (root / "languages").exists(), languages.output
    return {"checked": root / "bench.report", "transfer": transfer, "linked": linked}


@pytest.mark.parametrize("control", ["\x00", "\t", "\n", "\x1f", "\x7f"])
def test_a_web_url_holding_a_control_character_anywhere_stays_text(control):
    for url in (f"https://example.org/a{control}b", f"https://exa{control}mple.org/", f"https{control}://example.org/"):
        assert web_url(url) is None
    assert web_url("https://example.org/a\x80b ü") == "https://example.org/a\x80b ü"


@pytest.mark.parametrize("url", BAD_URLS)
def test_only_absolute_web_urls_become_links(url):
    assert web_url(url) is None
    assert markdown_link("title", url) == "title"


def test_web_urls_and_markdown_escapes():
    assert web_url(GOOD_URL) == GOOD_URL and web_url("HTTP://EXAMPLE.ORG/x") == "HTTP://EXAMPLE.ORG/x"
    assert markdown_link("a|b", GOOD_URL) == "[a\\|b](<https://example.org/wiki/A?b=1&c=%3C2%3E>)"
    assert markdown_text("x@evil.example <b> not_known _em_ a\nb") == "x\\@evil.example \\<b\\> not_known \\_em\\_ a b"
    assert markdown_code("ngram") == "`ngram`" and markdown_code("a`b|c") == "a\\`b\\|c"


def test_every_page_template_escapes_and_none_marks_input_safe():
    """Autoescaping is on for every template but the Markdown one, and nothing turns it off."""
    import re

    from audit.report.render import _environment

    environment = _environment()
    for name in environment.list_templates():
        assert environment.autoescape(name) is (not name.endswith(".md.j2")), name
        source = environment.loader.get_source(environment, name)[0]
        assert not re.search(r"\|\s*safe\b|Markup|autoescape\s+false", source), name


# The page's state after loading: what a payload would have changed or added.
INSPECT = """() => ({
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  title: document.title,
  marked: document.querySelectorAll('[data-pwn]').length,
  foreign: Array.from(document.querySelectorAll('script, iframe, frame, object, embed, svg, form, input, base, meta[http-equiv=refresh]')).map(e => e.outerHTML),
  images: Array.from(document.images).map(i => i.getAttribute('src')),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => [a.getAttribute('href'), a.protocol]),
  handlers: Array.from(document.querySelectorAll('*')).flatMap(e => Array.from(e.attributes).map(a => a.name)).filter(n => n.startsWith('on')),
  text: document.body.textContent,
})"""


def _tool_link(href: str, protocol: str) -> bool:
    """An http(s) URL as written, or a link the report made to its own pages: relative, no
    scheme, resolved by the browser into the report's own (file:) folder."""
    if web_url(href) is not None:
        return protocol in ("http:", "https:")
    return protocol == "file:" and not href.startswith(("/", "\\")) and ":" not in href.split("/")[0]


def _inspect(page, expected: list[str], title: str | None) -> dict:
    """Load checks on the open page; count one hostile case per payload it must show."""
    state = page.evaluate(INSPECT)
    assert state["pwned"] is None, state["pwned"]
    assert state["title"] == title if title is not None else "owned" not in state["title"]
    assert state["marked"] == 0 and state["foreign"] == [] and state["handlers"] == []
    assert all(src.startswith("data:image/png;base64,") for src in state["images"])
    assert [link for link in state["links"] if not _tool_link(*link)] == []
    for payload in expected:
        TALLY["cases"] += 1
        assert payload in state["text"], f"{payload!r} not shown as text"
        TALLY["handled"] += 1
    return state


def _open(browser, uri: str):  # noqa: F811
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(uri)
    page.wait_for_load_state("load")
    return page, dialogs


@pytest.mark.parametrize("name", ["checked", "transfer", "linked"])
def test_report_page_keeps_hostile_text_inert(reports, browser, name):  # noqa: F811
    report = reports[name]
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    page, dialogs = _open(browser, (report / "report.html").as_uri())
    policy = page.evaluate("() => document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]')?.content")
    assert policy is not None and policy.startswith("default-src 'none'")
    assert images_rendered(page) and page.locator("img").count() >= {"checked": 2, "linked": 3, "transfer": 5}[name]
    state = _inspect(page, list(PAYLOADS.values()), data["title"])
    assert [row["item_id"] for row in data["exposure"]["items"]] == list(PAYLOADS.values())
    if name != "checked":
        assert [GOOD_URL, "https:"] in state["links"]
        assert page.locator("#premise-items tr").count() == len(PAYLOADS) + 1
    if name == "linked":
        page.locator("#items-table a").first.click()
        page.wait_for_load_state("load")
        assert page.url.startswith((reports["transfer"] / "items").as_uri()) and page.locator("h1").inner_text().removeprefix("Item ") in PAYLOADS.values()
    page.close()
    assert dialogs == []


@pytest.mark.parametrize("name", ["checked", "transfer"])
def test_every_item_page_keeps_hostile_text_inert(reports, browser, name):  # noqa: F811
    """`checked`: the audit as `check` wrote it, the endpoint's answers included; the others
    add the link source's and the replayed model's evidence."""
    pages = sorted((reports[name] / "items").glob("*.html"))
    assert len(pages) == len(PAYLOADS)
    added = name != "checked"
    shown: Counter = Counter()
    for path in pages:
        page, dialogs = _open(browser, path.as_uri())
        item_id = page.locator("h1").inner_text().removeprefix("Item ")
        assert item_id in PAYLOADS.values()
        state = _inspect(page, [item_id, ECHO], f"Item {item_id} · provenance")
        # The item's id, documents, model outputs, judge replies and article titles.
        assert state["text"].count(item_id) >= (12 if added else 6), state["text"]
        shown.update(href for href, _ in state["links"])
        signals = ("ngram", "minhash", "probe", *(("langlinks", "pageviews") if added else ()))
        for signal in signals:
            assert page.locator(f".signal[data-signal={signal}]").count(), f"{signal} missing on {path.name}"
        assert page.locator(".signal[data-signal=probe] pre.output").count() and page.locator(".signal[data-signal=minhash] .doc").count()
        page.close()
        assert dialogs == []
    assert shown[GOOD_URL] >= (2 if added else 0) and not any(url in shown for url in BAD_URLS)


def test_markdown_report_shows_no_element_or_link_from_input(reports, browser, tmp_path):  # noqa: F811
    """Rendered as a Markdown renderer that passes raw HTML through would render it, beside
    the report so that its links to item pages resolve as they would there."""
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    for name in ("checked", "transfer", "linked"):
        text = (reports[name] / "report.md").read_text(encoding="utf-8")
        rendered = tmp_path / f"{name}.html"
        rendered.write_text(f"<!doctype html><html><head><title>md</title></head><body>{renderer.render(text)}</body></html>", encoding="utf-8")
        page, dialogs = _open(browser, rendered.as_uri())
        state = _inspect(page, list(PAYLOADS.values()), "md")
        items = page.locator("table").last.locator("tbody tr")
        assert items.count() == len(PAYLOADS) and all(items.nth(k).locator("td").count() == 6 for k in range(len(PAYLOADS)))
        for href, _ in state["links"]:
            assert web_url(href) is not None or href.startswith("items/") or href.startswith("../")
        page.close()
        assert dialogs == []


HOSTILE_IDS = {
    "mathtext": "$\\undefinedmacro$", "math and percent": "$x^2$ 100% {} %d", "newline": "a\nb\r\nc", "long": "x" * 5000,
    "rtl and cjk": "עברית العربية 中文 한국어", "markup": "<b data-pwn=1>x</b>", "dollar": "$", "underscore": "_legend_hidden",
}  # fmt: skip


def _bench(item_id: str) -> str:
    variants = {lang: {"question": f"{item_id}?", "answer": item_id, "context": f"{item_id} in {lang}"} for lang in LANGS}
    return json.dumps({"item_id": item_id, "source_lang": "en", "variants": variants}, ensure_ascii=False) + "\n"


CASES = [
    Case(f"item id: {name}", ("check", "odd.jsonl", *CHECK[2:], "--out", "odd.audit.jsonl"), ("report:",), exit_code=0, prepare=write("odd.jsonl", _bench(item_id)))
    for name, item_id in HOSTILE_IDS.items()
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_item_ids_are_audited_and_reported(case, sandbox, capfd):
    """Item ids that are mathtext, format strings, markup, several lines or 5,000 characters:
    the audit and its report (figures included) are written, the id kept as it was."""
    run_case(case, sandbox, capfd)
    report = sandbox / "odd.report"
    assert {p.name for p in report.iterdir()} >= {"report.html", "report.md", "report.json", "items"}
    written = json.loads((report / "report.json").read_text(encoding="utf-8"))["exposure"]["items"]
    assert [row["item_id"] for row in written] == [HOSTILE_IDS[case.name.removeprefix("item id: ")]]


PLOT_LABELS = [*HOSTILE_IDS.values(), "{}", "%(x)s", "\\n\\t", "right-to-left \u202e override"]


def _pixels(uri: str) -> tuple[int, int]:
    import base64
    import io

    from matplotlib import image

    assert uri.startswith("data:image/png;base64,")
    height, width, _ = image.imread(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])), format="png").shape
    return height, width


def test_plots_draw_labels_from_input_as_plain_text():
    """Every figure with every hostile label as a language, an item, a source, a stratum and a
    title: drawn (mathtext would fail on the undefined macro), and no label grows a figure past
    a page's width."""
    from audit.report import plots

    counts = {"seen": 1, "unseen": 1, "unknown": 0, "total": 2}
    stat = {"overall_success": {"n": 2, "value": 0.5, "ci_bootstrap": [0.25, 0.75]}, "transfer_score": {"n": 2, "value": 0.25, "ci_bootstrap": None}}
    for text in PLOT_LABELS:
        TALLY["cases"] += 1
        languages = [text, "en"]
        uris = [
            plots.exposure_bars({lang: counts for lang in languages}),
            plots.exposure_grid([{"item_id": text, "tags": {text: "seen", "en": "unseen"}}], languages),
            plots.transfer_heatmap([{"source": a, "target": b, "score": {"value": 0.5}} for a in languages for b in languages], "score"),
            plots.strata_bars({text: stat, "unseen": stat}, f"by target exposure in {text} alone"),
            plots.strata_bars({text: stat, "none": stat, "unknown": stat}, text, plots.combination_colors({text: stat, "none": stat, "unknown": stat})),
        ]
        assert all(max(_pixels(uri)) < 2000 for uri in uris), text
        TALLY["handled"] += 1
