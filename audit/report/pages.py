"""The provenance pages, one per item, rendered by the report's pool of forked processes.

A page depends on the audit alone and takes as long to render as the figures take to draw, so
on a large benchmark the pages are most of a report's time.  The workers are forked after the
pages' inputs are set here, so they inherit the items, the labels and where each item's records
lie instead of receiving them pickled; each is handed a list of item ids, reads those items'
records and writes their pages itself, each to a hidden sibling renamed into place, so no half-written page is ever visible under its own name."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, Template

from audit.children import WorkerPool, collected_by_hand
from audit.evaluate.stratify import Exposure
from audit.items import Item, PackedItems
from audit.outputs import writing
from audit.records import JsonObject
from audit.report.build import ReadAudit
from audit.report.itempage import item_page
from audit.report.itemrecords import ItemRecords
from audit.report.itemrows import page_name

# Chunks per worker: enough that a worker given the slow pages does not hold the others up.
CHUNKS_PER_WORKER = 8


class PageError(RuntimeError):
    """A provenance page could not be rendered; the message names the page and its item."""


class ItemsById:
    """The benchmark's items held packed (`PackedItems`: pickled in a temporary file), each
    read back by its id where its page is rendered.  A page worker then touches no item
    object of the parent's (touching one writes its reference count, and the page holding it
    is copied), and no item object is held while the pages render."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = PackedItems.of(items)
        self.position = {item_id: position for position, item_id in enumerate(self.items.ids)}

    def get(self, item_id: str) -> Item | None:
        position = self.position.get(item_id)
        return self.items[position] if position is not None else None


@dataclass(frozen=True)
class Pages:
    """Everything the pages are rendered from; `records` in the audit's order of items."""

    directory: Path
    template: Template
    data: JsonObject
    by_id: ItemsById
    records: ItemRecords
    labels: Exposure


# The pages being rendered, set before the pool forks: its workers read them from here.
_current: list[Pages] = []


def pages_of(directory: Path, environment: Environment, data: JsonObject, read: ReadAudit, items: Sequence[Item] | ItemsById) -> Pages:
    by_id = items if isinstance(items, ItemsById) else ItemsById(items)
    return Pages(directory, environment.get_template("item.html.j2"), data, by_id, read.records, read.labels)


@contextmanager
def inherited(pages: Pages | None) -> Iterator[None]:
    """Make `pages` what workers forked inside this block render."""
    _current[:] = [pages] if pages is not None else []
    try:
        yield
    finally:
        _current.clear()


def render_pages(pages: Pages, item_ids: list[str]) -> int:
    """The pages of `item_ids`, each written to a hidden sibling and renamed into place.  A
    system error (a full disk) stays the system's, naming the file; any other names the page."""
    with pages.records.reading() as records, collected_by_hand() as collect:
        for item_id in item_ids:
            _render_page(pages, item_id, records)
            collect()
    return len(item_ids)


def _render_page(pages: Pages, item_id: str, records: Callable[[str], list[JsonObject]]) -> None:
    name = page_name(item_id)
    target = pages.directory / name
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        html = pages.template.render(page=item_page(pages.by_id.get(item_id), records(item_id), pages.labels), data=pages.data)
    except Exception as error:
        raise PageError(f"the provenance page {name} (item {item_id!r}): {type(error).__name__}: {error}") from error
    with writing(target):
        temporary.write_text(html, encoding="utf-8")
        temporary.replace(target)


def _render_inherited(item_ids: list[str]) -> int:
    """A worker's task: the pages of `item_ids`, from the pages it inherited when forked."""
    return render_pages(_current[0], item_ids)


def write_pages(pages: Pages, pool: WorkerPool | None, workers: int) -> int:
    """Render every page, in `pool` (forked inside `inherited(pages)`) when given, else here."""
    (pages.directory / "items").mkdir()
    item_ids = pages.records.item_ids()
    if pool is None:
        return render_pages(pages, item_ids)
    size = max(1, math.ceil(len(item_ids) / (workers * CHUNKS_PER_WORKER)))
    futures: list[Future[int]] = [pool.submit(_render_inherited, item_ids[at : at + size]) for at in range(0, len(item_ids), size)]
    return sum(future.result() for future in futures)
