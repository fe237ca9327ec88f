"""`audit index build` writes infini-gram's own format, which infini-gram's engine opens and
answers exactly as our suffix-array search does."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import write_jsonl
from infini_gram.engine import InfiniGramEngine

from audit.cli import main
from audit.corpora.base import Occurrence
from audit.corpora.local import LocalIndex
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST
from audit.text import normalize


def engine_for(path: Path) -> InfiniGramEngine:
    return InfiniGramEngine(index_dir=str(path), eos_token_id=0, vocab_size=255, token_dtype="u8")


def probe_strings(docs: dict[str, list[dict]], seed: int = 7) -> list[str]:
    """Substrings of the corpus (present), their edits (partly present) and foreign text."""
    rng = random.Random(seed)
    probes = []
    for rows in docs.values():
        for row in rng.sample(rows, 5):
            text = row["text"]
            start = rng.randrange(max(1, len(text) - 120))
            piece = text[start : start + rng.randrange(5, 120)]
            probes.append(piece)
            probes.append(piece[: len(piece) // 2] + "§" + piece[len(piece) // 2 :])
    probes += ["zzzz qqqq", "日本語のテキスト", "", "a"]
    return probes


def test_index_files_and_manifest(wiki_index: Path, wiki_docs):
    for kind in ("tokenized", "table", "offset", "metadata", "metaoff"):
        assert (wiki_index / f"{kind}.0").stat().st_size > 0
    manifest = json.loads((wiki_index / MANIFEST).read_text())
    assert manifest["documents"] == sum(len(rows) for rows in wiki_docs.values())
    assert manifest["token_dtype"] == "u8"
    data = (wiki_index / "tokenized.0").read_bytes()
    assert data.count(b"\xff") == manifest["documents"]
    assert (wiki_index / "table.0").stat().st_size == len(data) * manifest["shards"][0]["ratio"]


def test_counts_and_longest_matches_equal_engine(wiki_index: Path, wiki_docs):
    engine = engine_for(wiki_index)
    ours = LocalIndex(wiki_index)
    for probe in probe_strings(wiki_docs):
        encoded = list(probe.encode("utf-8"))
        assert ours.count_bytes(bytes(encoded)) == engine.count(encoded)["count"], probe
        if encoded:
            expected = np.array(engine.creativity(encoded)["rs"]) - np.arange(len(encoded))
            assert ours.longest_match_bytes(bytes(encoded)).tolist() == expected.tolist(), probe


def test_shards_answer_like_one_index(tmp_path: Path, wiki_dir: Path, wiki_index: Path, wiki_docs):
    sharded = tmp_path / "sharded"
    manifest = build_index([wiki_dir], sharded, memory_bytes=1 << 20)
    assert len(manifest.shards) > 1
    whole, split = LocalIndex(wiki_index), LocalIndex(sharded)
    engine = engine_for(sharded)
    for probe in probe_strings(wiki_docs, seed=11):
        encoded = probe.encode("utf-8")
        assert split.count_bytes(encoded) == whole.count_bytes(encoded) == engine.count(list(encoded))["count"]
        assert split.longest_match_bytes(encoded).tolist() == whole.longest_match_bytes(encoded).tolist()


def test_provenance_points_at_the_document(wiki_index: Path, wiki_docs):
    corpus = LocalIndex(wiki_index)
    row = wiki_docs["he"][3]
    stored = normalize(row["text"])
    phrase = stored[200:260]
    total, occurrences = corpus.occurrences(phrase, 5)
    assert total >= 1
    hit = corpus.document_hit(occurrences[0], len(phrase.encode()), 30)
    assert hit.metadata["metadata"]["id"] == row["id"]
    assert hit.metadata["path"] == "he.jsonl"
    assert hit.snippet[hit.snippet_match_start : hit.snippet_match_end] == phrase
    assert stored.encode()[hit.offset : hit.offset + hit.length] == phrase.encode()


def test_refuses_to_overwrite_without_force(tmp_path: Path, wiki_dir: Path):
    out = tmp_path / "idx"
    build_index([wiki_dir / "he.jsonl"], out)
    with pytest.raises(IndexBuildError, match="already exists"):
        build_index([wiki_dir / "he.jsonl"], out)
    manifest = build_index([wiki_dir / "ko.jsonl"], out, force=True)
    assert manifest.sources[0].path == "ko.jsonl"


def test_failed_build_leaves_nothing_that_looks_like_an_index(tmp_path: Path, wiki_docs):
    source = write_jsonl(tmp_path / "docs.jsonl", wiki_docs["en"][:20])
    with open(source, "a", encoding="utf-8") as handle:
        handle.write('{"id": "broken", "text": 42}\n')
    out = tmp_path / "idx"
    with pytest.raises(IndexBuildError, match=r"docs.jsonl:21: field 'text' is a int, not a string"):
        build_index([source], out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [source]


def test_cli_build_errors_name_file_and_line(tmp_path: Path):
    source = tmp_path / "bad.jsonl"
    source.write_text('{"text": "fine"}\n{"text": "unterminated\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "idx")])
    assert result.exit_code == 2
    assert "bad.jsonl:2: not valid JSON" in result.output
    assert not (tmp_path / "idx").exists()


def test_cli_build_and_info(tmp_path: Path, wiki_dir: Path):
    runner = CliRunner()
    result = runner.invoke(main, ["index", "build", str(wiki_dir / "zh.jsonl"), "--out", str(tmp_path / "zh")])
    assert result.exit_code == 0, result.output
    assert "120 documents" in result.output
    again = runner.invoke(main, ["index", "build", str(wiki_dir / "zh.jsonl"), "--out", str(tmp_path / "zh")])
    assert again.exit_code == 2 and "--force" in again.output
    info = json.loads(runner.invoke(main, ["index", "info", str(tmp_path / "zh")]).output)
    assert info["corpus"]["documents"] == 120
    assert info["manifest"]["sources"][0]["documents"] == 120


def test_sampled_occurrences_are_every_place_when_all_fit_and_kept_unchanged(tmp_path: Path, wiki_dir: Path, wiki_docs):
    """Occurrences as arrays (the n-gram signal's sample of where a match is): with room for
    all, exactly the places a scan of every document finds, over several shards, in (document,
    offset) order; a sample asked again is the kept one, and no caller can change it."""
    sharded = tmp_path / "sharded"
    build_index([wiki_dir], sharded, memory_bytes=1 << 20)
    corpus = LocalIndex(sharded)
    texts = dict(corpus.documents())
    # Every document's first and last byte, so each shard's first and last documents are cut too.
    edges = [Occurrence(d, at) for d, text in texts.items() for at in (0, max(0, len(text) - 1))]
    assert corpus.surroundings(edges, 7, 1 << 20) == [corpus.surrounding(o, 7, 1 << 20) for o in edges]
    for probe in probe_strings(wiki_docs, seed=5)[:25]:
        encoded = probe.encode("utf-8")
        every = [(d, at) for d, text in texts.items() for at in range(len(text)) if text.startswith(encoded, at)]
        total, sampled = corpus.occurrence_arrays(probe, 10_000)
        assert total == len(every)
        assert list(zip(sampled.documents.tolist(), sampled.offsets.tolist(), strict=True)) == every
        count, found = corpus.occurrences(probe, 10_000)
        places = [Occurrence(d, at) for d, at in every]
        assert count == total and list(found) == places and len(found) == len(places)
        assert [found[j] for j in range(len(found))] == places and found[1:3] == places[1:3]
        assert found[-1] == places[-1] if places else not found
        for before, after in ((0, len(encoded)), (40, 90), (1 << 20, 1 << 20)):
            assert corpus.surroundings(found, before, after) == [corpus.surrounding(o, before, after) for o in places]
            assert corpus.surroundings(places[::-1], before, after) == [corpus.surrounding(o, before, after) for o in places[::-1]]
        few = corpus.occurrence_arrays(probe, 3)[1]
        assert len(few.documents) <= 3 and set(zip(few.documents.tolist(), few.offsets.tolist(), strict=True)) <= set(every)
        assert corpus.occurrence_arrays(probe, 3)[1] is few
        with pytest.raises(ValueError):
            few.documents[:1] = 0
