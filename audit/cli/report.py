"""`audit report`: transfer scores stratified by exposure, with intervals and provenance pages."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from audit.auditfile import AuditFile, check_against_benchmark, locate_benchmark
from audit.auditscan import scan_audit
from audit.bars import console, progress_display, step
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.items import Item
from audit.outputs import check_directory_target
from audit.readers import load_benchmark, recorded_options
from audit.report.pages import ItemsById
from audit.report.render import REPORT, write_report

METHODS = ("auto", "given", "eclektic", "robust", "judge")


@click.command("report")
@click.option("--audit", "audit_path", required=True, type=click.Path(path_type=Path), help="Audit file written by `audit check`.")
@click.option("--predictions", type=click.Path(path_type=Path), help="A model's answers (JSONL or CSV); without it, an exposure-only report.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Report directory: new, empty, or a report audit wrote (then replaced).")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True, help="How answers are judged; auto: given judgments when every row has one, else robust.")
@click.option("--bench", type=click.Path(path_type=Path), help="The audited benchmark [default: the path in the audit's manifest].")
@click.option("--judge-model", help="Model name for --method judge [default: $AUDIT_JUDGE_MODEL].")
@click.option("--judge-concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Judge requests in flight.")
@click.option("--bootstrap", type=click.IntRange(min=0, max=100_000), default=1000, show_default=True, help="Bootstrap resamples over questions for the intervals (at most 100000, and as many as fit in about 2 GiB).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seeds the resamples and permutations.")
@click.option("--item-pages", type=click.Path(path_type=Path), help="Link the provenance pages of this report of the same audit instead of writing copies.")
def report_command(
    audit_path: Path,
    predictions: Path | None,
    out: Path,
    method: str,
    bench: Path | None,
    judge_model: str | None,
    judge_concurrency: int,
    bootstrap: int,
    seed: int,
    item_pages: Path | None,
) -> None:
    """Transfer scores stratified by measured exposure, with intervals, plots and provenance pages."""
    try:
        audit, items, inputs = _read_inputs(audit_path, bench, [predictions, item_pages], out)
        evaluation = None
        if predictions is not None:
            method, evaluation = _evaluated(audit, items, predictions, method, JudgeOptions(judge_model, judge_concurrency, bootstrap, seed))
        pages_items = ItemsById(items)  # the items held packed, read back by id where a page is rendered
        with step(f"writing the report {out}"):
            data = write_report(out, audit, str(audit_path), pages_items, evaluation, item_pages, inputs=inputs)
    except (AuditError, FileNotFoundError) as error:
        raise InputError(str(error)) from None
    if evaluation:
        _print_evaluation(evaluation, method)
    pages = len(data["exposure"]["items"])
    click.echo(f"report: {out / 'report.html'} ({pages} provenance pages{f', linked from {item_pages}' if item_pages else ''})")


@dataclass(frozen=True)
class JudgeOptions:
    model: str | None
    concurrency: int
    bootstrap: int
    seed: int


def _read_inputs(audit_path: Path, bench: Path | None, others: list[Path | None], out: Path) -> tuple[AuditFile, Sequence[Item], list[Path]]:
    """The audit, checked in one pass that keeps a few fields per record (the report reads
    the records back from disk), and the benchmark's items checked against it."""
    audit, across = scan_audit(audit_path)
    bench, recorded = locate_benchmark(audit, audit_path, bench)
    inputs = [path for path in (audit_path, bench, *others) if path is not None]
    check_directory_target(out, REPORT, inputs=inputs)
    items = load_benchmark(bench, recorded.format, options=recorded_options(recorded.mapping, recorded.source_lang), packed=True).items
    check_against_benchmark(audit, audit_path, items, across)
    return audit, items, inputs


def _evaluated(audit: AuditFile, items: Sequence[Item], predictions: Path, method: str, judging: JudgeOptions) -> tuple[str, dict[str, Any]]:
    """The model's answers scored (`method` chosen when `auto`), with the problems met printed."""
    from audit.evaluate import JudgeConfig, evaluate, load_predictions

    answers = load_predictions(predictions, items)
    if method == "auto":
        method = "given" if all(p.correct is not None for p in answers.predictions.values()) else "robust"
    judge = JudgeConfig(model=judging.model, concurrency=judging.concurrency) if method == "judge" else None
    with progress_display() as progress:
        task = progress.add_task(f"scoring ({method})", total=None)
        result = evaluate(
            items, answers, audit, method, judge=judge, bootstrap=judging.bootstrap, seed=judging.seed,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    evaluation = result.to_dict()
    for problem in evaluation["problems"]:
        console.print(f"[yellow]problem[/yellow] {escape(problem)}")
    return method, evaluation


def _print_evaluation(evaluation: dict[str, Any], method: str) -> None:
    """The headline scores: overall, clean transfer, and transfer to what the model did not know."""
    total = evaluation["total"]
    click.echo(
        f"overall success {_fmt(total['overall_success'])}, transfer {_fmt(total['transfer_score'])} "
        f"({method}, {evaluation['questions']} questions)"
    )
    clean = (evaluation.get("strata") or {}).get("clean_transfer")
    if clean:
        click.echo(f"clean transfer (targets unseen by every signal) {_fmt(clean['transfer_score'])}")
    unknown = (evaluation.get("strata") or {}).get("unknown_to_model")
    if unknown:
        click.echo(f"transfer to targets the probed model did not know {_fmt(unknown['total']['transfer_score'])}")


def _fmt(stat: dict) -> str:
    if stat["value"] is None:
        return "n/a"
    interval = stat.get("ci_bootstrap")
    return f"{stat['value']:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")
