"""`audit calibrate`: how well each membership score tells members from the rest, per language
and per script, with the thresholds that reach a chosen false-positive rate."""
from __future__ import annotations

import json
from pathlib import Path

import click

from audit.auditfile import read_audit
from audit.bars import step
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.evaluate.membership import Grouping, as_json, calibrate, markdown, read_truth, scored_texts, thresholds_toml
from audit.outputs import check_directory_target, commit_directory, discard_staging, staging_directory

CALIBRATION = "membership calibration"


@click.command("calibrate")
@click.option("--audit", "audit_path", required=True, type=click.Path(path_type=Path), help="Audit file with the membership signal's scores (`audit check --probe-model ...`).")
@click.option("--truth", type=click.Path(path_type=Path), help='JSON Lines of {"item_id", "lang", "member": true|false}, for a model whose training text is known [default: the audit\'s exposure: seen is a member, unseen is not].')
@click.option("--fpr", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.05, show_default=True, help="The false-positive rate the thresholds are set for.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Directory for calibration.json, calibration.md, thresholds.toml (a policy file: `audit check --policy`) and one plot per field and grouping: new, empty, or one audit wrote.")
def calibrate_command(audit_path: Path, truth: Path | None, fpr: float, out: Path) -> None:
    """Calibrate membership scores against known membership, per language and per script."""
    try:
        inputs = [path for path in (audit_path, truth) if path is not None]
        check_directory_target(out, CALIBRATION, inputs=inputs)
        given = read_truth(truth) if truth is not None else None
        texts = scored_texts(read_audit(audit_path).records, given)
        if not texts:
            what = "the truth file's texts" if truth else "variants tagged seen or unseen"
            raise InputError(f"{audit_path}: no membership scores of {what}; run `audit check` with --probe-model (the membership signal)")
        groups = calibrate(texts, fpr)
        with step(f"writing the calibration {out}"):
            _write(out, groups, fpr, str(truth) if truth else "exposure", inputs)
    except AuditError as error:
        raise InputError(str(error)) from None
    click.echo(f"calibration: {out / 'calibration.md'} ({len(texts)} scored texts, {sum(t.member for t in texts)} members); thresholds for `audit check --policy`: {out / 'thresholds.toml'}")


def _write(out: Path, groups: list, fpr: float, truth: str, inputs: list[Path]) -> None:
    from audit.report.plots import auroc_bars

    staging = staging_directory(out)
    try:
        (staging / "calibration.json").write_text(json.dumps(as_json(groups, fpr, truth), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        (staging / "calibration.md").write_text(markdown(groups, fpr), encoding="utf-8")
        (staging / "thresholds.toml").write_text(thresholds_toml(groups, fpr, truth), encoding="utf-8")
        for name in sorted({group.field for group in groups}):
            for grouping in Grouping:
                chosen = {g.group: {score: f.auroc for score, f in g.scores.items() if f.auroc is not None} for g in groups if g.field == name and g.grouping is grouping}
                if chosen:
                    (staging / f"auroc-{name}-by-{grouping}.png").write_bytes(auroc_bars(chosen, f"{name}: AUROC by {grouping}"))
        commit_directory(staging, out, CALIBRATION, inputs=inputs)
    except BaseException:
        discard_staging(staging)
        raise
