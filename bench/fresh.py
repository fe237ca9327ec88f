"""One benchmark step in a fresh process, so no step's memory or imports colour another's.

A script that uses it answers `--child STEP ARG...` by running that step and printing
`measure(...)`'s figures as JSON; the parent starts it with `in_fresh_process`.  Memory is how
far the process's peak RSS (`VmHWM`) rose during the step: unlike `ru_maxrss`, which a process
started by a large parent inherits, `VmHWM` starts afresh with each program.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def status_mib(field: str) -> float:
    """A `/proc/self/status` memory figure (`VmRSS`, `VmHWM`) in MiB."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(f"{field}:"))
    return int(line.split()[1]) / 1024


def measure(step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The step's own figures, with its seconds and the peak RSS it added, in MiB."""
    before = status_mib("VmRSS")
    started = time.perf_counter()
    figures = step()
    return {**figures, "seconds": round(time.perf_counter() - started, 2), "peak_rss_added_mib": round(status_mib("VmHWM") - before)}


def in_fresh_process(script: str, step: str, *arguments: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, script, "--child", step, *arguments], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])
