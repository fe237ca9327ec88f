"""A damaged index is a clear error, never a silent `unseen`; a build never destroys what the
tool did not write.  Every index here is built from the real text of the bundled demo corpus."""
from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from audit.auditfile import read_audit
from audit.cli import main
from audit.corpora import demo
from audit.corpora.demo import demo_index, demo_location, demo_sources, stamp_path
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.corpora.verify import verify_index
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST, hash_file, pointer_width
from audit.outputs import MARKER, STAGING_TAG

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "audit" / "data" / "demo" / "corpus"
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"


def head_lines(source: Path, target: Path, lines: int) -> Path:
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        target.write_text("".join(line for _, line in zip(range(lines), handle, strict=False)), encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    """A few hundred English and Japanese Wikipedia paragraphs, as a user's JSONL files."""
    root = tmp_path_factory.mktemp("docs")
    head_lines(CORPUS / "xquad-en.jsonl.gz", root / "xquad-en.jsonl", 200)
    head_lines(CORPUS / "wiki-ja.jsonl.gz", root / "wiki-ja.jsonl", 300)
    return root


@pytest.fixture(scope="module")
def pristine(docs: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "index"
    build_index([docs], out)
    return out


@pytest.fixture
def index(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "index"))


def ratio(index: Path) -> int:
    return pointer_width((index / "tokenized.0").stat().st_size)


def cut(size: Callable[[Path, int], int]) -> Callable[[Path, Path], None]:
    return lambda index, path: os.truncate(path, size(index, path.stat().st_size))


def halve_table(index: Path, size: int) -> int:
    """Half the table, still a whole number of pointers: what a user found read as `unseen`."""
    return size // 2 // ratio(index) * ratio(index)


def append_byte(index: Path, path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b"\x00")


def flip_byte(path: Path, at: int = 4096) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(data)


DAMAGE: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "table halved": ("table.0", cut(halve_table)),
    "table one byte short": ("table.0", cut(lambda index, size: size - 1)),
    "tokenized cut": ("tokenized.0", cut(lambda index, size: size - 100)),
    "offset cut by one entry": ("offset.0", cut(lambda index, size: size - 8)),
    "metadata cut": ("metadata.0", cut(lambda index, size: size - 10)),
    "byte appended": ("tokenized.0", append_byte),
    "file deleted": ("offset.0", lambda index, path: path.unlink()),
    "unexpected file": ("table.1", lambda index, path: path.write_bytes(b"\x00" * 12)),
}


def verify(directory: Path):
    return CliRunner().invoke(main, ["index", "verify", str(directory)])


def test_manifest_records_every_file(pristine: Path):
    manifest = json.loads((pristine / MANIFEST).read_text())
    assert (manifest["format"], manifest["version"], manifest["manifest_version"]) == ("infini-gram", 4, 2)
    assert [f["name"] for f in manifest["files"]] == ["tokenized.0", "table.0", "offset.0", "metadata.0", "metaoff.0", "doclangs.bin", "doclangs.json"]
    for record in manifest["files"]:
        assert record["bytes"] == (pristine / record["name"]).stat().st_size
        assert record["blake2b"] == hash_file(pristine / record["name"])
    assert manifest["code"]
    marker = json.loads((pristine / MARKER).read_text())
    assert marker["kind"] == "index" and set(marker["files"]) == {MANIFEST, *(f["name"] for f in manifest["files"])}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damage_is_an_open_error_naming_the_file(index: Path, case: str):
    name, damage = DAMAGE[case]
    damage(index, index / name)
    with pytest.raises(IndexOpenError, match=rf"{name}.*audit index verify") as raised:
        LocalIndex(index)
    assert name in raised.value.detail
    result = verify(index)
    assert result.exit_code == 1, result.output
    assert name in result.output and "damaged" in result.output


@pytest.mark.parametrize("case", list(DAMAGE))
def test_structure_is_checked_without_a_manifest(index: Path, case: str):
    (index / MANIFEST).unlink()
    name, damage = DAMAGE[case]
    damage(index, index / name)
    with pytest.raises(IndexOpenError, match=name):
        LocalIndex(index)
    result = verify(index)
    assert result.exit_code == 1 and name in result.output


def test_the_user_case_halved_table_with_a_manifest(index: Path):
    size = (index / "table.0").stat().st_size
    os.truncate(index / "table.0", halve_table(index, size))
    with pytest.raises(IndexOpenError) as raised:
        LocalIndex(index)
    assert str(raised.value) == (
        f"{index}/table.0: {halve_table(index, size):,} bytes, but the manifest records {size:,}. The index is damaged: "
        f"rebuild it (`audit index build ... --force`), or run `audit index verify {index}` to check every file"
    )


@pytest.mark.parametrize(
    ("name", "entry", "shift", "expected"),
    [
        ("offset.0", 5, 1, "document 5 starts at byte .* which is not the 0xff document separator"),
        ("offset.0", 0, 1, "its first entry is 1, not 0"),
        ("offset.0", -1, 1 << 40, "its last entry .* is past the end of tokenized.0"),
        ("metaoff.0", 7, -1, "entry 7 starts at byte .* which is not the start of a line"),
        ("metaoff.0", 3, 1 << 40, "entry 4 .* does not come after entry 3"),
    ],
)
def test_offsets_must_point_at_their_documents(index: Path, name: str, entry: int, shift: int, expected: str):
    (index / MANIFEST).unlink()
    values = np.fromfile(index / name, dtype="<u8").astype(np.int64)
    values[entry] += shift
    values.astype("<u8").tofile(index / name)
    with pytest.raises(IndexOpenError, match=rf"{name}: {expected}"):
        LocalIndex(index)


def test_a_flipped_byte_is_found_by_verify_only(index: Path, pristine: Path):
    flip_byte(index / "table.0")
    assert LocalIndex(index).info.documents == 500
    result = verify(index)
    assert result.exit_code == 1
    assert f"{'hash differs':<22} table.0" in result.output
    assert "1 of 7 files differ from the manifest" in result.output
    intact = verify(pristine)
    assert intact.exit_code == 0, intact.output
    assert intact.output.count("ok ") == 7 and "all 7 files match the manifest" in intact.output


def test_verify_lists_unexpected_files_and_refuses_what_is_no_index(index: Path, tmp_path: Path):
    (index / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(IndexOpenError, match=r"notes\.txt: a file the index did not write"):
        LocalIndex(index)
    result = verify(index)
    assert result.exit_code == 1 and f"{'unexpected extra file':<22} notes.txt" in result.output
    (tmp_path / "empty").mkdir()
    assert verify(tmp_path / "empty").exit_code == 2
    assert verify(tmp_path / "nowhere").exit_code == 2


def test_an_index_without_hashes_gets_the_structural_checks_and_a_note(index: Path):
    (index / MANIFEST).unlink()
    flip_byte(index / "table.0")
    result = verify(index)
    assert result.exit_code == 0, result.output
    assert "not verifiable: no recorded hashes" in result.output


def test_a_manifest_from_before_file_records_is_still_checked(index: Path):
    manifest = json.loads((index / MANIFEST).read_text())
    for key in ("manifest_version", "files", "code"):
        del manifest[key]
    (index / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    assert LocalIndex(index).info.documents == 500
    assert "not verifiable" in verify(index).output
    os.truncate(index / "offset.0", (index / "offset.0").stat().st_size - 8)
    with pytest.raises(IndexOpenError, match=r"offset.0: 3,992 bytes, but the manifest records 4,000"):
        LocalIndex(index)


def test_an_unreadable_manifest_is_an_open_error(index: Path):
    (index / MANIFEST).write_text('{"format": "infini-gram", "vers', encoding="utf-8")
    with pytest.raises(IndexOpenError, match=r"audit-index.json: not a readable index manifest"):
        LocalIndex(index)
    assert verify(index).exit_code == 1


def write_benchmark(path: Path, question: str) -> Path:
    item = {"item_id": "q1", "source_lang": "en", "variants": {"en": {"question": question, "answer": "yes", "context": question}, "ja": {"question": "東京は日本の首都ですか", "answer": "はい"}}}
    path.write_text(json.dumps(item, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def test_check_on_a_damaged_index_stops_before_writing(index: Path, docs: Path, tmp_path: Path):
    text = json.loads((docs / "xquad-en.jsonl").read_text(encoding="utf-8").splitlines()[3])["text"]
    bench = write_benchmark(tmp_path / "bench.jsonl", text[:300])
    out = tmp_path / "bench.audit.jsonl"
    args = ["check", str(bench), "--corpus", str(index), "--out", str(out), "--no-report"]
    intact = CliRunner().invoke(main, args)
    assert intact.exit_code == 0, intact.output
    assert read_audit(out).manifest["summary"]["languages"]["en"]["seen"] == 1
    out.unlink()
    os.truncate(index / "table.0", halve_table(index, (index / "table.0").stat().st_size))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "table.0" in result.output and "the manifest records" in result.output
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl", "index"]


# The demo cache: built once per module, copied for each test.


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("demo-cache")
    demo_index(cache)
    return cache


@pytest.fixture
def cache(demo_cache: Path, tmp_path: Path, monkeypatch) -> Path:
    copy = Path(shutil.copytree(demo_cache, tmp_path / "cache"))
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(copy))
    return copy


def cached_index(cache: Path) -> Path:
    return demo_location(cache, demo_sources())


def test_the_demo_index_has_every_documents_language_from_its_files(demo_cache: Path):
    index = LocalIndex(cached_index(demo_cache))
    expected: dict[str, int] = {}
    for path in demo_sources():
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                lang = json.loads(line)["lang"]
                expected[lang] = expected.get(lang, 0) + 1
    assert index.languages is not None and index.languages.counts() == expected
    assert index.info.details["languages"]["known_by"]["metadata"] == index.info.documents


def english_seen(tmp_path: Path) -> tuple[int, str]:
    out = tmp_path / "sample.audit.jsonl"
    result = CliRunner().invoke(main, ["check", str(SAMPLE), "--corpus", "demo", "--langs", "en", "--out", str(out), "--no-report"])
    assert result.exit_code == 0, result.output
    return read_audit(out).manifest["summary"]["languages"]["en"]["seen"], result.output


def test_a_damaged_demo_cache_is_rebuilt_by_check(cache: Path, tmp_path: Path):
    target = cached_index(cache)
    os.truncate(target / "table.0", halve_table(target, (target / "table.0").stat().st_size))
    seen, output = english_seen(tmp_path)
    assert seen == 39
    assert "the cached demo index was unusable (table.0:" in output and "rebuilt it" in output
    assert verify_index(target).ok


def verification_spy(monkeypatch) -> list[Path]:
    calls: list[Path] = []

    def spy(path: Path, progress=None):
        calls.append(path)
        return verify_index(path, progress)

    monkeypatch.setattr(demo, "verify_index", spy)
    return calls


@pytest.mark.parametrize("stamp", ["other code", "missing"])
def test_a_flipped_byte_is_found_when_the_code_changed_or_no_stamp(cache: Path, monkeypatch, stamp: str):
    target = cached_index(cache)
    flip_byte(target / "table.0")
    if stamp == "missing":
        stamp_path(target).unlink()
    else:
        recorded = json.loads(stamp_path(target).read_text())
        stamp_path(target).write_text(json.dumps({**recorded, "code": "0123456789abcdef"}))
    calls, notes = verification_spy(monkeypatch), []
    assert demo_index(cache, notify=notes.append) == target
    assert calls == [target]
    assert len(notes) == 1 and "table.0: hash differs" in notes[0]
    assert verify_index(target).ok


def test_a_verified_demo_cache_is_not_hashed_again(cache: Path, monkeypatch):
    target = cached_index(cache)
    manifest = (target / MANIFEST).read_text()
    recorded = json.loads(stamp_path(target).read_text())
    stamp_path(target).write_text(json.dumps({**recorded, "code": "0123456789abcdef"}))
    calls, notes = verification_spy(monkeypatch), []
    demo_index(cache, notify=notes.append)
    demo_index(cache, notify=notes.append)
    assert calls == [target] and notes == []
    assert (target / MANIFEST).read_text() == manifest
    assert json.loads(stamp_path(target).read_text())["code"] != "0123456789abcdef"


def test_a_demo_cache_from_before_file_records_is_rebuilt(cache: Path):
    """An old cache: a manifest without `files`, no outputs marker, no stamp, no near-duplicate index."""
    target = cached_index(cache)
    shutil.rmtree(target / "minhash")
    for name in ("doclangs.bin", "doclangs.json"):
        (target / name).unlink()
    manifest = json.loads((target / MANIFEST).read_text())
    for key in ("manifest_version", "files", "code"):
        del manifest[key]
    (target / MANIFEST).write_text(json.dumps(manifest))
    (target / MARKER).unlink()
    stamp_path(target).unlink()
    notes: list[str] = []
    demo_index(cache, notify=notes.append)
    assert len(notes) == 1 and "no recorded file hashes" in notes[0]
    assert json.loads((target / MANIFEST).read_text())["manifest_version"] == 2
    assert verify_index(target).ok and (target / "minhash" / "manifest.json").is_file()


def test_a_demo_cache_holding_a_foreign_file_is_reported_not_replaced(cache: Path, tmp_path: Path):
    target = cached_index(cache)
    (target / "notes.txt").write_text("mine", encoding="utf-8")
    stamp_path(target).unlink()
    result = CliRunner().invoke(main, ["check", str(SAMPLE), "--corpus", "demo", "--langs", "en", "--out", str(tmp_path / "o.jsonl"), "--no-report"])
    assert result.exit_code == 2
    assert "unusable (notes.txt: a file the index did not write) and cannot be rebuilt" in result.output
    assert (target / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "o.jsonl").exists()


# Build safety.


def test_force_never_replaces_the_sources(docs: Path, tmp_path: Path):
    mine = Path(shutil.copytree(docs, tmp_path / "docs"))
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    with pytest.raises(IndexBuildError, match="holds this command's input"):
        build_index([mine], mine, force=True)
    result = CliRunner().invoke(main, ["index", "build", str(mine), "--out", str(mine), "--force"])
    assert result.exit_code == 2 and "holds this command's input" in result.output
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_force_refuses_an_unrelated_directory_before_reading_anything(tmp_path: Path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n", encoding="utf-8")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work", encoding="utf-8")
    with pytest.raises(IndexBuildError, match="was not written by audit"):
        build_index([broken], precious, force=True)
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]
    assert (precious / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.jsonl", "precious"]


def test_force_replaces_an_index_the_tool_wrote(docs: Path, tmp_path: Path):
    out = tmp_path / "index"
    build_index([docs / "xquad-en.jsonl"], out)
    with pytest.raises(IndexBuildError, match=r"already exists \(use --force"):
        build_index([docs / "wiki-ja.jsonl"], out)
    manifest = build_index([docs / "wiki-ja.jsonl"], out, force=True)
    assert manifest.sources[0].path == "wiki-ja.jsonl" and LocalIndex(out).info.documents == 300
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(IndexBuildError, match=r"holds notes\.txt"):
        build_index([docs / "xquad-en.jsonl"], out, force=True)
    assert (out / "notes.txt").exists()


def test_force_replaces_an_index_from_before_markers_only_if_it_holds_nothing_else(docs: Path, tmp_path: Path):
    out = tmp_path / "index"
    build_index([docs / "xquad-en.jsonl"], out)
    (out / MARKER).unlink()
    build_index([docs / "wiki-ja.jsonl"], out, force=True)
    assert LocalIndex(out).info.documents == 300 and (out / MARKER).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]
    (out / MARKER).unlink()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(IndexBuildError, match="was not written by audit"):
        build_index([docs / "xquad-en.jsonl"], out, force=True)
    assert (out / "notes.txt").exists()
    with pytest.raises(IndexOpenError, match=r"notes\.txt: a file the index did not write"):
        LocalIndex(out)
    (out / "notes.txt").unlink()
    assert LocalIndex(out).info.documents == 300


def test_stale_staging_of_a_dead_build_is_removed_and_untagged_ones_left(docs: Path, tmp_path: Path):
    stale = tmp_path / ".index.building-99999999"
    stale.mkdir()
    (stale / STAGING_TAG).touch()
    (stale / "tokenized.0").write_bytes(b"\xff" * 1000)
    untagged = tmp_path / ".index.building-99999998"
    untagged.mkdir()
    (untagged / "tokenized.0").write_bytes(b"\xff")
    build_index([docs / "xquad-en.jsonl"], tmp_path / "index")
    assert not stale.exists()
    assert (untagged / "tokenized.0").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".index.building-99999998", "index"]
