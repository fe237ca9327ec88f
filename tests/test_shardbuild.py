"""`audit index build --shards N`: the input cut into byte-balanced shards built apart, on local
processes or a real Ray cluster, resumable, and answering exactly as the plain build does."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CORPUS, write_jsonl
from test_indexing import engine_for, probe_strings

from audit.cli import main
from audit.corpora.local import LocalIndex
from audit.executors import connect, parse_executor
from audit.index.build import build_index
from audit.index.corpusread import ReadOptions
from audit.index.errors import IndexBuildError
from audit.index.format import MANIFEST
from audit.index.sharded.build import build_sharded
from audit.index.sharded.cuts import make_plan
from audit.index.sharded.plan import ShardPlan, planned_sources
from audit.index.sharded.records import RECORDS
from audit.index.sharded.staging import PLAN, staging_path
from audit.index.sources import discover_sources

AUDIT = str(Path(sys.executable).with_name("audit"))


def plan_for(paths: list[Path], shards: int, text_docs: str = "file") -> ShardPlan:
    return make_plan(planned_sources(discover_sources(paths)), ReadOptions(text_docs=text_docs), shards, digest="test", code="test")


def build_cli(*args: str) -> object:
    return CliRunner().invoke(main, ["index", "build", *args, "--no-minhash"])


def run_audit(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([AUDIT, "index", "build", *args, "--no-minhash"], capture_output=True, text=True, env=env, timeout=300)


def comparable_manifest(directory: Path) -> dict:
    """The manifest without what may differ between two builds of the same input."""
    manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    del manifest["created"], manifest["build_seconds"], manifest["extra"]["build"]["executor"]
    return manifest


def assert_same_index(built: Path, expected: Path) -> None:
    names = sorted(p.name for p in built.iterdir())
    assert names == sorted(p.name for p in expected.iterdir())
    for name in names:
        if name != MANIFEST:
            assert (built / name).read_bytes() == (expected / name).read_bytes(), name
    assert comparable_manifest(built) == comparable_manifest(expected)


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory, wiki_dir: Path) -> Path:
    """Real Wikipedia text as uncompressed JSONL files, one per language, and one gzipped."""
    root = tmp_path_factory.mktemp("mixed")
    for file in wiki_dir.glob("*.jsonl"):
        shutil.copy(file, root / file.name)
    shutil.copy(CORPUS / "pud-de.jsonl.gz", root / "pud-de.jsonl.gz")
    return root


@pytest.fixture(scope="module")
def plain_mixed(tmp_path_factory, mixed_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("plain") / "idx"
    build_index([mixed_dir], out)
    return out


@pytest.fixture(scope="module")
def local_mixed(tmp_path_factory, mixed_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("local") / "idx"
    result = build_cli(str(mixed_dir), "--out", str(out), "--shards", "3")
    assert result.exit_code == 0, result.output
    assert "in 3 shard(s) (3 built, 0 already built; executor local)" in result.output
    return out


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> Path:
    """The whole demo corpus (29 MB of Wikipedia and treebank text) as one JSONL file."""
    path = tmp_path_factory.mktemp("big") / "demo.jsonl"
    with open(path, "wb") as out:
        for file in sorted(CORPUS.glob("*.jsonl.gz")):
            out.write(gzip.decompress(file.read_bytes()))
    return path


@pytest.fixture(scope="module")
def big_reference(tmp_path_factory, big_corpus: Path) -> Path:
    out = tmp_path_factory.mktemp("reference") / "idx"
    build_sharded([big_corpus], out, shards=4)
    return out


@pytest.fixture(scope="module")
def ray_client(ray_cluster):
    """This process as a Ray Client driver of the test cluster."""
    ray = connect(parse_executor(ray_cluster.client))
    yield ray
    ray.shutdown()


def test_plan_is_balanced_covers_every_byte_and_numbers_lines(big_corpus: Path, wiki_dir: Path):
    for paths, shards in (([big_corpus], 5), ([wiki_dir], 4)):
        plan = plan_for(paths, shards)
        data = [Path(s.path).read_bytes() for s in plan.sources]
        total = sum(len(d) for d in data)
        longest = max(len(line) for d in data for line in d.splitlines(keepends=True))
        for k in range(shards):
            assert abs(plan.input_bytes(k) - total / shards) <= longest + 1, (k, plan.input_bytes(k), total / shards)
        pieces = [piece for shard in plan.shards for piece in shard]
        assert [(p.source, p.start) for p in pieces] == sorted((p.source, p.start) for p in pieces)
        for source, content in enumerate(data):
            own = [p for p in pieces if p.source == source]
            assert own[0].start == 0 and own[-1].end == len(content)
            assert all(a.end == b.start for a, b in pairwise(own))
            for piece in own:
                assert piece.start == 0 or content[piece.start - 1 : piece.start] == b"\n"
                assert piece.first_line == content[: piece.start].count(b"\n") + 1
    assert any(p.first_line > 1 for p in plan_for([big_corpus], 5).shards[3])


def test_plan_reads_compressed_files_whole_and_refuses_too_many_shards(tmp_path: Path, mixed_dir: Path):
    plan = plan_for([mixed_dir], 7)
    compressed = next(i for i, s in enumerate(plan.sources) if s.name.endswith(".gz"))
    owned = [p for shard in plan.shards for p in shard if p.source == compressed]
    assert [(p.start, p.end) for p in owned] == [(0, plan.sources[compressed].bytes)]
    with pytest.raises(IndexBuildError, match="cannot be cut into 2 non-empty shards: it allows at most 1"):
        plan_for([CORPUS / "pud-de.jsonl.gz"], 2)
    lines = tmp_path / "three.jsonl"
    lines.write_text('{"text": "a"}\n' + json.dumps({"text": "long " * 200}) + '\n{"text": "c"}\n', encoding="utf-8")
    with pytest.raises(IndexBuildError, match="cannot be cut into 4 non-empty shards: it allows at most 3"):
        plan_for([lines], 4)
    exact = plan_for([lines], 3)
    assert [[(p.start, p.end, p.first_line) for p in shard] for shard in exact.shards] == [
        [(0, 14, 1)],
        [(14, 14 + len(json.dumps({"text": "long " * 200})) + 1, 2)],
        [(lines.stat().st_size - 14, lines.stat().st_size, 3)],
    ]


def test_shard_over_the_memory_budget_is_refused_before_any_work(tmp_path: Path, wiki_dir: Path):
    out = tmp_path / "idx"
    with pytest.raises(IndexBuildError, match=r"shard \d's input is .* lets one shard sort .*: use --shards \d+ or more"):
        build_sharded([wiki_dir], out, shards=2, memory_bytes=1 << 20)
    with pytest.raises(IndexBuildError, match=r"wiki-en.jsonl.gz: .* read whole by one shard, is more than --mem"):
        build_sharded([CORPUS / "wiki-en.jsonl.gz", CORPUS / "pud-de.jsonl.gz"], out, shards=2, memory_bytes=1 << 20)
    assert list(tmp_path.iterdir()) == []


def test_sharded_build_answers_like_the_plain_build(local_mixed: Path, plain_mixed: Path, wiki_docs):
    whole, split = LocalIndex(plain_mixed), LocalIndex(local_mixed)
    engine = engine_for(local_mixed)
    sharded, plain = (json.loads((d / MANIFEST).read_text()) for d in (local_mixed, plain_mixed))
    assert len(sharded["shards"]) == 3 and split.info.documents == whole.info.documents
    for probe in probe_strings(wiki_docs, seed=5):
        encoded = probe.encode("utf-8")
        assert split.count_bytes(encoded) == whole.count_bytes(encoded) == engine.count(list(encoded))["count"], probe
        assert split.longest_match_bytes(encoded).tolist() == whole.longest_match_bytes(encoded).tolist(), probe
    assert [split.metadata(d) for d in range(split.info.documents)] == [whole.metadata(d) for d in range(whole.info.documents)]
    assert list(split.documents()) == list(whole.documents())
    first_documents = [sum(s["documents"] for s in sharded["shards"][:k]) for k in range(3)]
    assert any(split.metadata(d)["linenum"] > 0 for d in first_documents), "no file was cut inside"
    assert sharded["sources"] == plain["sources"]
    assert sharded["extra"]["build"] == {"shards": 3, "executor": "local"}
    assert sharded["extra"]["languages"] == plain["extra"]["languages"]
    for name in ("doclangs.bin", "doclangs.json"):
        assert (local_mixed / name).read_bytes() == (plain_mixed / name).read_bytes(), name
    assert split.languages.counts() == whole.languages.counts() and len(whole.languages.counts()) > 1
    fingerprints = [bytes.fromhex(s["fingerprint"]) for s in sharded["shards"]]
    assert sharded["fingerprint"] == hashlib.blake2b(b"".join(fingerprints), digest_size=16).hexdigest()
    verify = CliRunner().invoke(main, ["index", "verify", str(local_mixed)])
    assert verify.exit_code == 0, verify.output
    assert not staging_path(local_mixed).exists()


def test_text_read_in_blocks_is_cut_between_blocks(tmp_path: Path, wiki_docs):
    blocks = [row["text"].replace(". ", ".\n") for rows in wiki_docs.values() for row in rows[:40]]
    book = tmp_path / "book.txt"
    book.write_text("".join(block + ("\n   \n" if i % 3 else "\n\n") for i, block in enumerate(blocks)), encoding="utf-8")
    plan = plan_for([book], 4, text_docs="block")
    content = book.read_bytes()
    for shard in plan.shards[1:]:
        start = shard[0].start
        before = content[: start - 1].rsplit(b"\n", 1)[-1]
        assert content[start - 1 : start] == b"\n" and not before.strip()
    build_index([book], tmp_path / "plain", text_docs="block")
    build_sharded([book], tmp_path / "split", shards=4, text_docs="block")
    whole, split = LocalIndex(tmp_path / "plain"), LocalIndex(tmp_path / "split")
    assert split.info.documents == whole.info.documents == len(blocks)
    assert [split.metadata(d) for d in range(len(blocks))] == [whole.metadata(d) for d in range(len(blocks))]
    assert list(split.documents()) == list(whole.documents())


def test_ray_build_is_byte_identical_to_the_local_one(ray_cluster, mixed_dir: Path, local_mixed: Path, tmp_path: Path):
    out = tmp_path / "idx"
    result = run_audit(str(mixed_dir), "--out", str(out), "--shards", "3", "--executor", ray_cluster.client, env=ray_cluster.env)
    assert result.returncode == 0, result.stderr
    assert "(3 built, 0 already built; executor ray)" in result.stdout
    assert_same_index(out, local_mixed)
    assert json.loads((out / MANIFEST).read_text())["extra"]["build"] == {"shards": 3, "executor": "ray"}


def test_killed_build_resumes_and_ends_byte_identical(tmp_path: Path, big_corpus: Path, big_reference: Path):
    out = tmp_path / "idx"
    staging = staging_path(out)
    args = [str(big_corpus), "--out", str(out), "--shards", "4", "--workers", "1"]
    driver = subprocess.Popen([AUDIT, "index", "build", *args, "--no-minhash"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: (staging / RECORDS / "0.json").exists() or driver.poll() is not None)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    finished = len(list((staging / RECORDS).glob("*.json")))
    assert 1 <= finished < 4 and not out.exists()
    again = run_audit(*args)
    assert again.returncode == 0, again.stderr
    assert f"({4 - finished} built, {finished} already built; executor local)" in again.stdout
    assert_same_index(out, big_reference)
    assert not staging.exists()


def test_interrupted_build_resumes_and_rebuilds_a_damaged_shard(tmp_path: Path, mixed_dir: Path, local_mixed: Path):
    out = tmp_path / "idx"
    staging = staging_path(out)

    def interrupt(stage: str, done: int, total: int) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(IndexBuildError, match=r"^interrupted; (\d) of 3 shards finished; run the same command again to resume$") as caught:
        build_sharded([mixed_dir], out, shards=3, workers=1, progress=interrupt)
    finished = int(re.search(r"(\d) of 3", str(caught.value))[1])
    assert finished >= 1 and (staging / PLAN).is_file() and not out.exists()
    damaged = json.loads((staging / RECORDS / "0.json").read_text())["files"][1]["name"]
    with open(staging / damaged, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 0xFF]))
    built = build_sharded([mixed_dir], out, shards=3)
    assert (built.built, built.reused) == (4 - finished, finished - 1)
    assert_same_index(out, local_mixed)


def test_ray_worker_killed_mid_shard_is_retried(ray_cluster, ray_client, tmp_path: Path, big_corpus: Path, big_reference: Path):
    out = tmp_path / "idx"
    staging = staging_path(out)
    killed: dict = {}
    recorded: dict[str, str] = {}

    def kill_first_attempt() -> None:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for announced in staging.glob("shard-*.attempt-*/attempt.json"):
                try:
                    attempt = json.loads(announced.read_text())
                except (OSError, ValueError):
                    continue
                killed.update(attempt, name=announced.parent.name, ray_worker=attempt["pid"] in ray_cluster.worker_pids("build_shard"))
                os.kill(attempt["pid"], signal.SIGKILL)
                return
            time.sleep(0.002)

    def note_records(stage: str, done: int, total: int) -> None:
        for record in (staging / RECORDS).glob("*.json"):
            recorded[record.stem] = json.loads(record.read_text())["attempt"]

    killer = threading.Thread(target=kill_first_attempt)
    killer.start()
    built = build_sharded([big_corpus], out, shards=4, executor=parse_executor(ray_cluster.client), progress=note_records)
    killer.join()
    assert killed["ray_worker"], killed
    assert built.built == 4 and len(recorded) == 4
    assert recorded[str(killed["shard"])] != killed["name"]
    assert killed["name"] not in recorded.values()
    assert_same_index(out, big_reference)
    assert not staging.exists()


def write_with_bad_line(path: Path, wiki_docs) -> int:
    """Every document in one file, with an unterminated line near the end (in the last shard);
    returns that line's number."""
    rows = [json.dumps(row, ensure_ascii=False) + "\n" for rows in wiki_docs.values() for row in rows]
    bad_line = len(rows) - 10
    rows.insert(bad_line - 1, '{"text": "unterminated\n')
    path.write_text("".join(rows), encoding="utf-8")
    return bad_line


def test_bad_line_fails_clearly_and_keeps_the_finished_shards(tmp_path: Path, wiki_docs):
    source, out = tmp_path / "all.jsonl", tmp_path / "idx"
    bad_line = write_with_bad_line(source, wiki_docs)
    args = [str(source), "--out", str(out), "--shards", "3"]
    result = run_audit(*args)
    assert result.returncode == 2, result.stderr
    assert re.search(rf"Error: {re.escape(str(source))}:{bad_line}: not valid JSON \(.*\); \d of 3 shards finished; run the same command again to resume", result.stderr)
    assert "Traceback" not in result.stderr
    assert not out.exists() and (staging_path(out) / PLAN).is_file()
    write_jsonl(source, [row for rows in wiki_docs.values() for row in rows])
    fixed = run_audit(*args)
    assert fixed.returncode == 0, fixed.stderr
    assert "(3 built, 0 already built" in fixed.stdout
    assert not staging_path(out).exists()


def test_ray_reports_a_bad_line_as_the_local_build_does(ray_cluster, ray_client, tmp_path: Path, wiki_docs):
    source, out = tmp_path / "all.jsonl", tmp_path / "idx"
    bad_line = write_with_bad_line(source, wiki_docs)
    pattern = rf"^{re.escape(str(source))}:{bad_line}: not valid JSON \(.*\); \d of 3 shards finished; run the same command again to resume$"
    with pytest.raises(IndexBuildError, match=pattern):
        build_sharded([source], out, shards=3, executor=parse_executor(ray_cluster.client))
    assert not out.exists() and (staging_path(out) / PLAN).is_file()


def test_refusals_before_any_work(tmp_path: Path, wiki_dir: Path):
    out = tmp_path / "idx"
    foreign = staging_path(out)
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(IndexBuildError, match="was not written by audit; refusing to replace it"):
        build_sharded([wiki_dir], out, shards=2)
    assert (foreign / "notes.txt").read_text() == "mine"
    shutil.rmtree(foreign)
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    result = build_cli(str(wiki_dir), "--out", str(out), "--shards", "2")
    assert result.exit_code == 2 and "--force" in result.output
    assert not foreign.exists()
    result = build_cli(str(wiki_dir), "--out", str(tmp_path / "other"), "--executor", "ray")
    assert result.exit_code == 2 and "give --shards N" in result.output
    result = build_cli(str(wiki_dir), "--out", str(tmp_path / "other"), "--shards", "0")
    assert result.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_shards_identify_their_own_documents_as_the_plain_build_does(tmp_path: Path, wiki_docs):
    """Texts without metadata under a neutral name: every language is identified, in the shard
    that read it, and the assembled table is the plain build's byte for byte."""
    source = write_jsonl(tmp_path / "in" / "part-0001.jsonl", [{"text": row["text"]} for rows in wiki_docs.values() for row in rows])
    plain, split = tmp_path / "plain", tmp_path / "split"
    build_index([source], plain)
    built = build_sharded([source], split, shards=3)
    assert len(built.manifest.shards) == 3
    for name in ("doclangs.bin", "doclangs.json"):
        assert (split / name).read_bytes() == (plain / name).read_bytes(), name
    summary = built.manifest.extra["languages"]
    assert summary["known_by"]["identified"] == sum(len(rows) for rows in wiki_docs.values())
    assert {"en", "zh", "hi", "ja", "ko", "he"} <= set(summary["counts"])
