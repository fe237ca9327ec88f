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
import random
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import CHECK, TALLY, Case, run_case, write
from markdown_it import MarkdownIt
from test_report import browser, images_rendered  # noqa: F401  (browser is a fixture)

from audit.auditfile import read_audit, write_audit
from audit.cli import main
from audit.evidence import Evidence
from audit.exposure import decide, decide_knowledge, item_exposure, load_policy
from audit.indexing import build_index
from audit.report.inert import markdown_code, markdown_link, markdown_text, web_url

PAYLOADS = {
    "script": "<script>window.__pwned='script';document.title='owned'</script>",
    "img": "<img src=x onerror=\"window.__pwned='img'\" data-pwn=img>",
    "svg": "<svg onload=\"window.__pwned='svg'\" data-pwn=svg><circle r=9></circle></svg>",
    "iframe": "<iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\" data-pwn=iframe></iframe>",
    "bold": "<b data-pwn=bold>bold</b>",
    "attribute": "x\" data-pwn=\"attribute\" onmouseover=\"window.__pwned='attribute'",
    "anchor": "<a href=\"javascript:window.__pwned='anchor'\" data-pwn=anchor>click me</a>",
    "entity": "&lt;b data-pwn=entity&gt;not bold&lt;/b&gt; &amp;",
    "mathtext": "$\\undefinedmacro$",
    "format": "50% {0} %s {{ 7*7 }} {% raw %}",
    "markdown": "[md](javascript:window.__pwned='md') ![i](x) | cell | **b** `t` <b data-pwn=md>",
    "scripts": "עברית العربية 中文 日本語 한국어 \u202etxet desrever",
}
# URLs a browser would follow somewhere other than the web, or read otherwise than written.
BAD_URLS = (
    "javascript:window.__pwned='url'", "JaVaScRiPt:window.__pwned='case'", "  javascript:window.__pwned='blank'",
    "java\tscript:window.__pwned='tab'", "\x01javascript:window.__pwned='control'", "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)", "//evil.example/protocol-relative", "relative/page.html", "&#106;avascript:alert(1)",
    "https:evil.example", "file:///etc/passwd",
)  # fmt: skip
GOOD_URL = "https://example.org/wiki/A?b=1&c=<2>"
LANGS = ("en", "fr")
POLICY = load_policy()
WORDS = ["river", "harbour", "ancient", "market", "northern", "bridge", "festival", "valley", "mountain", "library", "painter", "engine", "railway", "island", "castle", "garden", "merchant", "ocean", "theatre"]
# A language named by a payload, as an edited audit file can carry one (the benchmark readers
# refuse such codes; a report draws what the audit holds).
ODD_LANG = "$\\undefinedmacro$ <b data-pwn=lang>"
# What the endpoint's model puts before the tail of every prompt it echoes.
ECHO = "<b data-pwn=echo>echoed</b>"
# The probed model, the judge and the link source are named by payloads too.
MODEL, SOURCE = PAYLOADS["bold"], PAYLOADS["img"]


def _passage(rng: random.Random, n: int, lang: str) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(28)) + f" passage {n} {lang}"


def _world(root: Path) -> tuple[Path, Path]:
    """The benchmark and the corpus: item n's id and every text of it carry payload n, and so
    do the ids, titles and URLs of the documents that hold its passages."""
    rng = random.Random(23)
    items, docs = [], []
    for n, payload in enumerate(PAYLOADS.values()):
        variants = {}
        for lang in LANGS:
            passage = _passage(rng, n, lang)
            variants[lang] = {"question": f"{payload} asks?", "answer": payload, "context": f"{passage} {payload}", "title": payload, "url": BAD_URLS[n % len(BAD_URLS)]}
            docs.append({"id": payload, "title": payload, "url": BAD_URLS[(n + len(docs)) % len(BAD_URLS)], "text": f"{passage} {payload}"})
        items.append({"item_id": payload, "source_lang": "en", "variants": variants})
    docs.append({"id": "good", "title": "a good link", "url": GOOD_URL, "text": " ".join(WORDS)})
    bench = root / "bench.jsonl"
    bench.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "docs.jsonl").write_text("".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs), encoding="utf-8")
    build_index([root / "docs"], root / "index")
    return bench, root / "index"


def _model_evidence(payload: str, n: int) -> list[Evidence]:
    """What a probed model and its judge said, every word of it a payload."""
    judge = {"prompt": f"judge this: {payload}", "output": payload, "verdict": None, "parse_error": f"no JSON object in {payload}"}
    summary = Evidence("probe", MODEL, "summary", status="unknown", error=payload,
                       figures={"model": MODEL, "entity": payload, "judge": None, "answer_recall": 0.5, "chrf": 0.3},
                       provenance=[{"prompt": payload, "decoding": {"temperature": 0.0}, "output": payload, "cached": False, "finish_reason": payload, "judge": judge}])  # fmt: skip
    direct = Evidence("probe", MODEL, "direct", figures={"model": MODEL, "matched": n % 2 == 0, "expected": payload, "similarity": 0.9, "masked": payload, "hidden": [payload]},
                      provenance=[{"prompt": payload, "output": payload, "error": payload}])  # fmt: skip
    prefix = Evidence("probe", MODEL, "prefix", figures={"model": MODEL, "similarity": 0.2, "chrf": 0.7, "reference": payload}, provenance=[{"prompt": payload, "output": payload}])
    return [summary, direct, prefix]


def _link_evidence(payload: str, n: int, lang: str) -> list[Evidence]:
    """A link source's answer: an article whose title and URL are payloads, and a signal with
    no template of its own whose provenance carries a URL."""
    url = GOOD_URL if n == 0 else BAD_URLS[(n + len(lang)) % len(BAD_URLS)]
    figures = {"item_article": payload, "article": "exists", "title": payload, "url": url, "existed": lang != "en", "created": "2020-01-01T00:00:00Z",
               "as_of": "2024-01-01", "judged_at": "2024-01-01", "redirected_from": payload, "answered_by": payload}  # fmt: skip
    links = Evidence("langlinks", SOURCE, "article", figures=figures, provenance=[{"wiki": lang, "title": payload, "url": url, "source": payload}])
    views = Evidence("pageviews", SOURCE, payload, figures={payload: payload, "views": 3}, provenance=[{"url": url, "title": payload, "snippet": f"{payload} in a page", "snippet_match": [0, 5]}])
    return [links, views]


def _hostile_audit(audit_path: Path, out: Path) -> Path:
    """The audit `check` wrote, with the model's and the link source's evidence added, decided
    again by the policy, and a manifest whose names are payloads."""
    audit = read_audit(audit_path)
    index = {payload: n for n, payload in enumerate(PAYLOADS.values())}
    records = []
    for record in audit.records:
        n = index[record["item_id"]]
        found = [Evidence(**e) for e in record["evidence"]] + _model_evidence(record["item_id"], n) + _link_evidence(record["item_id"], n, record["lang"])
        decision, knowledge = decide(POLICY, found), decide_knowledge(POLICY, found)
        records.append({k: v for k, v in record.items() if k != "record"} | {
            "exposure": decision.exposure, "decided_by": [*decision.decided_by, {"reason": record["item_id"]}],
            "knowledge": knowledge.knowledge if n % 3 else "known", "knowledge_decided_by": [*knowledge.decided_by, {"reason": record["item_id"]}],
            "evidence": [e.to_dict() for e in found],
        })  # fmt: skip
    by_item: dict[str, dict[str, str]] = {}
    for record in records:
        by_item.setdefault(record["item_id"], {})[record["lang"]] = record["exposure"]
    languages: dict[str, Counter] = {}
    for record in records:
        record["item_exposure"] = item_exposure(record["source_lang"], by_item[record["item_id"]])
        languages.setdefault(record["lang"], Counter())[record["exposure"]] += 1
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    payload = PAYLOADS["svg"]
    manifest["corpora"] = [*manifest["corpora"], {"name": payload, "backend": payload, "location": BAD_URLS[0], "fingerprint": payload, "documents": 1}]
    manifest["signals"] = [*manifest["signals"], "langlinks", "probe", "pageviews"]
    manifest["signal_runs"] = [*manifest["signal_runs"], {"signal": payload, "source": payload, "ran": False, "reason": payload}]
    manifest["policy"] = manifest["policy"] | {"name": payload}
    manifest["models"] = {"probe": {"name": MODEL, "model_id": payload, "backend": payload}, "judge": {"name": payload, "model_id": MODEL, "backend": "x"}, "prompts": {"file": payload, "digest": payload}}
    manifest["links"] = {"as_of": "2023-06-01", "sources": [{"name": SOURCE, "backend": payload, "wikis": {payload: payload}}]}
    manifest["summary"] = {
        "languages": {lang: {tag: c[tag] for tag in ("seen", "unseen", "unknown")} | {"total": c.total()} for lang, c in languages.items()},
        "items": dict(Counter(r["item_exposure"] for r in records if r["lang"] == r["source_lang"])),
    }
    write_audit(out, manifest, records)
    return out


class _Echo(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint whose model answers with markup and the prompt."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content = ECHO + body["messages"][-1]["content"][-300:]
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        data = json.dumps({"id": "echo", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet: the test reads what the audit recorded, not the log."""


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


def _odd_language(audit_path: Path, out: Path) -> Path:
    """The audit with its French variants relabelled as ODD_LANG."""
    audit = read_audit(audit_path)
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    manifest["summary"]["languages"][ODD_LANG] = manifest["summary"]["languages"].pop("fr")
    records = [{k: v for k, v in record.items() if k != "record"} | ({"lang": ODD_LANG} if record["lang"] == "fr" else {}) for record in audit.records]
    write_audit(out, manifest, records)
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory, endpoint) -> dict[str, Path]:
    """Four reports of the hostile world: the one `check` writes, a transfer report of the
    edited audit with predictions, one that links the transfer report's item pages, and one
    of the audit whose second language is named by a payload."""
    root = tmp_path_factory.mktemp("hostile-render")
    bench, index = _world(root)
    runner = CliRunner()
    env = {"AUDIT_CACHE_DIR": str(root / "cache"), "OPENAI_BASE_URL": endpoint}
    assert runner.invoke(main, ["index", "minhash", str(index)], env=env).exit_code == 0
    args = ["check", str(bench), "--corpus", str(index), "--out", str(root / "bench.audit.jsonl"), "--probe-model", f"openai:{PAYLOADS['anchor']}"]
    checked = runner.invoke(main, args, env=env)
    assert checked.exit_code == 0, checked.output
    audit = _hostile_audit(root / "bench.audit.jsonl", root / "hostile.audit.jsonl")
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
    odd = _odd_language(audit, root / "odd.audit.jsonl")
    languages = runner.invoke(main, ["report", "--audit", str(odd), "--bench", str(bench), "--out", str(root / "languages")], env=env)
    assert languages.exit_code == 0, languages.output
    return {"checked": root / "bench.report", "transfer": transfer, "linked": linked, "languages": root / "languages"}


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


@pytest.mark.parametrize("name", ["checked", "transfer", "linked", "languages"])
def test_report_page_keeps_hostile_text_inert(reports, browser, name):  # noqa: F811
    report = reports[name]
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    page, dialogs = _open(browser, (report / "report.html").as_uri())
    policy = page.evaluate("() => document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]')?.content")
    assert policy is not None and policy.startswith("default-src 'none'")
    assert images_rendered(page) and page.locator("img").count() >= {"checked": 2, "linked": 3, "transfer": 5, "languages": 3}[name]
    state = _inspect(page, [*PAYLOADS.values(), *([ODD_LANG] if name == "languages" else [])], data["title"])
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


@pytest.mark.parametrize("name", ["checked", "transfer", "languages"])
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
        state = _inspect(page, [item_id, ECHO, *([ODD_LANG] if name == "languages" else [])], f"Item {item_id} · provenance")
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
    for name in ("checked", "transfer", "linked", "languages"):
        text = (reports[name] / "report.md").read_text(encoding="utf-8")
        rendered = tmp_path / f"{name}.html"
        rendered.write_text(f"<!doctype html><html><head><title>md</title></head><body>{renderer.render(text)}</body></html>", encoding="utf-8")
        page, dialogs = _open(browser, rendered.as_uri())
        state = _inspect(page, [*PAYLOADS.values(), *([ODD_LANG] if name == "languages" else [])], "md")
        items = page.locator("table").last.locator("tbody tr")
        assert items.count() == len(PAYLOADS) and all(items.nth(k).locator("td").count() == 4 for k in range(len(PAYLOADS)))
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
    run_case(case, sandbox, capfd)
    report = sandbox / "odd.report"
    assert {p.name for p in report.iterdir()} >= {"report.html", "report.md", "report.json", "items"}
    assert json.loads((report / "report.json").read_text(encoding="utf-8"))["exposure"]["items"][0]["item_id"] == json.loads(_bench_line(case))["item_id"]


def _bench_line(case: Case) -> str:
    return _bench(HOSTILE_IDS[case.name.removeprefix("item id: ")])


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
