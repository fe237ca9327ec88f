"""The manual (docs/) and the README show what the tool really prints and list what the code
really accepts: each example output and each table that mirrors code is compared here with the
code or with a real run, so a change to either that the other does not follow fails a test."""
from __future__ import annotations

import contextlib
import gzip
import json
import re
import shutil
from dataclasses import fields
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import CORPUS
from manual import README, ROOT, manual, page, section
from test_langlinks import dumps  # noqa: F401  (a fixture: dumps holding real langlinks rows)

from audit.cli import main
from audit.cli.formats import _EXPECTS
from audit.corpora.registry import parse_registry
from audit.evaluate.judge import JudgeConfig, default_cache_path
from audit.evaluate.predictions import _ALIASES
from audit.index.build import build_index
from audit.policyfile import load_policy
from audit.probes.models import open_model
from audit.probes.prompts import load_templates
from audit.readers import FORMATS
from audit.readers.columns import ColumnMap
from audit.readers.mkqa import MKQA_KEYS
from audit.readers.tydi import TYDI_KEYS

SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"


def table(text: str, header: str) -> list[list[str]]:
    """The cells of the rows of the table in `text` whose header line starts with `header`."""
    lines = text[text.index(f"\n{header}") + 1 :].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def quoted(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def output_block(text: str, after: str) -> str:
    """The first unlabelled code block in `text` after the phrase `after`."""
    start = text.index("```\n", text.index(after)) + 4
    return text[start : text.index("```", start)]


def run(*args: str, cache: Path):
    return CliRunner().invoke(main, list(args), env={"AUDIT_CACHE_DIR": str(cache), "COLUMNS": "100"})


def commands(group: click.Group, prefix: str = "audit") -> dict[str, click.Command]:
    """Every command under `group` by its full name (the top level's are imported as asked)."""
    found: dict[str, click.Command] = {}
    with click.Context(group) as context:
        listed = {name: group.get_command(context, name) for name in group.list_commands(context)}
    for name, command in listed.items():
        if isinstance(command, click.Group):
            found |= commands(command, f"{prefix} {name}")
        else:
            found[f"{prefix} {name}"] = command
    return found


def option_names(command: click.Command) -> set[str]:
    return {name for p in command.params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts) if name.startswith("--")} - {"--help"}


# Tables that mirror code.


def test_the_formats_table_lists_every_format_the_cli_reads():
    rows = table(section(page("benchmarks.md"), "# Benchmark formats"), "| `--format` |")
    assert sorted(row[0].strip("`") for row in rows) == sorted(FORMATS) == sorted(_EXPECTS)
    for row in rows:
        assert set(_EXPECTS[row[0].strip("`")]) <= quoted(row[1]), row[0]
    assert set(_EXPECTS["tydiqa"]) == TYDI_KEYS and set(_EXPECTS["mkqa"]) >= MKQA_KEYS


def test_audit_formats_lists_what_check_help_points_to(tmp_path: Path):
    assert "`audit formats` lists them" in " ".join(run("check", "--help", cache=tmp_path).output.split())
    listed = run("formats", cache=tmp_path)
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert [line.split()[0] for line in lines[::3]] == list(FORMATS)
    for line, expects, example, spec in zip(lines[::3], lines[1::3], lines[2::3], FORMATS.values(), strict=True):
        assert spec.description in line
        assert expects.strip() == "expects: " + (", ".join(_EXPECTS[spec.name]) or "the columns --map names, or those of a preset")
        assert example.strip().startswith("example: audit check ")
    shown = {name.split()[1] for name, command in commands(main).items() if not command.hidden}
    named = set(re.findall(r"`audit ([a-z-]+)", " ".join(run("check", "--help", cache=tmp_path).output.split())))
    assert named and named <= shown


@pytest.mark.parametrize(("name", "heading"), [("check.md", "# `audit check BENCH --corpus NAME [--corpus NAME ...]`"), ("filter.md", "# `audit filter AUDIT --out CLEAN`")])
def test_an_options_table_lists_every_option_of_its_command(name: str, heading: str):
    text = section(page(name), heading)
    name = " ".join(heading.split("`")[1].split()[:2])
    shown = set(re.findall(r"--[a-z-]+", heading))
    for row in table(text, "| option |"):
        shown |= {name for name in quoted(row[0]) if name.startswith("--")}
    assert shown == option_names(commands(main)[name])


def test_every_command_is_in_the_manual():
    text = manual()
    missing = [name for name in commands(main) if f"`{name}" not in text]
    assert missing == []


def test_the_column_mapping_table_lists_every_key():
    rows = table(section(page("benchmarks.md"), "## Column mapping: `--map`"), "| key |")
    assert set().union(*(quoted(row[0]) for row in rows)) == {f.name for f in fields(ColumnMap)}


def test_the_predictions_table_lists_every_spelling_the_reader_accepts():
    for row in table(section(page("evaluation.md"), "## Predictions file"), "| column |"):
        (column,) = quoted(row[0])
        assert [column, *sorted(quoted(row[1]))] == [column, *sorted(set(_ALIASES[column]) - {column})], column


def test_the_methods_table_lists_every_method_but_auto():
    rows = table(section(page("evaluation.md"), "## Correctness, three ways"), "| method |")
    choices = next(p for p in commands(main)["audit report"].params if p.name == "method").type.choices
    assert [row[0].strip("`") for row in rows] == [c for c in choices if c != "auto"]


# Outputs shown: run on the bundled sample, as the manual's reader would.


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """The set-up section's audit of the bundled sample, in a folder of its own."""
    folder = tmp_path_factory.mktemp("readme")
    shutil.copyfile(SAMPLE, folder / SAMPLE.name)
    with contextlib.chdir(folder):
        result = run("check", SAMPLE.name, "--corpus", "demo", "--no-report", cache=folder / "cache")
    assert result.exit_code == 0, result.output
    return folder


def test_the_audit_file_tables_list_the_keys_it_writes(sample: Path):
    with open(sample / "eclektic_sample.demo.audit.jsonl", encoding="utf-8") as handle:
        manifest, record = json.loads(next(handle)), json.loads(next(handle))
    text = section(page("audit-file.md"), "# The audit file")
    documented = set().union(*(quoted(row[0]) for row in table(text, "| key |")))
    only_when = {"executor", "links", "models"}
    assert set(manifest) <= documented and documented - only_when <= set(manifest)
    records = text[text.index('Record (`"record": "exposure"`)') :]
    keys = set().union(*(quoted(row[0]) for row in table(records, "| key |")))
    assert set(record) <= keys and keys - {"field_languages", "membership", "membership_decided_by"} <= set(record)


@pytest.mark.parametrize(
    ("text", "after"),
    [(section(page("filter.md"), "# `audit filter AUDIT --out CLEAN`"), "On the sample audited"), (section(README, "## A five-minute tour"), "**3. Filter**")],
    ids=["manual", "readme"],
)
def test_the_filter_example_prints_what_is_shown(sample: Path, tmp_path: Path, text: str, after: str):
    """Each `$ audit filter ...` line of the filter section and of the README's tour, run on the
    sample's audit, prints the line shown under it."""
    shown = output_block(text, after).strip().splitlines()
    assert len(shown) >= 2
    for name in (SAMPLE.name, "eclektic_sample.demo.audit.jsonl"):
        shutil.copyfile(sample / name, tmp_path / name)
    for command, output in zip(shown[::2], shown[1::2], strict=True):
        args = command.removeprefix("$ audit ").split()
        with contextlib.chdir(tmp_path):
            result = run(*args, cache=sample / "cache")
        assert result.exit_code == 0, result.output
        assert result.output.strip() == output, command


@pytest.mark.parametrize(
    "policy",
    ['[rules.ngram.question]\ncoverge = 0.8\n', "[rules.ngram.question]\ncoverage = -0.5\n", "[ngram.window]\ndefault = 0\n"],
    ids=["misspelt", "negative", "zero"],
)
def test_a_policy_error_reads_as_the_manual_shows(sample: Path, policy: str):
    shown = output_block(page("policy.md"), "separated by `; `").strip().splitlines()
    with contextlib.chdir(sample):
        Path("my-policy.toml").write_text(policy, encoding="utf-8")
        result = run("check", SAMPLE.name, "--corpus", "demo", "--policy", "my-policy.toml", "--no-report", "--out", "x.audit.jsonl", cache=sample / "cache")
    assert result.exit_code == 2
    assert result.output.strip().removeprefix("Error: ") in shown


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Path:
    """A real index, under the manual's name for it, of a few demo passages."""
    root = tmp_path_factory.mktemp("index")
    with gzip.open(CORPUS / "xquad-en.jsonl.gz", "rt", encoding="utf-8") as lines:
        (root / "docs.jsonl").write_text("".join(next(lines) for _ in range(40)), encoding="utf-8")
    build_index([root / "docs.jsonl"], root / "indexes" / "my-wiki")
    return root


def shape(line: str) -> str:
    """A line with its numbers and hashes blanked, so two indexes' messages compare."""
    return re.sub(r"\b[0-9a-f]{32}\b|\d[\d,]*", "#", line)


def test_index_verify_prints_what_the_manual_shows(small_index: Path, tmp_path: Path):
    shown = output_block(section(page("indexes.md"), "## `audit index verify DIR`"), "Then it runs the open checks.").strip().splitlines()
    copy = tmp_path / "indexes" / "my-wiki"
    shutil.copytree(small_index / "indexes" / "my-wiki", copy)
    table_file = copy / "table.0"
    data = bytearray(table_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    table_file.write_bytes(bytes(data))
    with contextlib.chdir(tmp_path):
        result = run(*shown[0].removeprefix("$ audit ").split(), cache=tmp_path / "cache")
    assert result.exit_code == 1
    assert [shape(line) for line in result.stdout.strip().splitlines()] == [shape(line) for line in shown[1:]]


def test_index_info_of_a_cut_index_prints_what_the_manual_shows(small_index: Path, tmp_path: Path):
    (shown,) = output_block(section(page("indexes.md"), "## `audit index info DIR`"), "A damaged index, or one holding a file it did not write, is an error").strip().splitlines()
    copy = tmp_path / "indexes" / "my-wiki"
    shutil.copytree(small_index / "indexes" / "my-wiki", copy)
    table_file = copy / "table.0"
    table_file.write_bytes(table_file.read_bytes()[: table_file.stat().st_size // 2])
    with contextlib.chdir(tmp_path):
        result = run("index", "info", "indexes/my-wiki", cache=tmp_path / "cache")
    assert result.exit_code == 2
    assert shape(result.output.strip()) == shape(shown)


def test_langlinks_lookup_prints_what_the_manual_shows(dumps: list[Path], tmp_path: Path):  # noqa: F811  (the fixture imported above)
    """The lookup example's answer, shown as comments, from dumps holding the same rows."""
    block = section(page("signals/langlinks.md"), "## `audit langlinks build DUMP... --out DIR` and `audit langlinks lookup ARTICLE --links SOURCE`")
    lines = block[block.index("```bash\n") + 8 :].splitlines()
    lookup = next(line for line in lines if line.startswith("audit langlinks lookup https:"))
    after = lines[lines.index(lookup) + 1 :]
    shown = [line.removeprefix("# ") for line in after[: next(i for i, line in enumerate(after) if not line.startswith("# "))]]
    assert shown
    out = next(arg for arg in lookup.split() if arg.startswith("indexes/"))
    with contextlib.chdir(tmp_path):
        built = run("langlinks", "build", *map(str, dumps), "--out", out, cache=tmp_path / "cache")
        assert built.exit_code == 0, built.output
        result = run(*lookup.removeprefix("audit ").split(), cache=tmp_path / "cache")
    assert result.exit_code == 0, result.output
    assert [line.rstrip() for line in result.output.strip().splitlines()] == [line.rstrip() for line in shown]


def toml_blocks() -> dict[str, str]:
    """The manual's TOML examples, by their first table's name."""
    blocks = re.findall(r"\n```toml\n(.*?)```", manual(), flags=re.DOTALL)
    return {re.match(r"\[([^\]]+)\]", block).group(1): block for block in blocks}


def test_the_toml_examples_are_accepted_by_their_readers(tmp_path: Path):
    blocks = toml_blocks()
    assert {"rules.ngram.context", "corpora.my-wiki", "models.qwen7b", "de"} <= set(blocks)
    policy = tmp_path / "policy.toml"
    policy.write_text(blocks["rules.ngram.context"], encoding="utf-8")
    assert load_policy(policy).settings["rules"]["ngram"]["context"]["coverage"] == 0.5
    assert parse_registry(blocks["corpora.my-wiki"], tmp_path / "corpora.toml")["my-wiki"].backend == "local"
    prompts = tmp_path / "prompts.toml"
    prompts.write_text(blocks["de"], encoding="utf-8")
    assert "sw" in load_templates(prompts).languages
    registry = tmp_path / "models.toml"
    registry.write_text(blocks["models.qwen7b"], encoding="utf-8")
    for name in ("qwen7b", "llamacpp"):  # llama8b names a model directory this machine lacks
        assert open_model(name, registry, offline=True, cache=tmp_path / "probe-cache.sqlite") is not None


def test_the_judge_settings_table_names_what_the_judge_reads(monkeypatch, tmp_path: Path):
    rows = dict(table(section(page("evaluation.md"), "## Correctness, three ways"), "| setting |"))
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    for name in ("AUDIT_JUDGE_MODEL", "AUDIT_JUDGE_BASE_URL", "OPENAI_BASE_URL", "AUDIT_JUDGE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, name.lower())
    first = JudgeConfig().resolve()
    assert (first.model, first.base_url, first.api_key) == ("audit_judge_model", "audit_judge_base_url", "audit_judge_api_key")
    monkeypatch.delenv("AUDIT_JUDGE_BASE_URL")
    monkeypatch.delenv("AUDIT_JUDGE_API_KEY")
    second = JudgeConfig().resolve()
    assert (second.base_url, second.api_key) == ("openai_base_url", "openai_api_key")
    assert rows["model"] == "`--judge-model`, `AUDIT_JUDGE_MODEL`"
    assert rows["endpoint"] == "`AUDIT_JUDGE_BASE_URL`, else `OPENAI_BASE_URL`"
    assert rows["key"].startswith("`AUDIT_JUDGE_API_KEY`, else `OPENAI_API_KEY`")
    concurrency = next(p for p in commands(main)["audit report"].params if p.name == "judge_concurrency")
    assert rows["requests in flight"] == f"`--judge-concurrency` ({concurrency.default})" and concurrency.default == JudgeConfig.concurrency
    assert rows["retries"].startswith(f"{JudgeConfig.retries} per request")
    assert rows["cache"].startswith(f"`$AUDIT_CACHE_DIR/{default_cache_path().name}`")


def test_ci_runs_the_readme_test_command():
    """CI installs nothing itself: it runs the one command the README gives a new user."""
    block = section(README, "## Set up and run")
    command = block[block.index("```bash\n", block.index("Run the tests")) + 8 :].split()[0]
    script = ROOT / command
    assert script.is_file() and script.stat().st_mode & 0o111
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert ci[-1].startswith(f"exec {command} ")
    assert not any("pip install" in line or "apt-get" in line for line in ci)
