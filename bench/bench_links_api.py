"""Langlinks through the MediaWiki API: `MediaWikiApi.langlinks`, 50 titles a request, beside one
title per request, against a local replay server.

The server (its own process, stdlib `ThreadingHTTPServer`, HTTP/1.1 keep-alive) answers
`action=query&prop=langlinks` (formatversion 1) from synthetic pages shaped like the recorded one
(`tests/fixtures/langlinks/api`, Python (programming language), 117 links): about 100 links each,
to the wikis that article links to, with titles in their scripts.  Like Wikipedia, it gives at
most 500 langlinks a response (`lllimit=max` for a client without `apihighlimits`) and pages the
rest with `llcontinue`, so a batch of 50 such pages takes about 10 requests.  `--latency-ms`
delays every answer, as a round trip to Wikipedia would.  Each client runs in a fresh process and
reports its time and how far its peak RSS (`VmHWM`) rose; all must find the same links:
  - ours: `MediaWikiApi.langlinks` with `min_interval=0`;
  - wikipedia-api (PyPI `wikipedia-api`, the library a user would pick): `Wikipedia.page(t)
    .langlinks`, one title per request, pointed at the server through its `transport` argument;
  - requests: the plain loop a user would otherwise write, one title per request.

    python bench/bench_links_api.py --pages 2000
    python bench/bench_links_api.py --pages 300 --latency-ms 20
    python bench/bench_links_api.py --pages 300 --latency-ms 20 --links 3   # few langlinks, like ECLeKTic's articles
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fresh import in_fresh_process, measure

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "langlinks" / "api" / "wikipedia-api-cassettes" / "TestVcrWikiLanglinks.test_langlinks.body.json"
LIMIT = 500
USER_AGENT = "corpus-audit-bench/0.1 (bench_links_api; https://github.com/corpus-audit/corpus-audit)"
ECLEKTIC_SOURCE_ARTICLES = 384


def make_pages(count: int, links: int, seed: int) -> dict[str, list[dict[str, str]]]:
    """Page title → its langlinks, about `links` (±10%) of the recorded article's 117 wikis each,
    in the recorded order, with titles made from the recorded ones (so in their scripts)."""
    recorded = json.loads(RECORDED.read_bytes())["query"]["pages"]["23862"]["langlinks"]
    rng = random.Random(seed)
    pages = {}
    for n in range(count):
        base = recorded[n % len(recorded)]["*"]
        title = f"{base[:1].upper()}{base[1:]} {n}"
        kept = sorted(rng.sample(range(len(recorded)), k=min(len(recorded), rng.randint(links - links // 10, links + links // 10))))
        pages[title] = [{"lang": recorded[i]["lang"], "url": f"{recorded[i]['url']}_{n}", "*": f"{recorded[i]['*']} {n}"} for i in kept]
    return pages


def serve(pages_count: str, links: str, seed: str, latency_ms: str) -> None:
    """The replay server; prints its port, then answers until killed.  `GET /stats` counts the
    API requests so far."""
    pages = make_pages(int(pages_count), int(links), int(seed))
    ids = {title: 1_000 + n for n, title in enumerate(pages)}
    # Each link with its continuation key, `pageid|prefix`, as the API orders and names them.
    keyed = {title: [(f"{ids[title]}|{urlsplit(link['url']).netloc.split('.')[0]}", link) for link in links] for title, links in pages.items()}
    latency = float(latency_ms) / 1000
    counted = {"requests": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/stats":
                self.send(json.dumps(counted).encode())
                return
            with lock:
                counted["requests"] += 1
            params = dict(parse_qsl(urlsplit(self.path).query, keep_blank_values=True))
            time.sleep(latency)
            self.send(json.dumps(answer(params)).encode())

        def send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def answer(params: dict[str, str]) -> dict[str, Any]:
        query: dict[str, Any] = {}
        out: dict[str, Any] = {}
        found = []
        for n, title in enumerate(params["titles"].split("|"), start=1):
            name = title.replace("_", " ")
            if name != title:
                query.setdefault("normalized", []).append({"from": title, "to": name})
            if name in pages:
                found.append(name)
                out[str(ids[name])] = {"pageid": ids[name], "ns": 0, "title": name}
            else:
                out[str(-n)] = {"ns": 0, "title": name, "missing": ""}
        limit = LIMIT if params.get("lllimit") == "max" else min(LIMIT, int(params.get("lllimit", 10)))
        ordered = [(title, key, link) for title in sorted(found, key=ids.__getitem__) for key, link in keyed[title]]
        start = next(n for n, (_, key, _) in enumerate(ordered) if key == params["llcontinue"]) if "llcontinue" in params else 0
        for title, _, link in ordered[start:start + limit]:
            out[str(ids[title])].setdefault("langlinks", []).append(link)
        more = {"continue": {"llcontinue": ordered[start + limit][1], "continue": "||"}} if start + limit < len(ordered) else {"batchcomplete": ""}
        return {**more, "query": {**query, "pages": out}}

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def fingerprint(found: dict[str, list[str] | None]) -> dict[str, Any]:
    """How many titles were found, how many links, and a hash of every title's sorted link titles."""
    digest = hashlib.sha256()
    for title in sorted(found):
        digest.update(json.dumps([title, sorted(found[title]) if found[title] is not None else None], ensure_ascii=False).encode())
    return {"titles": len(found), "found": sum(v is not None for v in found.values()), "links": sum(len(v or ()) for v in found.values()), "hash": digest.hexdigest()[:16]}


def run_ours(endpoint: str, titles_file: str) -> dict[str, Any]:
    from audit.links.api import HttpSettings, MediaWikiApi

    titles = json.loads(Path(titles_file).read_text(encoding="utf-8"))
    api = MediaWikiApi(endpoint, HttpSettings(min_interval=0.0))
    answers = api.langlinks("en", titles)
    assert not answers.errors, next(iter(answers.errors.values()))
    return fingerprint({article.title: [link.title for link in found.links] if found.found else None for article, found in answers.found.items()})


def run_wikipedia_api(endpoint: str, titles_file: str) -> dict[str, Any]:
    import httpx
    import wikipediaapi

    local = urlsplit(endpoint)

    class Local(httpx.HTTPTransport):
        """Sends what the library addresses to https://{lang}.wikipedia.org/w/api.php to the replay server."""

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            wiki = request.url.host.split(".")[0]
            request.url = request.url.copy_with(scheme="http", host=local.hostname, port=local.port, path=local.path.replace("{wiki}", wiki))
            return super().handle_request(request)

    wiki = wikipediaapi.Wikipedia(user_agent=USER_AGENT, language="en", transport=Local(), timeout=30.0)
    found = {}
    for title in json.loads(Path(titles_file).read_text(encoding="utf-8")):
        page = wiki.page(title)
        links = page.langlinks
        found[title] = [linked.title for linked in links.values()] if page.pageid > 0 else None
    return fingerprint(found)


def run_requests(endpoint: str, titles_file: str) -> dict[str, Any]:
    import requests

    session = requests.Session()
    url = endpoint.replace("{wiki}", "en")
    found = {}
    for title in json.loads(Path(titles_file).read_text(encoding="utf-8")):
        params = {"action": "query", "prop": "langlinks", "titles": title, "lllimit": "max", "llprop": "url", "redirects": "1", "format": "json"}
        response = session.get(url, params=params, headers={"User-Agent": USER_AGENT}, timeout=30)
        response.raise_for_status()
        page = next(iter(response.json()["query"]["pages"].values()))
        found[title] = None if "missing" in page else [link["*"] for link in page.get("langlinks", ())]
    return fingerprint(found)


STEPS: dict[str, Callable[..., dict[str, Any]]] = {"ours": run_ours, "wikipedia-api": run_wikipedia_api, "requests": run_requests}
LABELS = {
    "ours": "`MediaWikiApi.langlinks`, 50 titles a request",
    "wikipedia-api": "wikipedia-api `page(t).langlinks`, one title a request",
    "requests": "plain `requests` loop, one title a request",
}


def server_requests(port: int) -> int:
    import requests

    return requests.get(f"http://127.0.0.1:{port}/stats", timeout=10).json()["requests"]


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(measure(lambda: STEPS[sys.argv[2]](*sys.argv[3:]))))
        return
    if sys.argv[1:2] == ["--serve"]:
        serve(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2000, help="synthetic pages on the server, each asked once")
    parser.add_argument("--links", type=int, default=100, help="langlinks a page, about (at most 117)")
    parser.add_argument("--missing", type=float, default=0.02, help="share of asked titles with no page")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before every answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work" / "links_api")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    titles = list(make_pages(args.pages, args.links, args.seed))
    titles += [f"Absent article {n}" for n in range(round(len(titles) * args.missing))]
    random.Random(args.seed).shuffle(titles)
    titles_file = args.work / "titles.json"
    titles_file.write_text(json.dumps(titles, ensure_ascii=False), encoding="utf-8")
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(args.pages), str(args.links), str(args.seed), str(args.latency_ms)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}/{{wiki}}/w/api.php"
        results = {}
        for step in STEPS:
            before = server_requests(port)
            figures = in_fresh_process(__file__, step, endpoint, str(titles_file))
            results[step] = {**figures, "requests": server_requests(port) - before}
    finally:
        server.kill()
        server.wait()
    fingerprints = {(r["titles"], r["found"], r["links"], r["hash"]) for r in results.values()}
    assert len(fingerprints) == 1, results
    ours = results["ours"]
    print(f"{len(titles):,} titles ({ours['found']:,} pages, {ours['links']:,} links, about {ours['links'] / ours['found']:.0f} a page), "
          f"latency {args.latency_ms:g} ms; every client found the same links")
    print("\n| client | requests | seconds | titles/s | requests/s | time / ours | peak RSS added |\n|---|---|---|---|---|---|---|")
    for step, figures in results.items():
        print(f"| {LABELS[step]} | {figures['requests']:,} | {figures['seconds']} | {len(titles) / figures['seconds']:,.0f} | "
              f"{figures['requests'] / figures['seconds']:,.0f} | {figures['seconds'] / ours['seconds']:.2f}x | {figures['peak_rss_added_mib']} MiB |")
    per_title = ours["requests"] / len(titles)
    print(f"\nAt the polite default (request starts 0.1 s apart), at least, ours asking {per_title:.3f} requests a title here:")
    print("| work | batch requests (ours) | time | one title a request | time |\n|---|---|---|---|---|")
    few = math.ceil(ECLEKTIC_SOURCE_ARTICLES / 50)
    print(f"| ECLeKTic, {ECLEKTIC_SOURCE_ARTICLES} source articles (few langlinks each) | {few} | {few * 0.1:.1f} s | {ECLEKTIC_SOURCE_ARTICLES} | {ECLEKTIC_SOURCE_ARTICLES * 0.1:.1f} s |")
    for label, requests_needed in (("10,000 titles with few langlinks", math.ceil(10_000 / 50)), (f"10,000 titles like these (about {ours['links'] / ours['found']:.0f} links)", math.ceil(10_000 * per_title))):
        print(f"| {label} | {requests_needed:,} | {requests_needed * 0.1:,.0f} s | 10,000 | 1,000 s |")
    (args.work / "results.json").write_text(json.dumps({"titles": len(titles), "links": args.links, "latency_ms": args.latency_ms, "results": results}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
