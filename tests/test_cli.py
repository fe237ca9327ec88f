"""`audit check` end to end on the bundled sample and demo corpus, as a user runs it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from manual import README, page

from audit.auditfile import AuditFileError, read_audit, write_audit
from audit.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def check(cache: Path, *args: str):
    return CliRunner().invoke(main, ["check", *args], env={"AUDIT_CACHE_DIR": str(cache)})


@pytest.fixture(scope="module")
def demo_audit(cache, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("out") / "sample.audit.jsonl"
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--out", str(out), "--langs", "en,fr,ja")
    assert result.exit_code == 0, result.output
    return out


def test_manifest_then_one_record_per_item_and_language(demo_audit: Path):
    audit = read_audit(demo_audit)
    manifest = audit.manifest
    assert manifest["benchmark"]["format"] == "eclektic-csv"
    assert manifest["benchmark"]["items"] == 39
    assert manifest["corpora"][0]["name"] == "demo" and manifest["corpora"][0]["documents"] > 20000
    assert len(manifest["corpora"][0]["fingerprint"]) == 32
    assert manifest["policy"]["name"] == "default" and manifest["config_hash"]
    assert len(audit.records) == 39 * 3
    assert {(r["item_id"], r["lang"]) for r in audit.records} == {(r["item_id"], l) for r in audit.records for l in ("en", "fr", "ja")}


def test_english_source_passages_in_the_demo_are_seen_with_provenance(demo_audit: Path):
    english = [r for r in read_audit(demo_audit).records if r["lang"] == "en"]
    assert all(r["exposure"] == "seen" and r["role"] == "source" for r in english)
    for record in english:
        context = next(e for e in record["evidence"] if e["field"] == "context")
        assert context["figures"]["coverage"] == 1.0
        assert context["provenance"][0]["metadata"]["metadata"]["id"] == f"eclektic-en-{record['item_id']}"
        assert any(d["field"] == "context" for d in record["decided_by"])


def test_targets_are_tagged_and_items_summarised(demo_audit: Path):
    audit = read_audit(demo_audit)
    targets = [r for r in audit.records if r["role"] == "target"]
    assert {r["exposure"] for r in targets} <= {"seen", "unseen", "unknown"}
    assert all(r["decided_by"] for r in audit.records)
    summary = audit.manifest["summary"]
    assert sum(summary["items"].values()) == 39
    assert summary["languages"]["en"]["seen"] == 39
    assert {r["item_exposure"] for r in audit.records} <= {"seen_in_source_only", "seen_in_target", "unseen_everywhere", "unknown"}


def test_rerun_gives_the_same_records(cache, demo_audit: Path, tmp_path: Path):
    again = tmp_path / "again.jsonl"
    assert check(cache, str(SAMPLE), "--corpus", "demo", "--out", str(again), "--langs", "en,fr,ja").exit_code == 0
    assert read_audit(again).records == read_audit(demo_audit).records
    assert check(cache, str(SAMPLE), "--corpus", "demo", "--out", str(again), "--langs", "en,fr,ja").exit_code == 0


def test_policy_file_changes_the_decision(cache, tmp_path: Path):
    policy = tmp_path / "strict.toml"
    policy.write_text(
        'name = "verbatim-question-only"\n[rules.ngram.context]\ncoverage = false\nlongest_match_chars = false\n'
        '[rules.ngram."question+answer"]\ndocuments = false\n[rules.ngram.question]\ncoverage = false\nlongest_match_fraction = false\n'
        "[rules.minhash.question]\ncontainment = false\n[rules.minhash.context]\ncontainment = false\n",
        encoding="utf-8",
    )
    out = tmp_path / "strict.jsonl"
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--out", str(out), "--langs", "en", "--policy", str(policy))
    assert result.exit_code == 0, result.output
    audit = read_audit(out)
    assert audit.manifest["policy"]["name"] == "verbatim-question-only"
    assert all(r["exposure"] == "unseen" for r in audit.records)
    assert all(d["figure"] == "exact_count" for r in audit.records for d in r["decided_by"])


def test_refuses_to_overwrite_something_that_is_not_an_audit_file(cache, tmp_path: Path):
    precious = tmp_path / "benchmark.jsonl"
    precious.write_text('{"item_id": 1}\n', encoding="utf-8")
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--out", str(precious))
    assert result.exit_code == 2
    assert "not an audit file" in result.output
    assert precious.read_text(encoding="utf-8") == '{"item_id": 1}\n'


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"item_id": "a", "source_lang": "en", "variants": {"en": {"question": "Q?"}}}\n{"item_id": "b", "source_lang": "xx", "variants": {}}\n', ":2: field 'source_lang'"),
        ('{"item_id": "a", "source_lang": "en", "variants": {"en": {"question": "Q?"}}}\n{oops\n', ":2:"),
    ],
)
def test_bad_benchmark_names_file_line_and_field(cache, tmp_path: Path, content: str, expected: str):
    bench = tmp_path / "bench.jsonl"
    bench.write_text(content, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = check(cache, str(bench), "--corpus", "demo", "--out", str(out))
    assert result.exit_code == 2
    assert f"bench.jsonl{expected}" in result.output
    assert not out.exists()


def test_langs_must_be_in_the_benchmark(cache, tmp_path: Path):
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--langs", "en,ru", "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "no 'ru' variants" in result.output
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--langs", "jp", "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "'ja'" in result.output


def test_bad_policy_and_unknown_corpus_are_input_errors(cache, tmp_path: Path):
    policy = tmp_path / "bad.toml"
    policy.write_text("[rules.ngram.context]\ncoverage = 'high'\n", encoding="utf-8")
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--policy", str(policy), "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "rules.ngram.context.coverage" in result.output
    typo = tmp_path / "typo.toml"
    typo.write_text("[ngram]\nspan_min_char = 5\n", encoding="utf-8")
    result = check(cache, str(SAMPLE), "--corpus", "demo", "--policy", str(typo), "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "span_min_char" in result.output
    result = check(cache, str(SAMPLE), "--corpus", "no-such-corpus", "--out", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2 and "unknown corpus 'no-such-corpus'" in result.output


def test_audit_file_is_written_whole_or_not_at_all(tmp_path: Path):
    out = tmp_path / "a.jsonl"

    def records():
        yield {"item_id": "1", "lang": "en"}
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_audit(out, {"tool": "corpus-audit"}, records())
    assert list(tmp_path.iterdir()) == []
    write_audit(out, {"tool": "corpus-audit"}, [{"item_id": "1", "lang": "en"}])
    assert json.loads(out.read_text().splitlines()[1]) == {"record": "exposure", "item_id": "1", "lang": "en"}
    out.write_text(out.read_text() + "{broken\n")
    with pytest.raises(AuditFileError, match=r"a.jsonl:3: not valid JSON"):
        read_audit(out)


@pytest.mark.parametrize("text", [README, page("install.md")], ids=["readme", "manual"])
def test_the_set_up_section_shows_what_the_main_command_prints(cache, demo_audit: Path, tmp_path: Path, monkeypatch, text: str):
    """The set-up section's sample output, in the README and in the manual, is the command's
    real output (bar the timing) once the demo index is built (`demo_audit` builds it)."""
    section = text[text.index("Set up and run\n") :]
    command = section[section.index("audit check") : section.index("\n", section.index("audit check"))].split()
    shown = section[section.index("```\n", section.index("in the current directory:")) + 4 :]
    shown = shown[: shown.index("```")]
    monkeypatch.chdir(tmp_path)
    sample = next(arg for arg in command if arg.endswith("eclektic_sample.csv.gz"))
    Path(sample).parent.mkdir(parents=True)
    shutil.copyfile(SAMPLE, sample)
    result = CliRunner().invoke(main, command[1:], env={"AUDIT_CACHE_DIR": str(cache), "COLUMNS": "100"})
    assert result.exit_code == 0, result.output

    def untimed(text: str) -> list[str]:
        return [line.split("(")[0].rstrip() if "items:" in line else line.split(": done in")[0].rstrip() for line in text.strip().splitlines()]

    assert untimed(result.output) == untimed(shown)
    assert (tmp_path / "eclektic_sample.demo.audit.jsonl").is_file() and (tmp_path / "eclektic_sample.demo.report" / "report.html").is_file()


def report_dir(audit: Path) -> Path:
    return audit.with_name(audit.name.removesuffix(".audit.jsonl") + ".report")


def run_values(manifest: dict) -> list[str]:
    """What differs between two runs of one command: when the audit was made, the command
    line, where it wrote the audit, and where the benchmark and the corpus were."""
    command = manifest["command"]
    where = [manifest["created"], command[command.index("--out") + 1], manifest["benchmark"]["absolute_path"], *(c["location"] for c in manifest["corpora"])]
    return [json.dumps(command, ensure_ascii=False), " ".join(command), *where]


def without_run(manifest: dict, text: str) -> str:
    """A file of the report with `run_values` replaced, as written and as JSON escapes them."""
    for value in sorted(run_values(manifest), key=len, reverse=True):
        text = text.replace(json.dumps(value, ensure_ascii=False)[1:-1], "VARIES").replace(value, "VARIES")
    return text


def test_the_committed_example_is_what_its_documented_command_writes(cache, demo_audit: Path, tmp_path: Path, monkeypatch):
    """`reports/demo/` is what the command reports/README.md gives writes today: the same
    records, byte for byte, and the same report, bar when and where it ran."""
    text = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    command = text[text.index("audit check") : text.index("\n", text.index("audit check"))].split()
    committed = ROOT / command[command.index("--out") + 1]
    command[command.index("--out") + 1] = str(tmp_path / committed.name)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", command)  # the command line the manifest records
    result = CliRunner().invoke(main, command[1:], env={"AUDIT_CACHE_DIR": str(cache)})
    assert result.exit_code == 0, result.output
    fresh = tmp_path / committed.name
    (old_head, *old_lines), (new_head, *new_lines) = (path.read_bytes().splitlines(keepends=True) for path in (committed, fresh))
    assert old_lines == new_lines and len(new_lines) == 468, "reports/demo is stale: regenerate it with the command in reports/README.md"
    old, new = json.loads(old_head), json.loads(new_head)
    assert without_run(old, json.dumps(old, ensure_ascii=False)) == without_run(new, json.dumps(new, ensure_ascii=False))
    names = sorted(path.relative_to(report_dir(fresh)) for path in report_dir(fresh).rglob("*") if path.is_file())
    assert names == sorted(path.relative_to(report_dir(committed)) for path in report_dir(committed).rglob("*") if path.is_file())
    for name in names:
        before, after = (without_run(m, (report_dir(a) / name).read_text(encoding="utf-8")) for m, a in ((old, committed), (new, fresh)))
        assert before == after, f"reports/demo/{report_dir(committed).name}/{name} is stale: regenerate it with the command in reports/README.md"


def _imported_by(where: Path, *args: str) -> set[str]:
    """The `audit` modules a fresh process holds after running the command line with `args`
    (run in `where`, so the package is the installed one, not a checkout's sources)."""
    script = "import sys; from audit.cli import main\ntry: main(sys.argv[1:], prog_name='audit')\nexcept SystemExit: pass\nprint(*(m for m in sys.modules if m.startswith('audit')), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True, cwd=where)
    return set(done.stderr.splitlines()[-1].split())


def test_a_command_imports_its_own_module_only(tmp_path: Path):
    """`audit --version` or `audit formats` answers without importing every signal, corpus and
    renderer (half a second of every command when they were all imported up front)."""
    assert not {m for m in _imported_by(tmp_path, "--version") if m.startswith("audit.cli.") and m != "audit.cli.shell"}
    formats = _imported_by(tmp_path, "formats")
    assert "audit.cli.formats" in formats and not formats & {"audit.cli.check", "audit.run", "audit.signals", "audit.report.render"}
    listed = _imported_by(tmp_path, "--help")
    assert {f"audit.cli.{module}" for module, _ in COMMANDS.values()} <= listed
    probe = CliRunner().invoke(main, ["probe", "--help"])
    assert probe.exit_code == 0 and "plant" in probe.output and "serve-model" in probe.output
    assert CliRunner().invoke(main, ["no-such-command"]).exit_code == 2
