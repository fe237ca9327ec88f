"""`audit check`, `audit report`, `audit corpora` and `audit probe serve-model` against bad and
odd input: every benchmark format damaged in every way (types, sizes, encodings, ids,
languages), every option given a bad value, and valid-but-odd inputs that must succeed.  The
harness is `tests/hostile.py`."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import BINARY, CHECK, REPORT, TALLY, Case, both, run_case, snapshot, write

from audit.evaluate.metrics import MAX_DRAW_CELLS, MAX_DRAWS, too_many_draws

NO_OUT = ("--out", "new.audit.jsonl", "--no-report")
NO_PROXY = tuple((name, "") for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"))


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


CLOSED = f"http://127.0.0.1:{closed_port()}/v1"
# A port something listens on for the whole run.
TAKEN = socket.create_server(("127.0.0.1", 0))


def check(bench: str, *options: str) -> tuple[str, ...]:
    return ("check", bench, "--corpus", "index", *NO_OUT, *options)


def item(item_id: object = "1", source: object = "en", **variants: object) -> str:
    """One line of the tool's JSONL."""
    return json.dumps({"item_id": item_id, "source_lang": source, "variants": variants or {"en": {"question": "Where is Bremerhaven?", "answer": "Germany"}}}, ensure_ascii=False) + "\n"


def fifo(name: str):
    return lambda root: os.mkfifo(root / name)


def sparse(name: str, size: int):
    """A regular file of `size` zero bytes and no newline, without writing them."""
    def prepare(root: Path) -> None:
        with open(root / name, "wb") as handle:
            handle.truncate(size)

    return prepare


def predictions(*rows: dict | str) -> str:
    return "".join(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def first_item(root: Path) -> dict:
    return json.loads((root / "bench.jsonl").read_text(encoding="utf-8").splitlines()[0])


def one_language(root: Path) -> None:
    record = first_item(root)
    record["variants"] = {"en": record["variants"]["en"]}
    (root / "one.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")


def odd_ids(root: Path) -> None:
    record = first_item(root)
    lines = [json.dumps({**record, "item_id": name}, ensure_ascii=False) for name in ("سؤال-١", "問題・二", "🦜🔥3", "[bold]$x$<b>")]
    (root / "odd.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


ECLEKTIC_CSV_HEAD = "original_lang,original_content,original_question,original_answer,content,question,answer,language,translated,q_id,title,url"
ECLEKTIC_ROW = 'en,Bremerhaven is in Germany.,Where is Bremerhaven?,Germany,Bremerhaven is in Germany.,Where is Bremerhaven?,Germany,en,False,7,AFN,https://en.wikipedia.org/wiki/AFN'
ECLEKTIC_WIDE = {"q_id": 9, "original_lang": "en", "en_q": "Where is Bremerhaven?", "en_a": "Germany", "de_q": "Wo liegt Bremerhaven?", "de_a": "Deutschland"}
SQUAD = {"data": [{"title": "T", "paragraphs": [{"context": "Bremerhaven is in Germany.", "qas": [{"id": "q1", "question": "Where?", "answers": [{"text": "Germany", "answer_start": 18}]}]}]}]}
MKQA = {"example_id": 1, "query": "where is bremerhaven", "queries": {"en": "where is bremerhaven", "de": "wo ist bremerhaven"},
        "answers": {"en": [{"type": "entity", "text": "Germany"}], "de": [{"type": "entity", "text": "Deutschland"}]}}
TYDI = {"example_id": 5, "question_text": "Where?", "document_plaintext": "Bremerhaven is in Germany.", "document_title": "B", "document_url": "https://en.wikipedia.org/wiki/B",
        "language": "english", "annotations": [{"minimal_answer": {"plaintext_start_byte": 18, "plaintext_end_byte": 25}, "passage_answer": {"candidate_index": 0}, "yes_no_answer": "NONE"}],
        "passage_answer_candidates": [{"plaintext_start_byte": 0, "plaintext_end_byte": 26}]}


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def bmlama_crlf(root: Path) -> None:
    """Two BMLAMA files of three facts, with Windows line ends and a byte-order mark."""
    (root / "bm").mkdir()
    for lang in ("en", "fr"):
        head = (FIXTURES / "bmlama17" / f"{lang}.tsv").read_text(encoding="utf-8").splitlines()[:4]
        (root / "bm" / f"{lang}.tsv").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(head).encode() + b"\r\n")


def copy_fixture(name: str):
    return lambda root: shutil.copytree(FIXTURES / name, root / name)


def jline(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


CHECK_CASES = [
    # the tool's JSONL, damaged
    Case("check jsonl: item id an array", check("b.jsonl"), ("b.jsonl:1", "item_id"), prepare=write("b.jsonl", item(["1"]))),
    Case("check jsonl: variants a string", check("b.jsonl"), ("b.jsonl:1", "variants"), prepare=write("b.jsonl", '{"item_id": "1", "source_lang": "en", "variants": "en"}\n')),
    Case("check jsonl: question an object", check("b.jsonl"), ("b.jsonl:1", "question"), prepare=write("b.jsonl", item(en={"question": {"text": "Q?"}}))),
    Case("check jsonl: answer NaN", check("b.jsonl"), ("b.jsonl:1", "answer"), prepare=write("b.jsonl", '{"item_id": "1", "source_lang": "en", "variants": {"en": {"question": "Q?", "answer": NaN}}}\n')),
    Case("check jsonl: source language a number", check("b.jsonl"), ("b.jsonl:1", "source_lang"), prepare=write("b.jsonl", item(source=7))),
    Case("check jsonl: unknown language", check("b.jsonl"), ("b.jsonl:1", "qqq"), prepare=write("b.jsonl", item(en={"question": "Q?"}, qqq={"question": "Q?"}))),
    Case("check jsonl: a terminal escape in a language code", check("b.jsonl"), ("b.jsonl:1", "\\x1b[31m"), prepare=write("b.jsonl", item(source="\x1b[31mred"))),
    Case("check jsonl: source language without a variant", check("b.jsonl"), ("b.jsonl:1", "'fr'"), prepare=write("b.jsonl", item(source="fr"))),
    Case("check jsonl: no variants", check("b.jsonl"), ("b.jsonl:1",), prepare=write("b.jsonl", '{"item_id": "1", "source_lang": "en", "variants": {}}\n')),
    Case("check jsonl: empty variant", check("b.jsonl"), ("b.jsonl",), prepare=write("b.jsonl", item(en={}))),
    Case("check jsonl: duplicate ids", check("b.jsonl"), ("b.jsonl:2", "duplicate item id '1'"), prepare=write("b.jsonl", item() + item())),
    Case("check jsonl: a JSON array per line", check("b.jsonl"), ("b.jsonl:1", "JSON object"), prepare=write("b.jsonl", '{"item_id": "1"}\n'.replace('{"item_id": "1"}', "[1, 2]"))),
    Case("check jsonl: deeply nested", check("b.jsonl"), ("b.jsonl:1",), prepare=write("b.jsonl", '{"item_id": "1", "meta": ' + "[" * 100000 + "]" * 100000 + "}\n")),
    Case("check jsonl: a 5000-digit item id", check("b.jsonl"), ("b.jsonl:1",), prepare=write("b.jsonl", '{"item_id": ' + "9" * 5000 + ', "source_lang": "en", "variants": {"en": {"question": "Q?"}}}\n')),
    Case("check jsonl: lone surrogate in a question", check("b.jsonl"), ("b.jsonl:1", "item '1'", "variants.en.question", "surrogate"),
         prepare=write("b.jsonl", '{"item_id": "1", "source_lang": "en", "variants": {"en": {"question": "Where \\ud800 is it?"}}}\n')),
    Case("check jsonl: lone surrogate in an id", check("b.jsonl"), ("b.jsonl:1", "item_id", "surrogate"), prepare=write("b.jsonl", '{"item_id": "x\\udc00", "source_lang": "en", "variants": {"en": {"question": "Q?"}}}\n')),
    Case("check jsonl: UTF-16", check("b.jsonl"), ("b.jsonl:1", "UTF-8"), prepare=write("b.jsonl", item().encode("utf-16"))),
    Case("check jsonl: NUL bytes", check("b.jsonl"), ("b.jsonl:1",), prepare=write("b.jsonl", b"\x00" * 64 + item().encode())),
    Case("check jsonl: a character device", check("/dev/zero"), ("/dev/zero", "character device")),
    Case("check jsonl: a FIFO", check("pipe.jsonl"), ("pipe.jsonl", "FIFO"), prepare=fifo("pipe.jsonl")),
    Case("check jsonl: 129 MiB without a newline", check("zeros.jsonl"), ("zeros.jsonl:1", "longer than"), prepare=sparse("zeros.jsonl", 129 * 2**20)),
    Case("check jsonl: gzip of garbage", check("b.jsonl.gz"), ("b.jsonl.gz",), prepare=write("b.jsonl.gz", b"\x1f\x8b" + BINARY)),
    Case("check jsonl: every row bad, skipped", check("b.jsonl", "--skip-bad-rows"), ("b.jsonl", "no items found", "2 bad rows skipped"), prepare=write("b.jsonl", item(["1"]) + item(source=7))),
    # other formats, damaged
    Case("check eclektic-jsonl: no q_id", check("e.jsonl"), ("e.jsonl:1", "q_id"), prepare=write("e.jsonl", jline({k: v for k, v in ECLEKTIC_WIDE.items() if k != "q_id"}) .replace('"original_lang"', '"q_id": null, "original_lang"'))),
    Case("check eclektic-jsonl: a question a number", check("e.jsonl"), ("e.jsonl:1", "de_q"), prepare=write("e.jsonl", jline({**ECLEKTIC_WIDE, "de_q": 4}))),
    Case("check eclektic-jsonl: unknown original language", check("e.jsonl"), ("e.jsonl:1", "original_lang"), prepare=write("e.jsonl", jline({**ECLEKTIC_WIDE, "original_lang": "klingon"}))),
    Case("check eclektic-csv: unterminated quote", check("e.csv"), ("e.csv",), prepare=write("e.csv", ECLEKTIC_CSV_HEAD + "\n" + ECLEKTIC_ROW.replace("Where is", '"Where is') + "\n")),
    Case("check eclektic-csv: UTF-16", check("e.csv"), ("e.csv:1", "UTF-8"), prepare=write("e.csv", f"{ECLEKTIC_CSV_HEAD}\n{ECLEKTIC_ROW}\n".encode("utf-16"))),
    Case("check eclektic-csv: a lone surrogate cannot be in UTF-8", check("e.csv"), ("e.csv:2", "UTF-8"), prepare=write("e.csv", f"{ECLEKTIC_CSV_HEAD}\n".encode() + b"en,\xed\xa0\x80\n")),
    Case("check eclektic-csv: a row short of cells", check("e.csv"), ("e.csv:2",), prepare=write("e.csv", ECLEKTIC_CSV_HEAD + "\nen,text\n")),
    Case("check eclektic-csv: duplicate language of an item", check("e.csv"), ("e.csv:3", "duplicate"), prepare=write("e.csv", f"{ECLEKTIC_CSV_HEAD}\n{ECLEKTIC_ROW}\n{ECLEKTIC_ROW}\n")),
    Case("check bmlama: files of different lengths", check("bm"), ("bm",),
         prepare=both(write("bm/en.tsv", "Prompt\tAns\tCandidate Ans\tSubject\nX was born in <mask>.\tParis\tParis, Rome\tX\n"), write("bm/fr.tsv", "Prompt\tAns\tCandidate Ans\tSubject\n"))),
    Case("check bmlama: binary file", check("bm"), ("bm",), prepare=both(write("bm/en.tsv", BINARY), write("bm/fr.tsv", BINARY))),
    Case("check squad: data a string", check("xquad.en.json", "--format", "squad"), ("xquad.en.json",), prepare=write("xquad.en.json", '{"data": "x"}')),
    Case("check squad: cut short", check("xquad.en.json", "--format", "squad"), ("xquad.en.json",), prepare=write("xquad.en.json", json.dumps(SQUAD)[:70])),
    Case("check squad: answers a number", check("xquad.en.json", "--format", "squad"), ("xquad.en.json", "answers"), prepare=write("xquad.en.json", json.dumps(SQUAD).replace('[{"text": "Germany", "answer_start": 18}]', "5"))),
    Case("check mkqa: answers a list", check("m.jsonl"), ("m.jsonl:1", "answers"), prepare=write("m.jsonl", jline({**MKQA, "answers": []}))),
    Case("check mkqa: unknown language", check("m.jsonl"), ("m.jsonl:1", "xx-bogus"), prepare=write("m.jsonl", jline({**MKQA, "queries": {"xx-bogus": "q"}}))),
    Case("check tydiqa: unknown language", check("t.jsonl"), ("t.jsonl:1", "language"), prepare=write("t.jsonl", jline({**TYDI, "language": "klingon"}))),
    Case("check tydiqa: annotations a string", check("t.jsonl"), ("t.jsonl:1", "annotations"), prepare=write("t.jsonl", jline({**TYDI, "annotations": "none"}))),
    Case("check xfactr: empty prompts", check("xfactr"), ("TREx_prompts.csv",), prepare=both(copy_fixture("xfactr"), write("xfactr/TREx_prompts.csv", ""))),
    Case("check xfactr: binary prompts", check("xfactr"), ("TREx_prompts.csv",), prepare=both(copy_fixture("xfactr"), write("xfactr/TREx_prompts.csv", BINARY))),
    Case("check xfactr: no facts", check("xf"), ("xf", "mTRExf"), prepare=write("xf/TREx_prompts.csv", "pid,relation,en\nP19,place of birth,[X] was born in [Y] .\n")),
    Case("check table: parquet that is text", check("t.parquet", "--map", "question=q,answer=a,lang=l,id=i"), ("t.parquet",), prepare=write("t.parquet", "q,a\n")),
    Case("check table: --map names a missing column", check("t.csv", "--map", "question=nope,answer=a", "--source-lang", "en"), ("nope",), prepare=write("t.csv", "q,a\nQ?,A\n")),
    Case("check table: --map unknown key", check("t.csv", "--map", "questoin=q", "--source-lang", "en"), ("questoin",), prepare=write("t.csv", "q,a\nQ?,A\n")),
    Case("check table: --map key twice", check("t.csv", "--map", "question=q,question=a", "--source-lang", "en"), ("question",), prepare=write("t.csv", "q,a\nQ?,A\n")),
    Case("check table: --map a binary TOML file", check("t.csv", "--map", "map.toml", "--source-lang", "en"), ("map.toml",), prepare=both(write("t.csv", "q,a\nQ?,A\n"), write("map.toml", BINARY))),
    Case("check table: unknown language column value", check("t.csv", "--map", "question=q,answer=a,lang=l,id=i", "--source-lang", "en"), ("t.csv:3", "zz-qq"),
         prepare=write("t.csv", "i,l,q,a\n1,en,Q?,A\n1,zz-qq,Q?,A\n")),
    Case("check per-language: glob matching nothing", check("none/*.jsonl"), ("none/*.jsonl",)),
    Case("check per-language: a file named for no language", check("bylang", "--format", "per-language", "--map", "question=q,answer=a,id=i"), ("bylang", "notes.jsonl"),
         prepare=both(write("bylang/en.jsonl", '{"i": 1, "q": "Q?", "a": "A"}\n'), write("bylang/notes.jsonl", '{"i": 1, "q": "Q?", "a": "A"}\n'))),
    # options
    Case("check: --format squad on JSONL", check("bench.jsonl", "--format", "squad"), ("bench.jsonl",)),
    Case("check: --format bmlama on a file", check("bench.jsonl", "--format", "bmlama"), ("bench.jsonl", "directory")),
    Case("check: --langs only commas", check("bench.jsonl", "--langs", ",,"), ("--langs",)),
    Case("check: --langs a language the benchmark lacks", check("bench.jsonl", "--langs", "sw"), ("--langs", "sw")),
    Case("check: --source-lang unknown", check("t.csv", "--map", "question=q,answer=a", "--source-lang", "klingonese"), ("source_lang",), prepare=write("t.csv", "q,a\nQ?,A\n")),
    Case("check: --source-lang on a format that names it", check("bench.jsonl", "--source-lang", "fr"), ("bench.jsonl", "--source-lang")),
    Case("check: --map on a format that reads its own fields", check("bench.jsonl", "--format", "jsonl", "--map", "question=q"), ("bench.jsonl", "--map")),
    Case("check: --policy a FIFO", check("bench.jsonl", "--policy", "p.toml"), ("p.toml", "not a regular file"), prepare=fifo("p.toml")),
    Case("check: --policy a character device", check("bench.jsonl", "--policy", "/dev/zero"), ("/dev/zero", "not a regular file")),
    Case("check: --policy of 129 MiB", check("bench.jsonl", "--policy", "p.toml"), ("p.toml", "larger than any policy file"), prepare=sparse("p.toml", 129 * 2**20)),
    Case("check: --registry a FIFO", check("bench.jsonl", "--registry", "r.toml"), ("r.toml", "not a regular file"), prepare=fifo("r.toml")),
    Case("check: --map a FIFO", check("t.csv", "--map", "m.toml", "--source-lang", "en"), ("m.toml", "not a regular file"), prepare=both(write("t.csv", "q,a\nQ?,A\n"), fifo("m.toml"))),
    Case("check: --probe-model a FIFO named .gguf", check("bench.jsonl", "--probe-model", "f.gguf"), ("f.gguf", "not a regular file"), prepare=fifo("f.gguf")),
    Case("check: --probe-prompts a character device", check("bench.jsonl", "--probe-model", "smollm2", "--probe-prompts", "/dev/zero"), ("/dev/zero", "not a regular file")),
    Case("check: --executor ray:// at a closed port", check("bench.jsonl", "--executor", f"ray://127.0.0.1:{closed_port()}"), ("cannot reach the Ray cluster", "127.0.0.1")),
    Case("check: --actors 0", check("bench.jsonl", "--actors", "0"), ("--actors",)),
    Case("check: --probe-batch-size 0", check("bench.jsonl", "--probe-model", "smollm2", "--probe-batch-size", "0"), ("--probe-batch-size",)),
    Case("check: --policy a directory", check("bench.jsonl", "--policy", "mine"), ("mine",)),
    Case("check: --policy a table where a number goes", check("bench.jsonl", "--policy", "p.toml"), ("p.toml",), prepare=write("p.toml", "[rules]\nngram = 5\n")),
    Case("check: --registry corpus path missing", (*CHECK[:3], "gone", *NO_OUT, "--registry", "r.toml"), ("nowhere", "no such index directory"),
         prepare=write("r.toml", '[corpora.gone]\nbackend = "local"\npath = "nowhere"\n')),
    Case("check: --registry corpus with an ftp url", (*CHECK[:3], "x", *NO_OUT, "--registry", "r.toml"), ("r.toml",), prepare=write("r.toml", '[corpora.x]\nbackend = "infini-gram-api"\nurl = "ftp://example.org"\n')),
    Case("check: --registry corpus unknown key", (*CHECK[:3], "x", *NO_OUT, "--registry", "r.toml"), ("r.toml", "pth"), prepare=write("r.toml", '[corpora.x]\nbackend = "local"\npth = "index"\n')),
    Case("check: --registry links of a wrong type", check("bench.jsonl", "--links", "x", "--registry", "r.toml"), ("r.toml", "links.x"), prepare=write("r.toml", '[links.x]\nbackend = 3\n')),
    Case("check: --registry model batch size zero", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml", "models.m", "batch_size"),
         prepare=write("r.toml", '[models.m]\nbackend = "local"\npath = "m.gguf"\nbatch_size = 0\n')),
    Case("check: --registry model with a file url", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml", "models.m"),
         prepare=write("r.toml", '[models.m]\nbackend = "openai"\nbase_url = "file:///etc"\nmodel = "x"\n')),
    Case("check: --registry model a string", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml", "models.m"), prepare=write("r.toml", 'models.m = "x"\n')),
    Case("check: --registry model a text file named .gguf", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml: models.m", "m.gguf", "GGUF"),
         prepare=both(write("r.toml", '[models.m]\nbackend = "local"\npath = "m.gguf"\n'), write("m.gguf", "hello\n"))),
    Case("check: --registry model timeout a string", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml", "models.m.timeout"),
         prepare=write("r.toml", '[models.m]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "x"\ntimeout = "soon"\n')),
    Case("check: --registry model cache a directory", check("bench.jsonl", "--probe-model", "m", "--registry", "r.toml"), ("r.toml: models.m", "mine"),
         prepare=write("r.toml", '[models.m]\nbackend = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "x"\ncache = "mine"\n')),
    Case("check: --registry links dump missing", check("bench.jsonl", "--links", "x", "--registry", "r.toml"), ("nowhere", "audit langlinks build"),
         prepare=write("r.toml", '[links.x]\nbackend = "dump"\npath = "nowhere"\n')),
    Case("check: --registry corpora an array", (*CHECK[:3], "x", *NO_OUT, "--registry", "r.toml"), ("r.toml", "corpora"), prepare=write("r.toml", "corpora = [1, 2]\n")),
    Case("check: --registry corpus profile on a local index", (*CHECK[:3], "x", *NO_OUT, "--registry", "r.toml"), ("r.toml", "profile"),
         prepare=write("r.toml", '[corpora.x]\nbackend = "local"\npath = "index"\nprofile = "fast"\n')),
    Case("check: --probe-prompts a template with a foreign placeholder", check("bench.jsonl", "--probe-model", "smollm2", "--probe-prompts", "pp.toml"), ("pp.toml", "de.summary", "{nope}"),
         prepare=write("pp.toml", '[de]\nsummary = "{entity} {nope}"\n')),
    Case("check: --probe-prompts a template reaching into an attribute", check("bench.jsonl", "--probe-model", "smollm2", "--probe-prompts", "pp.toml"), ("pp.toml", "de.summary"),
         prepare=write("pp.toml", '[de]\nsummary = "{entity.__class__}"\n')),
    Case("check: --links missing", check("bench.jsonl", "--links", "nowhere"), ("nowhere",)),
    Case("check: --links a user's folder", check("bench.jsonl", "--links", "mine"), ("mine",)),
    Case("check: --as-of not a date", check("bench.jsonl", "--as-of", "2020-13-45"), ("--as-of",)),
    Case("check: --probe-model a text file named .gguf", check("bench.jsonl", "--probe-model", "m.gguf"), ("m.gguf", "GGUF"), prepare=write("m.gguf", "not a model\n")),
    Case("check: --probe-model a GGUF of an unknown version", check("bench.jsonl", "--probe-model", "m.gguf"), ("m.gguf", "version 99"), prepare=write("m.gguf", b"GGUF" + (99).to_bytes(4, "little") + bytes(16))),
    Case("check: --probe-model a GGUF cut in half", check("bench.jsonl", "--probe-model", "half.gguf"), ("half.gguf", "not a readable GGUF model"),
         prepare=lambda root: (root / "half.gguf").write_bytes((data := (FIXTURES / "models" / "llama-2-tiny-random.gguf").read_bytes())[: len(data) // 2])),
    Case("check: --probe-model a directory without weights", check("bench.jsonl", "--probe-model", "md"), ("md", "weights"), prepare=write("md/config.json", '{"model_type": "llama"}')),
    Case("check: --probe-model a directory with a binary config", check("bench.jsonl", "--probe-model", "md"), ("md/config.json",), prepare=write("md/config.json", BINARY)),
    Case("check: --probe-model an empty directory", check("bench.jsonl", "--probe-model", "mine"), ("mine", "config.json")),
    Case("check: --probe-model openai without a model", check("bench.jsonl", "--probe-model", "openai:"), ("openai:MODEL",)),
    Case("check: --probe-model missing", check("bench.jsonl", "--probe-model", "nope.gguf"), ("nope.gguf",)),
    Case("check: --judge-model a text file named .gguf", check("bench.jsonl", "--probe-model", "smollm2", "--judge-model", "j.gguf"), ("j.gguf", "GGUF"), prepare=write("j.gguf", "{}\n")),
    Case("check: --judge-model without --probe-model", check("bench.jsonl", "--judge-model", "smollm2"), ("--probe-model",)),
    Case("check: --probe-prompts binary", check("bench.jsonl", "--probe-model", "smollm2", "--probe-prompts", "pp.toml"), ("pp.toml",), prepare=write("pp.toml", BINARY)),
    Case("check: --probe-prompts unknown table", check("bench.jsonl", "--probe-model", "smollm2", "--probe-prompts", "pp.toml"), ("pp.toml",), prepare=write("pp.toml", "[nonsense]\nx = 1\n")),
    Case("check: --profile unknown", check("bench.jsonl", "--profile", "fast"), ("--profile",)),
    Case("check: --executor spark", check("bench.jsonl", "--executor", "spark"), ("--executor spark",)),
    Case("check: --executor ray:// without a port", check("bench.jsonl", "--executor", "ray://head"), ("ray://HOST:PORT",)),
    Case("check: --actors without Ray", check("bench.jsonl", "--actors", "2"), ("--actors",)),
    Case("check: --workers 0", check("bench.jsonl", "--workers", "0"), ("--workers",)),
    Case("check: --signals unknown", check("bench.jsonl", "--signals", "ngram,telepathy"), ("telepathy",)),
    Case("check: --corpus twice", check("bench.jsonl", "--corpus", "index"), ("given twice",)),
    # valid but odd: these must succeed
    Case("check ok: RTL, CJK, emoji and markup ids", check("odd.jsonl"), ("4 items",), exit_code=0, prepare=odd_ids),
    Case("check ok: one language", check("one.jsonl"), ("1 items", "1 languages"), exit_code=0, prepare=one_language),
    Case("check ok: BOM and CRLF JSONL", check("b.jsonl"), ("1 items",), exit_code=0, prepare=write("b.jsonl", b"\xef\xbb\xbf" + item().replace("\n", "\r\n").encode())),
    Case("check ok: BOM-prefixed CSV", check("e.csv"), ("eclektic-csv", "1 items"), exit_code=0, prepare=write("e.csv", "\ufeff" + ECLEKTIC_CSV_HEAD + "\r\n" + ECLEKTIC_ROW + "\r\n")),
    Case("check ok: gzipped JSONL", check("b.jsonl.gz"), ("1 items",), exit_code=0, prepare=write("b.jsonl.gz", gzip.compress(item().encode()))),
    Case("check ok: --workers 200 is clamped", check("bench.jsonl", "--workers", "200"), ("--workers 200: clamped to",), exit_code=0),
    Case("check ok: --as-of without --links", check("bench.jsonl", "--as-of", "2020-01-01"), ("--as-of applies",), exit_code=0),
    Case("check ok: --offline on a local index", check("bench.jsonl", "--offline"), ("36 variants",), exit_code=0),
    Case("check ok: --strict, nothing unknown", check("bench.jsonl", "--strict"), ("36 variants",), exit_code=0),
    Case("check ok: probe endpoint refusing connections", check("bench.jsonl", "--probe-model", "openai:m"), (CLOSED, "refused", "undetermined"), exit_code=0,
         env=(("OPENAI_BASE_URL", CLOSED), ("OPENAI_API_KEY", "x"), *NO_PROXY)),
    Case("check ok: --langs with a code repeated and respelt", check("bench.jsonl", "--langs", "en,EN,eng,de"), ("│ all      │        6 │",), exit_code=0),
    Case("check ok: markup and emoji in a corpus name", ("check", "bench.jsonl", "--corpus", "[red]x:x:", *NO_OUT, "--registry", "r.toml"), ("[red]x:x:",), exit_code=0,
         prepare=write("r.toml", '[corpora."[red]x:x:"]\nbackend = "local"\npath = "index"\n')),
    Case("check ok: eclektic-jsonl with CRLF", check("e.jsonl"), ("eclektic-jsonl", "2 variants"), exit_code=0, prepare=write("e.jsonl", jline(ECLEKTIC_WIDE).replace("\n", "\r\n"))),
    Case("check ok: bmlama with BOM and CRLF", check("bm"), ("bmlama", "3 items"), exit_code=0, prepare=bmlama_crlf),
    Case("check ok: pretty-printed SQuAD with BOM and CRLF", check("xquad.en.json"), ("squad", "1 items"), exit_code=0,
         prepare=write("xquad.en.json", b"\xef\xbb\xbf" + json.dumps(SQUAD, indent=1).replace("\n", "\r\n").encode())),
    Case("check ok: mkqa with CRLF", check("m.jsonl"), ("mkqa", "2 variants"), exit_code=0, prepare=write("m.jsonl", jline(MKQA).replace("\n", "\r\n"))),
    Case("check ok: tydiqa", check("t.jsonl"), ("tydiqa", "1 items"), exit_code=0, prepare=write("t.jsonl", jline(TYDI))),
    Case("check ok: xfactr", check("xfactr"), ("xfactr", "30 items"), exit_code=0, prepare=copy_fixture("xfactr")),
    Case("check ok: a semicolon in a mapped CSV cell", check("t.csv", "--map", "question=q,answer=a", "--source-lang", "de"), ("table", "1 items"), exit_code=0,
         prepare=write("t.csv", 'q,a\r\n"Wo liegt Bremerhaven; und warum?",Deutschland\r\n')),
    Case("check ok: per-language files joined by id", check("bylang", "--map", "question=q,answer=a,id=i"), ("per-language", "2 variants"), exit_code=0,
         prepare=both(write("bylang/en.jsonl", '{"i": 1, "q": "Where?", "a": "Germany"}\n'), write("bylang/de.jsonl", '{"i": 1, "q": "Wo?", "a": "Deutschland"}\n'))),
    Case("check ok: ids that are numbers", check("b.jsonl"), ("2 items",), exit_code=0, prepare=write("b.jsonl", item(1) + item(2))),
]

PREDICTIONS = ("--predictions", "p.jsonl", "--out", "r")
REPORT_CASES = [
    Case("report: --bootstrap a billion", (*REPORT, "--out", "r", "--predictions", "predictions.jsonl", "--bootstrap", "1000000000"), ("--bootstrap", "100000")),
    Case("report: predictions a character device", (*REPORT, "--out", "r", "--predictions", "/dev/zero"), ("/dev/zero", "not a regular file")),
    Case("report: predictions a FIFO", (*REPORT, *PREDICTIONS), ("p.jsonl", "not a regular file"), prepare=fifo("p.jsonl")),
    Case("report: predictions UTF-16", (*REPORT, *PREDICTIONS), ("p.jsonl",), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "en", "prediction": "x"}).encode("utf-16"))),
    Case("report: predictions a JSON array", (*REPORT, *PREDICTIONS), ("p.jsonl:1",), prepare=write("p.jsonl", "[1, 2]\n")),
    Case("report: prediction a number", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "prediction"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "de", "prediction": 4}))),
    Case("report: unknown language", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "lang"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "qq-zz", "prediction": "x"}))),
    Case("report: correct is maybe", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "correct"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "en", "prediction": "x", "correct": "maybe"}))),
    Case("report: duplicated row", (*REPORT, *PREDICTIONS), ("p.jsonl:2",),
         prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "en", "prediction": "x"}, {"item_id": "33", "lang": "en", "prediction": "y"}))),
    Case("report: lone surrogate in a prediction", (*REPORT, *PREDICTIONS), ("p.jsonl:2", "prediction", "surrogate"),
         prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "en", "prediction": "Germany"}) + '{"item_id": "33", "lang": "de", "prediction": "\\ud800 Deutschland"}\n')),
    Case("report: CSV without a prediction column", (*REPORT, "--predictions", "p.csv", "--out", "r"), ("p.csv",), prepare=write("p.csv", "item_id,lang\n33,en\n")),
    Case("report: predictions a directory", (*REPORT, "--predictions", "mine", "--out", "r"), ("mine",)),
    Case("report: --method given without judgments", (*REPORT, "--predictions", "predictions.jsonl", "--out", "r", "--method", "given"), ("correct",)),
    Case("report: --method judge without a model", (*REPORT, "--predictions", "predictions.jsonl", "--out", "r", "--method", "judge"), ("AUDIT_JUDGE_MODEL",), env=(("AUDIT_JUDGE_MODEL", ""),)),
    Case("report: judge endpoint refusing connections", (*REPORT, "--predictions", "predictions.jsonl", "--out", "r", "--method", "judge"), ("judge endpoint", CLOSED, "refused"),
         env=(("AUDIT_JUDGE_MODEL", "m"), ("AUDIT_JUDGE_API_KEY", "x"), ("AUDIT_JUDGE_BASE_URL", CLOSED), *NO_PROXY)),
    Case("report: --seed negative", (*REPORT, "--out", "r", "--predictions", "predictions.jsonl", "--seed", "-1"), ("--seed",)),
    Case("report: predictions tab-separated", (*REPORT, "--predictions", "p.tsv", "--out", "r"), ("p.tsv:1", "tab-separated"), prepare=write("p.tsv", "item_id\tlang\tprediction\n33\tde\tx\n")),
    Case("report: predictions without a language", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "lang"), prepare=write("p.jsonl", predictions({"item_id": "33", "prediction": "x"}))),
    Case("report: predictions with a null language", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "lang"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": None, "prediction": "x"}))),
    Case("report: prediction null and no judgment", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "prediction"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "de", "prediction": None}))),
    Case("report: correct is 2", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "correct"), prepare=write("p.jsonl", predictions({"item_id": "33", "lang": "de", "prediction": "x", "correct": 2}))),
    Case("report: predictions nested too deeply", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "nested too deeply"), prepare=write("p.jsonl", '{"item_id": ' + "[" * 100000 + "]" * 100000 + "}\n")),
    Case("report: predictions 129 MiB without a newline", (*REPORT, *PREDICTIONS), ("p.jsonl:1", "longer than"), prepare=sparse("p.jsonl", 129 * 2**20)),
    Case("report: predictions gzip of garbage", (*REPORT, "--predictions", "p.jsonl.gz", "--out", "r"), ("p.jsonl.gz",), prepare=write("p.jsonl.gz", b"\x1f\x8b" + BINARY)),
    Case("report: CSV predictions, header only", (*REPORT, "--predictions", "p.csv", "--out", "r"), ("p.csv",), prepare=write("p.csv", "item_id,lang,prediction\n")),
    Case("report: --judge-concurrency 0", (*REPORT, "--out", "r", "--judge-concurrency", "0"), ("--judge-concurrency",)),
    Case("report: --item-pages a file", (*REPORT, "--out", "r", "--item-pages", "mine/notes.txt"), ("mine/notes.txt",)),
    Case("report: predictions a FIFO named .csv", (*REPORT, "--predictions", "p.csv", "--out", "r"), ("p.csv", "not a regular file"), prepare=fifo("p.csv")),
    Case("report: --audit a FIFO", ("report", "--audit", "a.audit.jsonl", "--out", "r"), ("a.audit.jsonl", "not a regular file"), prepare=fifo("a.audit.jsonl")),
    Case("report: --audit a character device", ("report", "--audit", "/dev/zero", "--out", "r"), ("/dev/zero", "not a regular file")),
    Case("report: --bench a character device", (*REPORT, "--out", "r", "--bench", "/dev/zero"), ("/dev/zero", "not a regular file")),
    Case("report: --item-pages missing", (*REPORT, "--out", "r", "--item-pages", "nowhere"), ("nowhere",)),
    Case("report: --bench another benchmark", (*REPORT, "--out", "r", "--bench", "o.jsonl"), ("o.jsonl",), prepare=write("o.jsonl", item("zz"))),
    Case("report: --method unknown", (*REPORT, "--out", "r", "--method", "vibes"), ("--method",)),
    Case("report ok: ids as numbers, odd keys", (*REPORT, *PREDICTIONS), ("report.html",), exit_code=0,
         prepare=write("p.jsonl", predictions({"item_id": 33, "lang": "en", "prediction": "Germany", "<script>": 1}, {"item_id": 33, "lang": "de", "prediction": "Deutschland", "$x$": "[red]"}))),
    Case("report ok: gzipped predictions", (*REPORT, "--predictions", "p.jsonl.gz", "--out", "r"), ("report.html",), exit_code=0,
         prepare=lambda root: (root / "p.jsonl.gz").write_bytes(gzip.compress((root / "predictions.jsonl").read_bytes()))),
    Case("report ok: --bootstrap 0", (*REPORT, "--out", "r", "--predictions", "predictions.jsonl", "--bootstrap", "0"), ("report.html",), exit_code=0),
    Case("report ok: BOM-prefixed CSV predictions", (*REPORT, "--predictions", "p.csv", "--out", "r"), ("report.html",), exit_code=0,
         prepare=lambda root: (root / "p.csv").write_text("\ufeffitem_id,lang,prediction\r\n" + "".join(
             f"{row['item_id']},{row['lang']},\"{row['prediction']}\"\r\n" for row in map(json.loads, (root / "predictions.jsonl").read_text(encoding="utf-8").splitlines())), encoding="utf-8")),
]

OTHER_CASES = [
    Case("corpora: registry missing", ("corpora", "--registry", "nope.toml"), ("nope.toml",)),
    Case("corpora: registry a FIFO", ("corpora", "--registry", "r.toml"), ("r.toml", "not a regular file"), prepare=fifo("r.toml")),
    Case("corpora: unknown backend", ("corpora", "--registry", "r.toml"), ("r.toml", "corpora.x"), prepare=write("r.toml", '[corpora.x]\nbackend = "ftp"\n')),
    Case("corpora: negative timeout", ("corpora", "--timeout", "-1"), ("--timeout",)),
    Case("corpora ok: an API corpus on a closed port", ("corpora", "--registry", "r.toml", "--timeout", "1"), ("closed",), exit_code=0,
         prepare=write("r.toml", '[corpora.closed]\nbackend = "infini-gram-api"\nurl = "http://127.0.0.1:9/"\nindex = "v4_x"\n')),
    Case("serve-model: a text file named .gguf", ("probe", "serve-model", "--probe-model", "m.gguf", "--port", "0"), ("m.gguf", "GGUF"), prepare=write("m.gguf", "hello\n")),
    Case("serve-model: an endpoint", ("probe", "serve-model", "--probe-model", "openai:x", "--port", "0"), ("endpoint",)),
    Case("serve-model: port out of range", ("probe", "serve-model", "--probe-model", "smollm2", "--port", "70000"), ("--port",)),
    Case("serve-model: batch size zero", ("probe", "serve-model", "--probe-model", "smollm2", "--batch-size", "0"), ("--batch-size",)),
    Case("serve-model: a host that does not resolve", ("probe", "serve-model", "--probe-model", "smollm2", "--host", "no such host!"), ("--host no such host!",)),
    Case("serve-model: a port already taken", ("probe", "serve-model", "--probe-model", "smollm2", "--port", str(TAKEN.getsockname()[1])), ("cannot listen there",)),
    Case("serve-model: missing model", ("probe", "serve-model", "--probe-model", "nope"), ("nope",)),
]

CASES = CHECK_CASES + REPORT_CASES + OTHER_CASES


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_a_clear_error_and_loses_nothing(case: Case, sandbox: Path, capfd):
    run_case(case, sandbox, capfd)


def test_closed_ray_address_fails_in_seconds(sandbox: Path):
    """`--executor ray` with $RAY_ADDRESS at a port nothing listens on: one line naming the
    address and exit 2, within the subprocess's bound instead of Ray's minutes of retries."""
    address = f"127.0.0.1:{closed_port()}"
    before = snapshot(sandbox)
    env = {**os.environ, "RAY_ADDRESS": address}
    done = subprocess.run([sys.executable, "-m", "audit.cli", *check("bench.jsonl", "--executor", "ray")], capture_output=True, text=True, timeout=60, cwd=sandbox, env=env)
    output = done.stdout + done.stderr
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in output
    lost = [name for name, digest in before.items() if snapshot(sandbox).get(name) != digest]
    TALLY["files_lost_or_changed"] += len(lost)
    assert "Traceback" not in output and not lost
    assert done.returncode == 2, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and address in errors[0] and "RAY_ADDRESS" in errors[0], output
    assert not (sandbox / "new.audit.jsonl").exists()
    TALLY["clear_errors"] += 1


def test_resamples_that_would_not_fit_are_refused_with_the_most_that_fit():
    """Past the cell budget the default 1000 resamples of a large benchmark are refused, naming
    the largest number that fits; within it, nothing is said."""
    assert too_many_draws(1000, 384, 4600) is None
    refused = too_many_draws(1000, 10_000, 260_000)
    assert refused is not None and "--bootstrap 1000" in refused and f"at most {MAX_DRAW_CELLS // 260_000:,}" in refused
    assert "at most 100,000" in str(too_many_draws(MAX_DRAWS + 1, 1, 1))
