"""Benchmark: the public infini-gram API's documented examples against `audit serve`, with the
Llama-2 tokenizer the public indexes use.

    python bench/bench_llama_protocol.py     # a few seconds

The Llama-2 tokenizer may not be committed (its licence), so the tests serve an OLMo-tokenized
index and this script, which reads the tokenizer from ../shared/data/tokenizers, checks the
examples whose token ids only Llama-2 gives: the Getting Started `count` request field for
field, and the documented equivalence of `query` and `query_ids` (plain and CNF).  It builds
the tests' token index (`tests/test_server.py`) over the same documents, starts
`python -m audit.server` on 127.0.0.1, sends each documented request REPEATS times, and prints
a Markdown table: whether the answer is the documented one, the server's own latency and the
round trip.  It exits 1 when any answer differs.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT.parent / "shared" / "data" / "tokenizers" / "llama2-tokenizer"
REPEATS = 50

sys.path.insert(0, str(ROOT / "tests"))
from test_server import TOKEN_DOCS, Served, build_token_index, start_server  # noqa: E402

NLP, DEEP, AI, ML = [5613, 4086, 9068], [6483, 6509], [23116, 21082], [4933, 6509]


def documented(served: Served) -> list[tuple[str, dict, bool]]:
    """Each documented request, its answer, and whether the answer is the documented one."""

    def ask(**request: object) -> dict:
        return served.post({"index": "llama", "query_type": "count", **request}).json()

    example = ask(query="University of Washington")
    by_text, by_ids = ask(query="natural language processing"), ask(query_ids=NLP)
    cnf_text, cnf_ids = ask(query="natural language processing AND deep learning"), ask(query_ids=[[NLP], [DEEP]])
    either = ask(query="natural language processing OR artificial intelligence AND deep learning OR machine learning")
    return [
        (
            "count `University of Washington` (Getting Started)",
            example,
            set(example) == {"count", "approx", "latency", "token_ids", "tokens"}
            and example["token_ids"] == [3014, 310, 7660]
            and example["tokens"] == ["\u2581University", "\u2581of", "\u2581Washington"]
            and example["count"] == 3
            and example["approx"] is False,
        ),
        ("count `natural language processing`", by_text, by_text["token_ids"] == NLP and by_text["count"] == 2),
        ("count query_ids `[5613, 4086, 9068]`", by_ids, by_ids["count"] == by_text["count"]),
        ("count `natural language processing AND deep learning`", cnf_text, cnf_text["token_ids"] == [[NLP], [DEEP]] and cnf_text["count"] >= 1),
        ("count CNF query_ids `[[[5613, 4086, 9068]], [[6483, 6509]]]`", cnf_ids, cnf_ids["count"] == cnf_text["count"]),
        ("count `... OR artificial intelligence AND deep learning OR machine learning`", either, either["token_ids"] == [[NLP, AI], [DEEP, ML]]),
    ]


def main() -> int:
    if not (LLAMA / "tokenizer.json").exists():
        raise SystemExit(f"{LLAMA}: no tokenizer.json (this benchmark needs ../shared beside the repository)")
    with tempfile.TemporaryDirectory() as work:
        index = build_token_index(TOKEN_DOCS, LLAMA, Path(work) / "index")
        served = start_server("--index", f"llama={index}", "--tokenizer", f"llama={LLAMA}", "--jobs-dir", str(Path(work) / "jobs"))
        try:
            rows, round_trips = documented(served), []
            for _ in range(REPEATS):
                started = time.perf_counter()
                documented(served)
                round_trips.append((time.perf_counter() - started) * 1000 / len(rows))
        finally:
            served.stop()
    print("| documented request | as documented | server latency | answer |")
    print("|---|---|---|---|")
    for name, answer, ok in rows:
        print(f"| {name} | {ok} | {answer['latency']:.3f} ms | count {answer['count']}, token_ids {answer['token_ids']} |")
    print(f"\nMedian round trip per request over {REPEATS} rounds: {statistics.median(round_trips):.2f} ms")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
