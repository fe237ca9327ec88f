"""Fixtures built from real text: the package's demo corpus and ECLeKTic sample, and the
committed subsets in tests/fixtures (see tests/fixtures/SOURCES.md). Nothing outside the
repository is read, so a fresh clone passes on its own."""
from __future__ import annotations

import contextlib
import csv
import gzip
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import pytest
from hostile import pristine, sandbox  # noqa: F401 (the hostile suites' fixtures, shared by every test_robustness*.py)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The installed package's data (as audit.corpora.demo finds it), so the tests read what an install ships.
DEMO = Path(str(resources.files("audit").joinpath("data/demo")))
CORPUS = DEMO / "corpus"
ECLEKTIC_CSV = DEMO / "eclektic_sample.csv.gz"
BMLAMA = FIXTURES / "bmlama17"


def chromium_path() -> str:
    """The Chromium the browser tests drive: Debian's package, which scripts/test installs
    (Playwright's own browser download is not used). Missing, it fails the test, never skips it."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found is None:
        pytest.fail("Chromium is not installed: run the tests with scripts/test, which installs Debian's chromium (apt-get install chromium)")
    return found


def read_jsonl_gz(path: Path, limit: int | None = None) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return rows[:limit] if limit else rows


def strip_table(index: Path) -> None:
    """Make `index` one built before tables: no table files, and a manifest without them."""
    for name in ("doclangs.bin", "doclangs.json"):
        (index / name).unlink()
    manifest = json.loads((index / "audit-index.json").read_text(encoding="utf-8"))
    manifest["files"] = [f for f in manifest["files"] if not f["name"].startswith("doclangs.")]
    del manifest["extra"]["languages"]
    (index / "audit-index.json").write_text(json.dumps(manifest), encoding="utf-8")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path


def _sample_rows() -> tuple[list[str], list[dict[str, str]]]:
    with gzip.open(ECLEKTIC_CSV, "rt", encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def sample_ids() -> list[str]:
    """The ECLeKTic sample's question ids, in file order."""
    return list(dict.fromkeys(row["q_id"] for row in _sample_rows()[1]))


def sample_subset(path: Path, ids: list[str] | tuple[str, ...], langs: tuple[str, ...] | None = None) -> Path:
    """These questions of the ECLeKTic sample (in `langs` only, when given), as the CSV the
    loader reads: a small real benchmark for tests that run a model on every variant."""
    columns, rows = _sample_rows()
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(row for row in rows if row["q_id"] in ids and (langs is None or row["language"] in langs))
    return path


@pytest.fixture(scope="session")
def wiki_docs() -> dict[str, list[dict]]:
    """Real multilingual Wikipedia text in several scripts."""
    return {
        "en": read_jsonl_gz(CORPUS / "xquad-en.jsonl.gz", 120),
        "zh": read_jsonl_gz(CORPUS / "xquad-zh.jsonl.gz", 120),
        "hi": read_jsonl_gz(CORPUS / "xquad-hi.jsonl.gz", 120),
        "ja": read_jsonl_gz(CORPUS / "wiki-ja.jsonl.gz", 300),
        "ko": read_jsonl_gz(CORPUS / "pud-ko.jsonl.gz", 100),
        "he": read_jsonl_gz(CORPUS / "iahltwiki-he.jsonl.gz"),
    }


@pytest.fixture(scope="session")
def wiki_dir(tmp_path_factory, wiki_docs) -> Path:
    """The documents as one JSONL file per language, the way a user hands them to the indexer."""
    root = tmp_path_factory.mktemp("wiki")
    for lang, rows in wiki_docs.items():
        write_jsonl(root / f"{lang}.jsonl", rows)
    return root


@pytest.fixture(scope="session")
def wiki_index(tmp_path_factory, wiki_dir) -> Path:
    from audit.index.build import build_index

    out = tmp_path_factory.mktemp("indexes") / "wiki"
    build_index([wiki_dir], out)
    return out


@pytest.fixture(scope="session")
def planted_audit(tmp_path_factory, wiki_docs) -> dict[str, Path]:
    """The ECLeKTic sample audited against real Wikipedia text with two planted leaks: item
    39's French passage verbatim, and item 46's Japanese question and answer together."""
    from click.testing import CliRunner

    from audit.cli import main
    from audit.index.build import build_index
    from audit.readers import load_benchmark

    root = tmp_path_factory.mktemp("planted-audit")
    bench = root / "eclektic_sample.csv.gz"
    bench.write_bytes(ECLEKTIC_CSV.read_bytes())
    by_id = {item.item_id: item for item in load_benchmark(bench).items}
    docs = [row for rows in wiki_docs.values() for row in rows]
    docs.append({"id": "planted-fr", "text": by_id["39"].variants["fr"].context})
    docs.append({"id": "planted-ja", "text": by_id["46"].variants["ja"].question + " " + by_id["46"].variants["ja"].answer})
    write_jsonl(root / "docs.jsonl", docs)
    build_index([root / "docs.jsonl"], root / "index")
    audit = root / "sample.audit.jsonl"
    result = CliRunner().invoke(main, ["check", str(bench), "--corpus", str(root / "index"), "--out", str(audit)])
    assert result.exit_code == 0, result.output
    return {"root": root, "bench": bench, "index": root / "index", "audit": audit, "report": root / "sample.report"}


def pytest_terminal_summary(terminalreporter) -> None:
    """The robustness suite's tally, as the manual's reliability page reports it."""
    from hostile import TALLY

    if TALLY["cases"]:
        terminalreporter.write_line(
            f"robustness: {TALLY['cases']} bad inputs tried, {TALLY['clear_errors']} clear errors, {TALLY['handled']} handled right, "
            f"{TALLY['tracebacks']} tracebacks, {TALLY['files_lost_or_changed']} files lost or changed"
        )


def pytest_configure(config) -> None:
    """Token authentication for every Ray cluster the tests start or join, as `ray start` sets
    it up by default, with a token of the session's own (a fresh HOME has none in ~/.ray).  Set
    before any test imports Ray, which reads the mode once, when first imported: a test that
    imported it earlier (an unreachable `--executor ray://` refused in-process) left its client
    unable to join the cluster started later."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RayCluster:
    """A Ray head on 127.0.0.1 with two CPUs, in a temporary directory of its own: `client` is
    the Ray Client address `--executor ray://...` takes (a driver joining by `gcs` would look
    for the session in Ray's default directory), `gcs` the address more nodes would join."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.gcs_port, self.client_port = _free_port(), _free_port()
        self.gcs = f"127.0.0.1:{self.gcs_port}"
        self.client = f"ray://127.0.0.1:{self.client_port}"
        ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if ray is None:
            pytest.fail('Ray is not installed: pip install "corpus-audit[ray]"')
        # Ray's socket paths must stay short (a Unix socket path holds at most 107 bytes).
        self.temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        # The head's Ray Client proxy gives a client's server 30 s to come up by default, which a
        # loaded two-core CI machine has overrun (three connection attempts failed in a row).
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S="120")
        command = [
            ray, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={self.gcs_port}",
            f"--ray-client-server-port={self.client_port}", "--num-cpus=2", "--include-dashboard=false",
            "--disable-usage-stats", f"--temp-dir={self.temp}",
        ]
        self.log = open(root / "ray-head.log", "wb")  # noqa: SIM115 (closed in stop())
        # Started outside the checkout, so its workers import the installed package, not the source tree.
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True, cwd=self.temp)
        deadline = time.monotonic() + 90
        while not self._listening(self.client_port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the Ray head did not start: {(root / 'ray-head.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    @staticmethod
    def _listening(port: int) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    def worker_pids(self, name: str) -> list[int]:
        """This cluster's processes whose title names `name` (Ray titles a busy worker
        `ray::FUNCTION` and an actor `ray::CLASS`); another cluster's on the machine are left alone."""
        found = subprocess.run(["pgrep", "-f", f"ray::{name}"], capture_output=True, text=True).stdout.split()
        return [int(pid) for pid in found if self._descends(int(pid))]

    def _descends(self, pid: int) -> bool:
        while pid > 1:
            if pid == self.process.pid:
                return True
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return False
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return False

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            # `ray start --block` itself waits out SIGTERM; the cluster's processes have ended by then.
            self.process.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()
        # Ray's own logs stay with the test's files (the head's temporary directory goes).
        logs = self.temp / "session_latest" / "logs"
        if logs.is_dir():
            shutil.copytree(logs, self.root / "ray-logs", dirs_exist_ok=True, ignore_dangling_symlinks=True)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory) -> RayCluster:
    """One real Ray cluster for the session, started with `ray start --head` and stopped after."""
    cluster = RayCluster(tmp_path_factory.mktemp("ray"))
    yield cluster
    cluster.stop()


def summary_of(records: list[dict]) -> dict:
    """The manifest's summary of records as written (a test's edited copy), as `audit check`
    computes it from its typed records."""
    from audit.records import ExposureRecord
    from audit.run.summary import summarise

    return summarise([ExposureRecord.from_dict(record) for record in records]).to_dict()


def checked_records(*args, **kwargs) -> list[dict]:
    """`check_items`' records as the audit file writes them, for comparing field by field."""
    from audit.run.executors import check_items

    return [record.to_dict() for record in check_items(*args, **kwargs)]
