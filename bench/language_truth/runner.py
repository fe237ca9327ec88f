"""`audit` commands run as a user runs them, in their own process tree, measured: wall time,
CPU time (user + system of the whole tree) and peak memory (summed PSS, sampled every 50 ms)."""
from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass(frozen=True)
class Measured:
    """One command's cost and outcome; `output` is the tail of what it printed."""

    seconds: float
    cpu_seconds: float
    peak_pss_mib: float
    returncode: int
    output: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sample(process: psutil.Process, cpu: dict[tuple[int, float], float]) -> int:
    """The tree's summed PSS now; each member's CPU time so far goes into `cpu`."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_full_info().pss
            times = member.cpu_times()
            cpu[(member.pid, member.create_time())] = times.user + times.system
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(command: list[str], env: dict[str, str] | None = None) -> Measured:
    """Run `command` to its end; a failure is returned, not raised, since a refusal can be the
    right answer (a file whose language role cannot be known).  CPU time is the larger of what
    the finished tree reports (members reaped by their parents) and the members' last samples
    (members that were not)."""
    cpu_before, started = _children_cpu(), time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak, sampled = 0, {}
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, _sample(process, sampled))
        time.sleep(0.05)
    output = process.stdout.read().decode("utf-8", errors="replace")
    cpu = max(_children_cpu() - cpu_before, sum(sampled.values()))
    return Measured(
        seconds=round(time.perf_counter() - started, 2), cpu_seconds=round(cpu, 2),
        peak_pss_mib=round(peak / 2**20, 1), returncode=process.returncode, output=output[-2000:],
    )


def audit(*arguments: str) -> list[str]:
    """The installed tool (`-P`: a checkout in the working directory is not what is measured,
    and lacks the compiled extension an installed package has)."""
    return [sys.executable, "-P", "-m", "audit.cli", *arguments]


def environment(cache: Path) -> dict[str, str]:
    """This process's environment with a cache of the benchmark's own (the demo index is built there once)."""
    return {**os.environ, "AUDIT_CACHE_DIR": str(cache)}


def read_records(path: Path) -> list[dict[str, Any]]:
    """The exposure records of an audit file (the manifest and summaries left out)."""
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [row for row in rows if row.get("record") == "exposure"]


def check(bench: str, corpus: str, out: Path, env: dict[str, str], extra: tuple[str, ...] = (), workers: int = 2) -> tuple[list[dict[str, Any]], Measured]:
    """`audit check BENCH --corpus CORPUS` with no report; its records ([] when it refused) and cost."""
    command = audit("check", bench, "--corpus", corpus, "--out", str(out), "--no-report", "--workers", str(workers), *extra)
    run = measured(command, env)
    return (read_records(out) if run.returncode == 0 else []), run
