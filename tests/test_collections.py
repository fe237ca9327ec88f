"""While items are checked, the youngest generation of the garbage collector is collected
every `CHECK_YOUNG_COLLECTION` allocations rather than Python's 700, in the run's process and
in the workers it forks; the thresholds are put back when the last overlapping check ends.
While a report's pages are rendered, Python's own collections are off and each page's garbage
is collected when the page is written."""
from __future__ import annotations

import gc
import multiprocessing
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from conftest import ECLEKTIC_CSV

from audit.auditfile import read_audit
from audit.children import CHECK_YOUNG_COLLECTION, collected_by_hand, spaced_collections
from audit.corpora.client import InfiniGramClient
from audit.readers import load_benchmark
from audit.report import pages as report_pages
from audit.report.render import write_report
from audit.run import AuditRequest, run_audit
from audit.run.progress import Progress


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_a_block_spaces_the_young_collections_and_puts_the_thresholds_back(default_thresholds):
    with spaced_collections():
        assert gc.get_threshold() == (CHECK_YOUNG_COLLECTION, 10, 10)
    assert gc.get_threshold() == default_thresholds
    with pytest.raises(ValueError), spaced_collections(5_000):
        assert gc.get_threshold() == (5_000, 10, 10)
        raise ValueError
    assert gc.get_threshold() == default_thresholds


def test_a_user_s_wider_spacing_is_kept():
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 30)
    try:
        with spaced_collections():
            assert gc.get_threshold() == (50_000, 20, 30)
        assert gc.get_threshold() == (50_000, 20, 30)
    finally:
        gc.set_threshold(*before)


def test_overlapping_blocks_on_threads_restore_only_when_the_last_ends(default_thresholds):
    entered, release = threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def other() -> None:
        with spaced_collections():
            entered.set()
            release.wait(10)
            seen.append(gc.get_threshold())

    with spaced_collections():
        thread = threading.Thread(target=other)
        thread.start()
        assert entered.wait(10)
    # The first block ended while the other was still open: its spacing stays.
    assert gc.get_threshold() == (CHECK_YOUNG_COLLECTION, 10, 10)
    release.set()
    thread.join(10)
    assert seen == [(CHECK_YOUNG_COLLECTION, 10, 10)]
    assert gc.get_threshold() == default_thresholds


def _report_thresholds(queue: multiprocessing.Queue) -> None:
    queue.put(gc.get_threshold())


def test_a_process_forked_inside_a_block_collects_as_spaced(default_thresholds):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with spaced_collections():
        child = context.Process(target=_report_thresholds, args=(queue,))
        child.start()
        child.join(30)
    assert queue.get(timeout=10) == (CHECK_YOUNG_COLLECTION, 10, 10)


class _Watching(Progress):
    """Notes the thresholds each time a variant is reported done."""

    def __init__(self) -> None:
        self.during: set[tuple[int, int, int]] = set()

    def checking(self, description: str, total: int, clients: list[InfiniGramClient]) -> AbstractContextManager[Callable[[], None]]:
        @contextmanager
        def watched() -> Iterator[Callable[[], None]]:
            yield lambda: self.during.add(gc.get_threshold())

        return watched()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_check_runs_with_spaced_collections_and_leaves_them_as_they_were(workers, default_thresholds, wiki_index: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    request = AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)], langs=["en", "fr"], workers=workers, out=tmp_path / "a.audit.jsonl")
    watching = _Watching()
    run_audit(request, progress=watching)
    assert watching.during == {(CHECK_YOUNG_COLLECTION, 10, 10)}
    assert gc.get_threshold() == default_thresholds


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_collections_by_hand_collect_cycles_and_are_put_back_by_the_last_block():
    was = gc.isenabled()
    gc.enable()
    try:
        entered, release = threading.Event(), threading.Event()

        def other() -> None:
            with collected_by_hand():
                entered.set()
                release.wait(10)

        with collected_by_hand() as collect:
            assert not gc.isenabled()
            cycle = weakref.ref(_Cycle())
            assert cycle() is not None, "a cycle outlives its last reference until collected"
            collect()
            assert cycle() is None
            thread = threading.Thread(target=other)
            thread.start()
            assert entered.wait(10)
        assert not gc.isenabled(), "the other thread's block is still open"
        release.set()
        thread.join(10)
        assert gc.isenabled()
        gc.disable()
        with collected_by_hand():
            pass
        assert not gc.isenabled(), "collections a user switched off stay off"
    finally:
        (gc.enable if was else gc.disable)()


def test_each_page_s_garbage_is_collected_when_the_page_is_written(planted_audit, tmp_path: Path, monkeypatch):
    """The pages render without Python's collections, and a reference cycle made while one
    page renders is gone when the next begins."""
    made: list[weakref.ref] = []
    states: list[tuple[bool, bool]] = []
    render = report_pages.item_page

    def watched(*args, **kwargs):
        states.append((gc.isenabled(), all(cycle() is None for cycle in made)))
        made.append(weakref.ref(_Cycle()))
        return render(*args, **kwargs)

    monkeypatch.setattr(report_pages, "item_page", watched)
    was = gc.isenabled()
    gc.enable()
    try:
        audit = read_audit(planted_audit["audit"])
        write_report(tmp_path / "a.report", audit, str(planted_audit["audit"]), load_benchmark(planted_audit["bench"]).items, workers=1)
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert len(states) == 39 and set(states) == {(False, True)}
    assert made[-1]() is None
