"""The checks across an audit's records, made one record at a time (`audit.auditacross`), raise
what checking the whole list at once raises: the same line, field and message, or nothing, on
hundreds of randomly edited copies of a real audit and its benchmark."""
from __future__ import annotations

import copy
import random
import tracemalloc
from collections import Counter
from dataclasses import replace

import orjson
import pytest

from audit.auditacross import Across
from audit.auditfile import read_audit
from audit.auditschema import FIRST_RECORD_LINE, SHOWN_MISSING, TAGS, SchemaError
from audit.exposure import ItemExposure, item_exposure, seen_in
from audit.items import Item
from audit.readers import load_benchmark
from audit.records import Role

# The whole-list checks, written plainly as the reference: every record held, each item's
# records gathered, then checked in order.


def whole_list(manifest: dict, records: list[dict]) -> None:
    languages = set(manifest["benchmark"]["languages"])
    first: dict[tuple[str, str], int] = {}
    by_item: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        number = index + FIRST_RECORD_LINE
        if record["lang"] not in languages:
            raise SchemaError(number, "lang", f"{record['lang']!r} is not one of the benchmark's languages in the manifest ({', '.join(sorted(languages))})")
        key = (record["item_id"], record["lang"])
        if key in first:
            raise SchemaError(number, "lang", f"a second record for item {key[0]!r} in {key[1]!r} (the first is on line {first[key]})")
        first[key] = number
        if (record["role"] == Role.SOURCE) != (record["lang"] == record["source_lang"]):
            raise SchemaError(number, "role", f"{record['role']!r} where lang is {record['lang']!r} and source_lang {record['source_lang']!r}")
        by_item.setdefault(record["item_id"], []).append(index)
    for indexes in by_item.values():
        head = records[indexes[0]]
        expected = item_exposure(head["source_lang"], {records[i]["lang"]: records[i]["exposure"] for i in indexes})
        for index in indexes:
            record = records[index]
            if record["source_lang"] != head["source_lang"]:
                raise SchemaError(index + 2, "source_lang", f"{record['source_lang']!r}, where line {indexes[0] + 2} gives item {head['item_id']!r} source language {head['source_lang']!r}")
            if record["item_exposure"] != expected:
                raise SchemaError(index + 2, "item_exposure", f"{record['item_exposure']!r}, but the exposure of item {head['item_id']!r}'s languages makes it {expected.value!r}")
        union = seen_in([records[i].get("seen_in_languages") for i in indexes])
        for index in indexes:
            record = records[index]
            if "seen_in" in record and record["seen_in"] != union:
                raise SchemaError(index + 2, "seen_in", f"{record['seen_in']!r}, but item {head['item_id']!r}'s seen_in_languages give {union!r}")
            if record.get("asked_in") != head.get("asked_in"):
                raise SchemaError(index + 2, "asked_in", f"{record.get('asked_in')!r}, where line {indexes[0] + 2} gives item {head['item_id']!r} {head.get('asked_in')!r}")
    declared = manifest["benchmark"]["items"]
    if len(by_item) > declared:
        raise SchemaError(1, "benchmark.items", f"{declared}, but the records are of {len(by_item)} items")
    tallies: dict[str, Counter] = {}
    for record in records:
        tallies.setdefault(record["lang"], Counter())[record["exposure"]] += 1
    summary = manifest["summary"]
    counted = {lang: {tag: found.get(tag, 0) for tag in TAGS} | {"total": sum(found.values())} for lang, found in tallies.items()}
    for lang in sorted(set(counted) | set(summary["languages"])):
        if summary["languages"].get(lang) != counted.get(lang):
            raise SchemaError(1, f"summary.languages.{lang}", f"{summary['languages'].get(lang)}, but the records give {counted.get(lang)}")
    item_tags = Counter({record["item_id"]: record["item_exposure"] for record in records}.values())
    if dict(item_tags) != summary["items"]:
        raise SchemaError(1, "summary.items", f"{summary['items']}, but the records give {dict(item_tags)}")


def whole_list_benchmark(records: list[dict], items: list[Item], declared: dict) -> None:
    shapes = {item.item_id: (item.source_lang, tuple(item.variants)) for item in items}
    if declared["items"] != len(shapes):
        raise SchemaError(1, "benchmark.items", f"{declared['items']}, but the benchmark has {len(shapes)} items")
    for index, record in enumerate(records):
        number, item_id = index + FIRST_RECORD_LINE, record["item_id"]
        if item_id not in shapes:
            raise SchemaError(number, "item_id", f"{item_id!r} is not an item of the benchmark")
        source_lang, langs = shapes[item_id]
        if record["lang"] not in langs:
            raise SchemaError(number, "lang", f"{record['lang']!r} is not a language of item {item_id!r} (it has {', '.join(sorted(langs))})")
        if record["source_lang"] != source_lang:
            raise SchemaError(number, "source_lang", f"{record['source_lang']!r}, but item {item_id!r}'s source language is {source_lang!r}")
        if record.get("asked_in") is not None and record["asked_in"] != sorted(langs):
            raise SchemaError(number, "asked_in", f"{record['asked_in']!r}, but item {item_id!r} is asked in {sorted(langs)!r}")
    audited = {record["lang"] for record in records}
    present = {(record["item_id"], record["lang"]) for record in records}
    languages = {lang for _, langs in shapes.values() for lang in langs}
    if set(declared["languages"]) != languages:
        raise SchemaError(1, "benchmark.languages", f"{', '.join(sorted(set(declared['languages'])))}, but the benchmark's are {', '.join(sorted(languages))}")
    missing = [f"{item_id}/{lang}" for item_id, (_, langs) in shapes.items() for lang in langs if lang in audited and (item_id, lang) not in present]
    if missing:
        shown = ", ".join(missing[:SHOWN_MISSING]) + (f" and {len(missing) - SHOWN_MISSING} more" if len(missing) > SHOWN_MISSING else "")
        raise SchemaError(None, None, f"no record for {len(missing)} variant(s) of the benchmark in the audited languages (item/language): {shown}")


def _whole(manifest: dict, records: list[dict], items: list[Item]) -> tuple | None:
    """What the whole-list checks refuse first: the records, then the records against the benchmark."""
    return _outcome(lambda: whole_list(manifest, records)) or _outcome(lambda: whole_list_benchmark(records, items, manifest["benchmark"]))


def _outcome(check) -> tuple | None:
    try:
        check()
    except SchemaError as problem:
        return (problem.line, problem.field, problem.message)
    return None


def _edit(rng: random.Random, manifest: dict, records: list[dict], items: list[Item]) -> str:
    """One random edit of the kind a damaged or hand-edited audit (or a changed benchmark) has."""
    langs = manifest["benchmark"]["languages"]
    at = rng.randrange(len(records))
    record = records[at]
    kind = rng.choice(["lang", "duplicate", "delete", "swap", "role", "source_lang", "item_exposure", "exposure", "seen_in",
                       "seen_in_languages", "asked_in", "item_id", "summary", "declared", "drop_item", "item_langs", "rename_item", "add_variant", "unaudited"])  # fmt: skip
    if kind == "lang":
        record["lang"] = rng.choice([*langs, "xx"])
    elif kind == "duplicate":
        records.insert(rng.randrange(len(records) + 1), copy.deepcopy(record))
    elif kind == "delete" and len(records) > 1:
        del records[at]
    elif kind == "swap":
        other = rng.randrange(len(records))
        records[at], records[other] = records[other], records[at]
    elif kind == "role":
        record["role"] = "target" if record["role"] == "source" else "source"
    elif kind == "source_lang":
        record["source_lang"] = rng.choice(langs)
    elif kind == "item_exposure":
        record["item_exposure"] = rng.choice([tag.value for tag in ItemExposure])
    elif kind == "exposure":
        record["exposure"] = rng.choice(TAGS)
    elif kind == "seen_in":
        record["seen_in"] = rng.choice([None, [], sorted(rng.sample(langs, 2))])
    elif kind == "seen_in_languages":
        record["seen_in_languages"] = rng.choice([None, [], [rng.choice(langs)]])
    elif kind == "asked_in":
        record["asked_in"] = rng.choice([None, sorted(rng.sample(langs, 3)), record.get("asked_in")])
    elif kind == "item_id":
        record["item_id"] = rng.choice([records[rng.randrange(len(records))]["item_id"], "nobody"])
    elif kind == "summary":
        lang = rng.choice(langs)
        manifest["summary"]["languages"].setdefault(lang, {tag: 0 for tag in TAGS} | {"total": 0})[rng.choice(TAGS)] += 1
    elif kind == "declared":
        manifest["benchmark"]["items"] += rng.choice([-1, 1])
    elif kind == "drop_item" and len(items) > 1:
        del items[rng.randrange(len(items))]
    elif kind == "item_langs":
        at_item = rng.randrange(len(items))
        variants = dict(items[at_item].variants)
        variants.pop(rng.choice(list(variants)))
        if variants:
            items[at_item] = replace(items[at_item], variants=variants)
    elif kind == "rename_item":
        at_item = rng.randrange(len(items))
        items[at_item] = replace(items[at_item], item_id=f"{items[at_item].item_id}-renamed")
    elif kind == "add_variant":
        at_item = rng.randrange(len(items))
        variants = dict(items[at_item].variants)
        lacking = [lang for lang in langs if lang not in variants]
        if lacking:
            variants[rng.choice(lacking)] = next(iter(variants.values()))
            items[at_item] = replace(items[at_item], variants=variants)
    elif kind == "unaudited" and len(records) > 1:
        del records[at]
        _resummarised(manifest, records)
    return kind


def _resummarised(manifest: dict, records: list[dict]) -> None:
    """Item tags, `seen_in` and the manifest's counts made to agree with the records again, as
    an audit of fewer variants would have them."""
    by_item: dict[str, list[dict]] = {}
    for record in records:
        by_item.setdefault(record["item_id"], []).append(record)
    for mine in by_item.values():
        tag = item_exposure(mine[0]["source_lang"], {r["lang"]: r["exposure"] for r in mine}).value
        union = seen_in([r.get("seen_in_languages") for r in mine])
        for record in mine:
            record["item_exposure"] = tag
            if "seen_in" in record:
                record["seen_in"] = union
    tallies: dict[str, Counter] = {}
    for record in records:
        tallies.setdefault(record["lang"], Counter())[record["exposure"]] += 1
    manifest["summary"]["languages"] = {lang: {tag: found.get(tag, 0) for tag in TAGS} | {"total": sum(found.values())} for lang, found in tallies.items()}
    manifest["summary"]["items"] = dict(Counter(mine[0]["item_exposure"] for mine in by_item.values()))


@pytest.fixture(scope="module")
def sample(planted_audit):
    audit = read_audit(planted_audit["audit"])
    return audit.manifest, list(audit.records), list(load_benchmark(planted_audit["bench"]).items)


def test_a_sound_audit_passes_both_ways(sample):
    manifest, records, items = sample
    assert _outcome(lambda: whole_list(manifest, records)) is None and _outcome(lambda: Across.of(manifest, records).finish()) is None
    assert _outcome(lambda: Across.of(manifest, records).check_benchmark(items)) is None


@pytest.mark.parametrize("seed", range(400))
def test_an_edited_audit_is_refused_as_the_whole_list_refuses_it(sample, seed):
    rng = random.Random(seed)
    manifest, records, items = copy.deepcopy(sample[0]), [dict(record) for record in sample[1]], list(sample[2])
    made = [_edit(rng, manifest, records, items) for _ in range(rng.choice([1, 1, 2, 3]))]
    whole = _outcome(lambda: whole_list(manifest, records))
    across = Across.of(manifest, records)
    assert _outcome(across.finish) == whole, made
    if whole is None:
        assert _outcome(lambda: across.check_benchmark(items)) == _outcome(lambda: whole_list_benchmark(records, items, manifest["benchmark"])), made


def test_the_edits_reach_every_check(sample):
    """The random edits above are worth something only if they make each check fail."""
    fields = Counter()
    for seed in range(400):
        rng = random.Random(seed)
        manifest, records, items = copy.deepcopy(sample[0]), [dict(record) for record in sample[1]], list(sample[2])
        for _ in range(rng.choice([1, 1, 2, 3])):
            _edit(rng, manifest, records, items)
        found = _whole(manifest, records, items)
        fields[found[1].split(".")[0] if found and found[1] else found and "missing"] += 1
    assert {"lang", "role", "source_lang", "item_exposure", "seen_in", "asked_in", "summary", "benchmark", "item_id", "missing"} <= set(fields), fields


def test_what_the_checks_keep_per_item_is_shared_not_parsed_anew(sample):
    """Records as a file gives them (each value parsed anew): what repeats from item to item
    (source language, `asked_in`, `seen_in`, the union of `seen_in_languages`, the item tag) is
    held once, and an item's tag with the line of its first record, so the checks keep under
    700 bytes an item (560 for these twelve-language items; 1.9 KB when each record's parsed
    copies were kept)."""
    manifest, records, _ = sample
    copies = 40
    lines = [orjson.dumps({**record, "item_id": f"{record['item_id']}-{copy}"}) for copy in range(copies) for record in records]
    across = Across(manifest)
    tracemalloc.start()
    try:
        for number, line in enumerate(lines, start=FIRST_RECORD_LINE):
            across.add(number, orjson.loads(line))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert across.problem is None and len(across.items) == copies * len({record["item_id"] for record in records})
    assert held / len(across.items) < 700, held / len(across.items)
    first, *others = across.items.values()
    assert all(seen.asked_in is first.asked_in and seen.source_lang is first.source_lang for seen in others if seen.asked_in == first.asked_in)
