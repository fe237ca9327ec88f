"""Every writer stopped mid-run by SIGINT (Ctrl-C, to the whole process group), SIGTERM or
SIGKILL (to the command's process): it ends, with one line and the exit status 130/143 for the
first two; no process of the run is left; nothing that looks complete is left; no file of the
user's is changed.

The runs are real `audit` processes.  A `sitecustomize` module on their PYTHONPATH holds one
function of the run (in the command's process or in its pool workers, forked or spawned) until
the signal arrives, so the signal always lands mid-run, and tells the test where it is.  Every
process of a run carries a unique environment marker, so what is left of it can be found by
walking /proc, whoever its parent is now.
"""
from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile import TALLY, snapshot

from audit.outputs import MARKER, STAGING_TAG

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AUDIT = Path(sys.executable).with_name("audit")
MARK = "AUDIT_HYGIENE_RUN"

SITECUSTOMIZE = '''
import functools, importlib, os, time
if os.environ.get("AUDIT_HYGIENE_BLOCK"):
    for setting in filter(None, os.environ.get("AUDIT_HYGIENE_SET", "").split(",")):
        where, value = setting.split("=")
        module_name, name = where.split(":")
        setattr(importlib.import_module(module_name), name, int(value))
    module_name, name = os.environ["AUDIT_HYGIENE_BLOCK"].split(":")
    module = importlib.import_module(module_name)
    original = getattr(module, name)

    @functools.wraps(original)
    def held(*args, **kwargs):
        with open(os.environ["AUDIT_HYGIENE_READY"], "a") as ready:
            ready.write(f"{os.getpid()}\\n")
        for _ in range(600):
            time.sleep(0.1)
        return original(*args, **kwargs)

    setattr(module, name, held)
'''


@dataclass(frozen=True)
class Run:
    """A writer command, the function it is held in, and the outputs a stop may keep."""

    name: str
    args: tuple[str, ...]
    hold: str
    settings: str = ""
    kept: tuple[str, ...] = ()
    says: str = "nothing written"


RUNS = [
    Run("check", ("check", "bench.jsonl", "--corpus", "index", "--workers", "2", "--out", "new.audit.jsonl"), "audit.run.executors:_check_forked"),
    Run(
        "check-report", ("check", "bench.jsonl", "--corpus", "index", "--out", "new.audit.jsonl"), "audit.report.pages:write_pages",
        kept=("new.audit.jsonl",), says="the audit file new.audit.jsonl was written whole",
    ),
    Run("report", ("report", "--audit", "bench.audit.jsonl", "--out", "bench.report"), "audit.report.pages:write_pages"),
    Run("filter", ("filter", "bench.audit.jsonl", "--out", "clean.jsonl"), "audit.filter:atomic_write_bytes"),
    Run("index-build", ("index", "build", "docs", "--out", "fresh", "--workers", "2"), "audit.index.documents:parse_lines"),
    Run("index-build-shards", ("index", "build", "docs", "--out", "fresh", "--shards", "2", "--workers", "2"), "audit.index.sharded.worker:build_shard", says="shards finished"),
    Run("index-minhash", ("index", "minhash", "index"), "audit.neardup.build:_sketch_range", settings="audit.neardup.build:TASK_BYTES=4096"),
    Run("langlinks-build", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "links"), "audit.links.dump:_load"),
]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def run_processes(marker: str) -> list[int]:
    """Every live process (not a zombie) whose environment carries this run's marker."""
    found = []
    needle = f"{MARK}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and " Z " not in (entry / "stat").read_text().split(")", 1)[1][:3]:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def none_left(marker: str) -> list[int]:
    """The run's processes still alive after a generous bound (SIGKILL from a dying parent is
    delivered at once; the bound only keeps a failure from hanging the suite)."""
    deadline = time.monotonic() + 30
    while (left := run_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def start(root: Path, run: Run, tmp: Path) -> tuple[subprocess.Popen, str, Path]:
    hooks = tmp / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    ready = tmp / f"ready-{uuid.uuid4().hex}"
    marker = uuid.uuid4().hex
    env = {
        **os.environ, MARK: marker, "PYTHONPATH": str(hooks), "AUDIT_HYGIENE_BLOCK": run.hold, "AUDIT_HYGIENE_READY": str(ready),
        "AUDIT_HYGIENE_SET": run.settings, "AUDIT_CACHE_DIR": str(tmp / "cache"),
    }
    process = subprocess.Popen([str(AUDIT), *run.args], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            out, err = process.communicate()
            pytest.fail(f"{run.name}: never reached {run.hold} (exit {process.returncode})\n{out}\n{err}")
        time.sleep(0.05)
    return process, marker, ready


def stop(process: subprocess.Popen, signum: int) -> tuple[str, str]:
    """Ctrl-C reaches the whole process group, as a terminal sends it; `kill` the process."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    try:
        return process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"did not end within 60 s of {signal.Signals(signum).name}\n{out}\n{err}")


def visible(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """Files of the user's changed or lost, and new files a person would take for outputs."""
    changed = [name for name, digest in before.items() if after.get(name) != digest]
    shown = [name for name in set(after) - set(before) if not any(part.startswith(".") for part in name.split("/"))]
    return changed, sorted(shown)


def complete_leftovers(root: Path) -> list[str]:
    """Hidden directories left that hold a finished output (a marker and no staging tag)."""
    return [p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(".") and (p / MARKER).exists() and not (p / STAGING_TAG).exists()]


@pytest.fixture
def folder(sandbox: Path) -> Path:
    shutil.copy(FIXTURES / "langlinks" / "langlinks_excerpts.sql", sandbox / "enwiki-20230701-langlinks.sql")
    return sandbox


def stopped(run: Run, signum: int, root: Path, tmp: Path) -> None:
    """One run stopped by one signal, checked and counted in the hostile tally."""
    before = snapshot(root)
    process, marker, _ = start(root, run, tmp)
    _, err = stop(process, signum)
    left = none_left(marker)
    changed, shown = visible(before, snapshot(root))
    shown = [name for name in shown if name not in run.kept]
    TALLY["cases"] += 1
    TALLY["files_lost_or_changed"] += len(changed)
    TALLY["tracebacks"] += "Traceback" in err
    assert "Traceback" not in err, err
    assert not left, f"{run.name}: processes {left} of the run outlived it"
    assert not changed, f"{run.name}: changed or removed {changed}"
    assert not shown, f"{run.name}: {shown} left where outputs go"
    assert not complete_leftovers(root), f"{run.name}: a hidden finished output was left: {complete_leftovers(root)}"
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        lines = [line for line in err.splitlines() if line.startswith("interrupted")]
        assert process.returncode == 128 + signum, err
        assert lines == [err.strip().splitlines()[-1]] and len(lines) == 1, err
        assert lines[0].startswith(f"interrupted by {signal.Signals(signum).name}: ") and run.says in lines[0], err
    for name in run.kept:
        assert name not in snapshot(root) or (root / name).stat().st_size > 0
    TALLY["clear_errors" if signum != signal.SIGKILL else "handled"] += 1


@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_a_writer_stopped_mid_run_ends_cleanly(run: Run, signum: int, folder: Path, tmp_path: Path):
    stopped(run, signum, folder, tmp_path)


@pytest.mark.parametrize("attempt", range(20))
def test_ctrl_c_on_check_never_hangs(attempt: int, folder: Path, tmp_path: Path):
    """Ctrl-C reaches the pool's workers too; they leave it to the parent, which ends them."""
    stopped(RUNS[0], signal.SIGINT, folder, tmp_path)


def test_a_killed_sharded_build_leaves_no_worker_and_no_resource_tracker(folder: Path, tmp_path: Path):
    """The spawned shard worker dies with the build, and the resource tracker, once the last
    process holding its pipe is gone, exits by itself."""
    run = RUNS[5]
    process, marker, ready = start(folder, run, tmp_path)
    holders = {int(pid) for pid in ready.read_text().split()}
    assert process.pid not in holders, "the shard is held in a spawned worker, not in the command"
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    assert not none_left(marker)
    TALLY["cases"] += 1
    TALLY["handled"] += 1


# A full disk: a real small file system (tmpfs, where mounting is permitted), filled up to the
# last few KiB; elsewhere a file size limit (RLIMIT_FSIZE), which fails writes with EFBIG.
ROOM = 16 * 1024


@dataclass(frozen=True)
class Full:
    """A writer whose output goes to the full disk ({disk} in `args`)."""

    name: str
    args: tuple[str, ...]
    output: str
    kept: tuple[str, ...] = ()
    says: str = ""
    copy: str = ""
    # Under a file size limit the audit file itself is too big, and SQLite reports EFBIG as an
    # I/O error: these are told apart only on a file system that is really full.
    full_only: bool = False


FULL = [
    Full("audit-file", ("check", "bench.jsonl", "--corpus", "index", "--out", "{disk}/a.audit.jsonl", "--no-report"), "a.audit.jsonl"),
    Full("report-after-audit", ("check", "bench.jsonl", "--corpus", "index", "--out", "a2.audit.jsonl", "--report-dir", "{disk}/r"), "r", kept=("a2.audit.jsonl",), says="the audit file a2.audit.jsonl was written whole", full_only=True),
    Full("report", ("report", "--audit", "bench.audit.jsonl", "--out", "{disk}/r"), "r"),
    Full("filter", ("filter", "bench.audit.jsonl", "--out", "{disk}/clean.jsonl"), "clean.jsonl"),
    Full("index-build", ("index", "build", "docs", "--out", "{disk}/idx"), "idx"),
    Full("index-minhash", ("index", "minhash", "{disk}/index"), "index", copy="index"),
    Full("langlinks-build", ("langlinks", "build", "enwiki-20230701-langlinks.sql", "--out", "{disk}/links"), "links", full_only=True),
]


def _fill(disk: Path) -> None:
    """Take all the room of the file system but ROOM bytes."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as error:
            assert error.errno == errno.ENOSPC
    os.truncate(filler, max(0, filler.stat().st_size - ROOM))


@pytest.fixture
def disk(tmp_path: Path):
    """A 4 MiB file system of its own when this process may mount one, else None."""
    place = tmp_path / "disk"
    place.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(place)], capture_output=True).returncode == 0
    yield place, mounted
    if mounted:
        subprocess.run(["umount", str(place)], check=True)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (ROOM, ROOM))


@pytest.mark.parametrize("case", FULL, ids=[c.name for c in FULL])
def test_a_full_disk_is_named_and_leaves_nothing_half_written(case: Full, folder: Path, disk: tuple[Path, bool]):
    place, mounted = disk
    if case.copy:
        shutil.copytree(folder / case.copy, place / case.copy)
    if mounted:
        _fill(place)
    before, there = snapshot(folder), snapshot(place)
    args = [arg.replace("{disk}", str(place)) for arg in case.args]
    done = subprocess.run([str(AUDIT), *args], cwd=folder, capture_output=True, text=True, timeout=300, preexec_fn=None if mounted else _limited)
    changed, shown = visible(before, snapshot(folder))
    TALLY["cases"] += 1
    TALLY["files_lost_or_changed"] += len(changed)
    TALLY["tracebacks"] += "Traceback" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: "), done.stderr
    if mounted or not case.full_only:
        assert "no space left on" in line and f"while writing {place / case.output}" in line, done.stderr
    if mounted:
        assert "tmpfs" in line and case.says in line, line
    assert not changed and shown == (sorted(case.kept) if mounted else []), (changed, shown)
    assert snapshot(place) == there, "nothing half-written on the full disk, and nothing there changed"
    assert {p.name for p in place.iterdir()} == {Path(name).parts[0] for name in there}, "no hidden staging left"
    TALLY["clear_errors"] += 1


def _steps(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.endswith(" ...") or " done in " in line or "built the demo index" in line]


def test_a_first_run_in_a_log_says_what_it_builds_step_by_step(folder: Path, tmp_path: Path):
    """Without a terminal (stderr is a pipe here) the demo index build, the check and the
    report each say when they start and end: nothing runs silent."""
    done = subprocess.run(
        [str(AUDIT), "check", "bench.jsonl", "--corpus", "demo", "--out", "d.audit.jsonl", "--report-dir", "d.report"],
        cwd=folder, capture_output=True, text=True, timeout=600, env={**os.environ, "AUDIT_CACHE_DIR": str(tmp_path / "fresh-cache")},
    )
    assert done.returncode == 0, done.stderr
    steps = [line.split(": done in")[0] if ": done in" in line else line.split(" in ")[0] if line.startswith("audit: built") else line for line in _steps(done.stderr)]
    assert steps[0].startswith("audit: building the demo index at "), done.stderr
    assert steps[1:] == [
        "reading documents ...", "reading documents",
        "sorting suffixes ...", "sorting suffixes, shard 1 of 1",
        steps[5], "audit: built the demo index",
        "checking against demo ...", "checking against demo",
        "writing the report d.report ...", "writing the report d.report",
    ], done.stderr
    assert steps[5].startswith("audit: adding the demo index's near-duplicate index")


def test_the_near_duplicate_build_reports_its_own_steps(folder: Path):
    done = subprocess.run([str(AUDIT), "index", "minhash", "index"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [line.split(": done in")[0] for line in _steps(done.stderr)] == [
        "sketching windows (documents) ...", "sketching windows (documents)", "sorting LSH bands ...", "sorting LSH bands",
    ], done.stderr


POOL_LEFT = """
import multiprocessing, sys, time
from audit.children import WorkerPool

def result(_):
    return b"x" * (4 << 20)

if __name__ == "__main__":
    for attempt in range(40):
        try:
            with WorkerPool(max_workers=2, mp_context=multiprocessing.get_context("fork")) as pool:
                futures = [pool.submit(result, n) for n in range(8)]
                time.sleep(0.005 * (attempt % 6))
                raise ValueError("a failed read")
        except ValueError:
            print(attempt, flush=True)
"""


def test_a_pool_left_while_its_workers_send_results_ends(tmp_path: Path):
    """A pool left by an error kills its workers, some of them mid-way through writing a result
    to the pipe; leaving it must still end (it once waited forever for the rest of a message)."""
    script = tmp_path / "pool_left.py"
    script.write_text(POOL_LEFT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.split() == [str(n) for n in range(40)], done.stderr
    assert "Traceback" not in done.stderr
