"""`audit index build` reads plain text, Parquet, `datasets` directories and Dolma JSONL as well
as JSONL: real documents go in, and the index answers counts and gives back each document's
metadata.  The Parquet and Arrow files are written here with pyarrow from the demo corpus's
Wikipedia text; the Dolma documents are the committed fixture (tests/fixtures/SOURCES.md)."""
from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import CORPUS, FIXTURES, read_jsonl_gz, write_jsonl

from audit.cli import main
from audit.corpora.local import LocalIndex
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.index.format import read_manifest
from audit.text import normalize

DOLMA = FIXTURES / "corpus" / "dolma"
DOLMA_FILES = ("000.json", "cc_en_head-0091.jsonl", "cc_en_head-0174.jsonl")


@pytest.fixture(scope="module")
def articles() -> list[dict]:
    """English Wikipedia articles as wikiextractor writes them: a title, a blank line, the body."""
    return read_jsonl_gz(CORPUS / "wiki-en.jsonl.gz", 6)


@pytest.fixture(scope="module")
def korean() -> list[dict]:
    return read_jsonl_gz(CORPUS / "wiki-ko.jsonl.gz", 60)


def phrase_of(text: str, length: int = 60) -> str:
    """A passage from the middle of a document, in the form queries are issued."""
    stored = normalize(text)
    start = max(0, (len(stored) - length) // 2)
    return stored[start : start + length]


def only_hit(index: LocalIndex, phrase: str) -> dict:
    """The metadata of the one document holding `phrase`."""
    total, occurrences = index.occurrences(phrase, 5)
    assert len(phrase) >= 30 and total == 1, phrase
    return index.metadata(occurrences[0].document)


def save_like_datasets(directory: Path, table: pa.Table, shards: int, batch_rows: int) -> list[str]:
    """What `datasets.Dataset.save_to_disk` writes (datasets 5.2): Arrow IPC *stream* files
    `data-0000i-of-0000n.arrow`, a `state.json` listing them and a `dataset_info.json`."""
    directory.mkdir(parents=True)
    per_shard = math.ceil(table.num_rows / shards)
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    for i, name in enumerate(names):
        with pa.OSFile(str(directory / name), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(i * per_shard, per_shard), max_chunksize=batch_rows)
    state = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": "6cae581eef94c79c",
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    features = {column.name: {"dtype": "string" if pa.types.is_string(column.type) else "null", "_type": "Value"} for column in table.schema}
    info = {"citation": "", "description": "", "features": features, "homepage": "", "license": ""}
    (directory / "state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    (directory / "dataset_info.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return names


def text_blocks_of(content: str) -> list[tuple[int, str]]:
    """(first line, text) of each blank-line-separated block, counted by hand."""
    blocks: list[tuple[int, str]] = []
    current: list[str] = []
    for number, line in enumerate(content.split("\n"), start=1):
        if line.strip():
            if not current:
                blocks.append((number, ""))
            current.append(line)
            blocks[-1] = (blocks[-1][0], "\n".join(current))
        else:
            current = []
    return blocks


# Plain text.


def test_text_files_are_one_document_each(tmp_path: Path, articles):
    texts = [row["text"] for row in articles[:3]]
    (tmp_path / "a.txt").write_text(texts[0], encoding="utf-8")
    (tmp_path / "b.md").write_text(texts[1], encoding="utf-8")
    with gzip.open(tmp_path / "c.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write(texts[2])
    names = ["a.txt", "b.md", "c.txt.gz"]
    manifest = build_index([tmp_path / name for name in names], tmp_path / "index")
    assert manifest.documents == 3
    assert [(s.path, s.documents, s.format, s.text_field, s.text_docs) for s in manifest.sources] == [(name, 1, "text", None, "file") for name in names]
    index = LocalIndex(tmp_path / "index")
    for name, text in zip(names, texts, strict=True):
        assert only_hit(index, phrase_of(text)) == {"path": name, "linenum": 0, "metadata": {}}
    # One document per file: a title and the body after its blank line are one passage.
    title, body = texts[0].split("\n\n", 1)
    assert index.count(normalize(title + " " + body[:40])) == 1


def test_blank_line_blocks_are_documents_with_their_first_line(tmp_path: Path, articles):
    content = "\n".join(row["text"] for row in articles)
    source = tmp_path / "wiki.txt"
    source.write_text(content, encoding="utf-8")
    blocks = text_blocks_of(content)
    assert len(blocks) > len(articles) and any("\n" in text for _, text in blocks)
    manifest = build_index([source], tmp_path / "index", text_docs="block")
    assert manifest.documents == len(blocks)
    assert (manifest.sources[0].format, manifest.sources[0].text_docs) == ("text", "block")
    index = LocalIndex(tmp_path / "index")
    for first, text in blocks:
        phrase = normalize(text)[-60:]
        total, occurrences = index.occurrences(phrase, 5)
        assert total >= 1 and {"path": "wiki.txt", "linenum": first - 1, "metadata": {}} in [index.metadata(o.document) for o in occurrences]
    # A title and its body are separate documents: no passage runs across the blank line.
    title, body = articles[0]["text"].split("\n\n", 1)
    assert index.count(normalize(title + " " + body[:40])) == 0
    assert index.count(normalize(body[:40])) == 1


def test_text_blocks_report_invalid_utf8_by_line(tmp_path: Path, articles):
    source = tmp_path / "notes.txt"
    source.write_bytes(articles[0]["text"].encode("utf-8") + b"\nbroken \xff byte\n")
    line = articles[0]["text"].count("\n") + 2
    with pytest.raises(IndexBuildError, match=rf"notes.txt:{line}: not valid UTF-8"):
        build_index([source], tmp_path / "index", text_docs="block")
    assert not (tmp_path / "index").exists()


def test_cli_text_docs_block(tmp_path: Path, articles):
    source = tmp_path / "wiki.md"
    source.write_text("\n".join(row["text"] for row in articles[:2]), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "index"), "--text-docs", "block", "--no-minhash"])
    assert result.exit_code == 0, result.output
    blocks = len(text_blocks_of(source.read_text(encoding="utf-8")))
    assert f"{blocks} documents" in result.output
    info = json.loads(runner.invoke(main, ["index", "info", str(tmp_path / "index")]).output)
    assert info["manifest"]["sources"] == [{"path": "wiki.md", "documents": blocks, "skipped_blank_lines": 0, "format": "text", "text_field": None, "text_docs": "block"}]


def test_a_walked_directory_reads_jsonl_only(tmp_path: Path, articles):
    """A README or notes file next to the corpus never becomes a document."""
    write_jsonl(tmp_path / "docs" / "wiki.jsonl", articles[:2])
    (tmp_path / "docs" / "README.md").write_text(articles[3]["text"], encoding="utf-8")
    manifest = build_index([tmp_path / "docs"], tmp_path / "index")
    assert [(s.path, s.format) for s in manifest.sources] == [("wiki.jsonl", "jsonl")]
    assert LocalIndex(tmp_path / "index").count(phrase_of(articles[3]["text"])) == 0


# Parquet.


def test_parquet_matches_the_same_documents_as_jsonl(tmp_path: Path, korean):
    pq.write_table(pa.Table.from_pylist(korean), tmp_path / "ko.parquet", row_group_size=16)
    write_jsonl(tmp_path / "ko.jsonl", korean)
    parquet = build_index([tmp_path / "ko.parquet"], tmp_path / "from-parquet")
    jsonl = build_index([tmp_path / "ko.jsonl"], tmp_path / "from-jsonl")
    assert (parquet.sources[0].format, parquet.sources[0].text_field, parquet.documents) == ("parquet", "text", jsonl.documents)
    assert (tmp_path / "from-parquet" / "tokenized.0").read_bytes() == (tmp_path / "from-jsonl" / "tokenized.0").read_bytes()
    index = LocalIndex(tmp_path / "from-parquet")
    for row_number in (0, 17, 59):
        row = korean[row_number]
        metadata = only_hit(index, phrase_of(row["text"]))
        assert metadata == {"path": "ko.parquet", "linenum": row_number, "metadata": {k: v for k, v in row.items() if k != "text"}}


def test_parquet_text_field_and_nested_columns(tmp_path: Path):
    """Dolma documents as Parquet under a `content` column: the nested `metadata` struct comes
    back whole, as a dict."""
    rows = [json.loads(line) for name in DOLMA_FILES for line in (DOLMA / name).read_text(encoding="utf-8").splitlines()]
    table = pa.Table.from_pylist([{("content" if k == "text" else k): v for k, v in row.items()} for row in rows])
    pq.write_table(table, tmp_path / "dolma.parquet")
    with pytest.raises(IndexBuildError, match=r"dolma.parquet: row 0: field 'text' is missing \(its columns: .*content"):
        build_index([tmp_path / "dolma.parquet"], tmp_path / "index")
    manifest = build_index([tmp_path / "dolma.parquet"], tmp_path / "index", text_field="content")
    assert manifest.sources[0].text_field == "content"
    index = LocalIndex(tmp_path / "index")
    for number, row in enumerate(rows):
        stored = only_hit(index, phrase_of(row["text"]))
        assert (stored["path"], stored["linenum"]) == ("dolma.parquet", number)
        assert {k: stored["metadata"][k] for k in ("id", "source", "added", "created")} == {k: row[k] for k in ("id", "source", "added", "created")}
        # Parquet gives every row the union of the struct's keys, absent ones as null.
        assert {k: v for k, v in stored["metadata"]["metadata"].items() if v is not None} == row["metadata"]


def test_parquet_wrong_type_and_null_text_name_the_row(tmp_path: Path, korean):
    numbers = pa.table({"id": [row["id"] for row in korean[:3]], "text": [1, 2, 3]})
    pq.write_table(numbers, tmp_path / "numbers.parquet")
    with pytest.raises(IndexBuildError, match=r"numbers.parquet: row 0: field 'text' is int64, not a string"):
        build_index([tmp_path / "numbers.parquet"], tmp_path / "index")
    texts: list[str | None] = [row["text"] for row in korean[:30]]
    texts[23] = None
    pq.write_table(pa.table({"text": texts}), tmp_path / "gap.parquet", row_group_size=10)
    with pytest.raises(IndexBuildError, match=r"gap.parquet: row 23: field 'text' is missing \(null\)"):
        build_index([tmp_path / "gap.parquet"], tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_parquet_text_that_is_not_utf8_names_the_row(tmp_path: Path, korean):
    """Parquet stores strings unchecked: a damaged byte surfaces only when the row is read."""
    titles = pa.array([row["title"] for row in korean[:20]])
    _, offsets, data = titles.buffers()
    starts = pa.Array.from_buffers(pa.int32(), 21, [None, offsets]).to_pylist()
    damaged = bytearray(data.to_pybytes())
    damaged[starts[13]] = 0xFF
    broken = pa.Array.from_buffers(pa.string(), 20, [None, offsets, pa.py_buffer(bytes(damaged))])
    pq.write_table(pa.table({"title": broken, "text": [row["text"] for row in korean[:20]]}), tmp_path / "titles.parquet")
    with pytest.raises(IndexBuildError, match=r"titles.parquet: row 13: field 'title' is not valid UTF-8"):
        build_index([tmp_path / "titles.parquet"], tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_truncated_parquet_is_an_error(tmp_path: Path, korean):
    pq.write_table(pa.Table.from_pylist(korean), tmp_path / "ko.parquet", row_group_size=16)
    data = (tmp_path / "ko.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(main, ["index", "build", str(tmp_path / "cut.parquet"), "--out", str(tmp_path / "index"), "--no-minhash"])
    assert result.exit_code == 2
    assert "cut.parquet: row 0: cannot be read, the file is damaged or not a Parquet file" in result.output, result.output
    assert not (tmp_path / "index").exists()


# Hugging Face `datasets` directories.


def test_datasets_directory(tmp_path: Path, korean):
    names = save_like_datasets(tmp_path / "ko", pa.Table.from_pylist(korean), shards=2, batch_rows=7)
    manifest = build_index([tmp_path / "ko"], tmp_path / "index")
    assert [(s.path, s.documents, s.format, s.text_field) for s in manifest.sources] == [(names[0], 30, "datasets", "text"), (names[1], 30, "datasets", "text")]
    index = LocalIndex(tmp_path / "index")
    for number in (0, 29, 30, 45):
        row = korean[number]
        metadata = only_hit(index, phrase_of(row["text"]))
        assert metadata == {"path": names[number // 30], "linenum": number % 30, "metadata": {k: v for k, v in row.items() if k != "text"}}


def test_datasets_dict_reads_the_splits_in_order(tmp_path: Path, korean):
    table = pa.Table.from_pylist(korean)
    root = tmp_path / "corpora" / "ko"
    save_like_datasets(root / "validation", table.slice(0, 10), shards=1, batch_rows=1000)
    save_like_datasets(root / "train", table.slice(10), shards=1, batch_rows=1000)
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "validation"]}), encoding="utf-8")
    manifest = build_index([root], tmp_path / "index")
    shard = "data-00000-of-00001.arrow"
    assert [(s.path, s.documents) for s in manifest.sources] == [(f"train/{shard}", 50), (f"validation/{shard}", 10)]
    index = LocalIndex(tmp_path / "index")
    assert only_hit(index, phrase_of(korean[3]["text"]))["path"] == f"validation/{shard}"
    assert only_hit(index, phrase_of(korean[12]["text"])) == {
        "path": f"train/{shard}",
        "linenum": 2,
        "metadata": {k: v for k, v in korean[12].items() if k != "text"},
    }
    # Inside a directory walked for JSONL, its JSON files would be misread as documents.
    with pytest.raises(IndexBuildError, match=r"corpora/ko: a datasets directory inside .*corpora, whose JSON files are not documents"):
        build_index([tmp_path / "corpora"], tmp_path / "walked")
    shutil.rmtree(root / "validation")
    with pytest.raises(IndexBuildError, match=r"validation: a datasets directory without data-\*.arrow files"):
        build_index([root], tmp_path / "again")


def test_truncated_arrow_stream_names_the_row(tmp_path: Path, korean):
    names = save_like_datasets(tmp_path / "ko", pa.Table.from_pylist(korean), shards=1, batch_rows=10)
    arrow = tmp_path / "ko" / names[0]
    whole = arrow.read_bytes()
    arrow.write_bytes(whole[: int(len(whole) * 0.6)])
    with pytest.raises(IndexBuildError, match=r"data-00000-of-00001.arrow: row (\d+): cannot be read") as error:
        build_index([tmp_path / "ko"], tmp_path / "index")
    assert int(re.search(r"row (\d+)", str(error.value))[1]) > 0
    # Cut exactly between two batches, the stream still lacks its end marker.
    with pa.ipc.open_stream(pa.py_buffer(whole)) as reader:
        first = reader.read_next_batch()
    sink = pa.BufferOutputStream()
    writer = pa.ipc.new_stream(sink, first.schema)
    writer.write_batch(first)
    arrow.write_bytes(sink.getvalue().to_pybytes())
    with pytest.raises(IndexBuildError, match=r"row 10: the Arrow stream stops without its end marker"):
        build_index([tmp_path / "ko"], tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_a_large_batch_is_parsed_in_pieces_that_keep_their_row_numbers(tmp_path: Path):
    """All 5,050 demo English articles (8 MB) as one record batch, more than one worker's share."""
    rows = read_jsonl_gz(CORPUS / "wiki-en.jsonl.gz")
    table = pa.Table.from_pylist(rows)
    assert table.nbytes > 1 << 22
    names = save_like_datasets(tmp_path / "en", table, shards=1, batch_rows=len(rows))
    manifest = build_index([tmp_path / "en"], tmp_path / "index", workers=2)
    assert manifest.sources[0].documents == len(rows)
    index = LocalIndex(tmp_path / "index")
    for number in (0, 2600, len(rows) - 1):
        assert index.metadata(number) == {"path": names[0], "linenum": number, "metadata": {k: v for k, v in rows[number].items() if k != "text"}}


def test_arrow_ipc_file_with_a_dictionary_column(tmp_path: Path, korean):
    """A lone `.arrow` file in the IPC *file* format (Feather v2), its `lang` column
    dictionary-encoded as pandas categoricals are."""
    table = pa.Table.from_pylist(korean)
    table = table.set_column(table.schema.get_field_index("lang"), "lang", table.column("lang").dictionary_encode())
    with pa.OSFile(str(tmp_path / "ko.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=25)
    manifest = build_index([tmp_path / "ko.arrow"], tmp_path / "index")
    assert (manifest.sources[0].format, manifest.documents) == ("arrow", len(korean))
    assert only_hit(LocalIndex(tmp_path / "index"), phrase_of(korean[40]["text"])) == {
        "path": "ko.arrow",
        "linenum": 40,
        "metadata": {k: v for k, v in korean[40].items() if k != "text"},
    }


def test_dataset_saved_by_datasets(tmp_path: Path, korean):
    datasets = pytest.importorskip("datasets")
    rows = korean[:20]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"), num_shards=2)
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows[:15]), "test": datasets.Dataset.from_list(rows[15:])}).save_to_disk(str(tmp_path / "dict"))
    single = build_index([tmp_path / "saved"], tmp_path / "single")
    assert [(s.path, s.documents, s.format) for s in single.sources] == [("data-00000-of-00002.arrow", 10, "datasets"), ("data-00001-of-00002.arrow", 10, "datasets")]
    split = build_index([tmp_path / "dict"], tmp_path / "split")
    assert [(s.path, s.documents) for s in split.sources] == [("train/data-00000-of-00001.arrow", 15), ("test/data-00000-of-00001.arrow", 5)]
    assert (tmp_path / "single" / "tokenized.0").read_bytes() == (tmp_path / "split" / "tokenized.0").read_bytes()
    index = LocalIndex(tmp_path / "split")
    assert only_hit(index, phrase_of(rows[17]["text"])) == {
        "path": "test/data-00000-of-00001.arrow",
        "linenum": 2,
        "metadata": {k: v for k, v in rows[17].items() if k != "text"},
    }


# Dolma and other JSONL corpora.


def test_dolma_documents_keep_all_their_metadata(tmp_path: Path):
    manifest = build_index([DOLMA], tmp_path / "index")
    assert [(s.path, s.format, s.text_field) for s in manifest.sources] == [(name, "jsonl", "text") for name in DOLMA_FILES]
    index = LocalIndex(tmp_path / "index")
    seen = 0
    for name in DOLMA_FILES:
        for number, line in enumerate((DOLMA / name).read_text(encoding="utf-8").splitlines()):
            record = json.loads(line)
            text = record.pop("text")
            stored = only_hit(index, phrase_of(text))
            assert stored == {"path": name, "linenum": number, "metadata": record}
            assert {"id", "source", "added", "created"} <= set(stored["metadata"])
            assert stored["metadata"]["metadata"]["cc_segment"].startswith("crawl-data/CC-MAIN-")
            assert stored["metadata"]["metadata"]["digest"].startswith("sha1:")
            seen += 1
    assert seen == manifest.documents == 4


def test_jsonl_text_field(tmp_path: Path, korean):
    """Corpora that call the text `content`: the field is named, and the rest is metadata."""
    rows = [{("content" if k == "text" else k): v for k, v in row.items()} for row in korean[:10]]
    rows[4]["text"] = "a field of the same name is metadata here"
    source = write_jsonl(tmp_path / "docs.jsonl", rows)
    runner = CliRunner()
    missing = runner.invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "index"), "--no-minhash"])
    assert missing.exit_code == 2 and "docs.jsonl:1: field 'text' is missing" in missing.output
    result = runner.invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "index"), "--text-field", "content", "--no-minhash"])
    assert result.exit_code == 0, result.output
    assert read_manifest(tmp_path / "index").sources[0].text_field == "content"
    stored = only_hit(LocalIndex(tmp_path / "index"), phrase_of(korean[4]["text"]))
    assert stored == {"path": "docs.jsonl", "linenum": 4, "metadata": {k: v for k, v in rows[4].items() if k != "content"}}
    with open(source, "a", encoding="utf-8") as handle:
        handle.write('{"id": "broken", "content": ["not", "text"]}\n')
    with pytest.raises(IndexBuildError, match=r"docs.jsonl:11: field 'content' is a list, not a string"):
        build_index([source], tmp_path / "again", text_field="content")


# Compressed JSONL: gzip and Zstandard (Dolma v1.7 and DCLM ship `.json.zst`).


def zstd_frames(data: bytes, frames: int) -> bytes:
    import zstandard

    cuts = [0, *(data.index(b"\n", len(data) * k // frames) + 1 for k in range(1, frames)), len(data)]
    return b"".join(zstandard.ZstdCompressor().compress(data[a:b]) for a, b in pairwise(cuts))


@pytest.mark.parametrize("frames", [1, 3])
def test_zstandard_jsonl_matches_the_same_documents_as_jsonl(tmp_path: Path, korean, frames):
    write_jsonl(tmp_path / "ko.jsonl", korean)
    (tmp_path / "ko.jsonl.zst").write_bytes(zstd_frames((tmp_path / "ko.jsonl").read_bytes(), frames))
    zst = build_index([tmp_path / "ko.jsonl.zst"], tmp_path / "from-zst")
    jsonl = build_index([tmp_path / "ko.jsonl"], tmp_path / "from-jsonl")
    assert zst.documents == jsonl.documents == len(korean)
    assert (tmp_path / "from-zst" / "tokenized.0").read_bytes() == (tmp_path / "from-jsonl" / "tokenized.0").read_bytes()
    row = korean[41]
    assert only_hit(LocalIndex(tmp_path / "from-zst"), phrase_of(row["text"])) == {"path": "ko.jsonl.zst", "linenum": 41, "metadata": {k: v for k, v in row.items() if k != "text"}}


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_a_compressed_file_cut_short_is_an_error_naming_it(tmp_path: Path, korean, suffix):
    write_jsonl(tmp_path / "ko.jsonl", korean)
    data = (tmp_path / "ko.jsonl").read_bytes()
    whole = gzip.compress(data) if suffix == ".jsonl.gz" else zstd_frames(data, 1)
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    result = CliRunner().invoke(main, ["index", "build", str(cut), "--out", str(tmp_path / "index"), "--no-minhash"])
    assert result.exit_code == 2, result.output
    assert f"cut{suffix}: line " in result.output and "cannot be read, the compressed file is cut short or damaged" in result.output
    assert not (tmp_path / "index").exists()
