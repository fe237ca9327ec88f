"""The policy file is checked key by key: a typo or an out-of-range value stops the run with the
file, the full key, what is allowed and the value given, from the loader, the command line
and the server alike."""
from __future__ import annotations

import gzip
import json
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from manual import page

from audit.auditfile import read_audit
from audit.cli import main
from audit.index.build import build_index
from audit.policyfile import PolicyError, build_config, load_policy, schema_keys
from audit.server.jobs import JobError, JobManager
from audit.signals import PolicyFile
from audit.signals.ngram import NgramConfig, WindowSizes
from audit.text import _SCRIPT_RANGES, UNSEGMENTED_SCRIPTS

ROOT = Path(__file__).resolve().parents[1]
DEMO_TEXTS = ROOT / "audit" / "data" / "demo" / "corpus" / "xquad-en.jsonl.gz"
FIGURES = "expected one of coverage, exact_count, longest_match_chars, longest_match_fraction"
BOUND = '{ ">=" = n } or { "<=" = n }'
FRACTION = f"must be a number in (0, 1] or {BOUND} or false"
COUNT = f"must be a whole number ≥ 1 or {BOUND} or false"
PARAMETER = "must be a whole number ≥ 1"
SCRIPTS = "expected one of arabic, cyrillic, default, devanagari, greek, han, hangul, hebrew, kana, khmer, lao, latin, myanmar, thai, tibetan"

BAD = [
    ("misspelt figure", "[rules.ngram.question]\ncoverge = 0.8\n", "key 'rules.ngram.question.coverge': unknown; " + FIGURES),
    ("misspelt field", "[rules.ngram.questoin]\ncoverage = 0.8\n", "key 'rules.ngram.questoin': unknown; expected one of answer, context, options, prompt, question, question+answer, question+correct, question+distractor, statement, subject+answer"),
    ("unknown co-occurrence figure", '[rules.ngram."question+answer"]\nanswer_count = 1\n', "key 'rules.ngram.\"question+answer\".answer_count': unknown; expected one of documents, documents_in_language"),
    ("misspelt ngram key", "[ngram]\nmax_span = 3\n", "key 'ngram.max_span': unknown; expected one of anchor_max_count, anchor_min_chars, cooccurrence_window_bytes, coverage_floor, max_anchors"),
    ("misspelt window script", "[ngram.window]\nlatn = 3\n", "key 'ngram.window.latn': unknown; " + SCRIPTS),
    ("unknown top-level key", "nmae = 'mine'\n", "key 'nmae': unknown; expected one of langlinks, membership, minhash, name, ngram, probe, rules"),
    ("negative coverage", "[rules.ngram.question]\ncoverage = -0.5\n", f"key 'rules.ngram.question.coverage': {FRACTION}, got -0.5"),
    ("coverage above 1", "[rules.ngram.context]\ncoverage = 1.5\n", f"key 'rules.ngram.context.coverage': {FRACTION}, got 1.5"),
    ("coverage 0", "[rules.ngram.question]\ncoverage = 0\n", f"key 'rules.ngram.question.coverage': {FRACTION}, got 0"),
    ("coverage nan", "[rules.ngram.question]\ncoverage = nan\n", f"key 'rules.ngram.question.coverage': {FRACTION}, got NaN"),
    ("exact_count 0", "[rules.ngram.question]\nexact_count = 0\n", f"key 'rules.ngram.question.exact_count': {COUNT}, got 0"),
    ("exact_count 1.5", "[rules.ngram.question]\nexact_count = 1.5\n", f"key 'rules.ngram.question.exact_count': {COUNT}, got 1.5"),
    ("documents 0", '[rules.ngram."question+answer"]\ndocuments = 0\n', f"key 'rules.ngram.\"question+answer\".documents': {COUNT}, got 0"),
    ("threshold true", "[rules.ngram.question]\ncoverage = true\n", f"key 'rules.ngram.question.coverage': {FRACTION}, got true"),
    ("threshold string", '[rules.ngram.question]\ncoverage = "0.8"\n', f"key 'rules.ngram.question.coverage': {FRACTION}, got \"0.8\""),
    ("threshold table", "[rules.ngram.question.coverage]\nvalue = 0.8\n", f"key 'rules.ngram.question.coverage': {FRACTION}, got a table"),
    ("max_spans -3", "[ngram]\nmax_spans = -3\n", f"key 'ngram.max_spans': {PARAMETER}, got -3"),
    ("max_spans 0", "[ngram]\nmax_spans = 0\n", f"key 'ngram.max_spans': {PARAMETER}, got 0"),
    ("max_spans true", "[ngram]\nmax_spans = true\n", f"key 'ngram.max_spans': {PARAMETER}, got true"),
    ("snippet_chars -1", "[ngram]\nsnippet_chars = -1\n", "key 'ngram.snippet_chars': must be a whole number ≥ 0, got -1"),
    ("window default 0", "[ngram.window]\ndefault = 0\n", f"key 'ngram.window.default': {PARAMETER}, got 0"),
    ("window script 2.5", "[ngram.window]\nhan = 2.5\n", f"key 'ngram.window.han': {PARAMETER}, got 2.5"),
    ("window a string", '[ngram]\nwindow = "8"\n', "key 'ngram.window': must be a table with keys arabic, cyrillic, default"),
    ("rules not a table", "rules = 5\n", "key 'rules': must be a table with keys langlinks, minhash, ngram, probe, got 5"),
    ("rules field not a table", "[rules.ngram]\nquestion = 0.8\n", "key 'rules.ngram.question': must be a table with keys coverage, exact_count"),
    ("ngram not a table", 'ngram = "fast"\n', "key 'ngram': must be a table with keys anchor_max_count, anchor_min_chars"),
    ("name not a string", "name = 3\n", "key 'name': must be a string, got 3"),
    ("not TOML", "[rules.ngram.question\ncoverage = 0.8\n", "not valid TOML"),
    ("not UTF-8", b"name = '\xff\xfe'\n", "not UTF-8 text"),
    ("a directory", None, "is a directory, not a policy file"),
]


def write_policy(tmp_path: Path, content: str | bytes | None) -> Path:
    """A policy file (a directory for None) with the given content."""
    path = tmp_path / "mine.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize(("content", "message"), [pytest.param(content, message, id=name) for name, content, message in BAD])
def test_a_bad_policy_is_refused_naming_file_key_and_what_is_allowed(tmp_path: Path, content: str | bytes | None, message: str):
    path = write_policy(tmp_path, content)
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_every_bad_key_is_reported_in_one_message(tmp_path: Path):
    path = write_policy(tmp_path, "[rules.ngram.question]\ncoverage = 2\ncoverge = 1\n[ngram]\nmax_spans = 0\n")
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    assert str(raised.value) == (
        f"{path}: key 'rules.ngram.question.coverage': {FRACTION}, got 2; "
        f"key 'rules.ngram.question.coverge': unknown; {FIGURES}; "
        f"key 'ngram.max_spans': {PARAMETER}, got 0"
    )


def test_the_builtin_policy_validates_unchanged():
    builtin = tomllib.loads(resources.files("audit").joinpath("data/policy.toml").read_text(encoding="utf-8"))
    policy = load_policy()
    assert policy.settings == builtin and policy.source == "built-in" and policy.name == "default"
    assert build_config(NgramConfig, policy.section("ngram"), "built-in") == NgramConfig()


def test_an_empty_file_is_the_builtin_policy(tmp_path: Path):
    assert load_policy(write_policy(tmp_path, "")).digest == load_policy().digest


def test_false_switches_a_rule_off(tmp_path: Path):
    policy = load_policy(write_policy(tmp_path, "[rules.ngram.question]\ncoverage = false\n"))
    assert policy.settings["rules"]["ngram"]["question"] == {"exact_count": 1, "coverage": False, "longest_match_fraction": 0.9}
    assert {rule.figure for rule in policy.rules["ngram"]["question"].for_source("any")} == {"exact_count", "longest_match_fraction"}


def test_a_whole_number_is_allowed_where_a_fraction_is(tmp_path: Path):
    policy = load_policy(write_policy(tmp_path, "[rules.ngram.context]\ncoverage = 1\n"))
    assert policy.settings["rules"]["ngram"]["context"] == {"coverage": 1.0, "longest_match_chars": 150}
    assert isinstance(policy.settings["rules"]["ngram"]["context"]["coverage"], float)


def test_a_partial_override_keeps_every_other_default(tmp_path: Path):
    text = 'name = "narrow"\n[rules.ngram.answer]\nexact_count = 5\n[ngram]\nmax_spans = 4\n[ngram.window]\nlatin = 5\n'
    policy = load_policy(write_policy(tmp_path, text))
    builtin = load_policy().settings
    assert policy.name == "narrow"
    assert policy.settings["rules"] == {**builtin["rules"], "ngram": {**builtin["rules"]["ngram"], "answer": {"exact_count": 5}}}
    assert policy.settings["ngram"] == {**builtin["ngram"], "max_spans": 4, "window": {**builtin["ngram"]["window"], "latin": 5}}
    config = build_config(NgramConfig, policy.section("ngram"), str(policy.source))
    assert (config.max_spans, config.window_for("latin"), config.window_for("greek"), config.window_for("han"), config.window_for("other")) == (4, 5, 8, 12, 8)


def test_build_config_names_where_the_section_came_from():
    with pytest.raises(PolicyError, match=re.escape(f"elsewhere: [ngram]: key 'max_anchors': {PARAMETER}, got 0")):
        build_config(NgramConfig, {"max_anchors": 0}, "elsewhere: [ngram]")


def test_window_sizes_cover_exactly_the_scripts_the_text_module_names():
    assert set(WindowSizes.model_fields) == {"default", *_SCRIPT_RANGES, *UNSEGMENTED_SCRIPTS}


def test_the_manual_lists_every_key_with_what_it_accepts():
    section = page("policy.md")
    rows = {line.split(" | ")[0].removeprefix("| ") for line in section.splitlines() if line.startswith("| `")}
    keys = schema_keys(PolicyFile)
    assert {f"`{key}`" for key, _ in keys} == rows
    for key, accepts in keys:
        assert f"| `{key}` | {accepts} |" in section


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    """A real index of a few demo passages, and a benchmark whose questions quote them."""
    root = tmp_path_factory.mktemp("tiny")
    with gzip.open(DEMO_TEXTS, "rt", encoding="utf-8") as lines:
        documents = [json.loads(next(lines)) for _ in range(3)]
    (root / "docs.jsonl").write_text("".join(json.dumps({"text": d["text"]}) + "\n" for d in documents), encoding="utf-8")
    build_index([root / "docs.jsonl"], root / "index")
    items = [
        {"item_id": str(n), "source_lang": "en", "variants": {"en": {"question": d["text"].split(". ")[0] + "?", "answer": d["text"].split()[1], "context": d["text"]}}}
        for n, d in enumerate(documents)
    ]
    (root / "bench.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return root / "bench.jsonl", root / "index"


def run_check(tiny: tuple[Path, Path], tmp_path: Path, policy: Path):
    bench, index = tiny
    args = ["check", str(bench), "--corpus", str(index), "--policy", str(policy), "--out", str(tmp_path / "out.audit.jsonl"), "--no-report"]
    return CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})


@pytest.mark.parametrize(
    ("content", "message"),
    [pytest.param(content, message, id=name) for name, content, message in BAD if name in ("misspelt figure", "negative coverage", "window default 0", "a directory")],
)
def test_the_command_line_refuses_a_bad_policy_on_one_line(tiny: tuple[Path, Path], tmp_path: Path, content: str | None, message: str):
    policy = write_policy(tmp_path, content)
    result = run_check(tiny, tmp_path, policy)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert f"Error: {policy}: " in result.output and message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out.audit.jsonl").exists()


def test_the_command_line_runs_under_the_validated_policy(tiny: tuple[Path, Path], tmp_path: Path):
    policy = write_policy(tmp_path, 'name = "strict"\n[rules.ngram.context]\ncoverage = 1\nlongest_match_chars = false\n')
    result = run_check(tiny, tmp_path, policy)
    assert result.exit_code == 0, result.output
    audit = read_audit(tmp_path / "out.audit.jsonl")
    assert audit.manifest["policy"]["name"] == "strict"
    assert audit.manifest["policy"]["settings"]["rules"]["ngram"]["context"] == {"coverage": 1.0, "longest_match_chars": False}
    assert [r["exposure"] for r in audit.records] == ["seen"] * 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"[rules.ngram.question]\ncoverge = 0.8\n", f"policy: key 'rules.ngram.question.coverge': unknown; {FIGURES}"),
        (b"[ngram.window]\ndefault = 0\n", f"policy: key 'ngram.window.default': {PARAMETER}, got 0"),
        (b"name = '\xff'\n", "policy: not valid UTF-8 TOML"),
    ],
)
def test_the_server_refuses_a_bad_policy_upload(tmp_path: Path, content: bytes, message: str):
    jobs = JobManager(tmp_path, {})
    try:
        with pytest.raises(JobError) as raised:
            jobs.add_policy(content)
    finally:
        jobs.shutdown()
    assert raised.value.status == 400 and str(raised.value).startswith(message)
    assert list((tmp_path / "policies").iterdir()) == []


def test_the_server_keeps_a_good_policy_with_its_validated_settings(tmp_path: Path):
    jobs = JobManager(tmp_path, {})
    try:
        policy = jobs.add_policy(b"[rules.ngram.question]\ncoverage = 1\n")
        assert jobs.policy_for(policy.digest).settings == policy.settings
    finally:
        jobs.shutdown()
    assert policy.settings["rules"]["ngram"]["question"]["coverage"] == 1.0
