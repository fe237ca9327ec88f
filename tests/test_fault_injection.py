"""Every writer killed mid-write (SIGKILL, no clean-up possible) leaves nothing that looks
complete: the target is absent or still the previous version, readers refuse what is there,
and the next run clears the leftovers and succeeds.

The kill is real: a child process runs the command with one system call (`os.replace`,
`os.rename`, `os.fsync` or a file write) replaced by one that kills the process on its n-th use.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit.auditfile import AuditFileError, read_audit
from audit.cli import main
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.outputs import MARKER, STAGING_TAG

CORPUS = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
SAMPLE = Path(str(resources.files("audit").joinpath("data/demo/eclektic_sample.csv.gz")))

CHILD = """
import os, signal, sys
module_name, attribute, survive = sys.argv[1], sys.argv[2], int(sys.argv[3])
import importlib
module = importlib.import_module(module_name)
original = getattr(module, attribute)
calls = 0
def dying(*args, **kwargs):
    global calls
    calls += 1
    if calls > survive:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(module, attribute, dying)
from audit.cli import main
main(sys.argv[4:], prog_name="audit")
"""


def run_killed(cwd: Path, patch: tuple[str, str, int], *args: str) -> subprocess.CompletedProcess:
    """Run `audit ARGS` in a child that dies at the patched call; it must die by SIGKILL."""
    module, attribute, survive = patch
    done = subprocess.run(
        [sys.executable, "-c", CHILD, module, attribute, str(survive), *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, "AUDIT_CACHE_DIR": str(cwd / ".cache")},
    )
    assert done.returncode == -signal.SIGKILL, f"the child was not killed at {patch}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def invoke(cwd: Path, *args: str) -> None:
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args))
    finally:
        os.chdir(previous)
    assert result.exit_code == 0, result.output


def visible(root: Path) -> set[str]:
    """Files a person (or a tool listing the folder) would take for outputs: not hidden."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not any(part.startswith(".") for part in p.relative_to(root).parts)}


def digest(path: Path) -> str:
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    return hashlib.sha256(b"".join(p.relative_to(path).as_posix().encode() + p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file())).hexdigest()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A benchmark of three real items and an index of real text, in a fresh folder."""
    (tmp_path / "docs").mkdir()
    with gzip.open(CORPUS / "xquad-en.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = [line for _, line in zip(range(150), handle, strict=False)]
    with gzip.open(CORPUS / "eclektic-en-passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines += handle.readlines()
    (tmp_path / "docs" / "docs.jsonl").write_text("".join(lines), encoding="utf-8")
    from audit.index.build import build_index
    from audit.readers import load_benchmark

    build_index([tmp_path / "docs"], tmp_path / "index")
    items = load_benchmark(SAMPLE).items[:3]
    (tmp_path / "bench.jsonl").write_text(
        "".join(
            json.dumps({"item_id": i.item_id, "source_lang": i.source_lang, "variants": {lang: {"question": v.question, "context": v.context} for lang, v in i.variants.items()}}, ensure_ascii=False) + "\n"
            for i in items
        ),
        encoding="utf-8",
    )
    return tmp_path


CHECK = ("check", "bench.jsonl", "--corpus", "index", "--out", "a.audit.jsonl")


def test_audit_file_killed_before_its_rename(work: Path):
    run_killed(work, ("os", "replace", 0), *CHECK, "--no-report")
    assert "a.audit.jsonl" not in visible(work)
    leftovers = list(work.glob(".a.audit.jsonl.*.tmp"))
    assert leftovers, "the staged file should be there, hidden"
    invoke(work, *CHECK, "--no-report")
    assert read_audit(work / "a.audit.jsonl").records
    assert not list(work.glob(".a.audit.jsonl.*.tmp")), "the next run clears a dead write's leftovers"


def test_audit_file_killed_while_writing_keeps_the_previous_audit(work: Path):
    invoke(work, *CHECK, "--no-report")
    before = digest(work / "a.audit.jsonl")
    run_killed(work, ("os", "fsync", 0), *CHECK, "--no-report")
    assert digest(work / "a.audit.jsonl") == before
    read_audit(work / "a.audit.jsonl")


def test_a_cut_audit_file_is_refused(work: Path):
    invoke(work, *CHECK, "--no-report")
    path = work / "a.audit.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    for keep in (1, len(lines) // 2, len(lines) - 1):
        path.write_bytes(b"".join(lines[:keep]))
        with pytest.raises(AuditFileError, match="truncated"):
            read_audit(path)


def test_report_killed_before_it_is_moved_into_place(work: Path):
    run_killed(work, ("os", "rename", 0), *CHECK, "--report-dir", "a.report")
    assert "a.report" not in visible(work)
    staged = list(work.glob(".a.report.building-*"))
    assert staged and {STAGING_TAG, MARKER} & {p.name for p in staged[0].iterdir()}
    invoke(work, *CHECK, "--report-dir", "a.report")
    assert (work / "a.report" / "report.html").is_file()
    assert not list(work.glob(".a.report.building-*"))


def test_report_replacement_killed_keeps_the_previous_report(work: Path):
    """The new report takes the old one's place in one exchange of the two directories: killed
    at it, the previous complete report is still there, never an absent or half one."""
    invoke(work, *CHECK, "--report-dir", "a.report")
    before = digest(work / "a.report")
    run_killed(work, ("audit.outputs", "_exchange", 0), *CHECK, "--report-dir", "a.report")
    assert digest(work / "a.report") == before
    invoke(work, *CHECK, "--report-dir", "a.report")
    assert (work / "a.report" / "report.html").is_file()
    assert not list(work.glob(".a.report.*")), "the dead run's staging is cleared"


def test_index_build_killed_while_sorting(work: Path):
    run_killed(work, ("audit.index.build", "write_suffix_array", 0), "index", "build", "docs", "--out", "fresh")
    assert "fresh" not in visible(work)
    staged = list(work.glob(".fresh.building-*"))
    assert staged and (staged[0] / STAGING_TAG).is_file()
    with pytest.raises(IndexOpenError):
        LocalIndex(staged[0])
    invoke(work, "index", "build", "docs", "--out", "fresh")
    assert LocalIndex(work / "fresh").count("Panthers") > 0
    assert not list(work.glob(".fresh.building-*")), "the dead build's staging is cleared"


def test_index_replacement_killed_keeps_no_half_index(work: Path):
    invoke(work, "index", "build", "docs", "--out", "fresh")
    before = digest(work / "fresh")
    run_killed(work, ("audit.outputs", "_exchange", 0), "index", "build", "docs", "--out", "fresh", "--force")
    assert digest(work / "fresh") == before, "the previous index stays whole"
    invoke(work, "index", "build", "docs", "--out", "fresh", "--force")
    LocalIndex(work / "fresh")


def test_filter_killed_before_its_rename(work: Path):
    invoke(work, *CHECK, "--no-report")
    run_killed(work, ("os", "replace", 0), "filter", "a.audit.jsonl", "--out", "clean.jsonl")
    assert not {"clean.jsonl", "clean.jsonl.manifest.json"} & visible(work)
    invoke(work, "filter", "a.audit.jsonl", "--out", "clean.jsonl")
    assert json.loads((work / "clean.jsonl.manifest.json").read_text())["counts"]["items"] == 3


def test_filtered_bmlama_directory_killed_before_its_rename(work: Path):
    source = work / "bmlama"
    source.mkdir()
    header = "Prompt\tAns\tCandidate Ans\tSubject\r\n"
    (source / "en.tsv").write_text(header + "The capital of France is <mask> .\tParis\t['Paris', 'Rome']\tFrance\r\n", encoding="utf-8")
    (source / "fr.tsv").write_text(header + "La capitale de la France est <mask> .\tParis\t['Paris', 'Rome']\tFrance\r\n", encoding="utf-8")
    invoke(work, "check", "bmlama", "--corpus", "index", "--out", "b.audit.jsonl", "--no-report")
    run_killed(work, ("os", "rename", 0), "filter", "b.audit.jsonl", "--out", "clean-bmlama")
    assert "clean-bmlama" not in visible(work)
    invoke(work, "filter", "b.audit.jsonl", "--out", "clean-bmlama")
    assert sorted(p.name for p in (work / "clean-bmlama").glob("*.tsv")) == ["en.tsv", "fr.tsv"]


def test_job_status_and_uploads_are_written_whole(tmp_path: Path):
    """The server's writers (job status, uploaded benchmark, policies) all go through
    `atomic_write_bytes`: killed at the rename, the previous file stays whole."""
    target = tmp_path / "job.json"
    target.write_text('{"status": "queued"}', encoding="utf-8")
    script = (
        "import os, signal, sys\n"
        "from audit import outputs\n"
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "outputs.atomic_write_text(sys.argv[1], '{\"status\": \"running\"}' * 100000)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(target)], capture_output=True, timeout=60, cwd=tmp_path)
    assert done.returncode == -signal.SIGKILL
    assert json.loads(target.read_text(encoding="utf-8")) == {"status": "queued"}
