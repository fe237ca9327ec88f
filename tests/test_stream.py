"""A run streams its records: each item is decided where it was checked and written to a hidden
sibling of the audit file as it finishes, in order; the parent keeps a tally, and the manifest
goes before the records in one atomic write.  So the summary must be the one the whole list
gives, a run that stops leaves neither a partial file nor its body, and every executor writes
the same bytes."""
from __future__ import annotations

import os
import random
import signal
import statistics
import threading
from collections import Counter
from pathlib import Path

import pytest
from conftest import ECLEKTIC_CSV

from audit.auditfile import AuditStream, read_audit, record_lines
from audit.children import WorkerDied
from audit.corpora.local import LocalIndex
from audit.evidence import Evidence
from audit.items import Item, PackedItems
from audit.packed import Packed
from audit.policyfile import load_policy
from audit.readers import load_benchmark
from audit.records import ExposureRecord
from audit.run import AuditRequest, run_audit
from audit.run.check import ItemWork
from audit.run.executors import MIN_AHEAD, Forked, Threads, check_items
from audit.run.summary import Tally, histogram_median, summarise
from audit.signals import plan


def test_the_manifest_summary_counted_item_by_item_is_the_whole_lists(wiki_index: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    request = AuditRequest.of(benchmark=ECLEKTIC_CSV, corpora=[str(wiki_index)], langs=["en", "fr", "ja", "zh"], workers=2, out=tmp_path / "a.audit.jsonl")
    written = run_audit(request)
    stored = list(written.records)
    again = read_audit(request.target)
    assert stored == again.records and len(written.records) == len(stored) == written.manifest["records"] > 0
    whole = summarise([ExposureRecord.from_dict(record) for record in again.records]).to_dict()
    assert written.manifest["summary"] == whole and sorted(whole["languages"]) == ["en", "fr", "ja", "zh"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    # Tallies split anywhere, inside an item too, merge to the whole list's summary.
    records = [ExposureRecord.from_dict(record) for record in again.records]
    for cut in (1, 2, 3, len(records) // 2, len(records) - 1):
        head, tail = Tally.of(records[:cut]), Tally.of(records[cut:])
        head.merge(tail)
        assert head.summary().to_dict() == whole, cut


@pytest.mark.parametrize("seed", range(20))
def test_count_queries_median_from_a_histogram_is_statisticshistogram_median(seed: int):
    values = random.Random(seed).choices(range(6), k=random.Random(seed).randint(1, 40))
    found = histogram_median(Counter(values))
    assert found == statistics.median(values) and type(found) is type(statistics.median(values))


def test_a_stream_that_stops_leaves_the_old_file_and_no_body(tmp_path: Path):
    path = tmp_path / "x.audit.jsonl"
    with AuditStream(path) as stream:
        stream.add(b"", 0)
        first = stream.finish({"tool": "corpus-audit"})
    old = path.read_bytes()
    assert first.manifest["records"] == 0 and list(first.records) == []
    with pytest.raises(KeyboardInterrupt), AuditStream(path) as stream:
        stream.add(record_lines([{"item_id": "1", "lang": "en"}]), 1)
        assert stream._body.path.exists()
        raise KeyboardInterrupt
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.audit.jsonl"]


def test_a_body_left_by_a_dead_process_is_removed_and_a_living_ones_kept(tmp_path: Path):
    path = tmp_path / "x.audit.jsonl"
    dead, living = tmp_path / ".x.audit.jsonl.body-999999999", tmp_path / f".x.audit.jsonl.body-{os.getppid()}"
    dead.write_bytes(b"partial")
    living.write_bytes(b"partial")
    with AuditStream(path) as stream:
        stream.finish({"tool": "corpus-audit"})
    assert not dead.exists() and living.exists()


def _slow_for_early_items(item: Item, lang: str) -> list[Evidence]:
    """Evidence whose cost falls with the item's number, so a pool finishes items out of order."""
    for _ in range(20000 * (5 - int(item.item_id) % 5)):
        pass
    return [Evidence(signal="ngram", source="x", field="question", figures={"longest_match_chars": len(item.variants[lang].question or "")})]


FIRST = load_benchmark(ECLEKTIC_CSV).items[0].item_id


def _deaf_and_slow_after_the_first(item: Item, lang: str) -> list[Evidence]:
    """A worker that ignores SIGTERM and takes ten minutes on every item but the first."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if item.item_id != FIRST:
        threading.Event().wait(600)
    return _slow_for_early_items(item, lang)


def test_a_forked_pool_is_left_at_once_whatever_its_workers_are_doing():
    """Leaving a forked executor kills its workers, busy or idle: a pool that only asks them to
    stop (SIGTERM), then waits for each, is held by a worker that does not stop (here it
    ignores the signal and is ten minutes into an item nobody will read).
    The pool runs on a thread here, so that a wait that never ends fails the test instead of
    holding the suite."""
    items = load_benchmark(ECLEKTIC_CSV).items[:4]
    assert items[0].item_id == FIRST
    executor = Forked(ItemWork([_deaf_and_slow_after_the_first], load_policy(None), ["en"]), 2, items)
    left, workers, outcomes = threading.Event(), [], []

    def run() -> None:
        with executor:
            workers.extend(executor.pids)
            outcomes.append(next(executor.checked(items)))
        left.set()

    threading.Thread(target=run, daemon=True).start()
    assert left.wait(120), "leaving the pool waited for workers it had only asked to stop"
    assert [o.variants for o in outcomes] == [1] and len(workers) == 2
    for pid in workers:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_every_executor_yields_items_in_order_and_writes_the_same_bytes():
    items = load_benchmark(ECLEKTIC_CSV).items[:10]
    work = ItemWork([_slow_for_early_items], load_policy(None), ["en", "de", "ja"])
    outcomes = {}
    for name, make in (("threads", lambda: Threads(work, 3)), ("forked", lambda: Forked(work, 2, items))):
        with make() as executor:
            outcomes[name] = list(executor.checked(items))
    threads, forked = outcomes["threads"], outcomes["forked"]
    assert [o.lines for o in threads] == [o.lines for o in forked] and [o.variants for o in threads] == [3] * 10
    assert [o.records for o in forked] == [None] * 10
    kept = check_items(items, [_slow_for_early_items], load_policy(None), langs=["en", "de", "ja"], executor=lambda w, chosen: Forked(w, 2, chosen))
    assert record_lines(kept) == b"".join(o.lines for o in threads)
    assert [(r.item_id, r.lang) for r in kept] == [(item.item_id, lang) for item in items for lang in ("en", "de", "ja")]


def test_packed_items_read_back_as_the_items_and_the_counts_are_made_as_they_are_read():
    items = load_benchmark(ECLEKTIC_CSV).items[:7]
    packed = PackedItems(items)
    assert list(packed) == items and len(packed) == 7 and packed[-1] == items[-1] and packed[2:5] == items[2:5]
    assert PackedItems.of(packed) is packed and packed.ids == [item.item_id for item in items]
    with pytest.raises(IndexError):
        packed[7]
    report, held = load_benchmark(ECLEKTIC_CSV), load_benchmark(ECLEKTIC_CSV, packed=True)
    assert isinstance(held.items, PackedItems) and list(held.items) == report.items and held.unused_fields == report.unused_fields
    assert held.languages == report.languages and held.variant_counts == report.variant_counts and held.kinds == report.kinds
    every = list(held.items)
    assert held.variant_counts == {lang: sum(lang in item.variants for item in every) for item in every for lang in item.variants}
    assert list(held.variant_counts) == list(dict.fromkeys(lang for item in every for lang in item.variants))
    assert held.kinds == Counter(str(item.kind) for item in every) and held.kinds
    restricted = load_benchmark(ECLEKTIC_CSV, langs=["de", "en"], packed=True)
    assert set(restricted.variant_counts) == {"de", "en"} and restricted.variant_counts["de"] == held.variant_counts["de"]


def test_a_thread_pool_asks_a_bounded_number_of_items_ahead():
    """Submitting every item at once held every item and its evidence until the run ended: an
    item is asked only once no more than `ahead` unfinished items are before it.  The first
    item waits until a later one was asked, so the pool is seen asking ahead."""
    items = [Item(item.item_id, item.source_lang, item.variants) for item in load_benchmark(ECLEKTIC_CSV).items[:3] * 30]
    position = {id(item): n for n, item in enumerate(items)}
    asked: list[int] = []
    later, lock = threading.Event(), threading.Lock()

    def noted(item: Item, lang: str) -> list[Evidence]:
        with lock:
            asked.append(position[id(item)])
        if position[id(item)]:
            later.set()
        else:
            later.wait(30)
        return []

    ahead, furthest = max(MIN_AHEAD, 2 * 2), []
    with Threads(ItemWork([noted], load_policy(None), ["en"]), 2) as executor:
        for _ in executor.checked(items):
            with lock:
                furthest.append(max(asked))
    assert len(furthest) == 90 and sorted(asked) == list(range(90))
    assert all(most <= finished + ahead + 1 for finished, most in enumerate(furthest))
    assert furthest[0] >= 1


def test_a_real_signal_gives_the_same_records_through_the_stream_and_in_memory(wiki_index: Path):
    items = load_benchmark(ECLEKTIC_CSV).items[:4]
    policy = load_policy(None)
    runners, _ = plan([LocalIndex(wiki_index, name="wiki")], ["ngram"], policy.configs, policy.rules, [], None, None)
    assert [r.signal for r in runners] == ["ngram"]
    with Forked(ItemWork(runners, policy), 2, items) as executor:
        streamed = b"".join(o.lines for o in executor.checked(items))
    assert streamed == record_lines(check_items(items, runners, policy, workers=1)) and streamed.count(b"\n") == sum(len(i.variants) for i in items)


def test_a_forked_pool_reads_its_items_from_one_buffer_packed_before_the_fork():
    items = load_benchmark(ECLEKTIC_CSV).items[:5]
    packed = Packed.of(items)
    assert [packed[position] for position in range(len(items))] == items
    assert packed.size() == int(packed.ends[-1]) == os.fstat(packed.file.fileno()).st_size
    work = ItemWork([_slow_for_early_items], load_policy(None), ["en"])
    with Forked(work, 2, items) as executor:
        # Only the items it was made with: its workers hold those.
        with pytest.raises(ValueError, match="the items it was made with"):
            next(executor.checked(list(items)))
        assert [o.variants for o in executor.checked(items)] == [1] * 5


THIRD = load_benchmark(ECLEKTIC_CSV).items[2].item_id


def _killed_on_the_third(item: Item, lang: str) -> list[Evidence]:
    """A worker killed as the system kills one out of memory, on the third item."""
    if item.item_id == THIRD:
        os.kill(os.getpid(), signal.SIGKILL)
    return _slow_for_early_items(item, lang)


def test_a_worker_killed_mid_check_is_named_not_waited_for():
    """A dead worker's item never comes back: the check ends at once with the cause."""
    items = load_benchmark(ECLEKTIC_CSV).items[:6]
    outcomes, errors = [], []

    def run() -> None:
        try:
            with Forked(ItemWork([_killed_on_the_third], load_policy(None), ["en"]), 2, items) as executor:
                outcomes.extend(executor.checked(items))
        except WorkerDied as error:
            errors.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(120)
    assert not runner.is_alive(), "the check waited for an item a dead worker held"
    assert [str(e) for e in errors] == ["a worker process checking items died (killed by SIGKILL, which the system sends when memory runs out)"]
    # Only items before the dead one, in order (one still running elsewhere is lost with the pool).
    assert len(outcomes) <= 2 and [o.variants for o in outcomes] == [1] * len(outcomes)


def test_audit_check_says_a_worker_died_in_one_line_and_writes_nothing(planted_audit, tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from audit.cli import main

    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    third = load_benchmark(planted_audit["bench"]).items[2].item_id
    real = ItemWork.__call__

    def dying(self: ItemWork, item: Item) -> object:
        if item.item_id == third:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, item)

    monkeypatch.setattr(ItemWork, "__call__", dying)
    out = tmp_path / "dead.audit.jsonl"
    result = CliRunner().invoke(main, ["check", str(planted_audit["bench"]), "--corpus", str(planted_audit["index"]), "--workers", "2", "--out", str(out)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "a worker process checking items died (killed by SIGKILL" in result.output and "no audit file was written" in result.output
    assert not out.exists() and not [p.name for p in tmp_path.iterdir() if p.name != "cache"]
