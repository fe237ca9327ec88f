"""`audit filter`: remove (or flag) the leaky items of an audited benchmark."""
from __future__ import annotations

import json
from pathlib import Path

import click

from audit.auditfile import check_against_benchmark, locate_benchmark
from audit.auditscan import scan_audit
from audit.cli.filteroutput import check_manifest_name, check_output_name
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.filter import FILTERED, RULES, FilterPolicy, filter_benchmark, writes_directory
from audit.outputs import OutputError, atomic_write_text, check_directory_target, check_file_target
from audit.readers import load_benchmark, recorded_options


@click.command("filter")
@click.argument("audit_path", metavar="AUDIT", type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Clean benchmark to write, in the input's format, which its suffix must name (a new directory for BMLAMA).")
@click.option("--bench", type=click.Path(path_type=Path), help="The audited benchmark [default: the path in the audit's manifest].")
@click.option("--rule", type=click.Choice(RULES), default="target-seen", show_default=True, help="Which items leak.")
@click.option("--drop-unknown", is_flag=True, help="Also treat items with a language of unknown exposure as leaky.")
@click.option("--drop-known", is_flag=True, help="Also treat items the probed model already knows (knowledge `known` in any language) as leaky: LiveCLKTBench's rule; needs an audit made with --probe-model.")
@click.option("--drop-member", is_flag=True, help="Also treat items whose text the probed model's calibrated membership scores call a member (membership `member` in any language) as leaky; needs an audit checked with thresholds from `audit calibrate`.")
@click.option("--flag", is_flag=True, help="Keep every item and mark each leaky or not, instead of removing.")
@click.option("--manifest", "manifest_path", type=click.Path(path_type=Path), help="Removal manifest, JSON [default: OUT.manifest.json].")
@click.option("--force", is_flag=True, help="Replace existing output (never the command's inputs, nor a directory audit did not write).")
def filter_command(
    audit_path: Path, out: Path, bench: Path | None, rule: str, drop_unknown: bool, drop_known: bool, drop_member: bool, flag: bool, manifest_path: Path | None, force: bool
) -> None:
    """Remove (or flag) leaky items of an audited benchmark before release."""
    if out.name in ("", ".", ".."):
        raise InputError(f"--out {out}: give the name of a new file (a new directory for BMLAMA)")
    manifest_path = manifest_path or out.with_name(out.name + ".manifest.json")
    try:
        # Checked in one pass that keeps a few fields per record; the verdicts read it again.
        audit, across = scan_audit(audit_path)
        if drop_known and not audit.manifest.get("models"):
            raise InputError(f"--drop-known: {audit_path} was made without a probe model, so it says nothing of what a model knows; audit with --probe-model")
        if drop_member:
            _check_membership(audit_path, audit.manifest.get("summary"))
        bench, recorded = locate_benchmark(audit, audit_path, bench)
        inputs = [audit_path, bench]
        if writes_directory(recorded.format, bench):
            if out.exists() and not force:
                raise OutputError(f"{out}: already exists (use --force to replace it)")
            check_directory_target(out, FILTERED, inputs=inputs)
        else:
            check_file_target(out, inputs=inputs, force=force)
        check_file_target(manifest_path, inputs=inputs, force=force)
        if _same_path(out, manifest_path):
            raise OutputError(f"--manifest {manifest_path}: is the same file as --out")
        check_output_name(out, recorded.format, bench)
        check_manifest_name(manifest_path)
        report = load_benchmark(bench, recorded.format, options=recorded_options(recorded.mapping, recorded.source_lang), packed=True)
        check_against_benchmark(audit, audit_path, report.items, across)
        result = filter_benchmark(audit, report.items, bench, recorded, out, FilterPolicy(rule, drop_unknown, drop_known, drop_member), flag=flag, audit_path=str(audit_path))
    except AuditError as error:
        raise InputError(str(error)) from None
    atomic_write_text(manifest_path, json.dumps(result.manifest, indent=2, ensure_ascii=False) + "\n")
    counts = result.manifest["counts"]
    verb = f"flagged {counts['flagged']}" if flag else f"removed {counts['removed']}"
    click.echo(
        f"{counts['items']} items: {verb} as leaky ({rule}{', unknown counts as leaky' if drop_unknown else ''}{', known to the model counts as leaky' if drop_known else ''}"
        f"{', a member counts as leaky' if drop_member else ''}), "
        f"kept {counts['kept']}; {counts['not_audited']} not audited. Wrote {out} and {manifest_path}."
    )


def _check_membership(audit_path: Path, summary: object) -> None:
    """Refuse --drop-member on an audit whose membership verdicts could drop nothing, rather
    than keep every item and look as if none were members."""
    counts = summary.get("membership") if isinstance(summary, dict) else None
    if not isinstance(counts, dict):
        raise InputError(f"--drop-member: {audit_path} has no membership verdicts; audit with --probe-model and the membership signal")
    if not any(isinstance(c, dict) and (c.get("member") or c.get("non_member")) for c in counts.values()):
        raise InputError(f"--drop-member: every membership verdict in {audit_path} is undetermined: the policy had no calibrated threshold for its languages; "
                         "run `audit calibrate` and audit again with --policy set to the thresholds it writes")


def _same_path(a: Path, b: Path) -> bool:
    return Path(a).absolute() == Path(b).absolute()
