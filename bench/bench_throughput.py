"""Throughput benchmark: a default `audit check` (default signals, with and without the report)
of whole benchmarks, run by this working tree and by a baseline commit interleaved in one run; and `audit report` and
`audit filter` of one audit file by both.

    python bench/bench_throughput.py                  # all six workloads; over an hour on 2 cores
    python bench/bench_throughput.py --skip-big       # the sample and the 4,608-variant one

Workloads: the bundled ECLeKTic sample and an ECLeKTic-sized benchmark (384 items x 12
languages, long passages; built as bench_report.py builds it) against `demo`, BMLAMA-17
(115,464 variants) against `demo`, the ECLeKTic-sized one against a ~100 MiB multilingual
index built from ../shared/data/corpus, and BMLAMA-17 three times over (`bmlama17x3`, 346,392
variants, with and without the report, and `audit report` of its audit: does memory grow with the benchmark?), and
ECLeKTic's long CSV thirty times over (`eclektic-long-x30`, 14,040 variants from the 468-row subset in ../shared: a row per
language, so an item is whole only at the end of its copy).  The baseline is checked out with `git worktree add`
under bench/work/ and its extension built in place; each code runs with PYTHONPATH pointing at
its own tree and its own cache.  Per run: CPU (user + sys of the whole process tree, from
RUSAGE_CHILDREN), wall time, variants/s and peak summed PSS of the tree (bench_core.py's
sampling).  The two codes' audit files must hold the same records (compared parsed, line by
line; whether the lines are also the same bytes is shown beside) and the same manifest apart
from `created`/`command`, and the reports of one audit file rendered by both must be
byte-identical.  infini-gram's indexer is timed on the demo corpus in the same run.  With py-spy (`--py-spy`, a separate venv), one more
run per code of the ECLeKTic-sized benchmark is sampled over all its processes and its CPU
attributed to phases.  Writes bench/work/throughput.json; prints Markdown tables.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import filecmp
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_core
from bench_core import SAMPLE, assemble_big_corpus, demo_corpus, tree_memory
from bench_report import synthetic_benchmark
from phases import PHASES, phase_shares

ROOT = Path(__file__).resolve().parents[1]



@dataclass
class Code:
    """One version of the tool: its tree (on PYTHONPATH) and its own cache."""

    label: str
    tree: Path
    commit: str
    cache: Path

    def env(self) -> dict[str, str]:
        # One hash seed for every run: before 2026-11-26 a report listed rules that fired equally
        # often in the order of a set of their names, so a baseline that old compares byte for
        # byte only within one seed (and its ties may still come out in another order).
        return {**os.environ, "PYTHONPATH": str(self.tree), "AUDIT_CACHE_DIR": str(self.cache), "PYTHONHASHSEED": "0"}


@dataclass
class Workload:
    name: str
    bench: Path
    variants: int
    corpus: str
    options: list[str] = field(default_factory=list)
    compare_reports: bool = False
    compare_filters: bool = False
    with_report: bool = True


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def build_extension(tree: Path) -> None:
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tree, check=True, capture_output=True)


def baseline_tree(rev: str, work: Path) -> Path:
    """A detached worktree of `rev` under `work`, its extension built in place."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = work / f"baseline-{commit[:12]}"
    if not (tree / ".git").exists():
        git("worktree", "add", "--detach", str(tree), commit)
    build_extension(tree)
    return tree


def two_codes(baseline: str, work: Path) -> list[Code]:
    """The baseline (a worktree under `work`) and this tree, each with its extension built,
    and each checked to import its own tree."""
    work.mkdir(parents=True, exist_ok=True)
    base_tree = baseline_tree(baseline, work)
    build_extension(ROOT)
    head = git("rev-parse", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")
    codes = [Code("baseline", base_tree, git("rev-parse", "HEAD", cwd=base_tree), work / "cache-baseline"), Code("new", ROOT, head, work / "cache-new")]
    for code in codes:
        imported = subprocess.run([sys.executable, "-c", "import audit; print(audit.__file__)"], env=code.env(), cwd=code.tree, capture_output=True, text=True, check=True).stdout.strip()
        if not Path(imported).is_relative_to(code.tree):
            raise SystemExit(f"the {code.label} code imports {imported}, not its tree {code.tree}")
    return codes


def measured(command: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> dict:
    """Wall time, CPU of the whole process tree (reaped children's rusage) and peak PSS.  A
    code's run starts in its own tree: `python -m` puts the current directory before
    PYTHONPATH, so a run started here would import this tree whichever code it stood for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log, "wb") as output:
        process = psutil.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = 0
        while process.poll() is None:
            with contextlib.suppress(psutil.Error):
                peak = max(peak, tree_memory(process))
            time.sleep(0.1)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{log.read_text(errors='replace')[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(seconds, 2), "cpu_s": round(cpu, 2), "peak_pss_bytes": peak}


def check_command(workload: Workload, out: Path, report: bool, workers: int) -> list[str]:
    command = [sys.executable, "-m", "audit.cli", "check", str(workload.bench), "--corpus", workload.corpus, "--out", str(out), "--workers", str(workers)]
    return command + workload.options + (["--report-dir", str(out.with_suffix(".report"))] if report else ["--no-report"])


# The steps a check's output times: the check itself (per corpus) and the report after it.
STEP = re.compile(rb"^(checking against .*|writing the report .*): done in ([0-9.]+) s", re.MULTILINE)


def steps(log: Path) -> dict[str, float]:
    """Seconds of the check and of the report, as the run's own output says them: the check's
    share of a run with the report, which the run's wall time alone does not show."""
    found: dict[str, float] = {}
    for name, seconds in STEP.findall(log.read_bytes()):
        key = "report_s" if name.startswith(b"writing") else "check_s"
        found[key] = round(found.get(key, 0.0) + float(seconds), 2)
    return found


def run_check(code: Code, workload: Workload, report: bool, workers: int, work: Path) -> dict:
    out = work / "runs" / f"{workload.name}.{code.label}.{'report' if report else 'plain'}.audit.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    # The previous repeat's outputs are removed, and the disks synced, before the clock starts:
    # a run replacing them paid for the removal, and a run after others for their writing back.
    out.unlink(missing_ok=True)
    shutil.rmtree(out.with_suffix(".report"), ignore_errors=True)
    os.sync()
    result = measured(check_command(workload, out, report, workers), code.env(), out.with_suffix(".log"), code.tree)
    result |= steps(out.with_suffix(".log"))
    result["cpu_ms_per_variant"] = round(1000 * result["cpu_s"] / workload.variants, 2)
    result["variants_per_s"] = round(workload.variants / result["wall_s"], 1)
    print(f"  {workload.name} {code.label} {'report' if report else 'no report'}: {json.dumps(result)}", file=sys.stderr)
    return result | {"audit": str(out)}


def normalized_manifest(line: bytes) -> dict:
    """The manifest without what differs between runs (and the records' digest, which
    `same_audits` replaces by comparing the records themselves)."""
    manifest = json.loads(line)
    for key in ("created", "command", "records_sha256"):
        manifest.pop(key, None)
    for key in ("path", "absolute_path"):
        manifest.get("benchmark", {}).pop(key, None)
    for corpus in manifest.get("corpora", []):
        corpus.pop("location", None)
    return manifest


def same_audits(first: Path, second: Path) -> dict:
    """Whether two audit files hold the same records, parsed line by line (`records`), and the
    same record lines byte for byte (`bytes`: false where one code writes compact lines and the
    other spaced); and which manifest keys differ apart from `created`/`command` (`manifest`:
    a code that knows more signals lists more `signal_runs`), reported beside the records."""
    with open(first, "rb") as a, open(second, "rb") as b:
        one, other = normalized_manifest(a.readline()), normalized_manifest(b.readline())
        same_records = same_bytes = True
        for line_a, line_b in itertools.zip_longest(a, b):
            if line_a != line_b:
                same_bytes = False
                if line_a is None or line_b is None or orjson.loads(line_a) != orjson.loads(line_b):
                    same_records = False
                    break
    return {"records": same_records, "bytes": same_bytes, "manifest": sorted(k for k in one.keys() | other.keys() if one.get(k) != other.get(k))}


def same_directory(first: Path, second: Path) -> bool:
    """Every file of two directories byte for byte, and the same set of files."""
    names = {p.relative_to(first) for p in first.rglob("*") if p.is_file()}
    if names != {p.relative_to(second) for p in second.rglob("*") if p.is_file()}:
        return False
    return all(filecmp.cmp(first / name, second / name, shallow=False) for name in names)


def same_reports(codes: list[Code], audit: Path, work: Path) -> dict:
    """The one audit file rendered by `audit report` of both codes: identical directories?
    With each render's time, the report alone.  Each code renders twice, in the order A B B A,
    and its faster render is the one shown; the disks are synced before each render, and the
    second renders are removed only after the last.  A render right after the checks paid for
    their writing back, and one right after half a gigabyte of pages was removed paid for
    that: the same code took 26.7 s in the baseline's turns and 22.2 s in the new code's, and
    22.9 and 23.7 s with nothing run before."""
    outs: dict[str, Path] = {}
    timed: dict[str, dict] = {}
    for turn, code in enumerate([*codes, *reversed(codes)]):
        out = work / "runs" / f"{audit.name}.{code.label}.rendered{turn}"
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        run = measured([sys.executable, "-m", "audit.cli", "report", "--audit", str(audit), "--out", str(out)], code.env(), out.with_suffix(".log"), code.tree)
        if code.label not in timed or run["wall_s"] < timed[code.label]["wall_s"]:
            timed[code.label] = run
        outs.setdefault(code.label, out)
    identical = same_directory(*outs.values())
    for turn, code in enumerate([*codes, *reversed(codes)]):
        if turn >= len(codes):
            shutil.rmtree(work / "runs" / f"{audit.name}.{code.label}.rendered{turn}")
    return {"identical": identical, "render": timed}


def same_filters(codes: list[Code], audit: Path, work: Path) -> dict:
    """The one audit file filtered by `audit filter` of both codes: the same filtered benchmark
    and removal manifest (apart from `created` and `output`)?  With each filter's time."""
    outs, timed = [], {}
    for code in codes:
        out = work / "runs" / f"{audit.name}.{code.label}.filtered"
        subprocess.run(["rm", "-rf", str(out), f"{out}.manifest.json"], check=True)
        timed[code.label] = measured([sys.executable, "-m", "audit.cli", "filter", str(audit), "--out", str(out)], code.env(), out.with_suffix(".log"), code.tree)
        outs.append(out)
    manifests = [{k: v for k, v in json.loads(Path(f"{out}.manifest.json").read_text()).items() if k not in ("created", "output")} for out in outs]
    same = same_directory(*outs) if outs[0].is_dir() else filecmp.cmp(*outs, shallow=False)
    return {"identical": same and manifests[0] == manifests[1], "filter": timed}


def workloads(work: Path, shared: Path, skip_big: bool, big_registry: Path) -> list[Workload]:
    eclektic = work / "eclektic384.jsonl"
    variants = len(synthetic_benchmark(eclektic))
    chosen = [
        Workload("sample", SAMPLE, 39 * 12, "demo", compare_reports=True),
        Workload("eclektic-4608", eclektic, variants, "demo", compare_reports=True),
    ]
    if not skip_big:
        chosen.append(Workload("bmlama17", shared / "data" / "bench" / "bmlama" / "BMLAMA17", 6792 * 17, "demo", ["--format", "bmlama"], True, True))
        chosen.append(Workload("eclektic-4608-100MiB", eclektic, variants, "shared-100MB", ["--registry", str(big_registry)]))
        tripled = repeated_bmlama(shared / "data" / "bench" / "bmlama" / "BMLAMA17", work / "BMLAMA17x3", 3)
        chosen.append(Workload("bmlama17x3", tripled, 3 * 6792 * 17, "demo", ["--format", "bmlama"], compare_reports=True))
        long_csv = repeated_eclektic(shared / "data" / "bench" / "eclektic" / "eclektic_long_subset.csv", work / "eclektic_long_x30.csv", 30)
        chosen.append(Workload("eclektic-long-x30", long_csv, 30 * 39 * 12, "demo", compare_reports=True))
    return chosen


def repeated_eclektic(source: Path, target: Path, times: int) -> Path:
    """ECLeKTic's long CSV with its rows `times` over, each copy's `q_id`s suffixed with its
    number: items whose rows lie a copy apart, so nothing is whole before the copy ends."""
    with open(source, encoding="utf-8-sig", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    at = header.index("q_id")
    with open(target, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        for copy in range(times):
            writer.writerows([*row[:at], f"{row[at]}-{copy}", *row[at + 1 :]] for row in rows)
    return target


def repeated_bmlama(source: Path, target: Path, times: int, skip: tuple[str, ...] = ()) -> Path:
    """BMLAMA-17 with each language's rows `times` over (item ids are row numbers, so every
    copy is an item of its own): the same work per variant on a benchmark `times` the size,
    to see whether a run's memory grows with the benchmark.  The files named in `skip` are
    left out."""
    target.mkdir(parents=True, exist_ok=True)
    for table in sorted(t for t in source.glob("*.tsv") if t.name not in skip):
        header, *rows = table.read_text(encoding="utf-8").splitlines(keepends=True)
        (target / table.name).write_text(header + "".join(rows) * times, encoding="utf-8")
    return target


def big_index(work: Path, code: Code) -> Path:
    """The ~100 MiB multilingual index (the build adds its near-duplicate index), built once by the
    baseline, and a registry naming it `shared-100MB`."""
    index = work / "index-100MiB"
    if not (index / "audit-index.json").exists():
        source = assemble_big_corpus(work / "src-big")
        cli = [sys.executable, "-m", "audit.cli", "index"]
        subprocess.run([*cli, "build", str(source), "--out", str(index)], env=code.env(), cwd=ROOT, check=True, capture_output=True)
    registry = work / "corpora-100MiB.toml"
    registry.write_text(f'[corpora.shared-100MB]\nbackend = "local"\npath = "{index}"\n', encoding="utf-8")
    return registry


def infinigram_index(work: Path) -> dict:
    """infini-gram's own indexer on the 23 MiB demo corpus, as bench_core.py runs it."""
    source, out = demo_corpus(work / "src-demo"), work / "demo-infinigram"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    command = [sys.executable, "-m", "infini_gram.indexing", "--data_dir", str(source), "--save_dir", str(out), "--token_dtype", "u8",
               "--add_metadata", "--cpus", str(os.cpu_count()), "--mem", "16", "--ulimit", str(hard)]  # fmt: skip
    return measured(command, dict(os.environ), work / "infinigram.log")


def profiled(code: Code, workload: Workload, workers: int, work: Path, py_spy: Path) -> dict:
    out = work / "runs" / f"{workload.name}.{code.label}.profiled.audit.jsonl"
    raw = out.with_suffix(".pyspy.txt")
    command = [str(py_spy), "record", "--subprocesses", "--nonblocking", "-r", "100", "-f", "raw", "-o", str(raw), "--",
               *check_command(workload, out, True, workers)]  # fmt: skip
    measured(command, code.env(), out.with_suffix(".log"), code.tree)
    return phase_shares(raw)


def ratio(new: float, old: float) -> float | None:
    return round(new / old, 2) if old else None


def summary(runs: list[dict]) -> dict:
    """The median run of several (by CPU), peak memory the highest."""
    ordered = sorted(runs, key=lambda r: r["cpu_s"])
    middle = ordered[len(ordered) // 2]
    return middle | {"peak_pss_bytes": max(r["peak_pss_bytes"] for r in runs), "runs": len(runs)}


def measure_all(codes: list[Code], chosen: list[Workload], args: argparse.Namespace) -> list[dict]:
    """Every workload, with and without the report, the codes interleaved run by run, the
    baseline first in odd repeats and second in even ones (on a shared machine the second run
    of a pair was often the slower, whichever code it was)."""
    rows = []
    for workload in chosen:
        print(f"{workload.name} ({workload.variants:,} variants) ...", file=sys.stderr)
        for report in (False, True) if workload.with_report else (False,):
            runs: dict[str, list[dict]] = {code.label: [] for code in codes}
            sequence = []
            for repeat in range(args.repeat):
                for code in codes if repeat % 2 == 0 else codes[::-1]:
                    runs[code.label].append(run_check(code, workload, report, args.workers, args.work))
                    sequence.append({"code": code.label} | {k: runs[code.label][-1][k] for k in ("wall_s", "cpu_s", "check_s", "report_s") if k in runs[code.label][-1]})
            row = {"workload": workload.name, "variants": workload.variants, "report": report, "sequence": sequence} | {label: summary(r) for label, r in runs.items()}
            base, new = row[codes[0].label], row[codes[1].label]
            row["ratio"] = {key: ratio(new[key], base[key]) for key in ("cpu_s", "wall_s", "peak_pss_bytes")}
            if report or not workload.with_report:
                row["audits"] = same_audits(Path(base["audit"]), Path(new["audit"]))
            if report:
                row["reports"] = same_reports(codes, Path(base["audit"]), args.work) if workload.compare_reports else None
                row["filters"] = same_filters(codes, Path(base["audit"]), args.work) if workload.compare_filters else None
            rows.append(row)
            (args.work / "throughput.partial.json").write_text(json.dumps(rows, indent=2))
    return rows


def audits(row: dict) -> str:
    """The audit comparison's cell: records equal, in brackets whether the bytes were, and the
    manifest keys that differ, if any."""
    same = row.get("audits")
    if not same:
        return ""
    differing = same.get("manifest", [])
    return f"{same['records']} ({same['bytes']})" + (f"; manifest differs in {', '.join(differing)}" if differing else "")


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def sequences(rows: list[dict]) -> list[str]:
    """Each run with the report in the order run: the wall time, and the check's and the
    report's seconds, since the machine's speed drifts from run to run."""
    lines = []
    for row in rows:
        if row["report"] and row.get("sequence"):
            shown = ", ".join(f"{run['code']} {run.get('check_s', '?')} + {run.get('report_s', '?')} ({run['wall_s']})" for run in row["sequence"])
            lines += ["", f"{row['workload']} with the report, each run in order, check s + report s (wall s): {shown}."]
    return lines


def table(results: dict) -> str:
    base, new = results["codes"]
    lines = [
        "| workload | report | code | CPU ms/variant | CPU s | wall s | variants/s | peak PSS | new/base CPU | new/base wall | new/base memory | audit records equal (bytes) | reports identical |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        for code in (base, new):
            r = row[code["label"]]
            tail = (f"| {row['ratio']['cpu_s']} | {row['ratio']['wall_s']} | {row['ratio']['peak_pss_bytes']} | {audits(row)} "
                    f"| {row['reports']['identical'] if row.get('reports') else ''} |") if code is new else "| | | | | |"  # fmt: skip
            lines.append(
                f"| {row['workload']} ({row['variants']:,}) | {'yes' if row['report'] else 'no'} | {code['label']} `{code['commit'][:7]}` "
                f"| {r['cpu_ms_per_variant']} | {r['cpu_s']} | {r['wall_s']} | {r['variants_per_s']:,} | {mib(r['peak_pss_bytes'])} {tail}"
            )
    for key, command, timing in (("reports", "audit report", "render"), ("filters", "audit filter", "filter")):
        done = [row for row in results["rows"] if row.get(key)]
        if done:
            lines += ["", f"| `{command}` of one audit file | " + " | ".join(f"{c['label']} wall / CPU / peak" for c in results["codes"]) + " | identical |", "|---|---|---|---|"]
            for row in done:
                runs = [row[key][timing][c["label"]] for c in results["codes"]]
                lines.append(f"| {row['workload']} | " + " | ".join(f"{r['wall_s']} s / {r['cpu_s']} s / {mib(r['peak_pss_bytes'])}" for r in runs) + f" | {row[key]['identical']} |")
    lines += sequences(results["rows"])
    ig = results["infinigram_demo_index"]
    lines += ["", f"infini-gram's indexer on the 23 MiB demo corpus: {ig['wall_s']} s wall, {ig['cpu_s']} s CPU, peak {mib(ig['peak_pss_bytes'])}."]
    if results.get("phases"):
        lines += ["", "| phase | " + " | ".join(f"{c['label']} `{c['commit'][:7]}`" for c in results["codes"]) + " |", "|---|---|---|"]
        for phase, _ in PHASES:
            lines.append(f"| {phase} | " + " | ".join(f"{100 * results['phases'][c['label']][phase]:.0f}%" for c in results["codes"]) + " |")
        for code in results["codes"]:
            places = results["phases"][code["label"]]["places"]
            lines += ["", f"Most sampled files ({code['label']}): " + ", ".join(f"`{place}` {100 * share:.0f}%" for place, share in places.items())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="ca305c2", help="the commit the working tree is compared with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "work")
    parser.add_argument("--skip-big", action="store_true", help="skip BMLAMA-17 and the 100 MiB index")
    parser.add_argument("--repeat", type=int, default=1, help="runs per code and variant; the median by CPU is shown")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated workload names to run (default: all)")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared", help="the shared data: data/corpus and data/bench/bmlama")
    parser.add_argument("--py-spy", type=Path, default=Path(shutil.which("py-spy") or "py-spy"), help="py-spy for the phase shares (skipped when absent)")
    args = parser.parse_args()
    args.work = args.work.absolute()
    codes = two_codes(args.baseline, args.work)
    for code in codes:  # each builds its demo index in its cache, untimed
        run_check(code, Workload("warm-up", SAMPLE, 468, "demo"), False, args.workers, args.work)
    bench_core.SHARED_CORPUS = args.shared / "data" / "corpus"
    only = set(filter(None, args.only.split(",")))
    index_wanted = not args.skip_big and (not only or "eclektic-4608-100MiB" in only)
    registry = big_index(args.work, codes[0]) if index_wanted else args.work / "corpora-100MiB.toml"
    chosen = [w for w in workloads(args.work, args.shared, args.skip_big, registry) if not only or w.name in only]
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": {"cpus": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total},
               "workers": args.workers, "codes": [{"label": c.label, "commit": c.commit} for c in codes]}  # fmt: skip
    results["infinigram_demo_index"] = infinigram_index(args.work)
    results["rows"] = measure_all(codes, chosen, args)
    profiled_workload = next((w for w in chosen if w.name == "eclektic-4608"), None)
    if args.py_spy.exists() and profiled_workload:
        results["phases"] = {code.label: profiled(code, profiled_workload, args.workers, args.work, args.py_spy) for code in codes}
    (args.work / "throughput.json").write_text(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
