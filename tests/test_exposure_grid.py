"""The report's item x language grid: each row labelled with its item id on a small benchmark,
numbered past `LABELLED_GRID_ITEMS` (the items table holds the ids), none past `MAX_GRID_ITEMS`;
one cell per variant in its tag's colour, white where an item was not asked in a language."""
from __future__ import annotations

import base64
import io
import random

import numpy as np
import pytest
from matplotlib import image

from audit.report import plots

LANGUAGES = ["de", "en", "ja", "zh"]
CODES = {"seen": 0, "unseen": 1, "unknown": 2}


def _rows(count: int, seed: int = 7) -> list[dict]:
    """`count` rows with random tags, a few languages left out, and ids that mathtext would parse."""
    rng = random.Random(seed)
    return [
        {"item_id": f"q{i}-$\\undefined{{{i}}}$", "tags": {lang: rng.choice(list(CODES)) for lang in LANGUAGES if rng.random() < 0.9}}
        for i in range(count)
    ]


def _drawn(monkeypatch: pytest.MonkeyPatch, rows: list[dict]) -> tuple[object, str]:
    """The grid's figure as it was when saved, and the data URI it was saved to."""
    kept = []
    save = plots._data_uri

    def keep(figure):
        kept.append((figure.axes[0].get_ylabel(), [t.get_text() for t in figure.axes[0].get_yticklabels()], figure.axes[0].get_ylim(), figure.axes[0].images[0].get_array().copy()))
        return save(figure)

    monkeypatch.setattr(plots, "_data_uri", keep)
    uri = plots.exposure_grid(rows, LANGUAGES)
    return kept[0], uri


def _expected(rows: list[dict]) -> np.ma.MaskedArray:
    grid = np.full((len(rows), len(LANGUAGES)), np.nan)
    for i, row in enumerate(rows):
        for j, lang in enumerate(LANGUAGES):
            if lang in row["tags"]:
                grid[i, j] = CODES[row["tags"][lang]]
    return np.ma.masked_invalid(grid)


def _height(uri: str) -> int:
    assert uri.startswith("data:image/png;base64,")
    return image.imread(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])), format="png").shape[0]


def _same_cells(drawn: np.ma.MaskedArray, rows: list[dict]) -> None:
    expected = _expected(rows)
    assert np.array_equal(np.ma.getmaskarray(drawn), np.ma.getmaskarray(expected))
    assert np.array_equal(drawn.filled(-1), expected.filled(-1))


def test_a_small_grid_labels_each_row_with_its_item_id(monkeypatch):
    rows = _rows(plots.LABELLED_GRID_ITEMS)
    (ylabel, ticks, _, cells), uri = _drawn(monkeypatch, rows)
    assert ylabel == "item"
    assert ticks == [plots.label(row["item_id"]) for row in rows]
    _same_cells(cells, rows)
    # Tall enough for a legible id a row.
    assert _height(uri) > 10 * len(rows)


@pytest.mark.parametrize("count", [plots.LABELLED_GRID_ITEMS + 1, 384, plots.MAX_GRID_ITEMS])
def test_past_the_labelled_size_rows_are_numbered_from_one_and_no_id_is_drawn(monkeypatch, count):
    rows = _rows(count)
    (ylabel, ticks, limits, cells), uri = _drawn(monkeypatch, rows)
    assert ylabel == "item, in the items table's order"
    assert limits == (count + 0.5, 0.5)
    assert not any("q" in tick or "undefined" in tick for tick in ticks)
    assert all(tick.lstrip("\u2212-").isdigit() for tick in ticks if tick)
    _same_cells(cells, rows)
    # Under three pixels a row (110 dpi) plus the margins: an overview, not a scroll.
    assert _height(uri) < 110 * (plots.NUMBERED_ROW_INCHES * count + 1) + 80


def test_too_many_items_draw_no_grid_and_no_items_none():
    assert plots.exposure_grid(_rows(plots.MAX_GRID_ITEMS + 1), LANGUAGES) is None
    assert plots.exposure_grid([], LANGUAGES) is None
