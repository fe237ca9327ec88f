"""`audit export`: an audit as a table, one row per (item, language) with its tags and the
figures that decided them (the columns of `Audit.to_pandas`, listed in docs/python-api.md),
for tools that do not speak Python."""
from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from audit.bars import console
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.outputs import atomic_write_bytes, check_file_target


@click.command("export")
@click.argument("audit_path", metavar="AUDIT", type=click.Path(path_type=Path))
@click.option("--parquet", type=click.Path(path_type=Path), help="Write the table here as Parquet.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Write the table here as CSV.")
@click.option("--all-figures", is_flag=True, help="Every scalar figure the signals reported, not only those the policy's rules judge.")
@click.option("--force", is_flag=True, help="Replace an existing file (never the audit itself).")
def export_command(audit_path: Path, parquet: Path | None, csv_path: Path | None, all_figures: bool, force: bool) -> None:
    """An audit as a table: one row per (item, language), its tags and deciding figures."""
    from audit.result import read, table_bytes

    targets = {kind: path for kind, path in (("parquet", parquet), ("csv", csv_path)) if path is not None}
    if not targets:
        raise InputError("give --parquet OUT or --csv OUT (or both)")
    if parquet is not None and csv_path is not None and Path(parquet).absolute() == Path(csv_path).absolute():
        raise InputError(f"--parquet and --csv name the same file {parquet}")
    try:
        for path in targets.values():
            check_file_target(path, inputs=[audit_path], force=force)
        result = read(audit_path)
        frame = result.to_pandas(all_figures=all_figures)
        for kind, path in targets.items():
            atomic_write_bytes(path, table_bytes(frame, kind))
    except (AuditError, ImportError) as error:
        raise InputError(str(error)) from None
    for kind, path in targets.items():
        console.print(f"wrote {escape(str(path))} ({kind}): {len(frame)} rows, {len(frame.columns)} columns")
