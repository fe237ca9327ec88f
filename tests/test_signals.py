"""Several signals and several corpora in one audit: the policy judges each piece of evidence on
its own, whatever the order; a failing source fails only its own evidence; version-1 audit files
still read."""
from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from manual import page

from audit.auditfile import SCHEMA_VERSION, read_audit
from audit.cli import main
from audit.evidence import ABSENT, FAILED, Evidence, EvidenceError, Status
from audit.exposure import SEEN, UNKNOWN, UNSEEN, decide, exposure_of, said_alone
from audit.index.build import build_index
from audit.policyfile import Policy, PolicyError, compile_policy, load_policy
from audit.readers import load_benchmark
from audit.rules import FieldRules, Outcome
from audit.signals import MODEL_SIGNALS
from audit.signals.spec import Opening

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
SAMPLE = Path(str(resources.files("audit").joinpath("data/demo/eclektic_sample.csv.gz")))


def policy(rules: dict) -> Policy:
    """A compiled policy with these rules and no others, for signals and fields a policy file
    need not know: what is tested here is how rules decide."""
    compiled = {signal: {name: FieldRules.compile(table) for name, table in fields.items()} for signal, fields in rules.items()}
    return Policy("test", "test", {"name": "test", "rules": rules}, compiled, {})


def context(signal: str, source: str, **figures) -> Evidence:
    return Evidence(signal, source, "context", figures=figures)


TWO = policy({"ngram": {"context": {"coverage": 0.5}}, "minhash": {"context": {"containment": 0.6}}})


def test_two_signals_on_one_field_are_judged_separately_in_any_order():
    evidence = [context("ngram", "olmo", coverage=0.1), context("minhash", "olmo", containment=0.9)]
    for order in (evidence, evidence[::-1]):
        decision = decide(TWO, order)
        assert decision.exposure == SEEN
        assert decision.decided_by == [{"signal": "minhash", "source": "olmo", "field": "context", "figure": "containment", "op": ">=", "value": 0.9, "threshold": 0.6}]
    assert decide(TWO, [context("ngram", "olmo", coverage=0.1), context("minhash", "olmo", containment=0.2)]).exposure == UNSEEN


def test_two_corpora_on_one_field_never_replace_each_other():
    seen_in_second = [context("ngram", "olmo", coverage=0.1), context("ngram", "dolma", coverage=0.7)]
    rng = random.Random(7)
    for _ in range(5):
        rng.shuffle(seen_in_second)
        decision = decide(TWO, seen_in_second)
        assert decision.exposure == SEEN and decision.decided_by[0]["source"] == "dolma"
    unseen = decide(TWO, [context("ngram", "olmo", coverage=0.1), context("ngram", "dolma", coverage=0.2)])
    assert unseen.exposure == UNSEEN and {check["source"] for check in unseen.decided_by} == {"olmo", "dolma"}


def test_a_failed_source_is_unknown_unless_another_rule_fires():
    failed = Evidence("ngram", "olmo", "context", status="failed", error="ConnectionError: refused")
    assert decide(TWO, [failed, context("ngram", "dolma", coverage=0.7)]).exposure == SEEN
    decision = decide(TWO, [failed, context("ngram", "dolma", coverage=0.1)])
    assert decision.exposure == UNKNOWN
    assert decision.decided_by == [{"signal": "ngram", "source": "olmo", "field": "context", "status": "failed", "error": "ConnectionError: refused"}]


def test_rules_scoped_to_one_source_override_the_others():
    scoped = policy({"ngram": {"context": {"coverage": 0.5, "source:olmo": {"coverage": 0.2}, "source:dolma": {"coverage": False}}}})
    assert decide(scoped, [context("ngram", "olmo", coverage=0.3)]).exposure == SEEN
    assert decide(scoped, [context("ngram", "c4", coverage=0.3)]).exposure == UNSEEN
    assert decide(scoped, [context("ngram", "dolma", coverage=0.99)]).exposure == UNKNOWN, "no rule applies to dolma's evidence"


def test_at_most_and_categorical_rules():
    rules = policy({"logprobs": {"question": {"perplexity": {"<=": 12.0}, "verdict": "known"}}, "langlinks": {"title": {"article_exists": True}}})
    question = lambda **figures: Evidence("logprobs", "gemma", "question", figures=figures)  # noqa: E731
    assert decide(rules, [question(perplexity=8.0, verdict="not_known")]).exposure == SEEN
    assert decide(rules, [question(perplexity=30.0, verdict="known")]).exposure == SEEN
    assert decide(rules, [question(perplexity=30.0, verdict="not_known")]).exposure == UNSEEN
    assert decide(rules, [question(perplexity=30.0, verdict="not_known", bounds={"perplexity": [9.0, 30.0]})]).exposure == UNKNOWN
    article = lambda exists: Evidence("langlinks", "enwiki-2026-11", "title", figures={"article_exists": exists})  # noqa: E731
    assert decide(rules, [article(True)]).exposure == SEEN
    assert decide(rules, [article(False)]).exposure == UNSEEN


MIXED = policy({
    "ngram": {"context": {"coverage": 0.5, "exact_count": 2, "source:olmo": {"coverage": 0.2}, "source:dolma": {"coverage": False}}},
    "logprobs": {"context": {"perplexity": {"<=": 12.0}, "verdict": "known"}},
})


def random_piece(rng: random.Random) -> Evidence:
    """Evidence of every kind `decide` meets: figures missing, bounded or below their floor,
    sources with scoped rules or none, failed, unknown and absent pieces."""
    signal = rng.choice(["ngram", "logprobs", "minhash"])
    status = rng.choice([Status.OK] * 6 + [FAILED, Status.UNKNOWN, ABSENT])
    names = {"ngram": ["coverage", "exact_count"], "logprobs": ["perplexity", "verdict"], "minhash": ["containment"]}[signal]
    figures: dict = {}
    for name in names:
        if rng.random() < 0.8:
            figures[name] = rng.choice(["known", "not_known"]) if name == "verdict" else round(rng.uniform(0, 20 if name in ("perplexity", "exact_count") else 1), 2)
    numeric = [name for name in figures if name != "verdict"]
    if numeric and rng.random() < 0.3:
        low = rng.uniform(0, 10)
        figures["bounds"] = {rng.choice(numeric): [round(low, 2), round(low + rng.uniform(0, 10), 2)]}
    if figures and rng.random() < 0.2:
        figures["below_floor"] = [rng.choice(list(figures))]
    return Evidence(signal, rng.choice(["olmo", "dolma", "c4"]), rng.choice(["context", "question"]), status=status, figures=figures)


def test_each_piece_judged_alone_tags_any_group_of_pieces_as_decide_does():
    """The report tags every signal and source of every variant alone from each piece's own
    outcome; that must be `decide`'s tag of the same pieces, for every kind of evidence.  What
    `decide` hands back per piece (`said`, which a worker's record views carry) is what each
    piece says alone, a model's piece saying nothing."""
    rng = random.Random(7)
    tags, outcomes = set(), set()
    for _ in range(3000):
        pieces = [random_piece(rng) for _ in range(rng.randint(0, 5))]
        decision = decide(MIXED, pieces)
        alone = [None if piece.signal in MODEL_SIGNALS else said_alone(MIXED, piece) for piece in pieces]
        assert exposure_of(said_alone(MIXED, piece) for piece in pieces) == decision.exposure, pieces
        assert decision.said == alone, pieces
        tags.add(decision.exposure)
        outcomes |= set(alone)
    assert tags == {SEEN, UNSEEN, UNKNOWN} and outcomes == {*Outcome, None}


def test_a_policy_file_states_every_kind_of_rule(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text('[rules.ngram.context]\ncoverage = { "<=" = 0.9 }\n[rules.ngram.context."source:olmo"]\nlongest_match_chars = 80\ncoverage = false\n', encoding="utf-8")
    loaded = load_policy(path)
    rules = loaded.rules["ngram"]["context"]
    assert [(r.figure, r.op, r.value) for r in rules.for_source("c4")] == [("coverage", "<=", 0.9), ("longest_match_chars", ">=", 150)]
    assert [(r.figure, r.op, r.value) for r in rules.for_source("olmo")] == [("longest_match_chars", ">=", 80)]


def test_the_policy_and_the_decisions_import_no_signal_code_client_or_model(tmp_path: Path):
    """`audit.exposure` needs the signals' specs only: loading it loads no implementation, link
    source, HTTP client or probe model.  Run away from the checkout, so `-c` imports the
    package as installed (with its compiled parts), not the source tree."""
    code = "import sys, audit.exposure; print(' '.join(sorted(sys.modules)))"
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp_path).stdout.split())
    assert {"audit.signals.spec", "audit.signals.ngram_spec", "audit.signals.probe_spec"} <= loaded
    implementations = {f"audit.signals.{name}" for name in ("ngram", "minhash", "langlinks", "probe")}
    heavy = {name for name in loaded if name.startswith(("audit.links", "audit.probes", "requests", "httpx", "llama_cpp", "torch"))}
    assert not loaded & implementations and not heavy


def test_every_signal_opens_from_its_spec_and_says_why_it_skips(two_indexes: dict[str, Path]):
    from audit.corpora.local import LocalIndex
    from audit.signals import SIGNALS, Runner, configure, plan
    from audit.signals.spec import Skip

    policy = load_policy()
    corpus = LocalIndex(two_indexes["root"] / "wiki-a", name="olmo")
    opened = SIGNALS["minhash"].open(corpus, Opening(policy.configs["minhash"], policy.rules["minhash"]))
    assert isinstance(opened, Skip) and opened.source == "olmo" and "no near-duplicate index" in opened.reason
    runner = SIGNALS["ngram"].open(corpus, Opening(policy.configs["ngram"], policy.rules["ngram"]))
    assert isinstance(runner, Runner) and runner.source == "olmo" and runner.prepare is None
    runners, runs = plan([corpus], None, configure(policy.settings), policy.rules)
    assert [(r.signal, r.source) for r in runners] == [("ngram", "olmo")]
    assert [(r.signal, r.ran, r.reason) for r in runs] == [
        ("ngram", True, None), ("minhash", False, opened.reason), ("langlinks", False, "no link source (--links)"), ("probe", False, "no model to probe"),
        ("membership", False, "no model to probe"),
    ]


def test_a_policy_is_compiled_once_and_read_back_from_a_manifest_the_same_way():
    policy = load_policy()
    again = compile_policy(json.loads(json.dumps(policy.settings)), "audit manifest's policy")
    assert again.digest == policy.digest and again.rules == policy.rules and again.configs == policy.configs
    assert policy.judges("ngram") and not compile_policy({"name": "off", "rules": {"ngram": {}}}, "test").judges("minhash")
    bad = {**policy.settings, "rules": {**policy.settings["rules"], "minhash": {"context": {"coverage": 0.5}}}}
    with pytest.raises(PolicyError, match=r"audit manifest's policy: key 'rules\.minhash\.context\.coverage': unknown"):
        compile_policy(bad, "audit manifest's policy")


def test_evidence_reads_back_as_written_and_bad_entries_are_named():
    written = Evidence("ngram", "olmo", "context", status="failed", figures={"coverage": 0.5}, provenance=[{"document": 3}], error="timed out")
    assert Evidence.from_dict(json.loads(json.dumps(written.to_dict()))) == written
    assert Evidence.from_dict({"signal": "ngram", "corpus": "olmo", "field": "question"}).source == "olmo"
    with pytest.raises(EvidenceError, match="'status': expected one of ok, absent, failed, unknown, got 'maybe'"):
        Evidence.from_dict({"signal": "ngram", "field": "question", "status": "maybe"})


# Through the command line -------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory) -> dict[str, Path]:
    """Two real indexes of different text, a benchmark of three sample items, and a registry
    naming a remote corpus that is never reachable."""
    root = tmp_path_factory.mktemp("two")
    with gzip.open(CORPUS / "eclektic-en-passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        passages = handle.readlines()
    with gzip.open(CORPUS / "xquad-en.jsonl.gz", "rt", encoding="utf-8") as handle:
        xquad = handle.readlines()[:50]
    items = load_benchmark(SAMPLE).items[:3]
    wanted = {i.variants[i.source_lang].context for i in items}
    (root / "a.jsonl").write_text("".join(xquad), encoding="utf-8")
    (root / "b.jsonl").write_text("".join(line for line in passages if json.loads(line)["text"] in wanted), encoding="utf-8")
    build_index([root / "a.jsonl"], root / "wiki-a")
    build_index([root / "b.jsonl"], root / "wiki-b")
    (root / "bench.jsonl").write_text(
        "".join(
            json.dumps({"item_id": i.item_id, "source_lang": i.source_lang, "variants": {lang: {"question": v.question, "context": v.context} for lang, v in i.variants.items() if lang in ("en", "fr")}}, ensure_ascii=False) + "\n"
            for i in items
        ),
        encoding="utf-8",
    )
    (root / "registry.toml").write_text('[corpora.gone]\nbackend = "infini-gram-api"\nurl = "http://127.0.0.1:9/"\nindex = "nothing"\nattempts = 1\ntimeout = 2\n', encoding="utf-8")
    return {"root": root}


def run(root: Path, *args: str):
    return CliRunner().invoke(main, ["check", str(root / "bench.jsonl"), *args, "--no-report"], env={"AUDIT_CACHE_DIR": str(root / "cache")})


def test_several_corpora_in_one_audit(two_indexes):
    root = two_indexes["root"]
    out = root / "two.audit.jsonl"
    result = run(root, "--corpus", str(root / "wiki-a"), "--corpus", str(root / "wiki-b"), "--out", str(out))
    assert result.exit_code == 0, result.output
    audit = read_audit(out)
    assert audit.manifest["schema_version"] == SCHEMA_VERSION == 4
    assert [c["name"] for c in audit.manifest["corpora"]] == ["wiki-a", "wiki-b"]
    assert audit.manifest["signal_runs"] == [
        {"signal": "ngram", "source": "wiki-a", "ran": True, "reason": None},
        {"signal": "ngram", "source": "wiki-b", "ran": True, "reason": None},
    ] + [run for run in audit.manifest["signal_runs"] if run["signal"] != "ngram"]
    english = [r for r in audit.records if r["lang"] == "en"]
    assert all(r["exposure"] == SEEN for r in english), "the passages are in wiki-b"
    assert all({c["source"] for c in r["decided_by"]} == {"wiki-b"} for r in english)
    assert all({e["source"] for e in r["evidence"]} == {"wiki-a", "wiki-b"} for r in audit.records)


def test_a_failing_corpus_fails_only_its_own_evidence(two_indexes):
    root = two_indexes["root"]
    out = root / "gone.audit.jsonl"
    result = run(root, "--corpus", str(root / "wiki-b"), "--corpus", "gone", "--registry", str(root / "registry.toml"), "--out", str(out), "--signals", "ngram")
    assert result.exit_code == 0, result.output
    assert "failed ngram on gone" in result.output
    records = read_audit(out).records
    for record in records:
        gone = [e for e in record["evidence"] if e["source"] == "gone" and e["field"] in ("question", "context")]
        assert gone and all(e["status"] == "failed" for e in gone)
    english = [r for r in records if r["lang"] == "en"]
    assert all(r["exposure"] == SEEN for r in english), "wiki-b's evidence still decides"
    french = [r for r in records if r["lang"] == "fr"]
    assert all(r["exposure"] == UNKNOWN for r in french), "unseen in wiki-b, but gone could not say"


def test_signal_choice_is_checked(two_indexes):
    root = two_indexes["root"]
    result = run(root, "--corpus", str(root / "wiki-a"), "--signals", "ngram,telepathy")
    assert result.exit_code == 2 and "telepathy is not a signal" in result.output
    result = run(root, "--corpus", str(root / "wiki-a"), "--corpus", str(root / "wiki-a"))
    assert result.exit_code == 2 and "given twice" in result.output


def test_a_version_1_audit_file_is_still_filtered_and_reported(tmp_path: Path, monkeypatch):
    for name in ("v1.audit.jsonl", "bench.jsonl"):
        shutil.copy(FIXTURES / "audit-v1" / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    audit = read_audit(tmp_path / "v1.audit.jsonl")
    assert audit.manifest["upgraded_from"] == 1 and audit.manifest["policy"]["settings"]["rules"]["ngram"]
    assert all("source" in e and "corpus" not in e for r in audit.records for e in r["evidence"])
    result = CliRunner().invoke(main, ["filter", "v1.audit.jsonl", "--out", "clean.jsonl"])
    assert result.exit_code == 0, result.output
    assert "2 items: removed 0" in result.output
    result = CliRunner().invoke(main, ["report", "--audit", "v1.audit.jsonl", "--out", "v1.report"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "v1.report" / "report.json").read_text(encoding="utf-8"))
    assert len(data["exposure"]["items"]) == 2


def test_the_manual_schema_tables_are_the_records_fields():
    from dataclasses import fields

    from audit.records import AuditManifest, ExposureRecord

    section = page("audit-file.md")

    def table_after(heading: str) -> set[str]:
        rows = section[section.index(heading) :].split("\n\n")[1].splitlines()[2:]
        return {key.strip(" `") for row in rows for key in row.split(" | ")[0].removeprefix("| ").split(", ")}

    assert table_after("Manifest (") == {f.name for f in fields(AuditManifest)} | {"record", "schema_version", "records", "records_sha256"}
    assert table_after("Record (") == {f.name for f in fields(ExposureRecord)} | {"record"}
