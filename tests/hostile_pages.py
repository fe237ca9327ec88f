"""The hostile world the report pages are rendered from (see tests/test_hostile_render.py): a
benchmark and a corpus whose every string is a payload, a model endpoint on 127.0.0.1 that
answers with markup, and the evidence a model and a link source could add to an audit."""
from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from audit.auditfile import read_audit, write_audit
from audit.evidence import Evidence
from audit.exposure import decide, decide_knowledge, item_exposure
from audit.index.build import build_index
from audit.policyfile import load_policy

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


def build_world(root: Path) -> tuple[Path, Path]:
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


def hostile_audit(audit_path: Path, out: Path) -> Path:
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


def odd_language(audit_path: Path, out: Path) -> Path:
    """The audit with its French variants relabelled as ODD_LANG."""
    audit = read_audit(audit_path)
    manifest = {k: v for k, v in audit.manifest.items() if k not in ("record", "schema_version", "records", "records_sha256")}
    manifest["summary"]["languages"][ODD_LANG] = manifest["summary"]["languages"].pop("fr")
    records = [{k: v for k, v in record.items() if k != "record"} | ({"lang": ODD_LANG} if record["lang"] == "fr" else {}) for record in audit.records]
    write_audit(out, manifest, records)
    return out
