"""The report's item rows made one at a time against the dict rows they replace, and report.json
written a row at a time against `json.dump`: equal rows and the same bytes, on random audits."""
from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from audit.evaluate.stratify import STRATA
from audit.labels import LabelTable, Variants
from audit.report.itemrows import ItemRows, dump, page_name

LANGS = ["en", "fr", "de", "zh-Hans", "ar", "sw", "he"]


def _records(seed: int) -> list[dict]:
    """Records in a random order (an item's languages need not be together nor in one order),
    with `seen_in` and `asked_in` present, absent, empty or null as audits of every age have them."""
    rng = random.Random(seed)
    items = [f"q{n}-é/\"{n % 3}" for n in range(rng.randint(0, 60))]
    firsts = {
        item: {
            "source_lang": rng.choice(LANGS), "item_exposure": rng.choice(["seen_in_target", "unseen_everywhere", "seen_in_source_only"]),
            **({"seen_in": rng.choice([None, [], sorted(rng.sample(LANGS, rng.randint(1, 3)))])} if rng.random() < 0.8 else {}),
            **({"asked_in": rng.choice([None, [], sorted(rng.sample(LANGS, rng.randint(1, 4)))])} if rng.random() < 0.8 else {}),
        }
        for item in items
    }  # fmt: skip
    pairs = list(dict.fromkeys((rng.choice(items), rng.choice(LANGS)) for _ in range(rng.randint(0, 300)))) if items else []
    return [{"item_id": item, "lang": lang, "exposure": rng.choice(STRATA), **firsts[item]} for item, lang in pairs]


def _reference(records: list[dict]) -> list[dict]:
    """The rows as the report built them before: a dict per item, completed at the end."""
    rows: dict[str, dict] = {}
    for record in records:
        row = rows.get(record["item_id"])
        if row is None:
            row = rows[record["item_id"]] = {
                "item_id": record["item_id"], "source_lang": record["source_lang"], "item_exposure": record["item_exposure"], "tags": {},
                "page": page_name(record["item_id"]), "seen_in": record.get("seen_in"), "asked_in": record.get("asked_in"),
            }  # fmt: skip
        row["tags"][record["lang"]] = record["exposure"]
    for row in rows.values():
        row["asked_in"] = row["asked_in"] or sorted(row["tags"])
    return list(rows.values())


def _rows(records: list[dict]) -> ItemRows:
    variants = Variants()
    overall = LabelTable(variants, STRATA, ordering=True)
    rows = ItemRows(variants)
    for record in records:
        item, lang = variants.number(record["item_id"], record["lang"])
        overall.set(item, lang, record["exposure"])
        rows.add(item, lang, record)
    rows.finish(overall)
    return rows


@pytest.mark.parametrize("seed", range(30))
def test_rows_made_one_at_a_time_equal_the_dict_rows(seed):
    records = _records(seed)
    rows, expected = _rows(records), _reference(records)
    assert len(rows) == len(expected) and list(rows) == expected and rows == expected
    assert [list(row["tags"]) for row in rows] == [list(row["tags"]) for row in expected]
    if expected:
        assert rows[-1] == expected[-1] and rows[1:3] == expected[1:3]
        for row in expected:
            assert rows.page_of(row["item_id"]) == row["page"]
    assert rows.page_of("no such item") == ""


def test_a_row_read_twice_is_a_fresh_dict_each_time():
    rows = _rows(_records(3))
    first = rows[0]
    first["tags"].clear()
    first["asked_in"].append("xx")
    assert rows[0] == _reference(_records(3))[0]


@pytest.mark.parametrize("seed", range(30))
def test_report_json_written_row_by_row_is_json_dump_byte_for_byte(seed):
    rng = random.Random(seed)
    rows = _rows(_records(seed))
    data = {
        "title": "Contamination audit of «bench» \u2028 \"quoted\" \\ </script>",
        "audit": {"path": "x.jsonl", "signals": ["ngram", "minhash"], "links": None, "empty": {}, "nothing": []},
        "exposure": {"languages": LANGS, "per_language": {lang: {"seen": rng.randint(0, 9), "seen_rate": rng.random()} for lang in LANGS}, "items": rows, "seen_elsewhere": None},
        "numbers": [1, 2.5, -0.0, 1e300, True, False, None, float("nan")],
        "keyed": {1: "an int key", "2": [{"deep": {"deeper": [[], {}]}}]},
        "evaluation": None,
    }
    written = io.StringIO()
    dump(data, written)
    assert written.getvalue() == json.dumps({**data, "exposure": {**data["exposure"], "items": list(rows)}}, indent=2, ensure_ascii=False)
    assert json.loads(written.getvalue())["exposure"]["items"] == list(rows)
    empty = io.StringIO()
    dump({"items": _rows([]), "nested": {"items": _rows([])}}, empty)
    assert empty.getvalue() == json.dumps({"items": [], "nested": {"items": []}}, indent=2)


def test_rows_linked_to_another_report_point_at_its_pages(tmp_path: Path):
    rows = _rows(_records(5))
    other, out = tmp_path / "first", tmp_path / "second" / "report"
    for row in rows:
        (other / row["page"]).parent.mkdir(parents=True, exist_ok=True)
        (other / row["page"]).write_text("page")
    rows.link(other, out)
    for row in rows:
        assert (out / row["page"]).resolve() == (other / page_name(row["item_id"])).resolve() and row["page"].startswith("../../first/items/")
        assert rows.page_of(row["item_id"]) == row["page"]
    missing = other / page_name(rows[2]["item_id"])
    missing.unlink()
    with pytest.raises(FileNotFoundError, match=f"no provenance page for item {rows[2]['item_id']}"):
        _rows(_records(5)).link(other, out)
