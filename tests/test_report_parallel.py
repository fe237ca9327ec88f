"""The report's provenance pages rendered by a pool of forked processes: the same bytes as
rendered in one process, and as rendered from an audit read back from disk one item at a time
(what `audit check --report` renders); a page that cannot be rendered named in the error.

Each report is rendered in a fresh interpreter: the pool is used only when no other thread
runs, and other tests' fixtures may leave threads in this one."""
from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RENDER = """
import json, sys
from audit.auditfile import AuditFile, StoredRecords, read_audit
from audit.readers import load_benchmark
from audit.report.render import write_report

audit_path, bench, out, workers, broken, stored = sys.argv[1:7]
audit = read_audit(audit_path)
if stored:
    audit = AuditFile(audit.manifest, StoredRecords(audit_path, len(audit.records)))
if broken:
    item_id, lang = broken.split("/")
    del next(r for r in audit.records if r["item_id"] == item_id and r["lang"] == lang)["role"]
try:
    write_report(out, audit, audit_path, load_benchmark(bench).items, workers=int(workers))
except Exception as error:
    print(json.dumps({"error": type(error).__name__, "message": str(error), "cause": type(error.__cause__).__name__}))
else:
    print(json.dumps({"error": None}))
"""


def render(planted: dict[str, Path], out: Path, workers: int, broken: str = "", seed: int = 0, stored: bool = False) -> dict:
    command = [sys.executable, "-c", RENDER, str(planted["audit"]), str(planted["bench"]), str(out), str(workers), broken, "stored" if stored else ""]
    # Away from the checkout, so `-c` imports the installed package, not the source tree.
    result = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)}, cwd=out.parent)
    return json.loads(result.stdout.strip().splitlines()[-1])


def files(directory: Path) -> set[Path]:
    return {path.relative_to(directory) for path in directory.rglob("*") if path.is_file()}


def test_pages_rendered_in_parallel_equal_those_rendered_serially(planted_audit, tmp_path: Path):
    serial, parallel = tmp_path / "serial.report", tmp_path / "parallel.report"
    assert render(planted_audit, serial, workers=1) == {"error": None}
    # More workers than this machine may have cores, so the pages are spread over processes.
    assert render(planted_audit, parallel, workers=3, seed=1) == {"error": None}
    written = files(serial)
    assert len([path for path in written if path.parts[0] == "items"]) == 39
    assert written == files(parallel)
    assert all(filecmp.cmp(serial / name, parallel / name, shallow=False) for name in written)
    assert (parallel / "items" / "39.html").read_text(encoding="utf-8").count("<mark>") >= 2
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.parametrize("workers", [1, 3])
def test_a_page_that_cannot_be_rendered_is_named_and_no_report_is_left(planted_audit, tmp_path: Path, workers: int):
    out = tmp_path / "broken.report"
    failed = render(planted_audit, out, workers, broken="46/ja")
    assert failed["error"] == "PageError"
    assert failed["message"] == "the provenance page items/46.html (item '46'): KeyError: 'role'"
    # Raised in the rendering process, the error keeps its cause; from a worker, it comes with
    # the worker's traceback instead: the pages were rendered where they were meant to be.
    assert (failed["cause"] == "KeyError") == (workers == 1)
    assert list(tmp_path.iterdir()) == []


def test_a_report_is_the_same_bytes_whatever_the_hash_seed(planted_audit, tmp_path: Path):
    """Rules that decided `seen` equally often are listed by name, not in a set's order."""
    first, second = tmp_path / "a.report", tmp_path / "b.report"
    assert render(planted_audit, first, workers=1, seed=1) == {"error": None}
    assert render(planted_audit, second, workers=1, seed=2) == {"error": None}
    fires = json.loads((first / "report.json").read_text(encoding="utf-8"))["exposure"]["rule_fires"]
    assert len(fires) > 1 and list(fires.items()) == sorted(fires.items(), key=lambda fired: (-fired[1], fired[0]))
    assert all(filecmp.cmp(first / name, second / name, shallow=False) for name in files(first)) and files(first) == files(second)


@pytest.mark.parametrize("workers", [1, 3])
def test_a_report_of_records_left_on_disk_is_the_report_of_records_held(planted_audit, tmp_path: Path, workers: int):
    """The check's report keeps where each item's lines lie, not its records, and each page
    reads its item back: the same bytes as a report of the whole audit held in memory."""
    held, stored = tmp_path / "held.report", tmp_path / "stored.report"
    assert render(planted_audit, held, workers=1) == {"error": None}
    assert render(planted_audit, stored, workers=workers, stored=True) == {"error": None}
    assert files(held) == files(stored) and len(files(held)) > 39
    assert all(filecmp.cmp(held / name, stored / name, shallow=False) for name in files(held))


def test_a_page_worker_killed_ends_audit_report_with_one_line(planted_audit, tmp_path: Path):
    """Any command whose pool loses a worker says so in one line, not a traceback.  Run in a
    forked child of the test: there it is the only thread, as in a command, so the pages go to
    a pool (with other threads alive, as other tests leave them, they render inline)."""
    import signal

    from click.testing import CliRunner

    import audit.report.pages as pages
    from audit.cli import main
    from audit.report.render import available_cores

    if available_cores() < 2:
        pytest.skip("the pages render in this process on one core")
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(reading)
            parent, real = os.getpid(), pages._render_page

            def killed(*args: object) -> None:
                if os.getpid() != parent:
                    os.kill(os.getpid(), signal.SIGKILL)
                real(*args)

            pages._render_page = killed
            result = CliRunner().invoke(main, ["report", "--audit", str(planted_audit["audit"]), "--out", str(tmp_path / "report")])
            os.write(writing, json.dumps({"code": result.exit_code, "output": result.output}).encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as handle:
        told = json.loads(handle.read() or b"{}")
    os.waitpid(child, 0)
    assert told.get("code") == 1 and "Traceback" not in told["output"], told
    assert "a worker process died (killed, often by the system when memory runs out); nothing written" in told["output"]
    assert not (tmp_path / "report").exists() and not list(tmp_path.iterdir())
