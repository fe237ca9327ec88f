"""The hostile-input harness: every command against bad input must give a clear message naming
what is wrong, the documented exit status, no traceback, and not one byte of the user's files
changed or lost. Each `tests/test_robustness*.py` file holds a list of `Case`s and runs them
with `run_case`.

Each case runs in a sandbox holding a real benchmark, a real index built from real text, an
audit file, a report and an unrelated folder of the user's; before and after the command every
file there is hashed, and any file changed or gone fails the case.  The tally is printed at the
end of the run (see the manual's reliability page, docs/reliability.md).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit.cli import main
from audit.index.build import build_index
from audit.readers import load_benchmark

CORPUS = Path(str(resources.files("audit").joinpath("data/demo/corpus")))
SAMPLE = Path(str(resources.files("audit").joinpath("data/demo/eclektic_sample.csv.gz")))
TALLY: dict[str, int] = {"cases": 0, "clear_errors": 0, "handled": 0, "tracebacks": 0, "files_lost_or_changed": 0}


def _lines(name: str, count: int) -> list[str]:
    with gzip.open(CORPUS / name, "rt", encoding="utf-8") as handle:
        return [line for _, line in zip(range(count), handle, strict=False)]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A user's working folder: benchmark, index, audit, report, and files of their own."""
    root = tmp_path_factory.mktemp("pristine")
    (root / "docs").mkdir()
    (root / "docs" / "wiki.jsonl").write_text("".join(_lines("xquad-en.jsonl.gz", 120) + _lines("eclektic-en-passages.jsonl.gz", 39)), encoding="utf-8")
    build_index([root / "docs"], root / "index")
    items = load_benchmark(SAMPLE).items[:3]
    bench = root / "bench.jsonl"
    bench.write_text(
        "".join(
            json.dumps({"item_id": item.item_id, "source_lang": item.source_lang, "variants": {
                lang: {"question": v.question, "answer": v.answer, "context": v.context} for lang, v in item.variants.items()
            }}, ensure_ascii=False) + "\n"
            for item in items
        ),
        encoding="utf-8",
    )
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("my notes, not the tool's\n", encoding="utf-8")
    (root / "mine" / "thesis.tex").write_text("\\documentclass{article}\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        result = CliRunner().invoke(main, ["check", "bench.jsonl", "--corpus", "index", "--out", "bench.audit.jsonl", "--report-dir", "bench.report"])
    assert result.exit_code == 0, result.output
    predictions = root / "predictions.jsonl"
    predictions.write_text(
        "".join(json.dumps({"item_id": item.item_id, "lang": lang, "prediction": v.answer or ""}, ensure_ascii=False) + "\n" for item in items for lang, v in item.variants.items()),
        encoding="utf-8",
    )
    (root / "registry.toml").write_text('[corpora.tiny]\nbackend = "local"\npath = "index"\n', encoding="utf-8")
    return root


@pytest.fixture
def sandbox(pristine: Path, tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "work"
    shutil.copytree(pristine, root, symlinks=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    return root


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Case:
    """`args` run in the sandbox after `prepare`; `expect` are fragments of the message."""

    name: str
    args: tuple[str, ...]
    expect: tuple[str, ...]
    exit_code: int = 2
    prepare: Callable[[Path], None] | None = None
    env: tuple[tuple[str, str], ...] = ()
    stdin: str | None = None


def write(name: str, data: bytes | str) -> Callable[[Path], None]:
    def prepare(root: Path) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    return prepare


def cut(name: str, keep: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def prepare(root: Path) -> None:
        path = root / name
        path.write_bytes(keep(path.read_bytes()))

    return prepare


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def prepare(root: Path) -> None:
        for step in steps:
            step(root)

    return prepare


def lines_kept(count: int) -> Callable[[bytes], bytes]:
    return lambda data: b"".join(data.splitlines(keepends=True)[:count])


def edit_record(data: bytes) -> bytes:
    """Valid JSON still, but not the bytes the manifest's digest was taken of."""
    lines = data.splitlines(keepends=True)
    lines[2] = lines[2].rstrip(b"\n") + b" \n"
    return b"".join(lines)


def move_benchmark(root: Path) -> None:
    """The benchmark moved after an audit run in this folder: neither recorded path exists."""
    audit = root / "bench.audit.jsonl"
    manifest, rest = audit.read_bytes().split(b"\n", 1)
    header = json.loads(manifest)
    header["benchmark"]["absolute_path"] = str(root / "bench.jsonl")
    audit.write_bytes(json.dumps(header, ensure_ascii=False).encode() + b"\n" + rest)
    (root / "bench.jsonl").rename(root / "moved.jsonl")


def halve_table(root: Path) -> None:
    table = root / "index" / "table.0"
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2 - (len(data) // 2) % 8])


BINARY = bytes(range(256)) * 4
CHECK = ("check", "bench.jsonl", "--corpus", "index")
REPORT = ("report", "--audit", "bench.audit.jsonl")



def run_case(case: Case, sandbox: Path, capfd) -> None:
    """Run one case in its sandbox and count it in the tally: a traceback, a file of the user's
    changed or lost, a wrong exit status, a missing fragment of the message or a file left
    behind by a failed command fails it."""
    if case.prepare:
        case.prepare(sandbox)
    before = snapshot(sandbox)
    result = CliRunner().invoke(main, list(case.args), env=dict(case.env) or None, input=case.stdin)
    captured = capfd.readouterr()
    output = result.output + captured.out + captured.err
    after = snapshot(sandbox)
    TALLY["cases"] += 1
    lost = [name for name, digest in before.items() if after.get(name) != digest]
    TALLY["files_lost_or_changed"] += len(lost)
    crashed = not isinstance(result.exception, SystemExit | None) or "Traceback" in output
    TALLY["tracebacks"] += crashed
    assert not crashed, f"{case.name}: {result.exception!r}\n{output}"
    assert not lost, f"{case.name}: changed or removed {lost}"
    assert result.exit_code == case.exit_code, output
    for fragment in case.expect:
        assert fragment in output, f"{case.name}: {fragment!r} not in {output!r}"
    new = sorted(set(after) - set(before))
    if case.exit_code != 0:
        assert not new, f"{case.name}: a failed command left {new}"
    TALLY["clear_errors" if case.exit_code else "handled"] += 1
