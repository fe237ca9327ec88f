"""Every command against bad input: a clear message naming what is wrong, the documented exit
status, no traceback, and not one byte of the user's files changed or lost. The harness (the
sandbox, the hashing, the tally) is `tests/hostile.py`; more cases by area stand in the other
`test_robustness_*.py` files."""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import BINARY, CHECK, REPORT, Case, cut, edit_record, halve_table, lines_kept, move_benchmark, run_case, write

from audit.cli import main

CASES = [
    # audit check: the benchmark
    Case("check: missing benchmark", ("check", "nope.jsonl", "--corpus", "index"), ("nope.jsonl",)),
    Case("check: empty benchmark", ("check", "empty.jsonl", "--corpus", "index"), ("empty.jsonl",), prepare=write("empty.jsonl", "")),
    Case("check: binary benchmark", ("check", "blob.jsonl", "--corpus", "index"), ("blob.jsonl:1",), prepare=write("blob.jsonl", BINARY)),
    Case("check: truncated gzip", ("check", "cut.jsonl.gz", "--corpus", "index"), ("cut.jsonl.gz",), prepare=write("cut.jsonl.gz", gzip.compress(b'{"item_id": "1"}\n' * 200)[:60])),
    Case("check: latin-1 benchmark", ("check", "latin.jsonl", "--corpus", "index"), ("latin.jsonl:1", "UTF-8"),
         prepare=write("latin.jsonl", '{"item_id": "1", "source_lang": "fr", "variants": {"fr": {"question": "Où est né Molière ?"}}}\n'.encode("latin-1"))),
    Case("check: wrong types", ("check", "types.jsonl", "--corpus", "index"), ("types.jsonl:1", "question"),
         prepare=write("types.jsonl", '{"item_id": "1", "source_lang": "en", "variants": {"en": {"question": 42}}}\n')),
    Case("check: missing field", ("check", "fields.jsonl", "--corpus", "index"), ("fields.jsonl:1", "source_lang"),
         prepare=write("fields.jsonl", '{"item_id": "1", "variants": {"en": {"question": "Q?"}}}\n')),
    Case("check: benchmark is a directory", ("check", "mine", "--corpus", "index"), ("mine",)),
    # audit check: corpus, options, policy
    Case("check: missing corpus", (*CHECK[:3], "nowhere"), ("nowhere",)),
    Case("check: empty corpus directory", (*CHECK[:3], "hollow"), ("hollow",), prepare=lambda root: (root / "hollow").mkdir()),
    Case("check: damaged index", CHECK, ("table.0",), prepare=halve_table),
    Case("check: negative workers", (*CHECK, "--workers", "-3"), ("--workers", "-3")),
    Case("check: unknown language", (*CHECK, "--langs", "xx"), ("--langs",)),
    Case("check: bad format", (*CHECK, "--format", "xml"), ("--format",)),
    Case("check: missing policy", (*CHECK, "--policy", "nope.toml"), ("nope.toml",)),
    Case("check: binary policy", (*CHECK, "--policy", "blob.toml"), ("blob.toml",), prepare=write("blob.toml", BINARY)),
    Case("check: misspelt policy key", (*CHECK, "--policy", "p.toml"), ("p.toml", "rules.ngram.question.coverge"), prepare=write("p.toml", "[rules.ngram.question]\ncoverge = 0.8\n")),
    Case("check: policy out of range", (*CHECK, "--policy", "p.toml"), ("p.toml", "rules.ngram.question.coverage", "-0.5"), prepare=write("p.toml", "[rules.ngram.question]\ncoverage = -0.5\n")),
    Case("check: policy window zero", (*CHECK, "--policy", "p.toml"), ("p.toml", "ngram.window.default"), prepare=write("p.toml", "[ngram.window]\ndefault = 0\n")),
    Case("check: policy negative spans", (*CHECK, "--policy", "p.toml"), ("p.toml", "ngram.max_spans"), prepare=write("p.toml", "[ngram]\nmax_spans = -3\n")),
    Case("check: bad registry", (*CHECK[:3], "tiny", "--registry", "blob.toml"), ("blob.toml",), prepare=write("blob.toml", BINARY)),
    # audit check: where it writes
    Case("check: --out over the benchmark", (*CHECK, "--out", "bench.jsonl"), ("bench.jsonl",)),
    Case("check: --out over a user's file", (*CHECK, "--out", "mine/notes.txt"), ("mine/notes.txt", "not an audit file")),
    Case("check: --out a directory", (*CHECK, "--out", "mine"), ("mine", "directory")),
    Case("check: --report-dir the current directory", (*CHECK, "--out", "new.audit.jsonl", "--report-dir", "."), ("current directory",)),
    Case("check: --report-dir a user's folder", (*CHECK, "--out", "new.audit.jsonl", "--report-dir", "mine"), ("mine", "not written by audit")),
    Case("check: --report-dir holding the working directory", (*CHECK, "--out", "new.audit.jsonl", "--report-dir", "../work"), ("current directory",)),
    Case("check: --report-dir holding the benchmark", ("check", "data/b.jsonl", "--corpus", "index", "--out", "new.audit.jsonl", "--report-dir", "data"),
         ("data", "input data/b.jsonl"), prepare=lambda root: (root / "data").mkdir() or shutil.copy(root / "bench.jsonl", root / "data" / "b.jsonl")),
    Case("check: --report-dir a file", (*CHECK, "--out", "new.audit.jsonl", "--report-dir", "mine/notes.txt"), ("mine/notes.txt", "not a directory")),
    Case("check: --report-dir a report plus a user's file", (*CHECK, "--report-dir", "bench.report"), ("bench.report", "extra.txt", "did not write"),
         prepare=write("bench.report/extra.txt", "added by the user\n")),
    Case("check: --report-dir holding its own audit file", (*CHECK, "--out", "bench.report/a.audit.jsonl", "--report-dir", "bench.report"), ("bench.report", "a.audit.jsonl")),
    # audit filter
    Case("filter: missing audit", ("filter", "nope.audit.jsonl", "--out", "clean.jsonl"), ("nope.audit.jsonl",)),
    Case("filter: empty audit", ("filter", "empty.audit.jsonl", "--out", "clean.jsonl"), ("empty.audit.jsonl", "empty"), prepare=write("empty.audit.jsonl", "")),
    Case("filter: binary audit", ("filter", "blob.audit.jsonl", "--out", "clean.jsonl"), ("blob.audit.jsonl:1",), prepare=write("blob.audit.jsonl", BINARY)),
    Case("filter: not an audit file", ("filter", "bench.jsonl", "--out", "clean.jsonl"), ("bench.jsonl:1", "not an audit file")),
    Case("filter: audit cut at a line", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), ("bench.audit.jsonl", "truncated"), prepare=cut("bench.audit.jsonl", lines_kept(10))),
    Case("filter: audit cut mid-line", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), ("bench.audit.jsonl",), prepare=cut("bench.audit.jsonl", lambda d: d[: len(d) // 2])),
    Case("filter: audit record edited", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), ("bench.audit.jsonl", "sha256"), prepare=cut("bench.audit.jsonl", edit_record)),
    Case("filter: audit of another schema", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), ("schema_version",),
         prepare=cut("bench.audit.jsonl", lambda d: d.replace(b'"schema_version":4', b'"schema_version":99', 1))),
    Case("filter: another benchmark", ("filter", "bench.audit.jsonl", "--bench", "other.jsonl", "--out", "clean.jsonl"), ("other.jsonl", "not the audited benchmark"),
         prepare=write("other.jsonl", '{"q_id": 1}\n')),
    Case("filter: benchmark moved away", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), ("--bench",), prepare=move_benchmark),
    Case("filter: --out over the benchmark, forced", ("filter", "bench.audit.jsonl", "--out", "bench.jsonl", "--force"), ("bench.jsonl", "input")),
    Case("filter: --out over the audit, forced", ("filter", "bench.audit.jsonl", "--out", "bench.audit.jsonl", "--force"), ("bench.audit.jsonl", "input")),
    Case("filter: --manifest over the benchmark, forced", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl", "--manifest", "bench.jsonl", "--force"), ("bench.jsonl", "input")),
    Case("filter: --out over a user's file", ("filter", "bench.audit.jsonl", "--out", "mine/notes.txt"), ("mine/notes.txt", "already exists")),
    Case("filter: --out a directory", ("filter", "bench.audit.jsonl", "--out", "mine", "--force"), ("mine", "directory")),
    Case("filter: --out the current directory", ("filter", "bench.audit.jsonl", "--out", "."), ("--out",)),
    Case("filter: unknown rule", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl", "--rule", "all"), ("--rule",)),
    # audit report
    Case("report: missing audit", ("report", "--audit", "nope.audit.jsonl", "--out", "r"), ("nope.audit.jsonl",)),
    Case("report: binary audit", ("report", "--audit", "blob.audit.jsonl", "--out", "r"), ("blob.audit.jsonl",), prepare=write("blob.audit.jsonl", BINARY)),
    Case("report: truncated audit", (*REPORT, "--out", "r"), ("bench.audit.jsonl", "truncated"), prepare=cut("bench.audit.jsonl", lines_kept(5))),
    Case("report: --out the current directory", (*REPORT, "--out", "."), ("current directory",)),
    Case("report: --out a file", (*REPORT, "--out", "mine/notes.txt"), ("mine/notes.txt", "not a directory")),
    Case("report: --out a user's folder", (*REPORT, "--out", "mine"), ("mine", "not written by audit")),
    Case("report: --out a parent of the audit", ("report", "--audit", "sub/a.audit.jsonl", "--out", "sub"), ("sub", "a.audit.jsonl"),
         prepare=lambda root: (root / "sub").mkdir() or shutil.copy(root / "bench.audit.jsonl", root / "sub" / "a.audit.jsonl")),
    Case("report: --item-pages is --out", (*REPORT, "--out", "bench.report", "--item-pages", "bench.report"), ("bench.report",)),
    Case("report: --item-pages not a report", (*REPORT, "--out", "r", "--item-pages", "mine"), ("mine",)),
    Case("report: empty predictions", (*REPORT, "--out", "r", "--predictions", "empty.jsonl"), ("empty.jsonl",), prepare=write("empty.jsonl", "")),
    Case("report: binary predictions", (*REPORT, "--out", "r", "--predictions", "blob.jsonl"), ("blob.jsonl",), prepare=write("blob.jsonl", BINARY)),
    Case("report: predictions of unknown items", (*REPORT, "--out", "r", "--predictions", "p.jsonl"), ("p.jsonl:1", "item_id"),
         prepare=write("p.jsonl", '{"item_id": "nope", "lang": "en", "prediction": "x"}\n')),
    Case("report: negative bootstrap", (*REPORT, "--out", "r", "--bootstrap", "-1"), ("--bootstrap",)),
    # audit index
    Case("index build: missing source", ("index", "build", "nope", "--out", "ix"), ("nope",)),
    Case("index build: empty source", ("index", "build", "empty.jsonl", "--out", "ix"), ("empty.jsonl",), prepare=write("empty.jsonl", "")),
    Case("index build: binary source", ("index", "build", "blob.jsonl", "--out", "ix"), ("blob.jsonl",), prepare=write("blob.jsonl", BINARY)),
    Case("index build: no text field", ("index", "build", "notext.jsonl", "--out", "ix"), ("notext.jsonl:1", "text"), prepare=write("notext.jsonl", '{"id": 1}\n')),
    Case("index build: --out over its sources", ("index", "build", "docs", "--out", "docs", "--force"), ("docs",)),
    Case("index build: --out a user's folder", ("index", "build", "docs", "--out", "mine", "--force"), ("mine",)),
    Case("index build: --out existing, no --force", ("index", "build", "docs", "--out", "index"), ("index", "already exists")),
    Case("index build: --out the current directory", ("index", "build", "docs", "--out", ".", "--force"), ("current directory",)),
    Case("index build: bad --mem", ("index", "build", "docs", "--out", "ix", "--mem", "lots"), ("lots",)),
    Case("index info: missing", ("index", "info", "nope"), ("nope",)),
    Case("index info: a file", ("index", "info", "bench.jsonl"), ("bench.jsonl",)),
    Case("index info: damaged", ("index", "info", "index"), ("table.0",), prepare=halve_table),
    Case("index verify: missing", ("index", "verify", "nope"), ("nope",)),
    Case("index verify: damaged", ("index", "verify", "index"), ("table.0",), exit_code=1, prepare=cut("index/tokenized.0", lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:])),
    # audit corpora, audit serve
    Case("corpora: binary registry", ("corpora", "--registry", "blob.toml"), ("blob.toml",), prepare=write("blob.toml", BINARY)),
    Case("corpora: registry of wrong types", ("corpora", "--registry", "r.toml"), ("r.toml",), prepare=write("r.toml", "[corpora.x]\nbackend = 7\n")),
    Case("serve: negative port", ("serve", "--index", "index", "--port", "-1"), ("--port",)),
    Case("serve: no concurrency", ("serve", "--index", "index", "--max-concurrent", "0"), ("--max-concurrent",)),
    Case("serve: missing index", ("serve", "--index", "nope", "--port", "0"), ("nope",)),
    Case("serve: damaged index", ("serve", "--index", "index", "--port", "0"), ("table.0",), prepare=halve_table),
    Case("serve: tokenizer for nothing served", ("serve", "--index", "index", "--tokenizer", "x=y.json", "--port", "0"), ("--tokenizer",)),
    Case("serve: bad policy", ("serve", "--index", "index", "--policy", "p.toml", "--port", "0"), ("p.toml", "rules.ngram.question.coverge"),
         prepare=write("p.toml", "[rules.ngram.question]\ncoverge = 0.8\n")),
    Case("serve: jobs dir is a file", ("serve", "--index", "index", "--jobs-dir", "mine/notes.txt", "--port", "0"), ("mine/notes.txt",), exit_code=1),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_a_clear_error_and_loses_nothing(case: Case, sandbox: Path, capfd):
    run_case(case, sandbox, capfd)


def test_serve_without_its_extra_names_the_extra(tmp_path: Path):
    """`audit serve` on an install without fastapi: which extra to install, not a traceback."""
    script = "import sys; sys.modules['fastapi'] = None; from audit.cli import main; main(['serve', '--help'], prog_name='audit')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2
    assert "[serve] extra" in done.stderr and "pip install" in done.stderr and "fastapi" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_filter_and_report_find_the_benchmark_from_another_directory(sandbox: Path, tmp_path: Path, monkeypatch):
    """The audit records the benchmark as given and as an absolute path; run from elsewhere,
    the absolute one is found."""
    result = CliRunner().invoke(main, ["check", "bench.jsonl", "--corpus", "index", "--out", "fresh.audit.jsonl", "--no-report"])
    assert result.exit_code == 0, result.output
    audit = str(sandbox / "fresh.audit.jsonl")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["filter", audit, "--out", "clean.jsonl"])
    assert result.exit_code == 0, result.output
    assert "3 items" in result.output and (tmp_path / "clean.jsonl").is_file()
    result = CliRunner().invoke(main, ["report", "--audit", audit, "--out", "r"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "report.html").is_file()
