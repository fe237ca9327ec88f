"""Every script and notebook in examples/ runs, from a directory of its own with a fresh cache,
and shows what it says it shows: each declares, in its header, `expects: PATTERN` lines (regular
expressions its output must match) and `writes: PATH` lines (files it must leave, not empty, in
its directory). An example that declares no `expects:` line fails: an exit status alone proves
little."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from manual import README, ROOT
from nbclient import NotebookClient

EXAMPLES = ROOT / "examples"
KINDS = (".py", ".sh", ".ipynb")
FOUND = sorted(path for path in EXAMPLES.iterdir() if path.suffix in KINDS)
TIMEOUT = 1800


def source(path: Path) -> str:
    """An example's text: a script's file, or a notebook's cells one after the other."""
    if path.suffix == ".ipynb":
        return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    return path.read_text(encoding="utf-8")


def declared(path: Path, key: str) -> list[str]:
    """The values of an example's `key:` header lines, in a comment or a docstring."""
    return re.findall(rf"^(?:#\s*)?{key}:\s*(.+?)\s*$", source(path), flags=re.MULTILINE)


def environment(cache: Path) -> dict[str, str]:
    """The test's environment, with this interpreter's `audit` and `python` first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "AUDIT_CACHE_DIR": str(cache), "COLUMNS": "100", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run_script(path: Path, folder: Path, env: dict[str, str]) -> str:
    """Runs a script in `folder`; returns what it printed, on stdout and stderr as a user sees it."""
    command = ["bash", str(path)] if path.suffix == ".sh" else [sys.executable, str(path)]
    result = subprocess.run(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"{path.name} exited {result.returncode}\n{result.stdout}"
    return result.stdout


def run_notebook(path: Path, folder: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs every cell in a real Python kernel started in `folder`; returns what the cells
    printed and the plain-text form of what they returned."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    printed = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                printed.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                printed.append(output.data.get("text/plain", ""))
    return "\n".join(printed)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One fresh cache for all the examples, so the demo index is built once."""
    return tmp_path_factory.mktemp("cache")


def test_the_examples_folder_holds_the_tour():
    assert {path.name for path in FOUND} >= {"check_sample.sh", "filter_sample.sh", "report_sample.sh", "index_text_folder.sh", "serve_job.py"}
    linked = set(re.findall(r"\]\((examples/[^)]+)\)", README))
    assert linked and all((ROOT / link).exists() for link in linked), linked


@pytest.mark.parametrize("path", FOUND, ids=[path.name for path in FOUND])
def test_an_example_runs_and_shows_what_it_declares(path: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    expects, writes = declared(path, "expects"), declared(path, "writes")
    assert expects, f"{path.name} declares no `expects:` line: say what its output shows"
    env = environment(cache)
    output = run_notebook(path, tmp_path, env, monkeypatch) if path.suffix == ".ipynb" else run_script(path, tmp_path, env)
    for pattern in expects:
        assert re.search(pattern, output, flags=re.MULTILINE), f"{path.name}: no line matches {pattern!r} in\n{output}"
    for name in writes:
        written = tmp_path / name
        assert written.is_file() and written.stat().st_size > 0, f"{path.name} did not write {name}"
        if written.suffix in (".json", ".jsonl"):
            lines = written.read_text(encoding="utf-8").splitlines() if written.suffix == ".jsonl" else [written.read_text(encoding="utf-8")]
            assert all(json.loads(line) is not None for line in lines if line), name


def test_a_notebook_is_run_in_its_folder_and_its_outputs_are_matched(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The harness the example notebooks go through, on a notebook made here: its cells run in
    a real kernel started in the example's folder, with the fresh cache, and what they print and
    return is what `expects:` lines are matched against."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("expects: ^cache \\S+cache\nexpects: ^'seen'$\nwrites: out.txt"),
        nbformat.v4.new_code_cell("import os, pathlib\nprint('cache', os.environ['AUDIT_CACHE_DIR'])\npathlib.Path('out.txt').write_text('x')"),
        nbformat.v4.new_code_cell("'seen'"),
    ]
    path = tmp_path / "made.ipynb"
    nbformat.write(notebook, path)
    folder = tmp_path / "run"
    folder.mkdir()
    output = run_notebook(path, folder, environment(cache), monkeypatch)
    assert declared(path, "expects") == ["^cache \\S+cache", "^'seen'$"] and declared(path, "writes") == ["out.txt"]
    assert all(re.search(pattern, output, flags=re.MULTILINE) for pattern in declared(path, "expects")), output
    assert (folder / "out.txt").read_text() == "x"
