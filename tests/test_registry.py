"""The corpus registry: built-in public indexes, user entries (paths and URLs), their errors,
and the reachability and cache report behind `audit corpora`."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from manual import page
from test_server import SAMPLE, Served, start_server

from audit.auditfile import read_audit
from audit.cli import main
from audit.corpora.api import ApiCorpus
from audit.corpora.local import LocalIndex
from audit.corpora.registry import (
    API,
    BUILTIN,
    CorpusError,
    check_corpora,
    open_corpus,
    read_registry,
    registry_entries,
)
from audit.paths import DEFAULT_REGISTRY
from audit.readers import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def served(wiki_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_registry_file_is_the_built_in_registry_the_package_ships():
    shipped = resources.files("audit").joinpath("data/corpora.toml").read_text(encoding="utf-8")
    assert shipped == (ROOT / DEFAULT_REGISTRY).read_text(encoding="utf-8")
    assert set(read_registry(ROOT / DEFAULT_REGISTRY)) == set(BUILTIN)
    assert BUILTIN["olmo"].index == "v4_olmo-2-0325-32b-instruct_llama" and BUILTIN["olmo"].url == "https://api.infini-gram.io/"
    assert {name for name, e in BUILTIN.items() if e.backend == API} >= {"olmo", "olmo-mix", "dolma", "dclm", "rpj", "pile", "c4"}


def test_the_manual_corpora_table_names_every_built_in_corpus():
    text = page("corpora.md")
    section = text[: text.index("\n## `audit corpora`")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([a-z0-9.-]+)`", row.split(" | ")[0])}
    assert named == set(BUILTIN)
    for row in rows:
        backend = row.split(" | ")[1].strip("` ")
        names = set(re.findall(r"`([a-z0-9.-]+)`", row.split(" | ")[0]))
        assert {BUILTIN[name].backend for name in names} == {"demo" if backend == "bundled" else backend}, row[:60]


def test_built_in_names_open_from_any_directory_without_network(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    corpus = open_corpus("olmo", offline=True)
    assert isinstance(corpus, ApiCorpus) and corpus.info.backend == API
    assert corpus.details["index"] == "v4_olmo-2-0325-32b-instruct_llama" and corpus.details["longest_match"] == "count"


def test_user_entries_name_a_url_or_a_path(served: Served, wiki_index: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    registry = write(
        tmp_path / "corpora.toml",
        f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{served.url}"\nindex = "wiki"\ncache = "team.sqlite"\nbudget = 64\n'
        f'[corpora.mine]\nbackend = "local"\npath = "{wiki_index}"\n'
        '[corpora.olmo]\nbackend = "infini-gram-api"\nindex = "v4_pileval_llama"\n',
    )
    team = open_corpus("team", registry)
    assert isinstance(team, ApiCorpus) and team.options.budget == 64
    assert team.count("University") == LocalIndex(wiki_index).count("University")
    assert (tmp_path / "team.sqlite").exists()
    assert isinstance(open_corpus("mine", registry), LocalIndex)
    assert registry_entries(registry)["olmo"].index == "v4_pileval_llama"
    assert isinstance(open_corpus(str(wiki_index), registry), LocalIndex)
    with pytest.raises(CorpusError, match="unknown corpus 'nothing'"):
        open_corpus("nothing", registry)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('backend = "cloud"', "corpora.x.backend: 'cloud' is not one of local, demo, infini-gram-api, infini-gram-mini"),
        ('backend = "local"', "corpora.x.path is required for a local index"),
        ('backend = "infini-gram-api"', "corpora.x.index is required"),
        ('backend = "infini-gram-api"\nindex = "i"\nurl = "ftp://x"', "corpora.x.url: 'ftp://x' is not an http(s) URL"),
        ('backend = "infini-gram-api"\nindex = "i"\nlongest_match = "guess"', "corpora.x: longest_match 'guess' is not one of auto, creativity, count"),
        ('backend = "infini-gram-api"\nindex = "i"\nbudget = 0', "corpora.x: budget, max_query_chars"),
        ('backend = "infini-gram-api"\nindex = "i"\ncolour = "blue"', "corpora.x: unknown key(s) colour"),
        ('backend = "local"\npath = "p"\nindex = "i"', "corpora.x: key(s) index apply to infini-gram-api and infini-gram-mini entries only"),
    ],
)
def test_bad_entries_are_reported_with_their_key(tmp_path: Path, entry: str, message: str):
    registry = write(tmp_path / "corpora.toml", f"[corpora.x]\n{entry}\n")
    with pytest.raises(CorpusError) as error:
        read_registry(registry)
    assert str(error.value) == f"{registry}: {message}" or message in str(error.value)


@pytest.mark.parametrize(
    ("section", "entry", "field", "message"),
    [
        ("corpora", 'backend = "infini-gram-api"\nindex = "i"\ntimeout = "soon"', "corpora.x.timeout", "'soon' is not a number"),
        ("corpora", 'backend = "infini-gram-api"\nindex = "i"\nvariants = 1', "corpora.x.variants", "1 is not true or false"),
        ("corpora", 'backend = "local"\npath = 3', "corpora.x.path", "3 is not a string"),
        ("corpora", "backend = 7", "corpora.x.backend", "7 is not one of local, demo"),
        ("links", 'backend = "api"\nattempts = 2.5', "links.x.attempts", "2.5 is not a whole number"),
        ("links", 'backend = "dump"\npath = ["a"]', "links.x.path", "['a'] is not a string"),
        ("models", 'backend = "local"\npath = "m.gguf"\nbatch_size = true', "models.x.batch_size", "must be a whole number, at least 1"),
        ("models", 'backend = "openai"\nmodel = "m"', "models.x.base_url", "is required: an openai entry needs base_url and model"),
    ],
)
def test_entries_of_every_section_are_typed_and_placed(tmp_path: Path, section: str, entry: str, field: str, message: str):
    """Every section's entries go through a model: a value of the wrong type is refused, not
    converted, and the error names the file and the key, as text and as `place()`."""
    from audit.errors import AuditError
    from audit.links.sources import open_links
    from audit.probes.models import open_model

    registry = write(tmp_path / "corpora.toml", f"[{section}.x]\n{entry}\n")
    opening = {"corpora": lambda: read_registry(registry), "links": lambda: open_links("x", registry), "models": lambda: open_model("x", registry, cache=tmp_path / "p.sqlite")}
    with pytest.raises(AuditError) as raised:
        opening[section]()
    assert str(raised.value).startswith(f"{registry}: {field}") and message in str(raised.value), str(raised.value)
    assert raised.value.place() == (str(registry), None, field)


def test_bad_registry_files(tmp_path: Path):
    with pytest.raises(CorpusError, match="no such registry file"):
        open_corpus("demo", tmp_path / "missing.toml")
    with pytest.raises(CorpusError, match="not valid TOML"):
        read_registry(write(tmp_path / "bad.toml", "[corpora\n"))


def test_corpora_report_reachability_and_cache_quickly(served: Served, wiki_index: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    registry = write(
        tmp_path / "corpora.toml",
        f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{served.url}"\nindex = "wiki"\n'
        '[corpora.gone]\nbackend = "infini-gram-api"\nurl = "http://127.0.0.1:9/"\nindex = "wiki"\n'
        f'[corpora.mine]\nbackend = "local"\npath = "{wiki_index}"\n'
        f'[corpora.broken]\nbackend = "local"\npath = "{tmp_path}"\n',
    )
    open_corpus("team", registry).count("University")
    started = time.monotonic()
    report = {check.name: check for check in check_corpora(registry, timeout=2.0)}
    assert time.monotonic() - started < 10
    assert report["team"].reachable is True and report["team"].cached >= 1 and "tokens" in report["team"].message
    assert report["gone"].reachable is False and "unreachable" in report["gone"].message and report["gone"].cached == 0
    assert report["mine"].reachable is True and report["broken"].reachable is False
    assert report["olmo"].backend == API and report["olmo"].reachable is False
    assert report["demo"].backend == "demo"


def test_audit_check_runs_through_a_served_index_unchanged(served: Served, wiki_index: Path, tmp_path: Path):
    registry = write(tmp_path / "corpora.toml", f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{served.url}"\nindex = "wiki"\ncache = "c.sqlite"\n')
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    runner = CliRunner()
    remote = runner.invoke(main, ["check", str(SAMPLE), "--corpus", "team", "--registry", str(registry), "--langs", "en,zh", "--out", str(tmp_path / "remote.jsonl")], env=env)
    assert remote.exit_code == 0, remote.output
    local = runner.invoke(main, ["check", str(SAMPLE), "--corpus", str(wiki_index), "--langs", "en,zh", "--out", str(tmp_path / "local.jsonl")], env=env)
    assert local.exit_code == 0, local.output
    a, b = read_audit(tmp_path / "remote.jsonl"), read_audit(tmp_path / "local.jsonl")
    assert [(r["item_id"], r["lang"], r["exposure"]) for r in a.records] == [(r["item_id"], r["lang"], r["exposure"]) for r in b.records]
    corpus = a.manifest["corpora"][0]
    assert corpus["backend"] == API and corpus["details"]["index"] == "wiki" and corpus["details"]["tokenization"] == "bytes"
    assert corpus["details"]["requests"]["requests"] > 0


def test_audit_check_profiles_through_counts_and_the_manifest_summary(served: Served, wiki_docs, tmp_path: Path):
    """`longest_match = "count"`, as against the public API: the default profile asks what the
    policy needs, `--profile full` every position; both decide the same tags here, the manifest
    says which profile ran and what the count queries cost per variant, and a re-run from the
    cache decides the same with no request sent."""
    registry = write(tmp_path / "corpora.toml", f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{served.url}"\nindex = "wiki"\ncache = "c.sqlite"\nlongest_match = "count"\nbudget = 20000\n')
    rows = [
        {"item_id": item.item_id, "source_lang": item.source_lang, "variants": {lang: {"question": item.variants[lang].question, "answer": item.variants[lang].answer} for lang in ("en", "de")}}
        for item in load_benchmark(SAMPLE).items[:6]
    ]
    held = " ".join(wiki_docs["en"][2]["text"].split()[:30])
    rows.append({"item_id": "held", "source_lang": "en", "variants": {"en": {"question": f"{held}?", "answer": "yes"}, "de": {"question": "Was steht in diesem Absatz über den Fluss?", "answer": "ja"}}})
    bench = write(tmp_path / "six.jsonl", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    runner = CliRunner()
    base = ["check", str(bench), "--corpus", "team", "--registry", str(registry), "--no-report"]
    audits = {}
    for name, extra in (("decide", []), ("full", ["--profile", "full"]), ("again", [])):
        result = runner.invoke(main, [*base, *extra, "--out", str(tmp_path / f"{name}.jsonl")], env=env)
        assert result.exit_code == 0, result.output
        audits[name] = read_audit(tmp_path / f"{name}.jsonl")
    tags = {name: [(r["item_id"], r["lang"], r["exposure"]) for r in audit.records] for name, audit in audits.items()}
    assert tags["decide"] == tags["full"] == tags["again"]
    details = {name: audit.manifest["corpora"][0]["details"] for name, audit in audits.items()}
    assert details["decide"]["profile"] == "decide" and details["full"]["profile"] == "full"
    spent = {name: audit.manifest["summary"]["count_queries"]["team"] for name, audit in audits.items()}
    assert spent["decide"]["total"] * 3 < spent["full"]["total"]
    assert spent["again"] == spent["decide"] and details["again"]["requests"]["requests"] == 0
    checks = audits["decide"].manifest["summary"]["checks"]["ngram/team"]
    assert checks.get("fired", 0) > 0 and checks.get("passed", 0) > 0


def test_profile_entries_are_checked(tmp_path: Path):
    registry = write(tmp_path / "corpora.toml", '[corpora.x]\nbackend = "infini-gram-api"\nindex = "i"\nprofile = "most"\n')
    with pytest.raises(CorpusError, match="profile 'most' is not one of decide, full"):
        read_registry(registry)


def test_an_unreachable_corpus_is_on_the_first_screen_and_strict_fails(tmp_path: Path):
    """A run whose corpus cannot be reached says so (which corpus, how many variants it left
    unknown, the first error), shows no seen rate for undecided languages, and with `--strict`
    exits non-zero; the audit file is written all the same."""
    registry = write(tmp_path / "corpora.toml", '[corpora.gone]\nbackend = "infini-gram-api"\nurl = "http://127.0.0.1:9/"\nindex = "wiki"\nattempts = 1\ntimeout = 2\n')
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    args = ["check", str(SAMPLE), "--corpus", "gone", "--registry", str(registry), "--langs", "en,de", "--no-report", "--out", str(tmp_path / "gone.jsonl")]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    assert "failed ngram on gone:" in result.output and "leaving 78 of 78 variant(s) unknown" in result.output and "first error:" in result.output
    rows = [line for line in result.output.splitlines() if line.lstrip("│ ").startswith(("de ", "en ", "all "))]
    assert [row.split("│")[1].strip() for row in rows] == ["de", "en", "all"] and all("–" in row and "100.0%" in row for row in rows)
    strict = CliRunner().invoke(main, [*args, "--strict"], env=env)
    assert strict.exit_code == 3 and "--strict: 78 variant(s) are unknown" in strict.output
    assert read_audit(tmp_path / "gone.jsonl").manifest["summary"]["checks"]["ngram/gone"]["failed"] > 0
