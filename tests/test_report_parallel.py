"""The report's provenance pages rendered by a pool of forked processes: the same bytes as
rendered in one process, and a page that cannot be rendered named in the error."""
from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from audit.auditfile import read_audit
from audit.readers import load_benchmark
from audit.report.pages import PageError
from audit.report.render import write_report


def files(directory: Path) -> set[Path]:
    return {path.relative_to(directory) for path in directory.rglob("*") if path.is_file()}


def test_pages_rendered_in_parallel_equal_those_rendered_serially(planted_audit, tmp_path: Path):
    audit = read_audit(planted_audit["audit"])
    items = load_benchmark(planted_audit["bench"]).items
    serial, parallel = tmp_path / "serial.report", tmp_path / "parallel.report"
    write_report(serial, audit, str(planted_audit["audit"]), items, workers=1)
    # More workers than this machine may have cores, so the pages are spread over processes.
    write_report(parallel, audit, str(planted_audit["audit"]), items, workers=3)
    written = files(serial)
    assert len([path for path in written if path.parts[0] == "items"]) == 39
    assert written == files(parallel)
    assert all(filecmp.cmp(serial / name, parallel / name, shallow=False) for name in written)
    assert (parallel / "items" / "39.html").read_text(encoding="utf-8").count("<mark>") >= 2
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


@pytest.mark.parametrize("workers", [1, 3])
def test_a_page_that_cannot_be_rendered_is_named_and_no_report_is_left(planted_audit, tmp_path: Path, workers: int):
    audit = read_audit(planted_audit["audit"])
    items = load_benchmark(planted_audit["bench"]).items
    broken = next(record for record in audit.records if record["item_id"] == "46" and record["lang"] == "ja")
    del broken["role"]
    out = tmp_path / "broken.report"
    with pytest.raises(PageError, match=r"the provenance page items/46\.html \(item '46'\): KeyError: 'role'") as raised:
        write_report(out, audit, str(planted_audit["audit"]), items, workers=workers)
    # Raised in this process, the error keeps its cause; from a worker, it comes with the
    # worker's traceback instead: the pages were rendered where they were meant to be.
    assert isinstance(raised.value.__cause__, KeyError) == (workers == 1)
    assert list(tmp_path.iterdir()) == []
