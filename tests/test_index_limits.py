"""The limits of index builds and opens: option ranges, the sampled suffix-array check, a full
disk (a real tmpfs filled up), two builds of one index at once (real processes), and the
longest document a build reads.  Every index is built from the real text of the demo corpus."""
from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError, check_index
from audit.corpora.soundness import suffix_order_problem
from audit.corpora.verify import verify_index
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.ranges import MIN_MEMORY, REMOTE_WORKERS, RangeError, check_workers, document_limit, memory_budget, worker_count

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "audit" / "data" / "demo" / "corpus"
AUDIT = str(Path(sys.executable).with_name("audit"))


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    with gzip.open(CORPUS / "xquad-en.jsonl.gz", "rt", encoding="utf-8") as handle:
        (root / "xquad-en.jsonl").write_text("".join(line for _, line in zip(range(300), handle, strict=False)), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def pristine(docs: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "index"
    build_index([docs], out)
    return out


@pytest.fixture
def index(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "index"))


def test_worker_counts_are_clamped_to_the_cpus_and_the_work_with_a_note():
    cpus = os.cpu_count() or 1
    assert worker_count(None) == worker_count(None, None) and worker_count(None).count == cpus and not worker_count(None).note
    assert worker_count(cpus * 100).count == cpus and f"--workers {cpus * 100}: using {cpus}" in worker_count(cpus * 100).note
    assert worker_count(1, work=5).count == 1 and not worker_count(1, work=5).note
    clamped = worker_count(200, work=1, option="--actors")
    assert clamped.count == 1 and clamped.note == "--actors 200: using 1, the 1 pieces of work"
    for bad in (0, -3):
        with pytest.raises(RangeError, match=f"--workers {bad}: give at least 1"):
            worker_count(bad)


def test_check_workers_default_to_the_cpus_locally_and_more_threads_against_remote_corpora():
    assert check_workers(None, 468, cpus=2) == (2, None)
    assert check_workers(None, 468, cpus=2, remote=True) == (REMOTE_WORKERS, None)
    assert check_workers(None, 3, cpus=2, remote=True) == (3, None)
    assert check_workers(None, 468, cpus=1, remote=True) == (4, None)
    count, note = check_workers(200, 468, cpus=2, remote=True)
    assert count == 8 and note is not None and "clamped to 8" in note


def test_memory_budgets_have_a_floor_and_the_machine_as_ceiling():
    assert memory_budget("16M") == MIN_MEMORY and memory_budget(" 1.5 GiB ") == 3 << 29
    for bad, why in (("0", "too small"), ("1", "too small"), ("15M", "too small"), ("2048T", "this machine's memory"), ("8X", "not a size"), ("", "not a size")):
        with pytest.raises(RangeError, match=why):
            memory_budget(bad)
    assert document_limit("1K") == 1024
    with pytest.raises(RangeError, match="--max-document '512'"):
        document_limit("512")


def shuffled(index: Path, seed: int) -> None:
    table = index / "table.0"
    width = table.stat().st_size // (index / "tokenized.0").stat().st_size
    pointers = np.frombuffer(table.read_bytes(), dtype=np.uint8).reshape(-1, width).copy()
    np.random.default_rng(seed).shuffle(pointers)
    table.write_bytes(pointers.tobytes())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_table_scrambled_at_its_size_is_refused_by_every_open(index: Path, seed: int):
    shuffled(index, seed)
    for opening in (LocalIndex, check_index):
        with pytest.raises(IndexOpenError, match=r"table\.0: .*out of order.*audit index verify"):
            opening(index)
    assert not verify_index(index).ok


def test_the_sample_passes_a_sound_table_and_names_a_pointer_out_of_range(index: Path):
    mapped = LocalIndex(index).groups[0].shards[0]
    assert suffix_order_problem(mapped.data, mapped.table, mapped.ratio, 1) is None
    table = bytearray(mapped.table)
    table[: mapped.ratio] = b"\xff" * mapped.ratio
    assert "outside the text" in suffix_order_problem(mapped.data, bytes(table), mapped.ratio, 1)


def test_a_file_the_index_did_not_write_is_refused_by_every_open(index: Path):
    (index / "drafts").mkdir()
    (index / "drafts" / "mine.npy").write_bytes(b"mine")
    for opening in (LocalIndex, check_index):
        with pytest.raises(IndexOpenError, match=r"drafts/mine\.npy: a file the index did not write"):
            opening(index)
    shutil.rmtree(index / "drafts")
    assert LocalIndex(index).info.documents == 240


def on_full_disk(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`audit ARGS` in `cwd`, whose `full/` is a 256 KiB tmpfs of its own mount namespace; the
    last line printed is what `full/` holds afterwards."""
    (cwd / "full").mkdir()
    script = 'mount -t tmpfs -o size=256k tmpfs full || exit 99; "$@"; status=$?; echo "left: $(ls -A full)"; exit $status'
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", AUDIT, *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, "AUDIT_CACHE_DIR": str(cwd / "cache")},
    )
    assert done.returncode != 99, f"no tmpfs could be mounted: {done.stderr}"
    return done


def test_a_full_disk_is_one_line_naming_the_filesystem_and_the_index(docs: Path, tmp_path: Path):
    done = on_full_disk(tmp_path, "index", "build", str(docs), "--out", "full/idx", "--no-minhash")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no space left on " in done.stderr and f"(mounted at {tmp_path / 'full'}) while writing full/idx" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.splitlines()[-1].strip() == "left:"


def test_a_second_build_of_one_index_names_the_first(docs: Path, tmp_path: Path):
    big = tmp_path / "big"
    big.mkdir()
    with (big / "all.jsonl").open("wb") as out:
        for source in sorted(CORPUS.glob("*.jsonl.gz")):
            out.write(gzip.decompress(source.read_bytes()))
    args = [AUDIT, "index", "build", str(big), "--out", str(tmp_path / "idx"), "--shards", "2", "--workers", "1", "--no-minhash"]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".idx.audit-build.lock"
    while first.poll() is None and not (lock.exists() and lock.read_text().strip()):
        time.sleep(0.05)
    second = subprocess.run(args, capture_output=True, text=True, timeout=300)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert second.returncode == 2 and f"another build (pid {first.pid}) is writing {tmp_path / 'idx'}" in second.stderr
    assert LocalIndex(tmp_path / "idx").info.documents > 0 and not lock.exists()


def test_a_build_after_another_ended_or_was_killed_takes_the_lock(docs: Path, tmp_path: Path):
    build_index([docs], tmp_path / "idx")
    (tmp_path / ".idx.audit-build.lock").write_text("99999999")  # what a killed build leaves
    build_index([docs], tmp_path / "idx", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_the_longest_document_is_bounded_in_every_reader(tmp_path: Path):
    blocks = tmp_path / "notes.txt"
    blocks.write_text("short block\n\n" + "long line of a block\n" * 100, encoding="utf-8")
    with pytest.raises(IndexBuildError, match=r"notes\.txt: line 3: a block \(one document\) longer than 1,024 bytes"):
        build_index([blocks], tmp_path / "a", text_docs="block", max_document=1024)
    with pytest.raises(IndexBuildError, match=r"notes\.txt: line 1: a text file \(one document\) longer"):
        build_index([blocks], tmp_path / "b", max_document=1024)
    assert build_index([blocks], tmp_path / "c", text_docs="block", max_document=4096).documents == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "notes.txt"]


@pytest.mark.parametrize("damage", ["a user's file", "a scrambled table"])
def test_the_server_refuses_to_serve_a_damaged_index(index: Path, tmp_path: Path, damage: str):
    if damage == "a user's file":
        (index / "notes.txt").write_text("mine", encoding="utf-8")
    else:
        shuffled(index, 5)
    result = subprocess.run([sys.executable, "-m", "audit.server", "--index", f"x={index}", "--port", "0"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert ("notes.txt: a file the index did not write" if damage == "a user's file" else "table.0: the suffixes at ranks") in result.stderr


def session_processes(session: int) -> list[int]:
    """Live processes of a session, from /proc (zombies, already ended, left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("shards", [None, 2])
def test_a_killed_build_leaves_no_worker_behind(tmp_path: Path, shards: int | None):
    big = tmp_path / "big"
    big.mkdir()
    with (big / "all.jsonl").open("wb") as out:
        for source in sorted(CORPUS.glob("*.jsonl.gz")):
            out.write(gzip.decompress(source.read_bytes()))
    extra = ["--shards", str(shards), "--workers", "2"] if shards else ["--workers", "2"]
    build = subprocess.Popen([AUDIT, "index", "build", str(big), "--out", str(tmp_path / "idx"), "--no-minhash", *extra],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while len(session_processes(build.pid)) < 3 and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert build.poll() is None, "the build ended before its workers could be seen"
        build.kill()
        build.wait(timeout=60)
        while session_processes(build.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert session_processes(build.pid) == []
    finally:
        if session_processes(build.pid):
            os.killpg(build.pid, signal.SIGKILL)
