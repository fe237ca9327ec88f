"""The `audit` command line: the one place that knows every loader, corpus and signal.  Each
command group lives in its own module; this one gathers them under `main`."""
from __future__ import annotations

import click

from audit import __version__
from audit.cli import calibrate, check, corpora, exchangeability, export, filter, formats, index, langlinks, plant, report, serve
from audit.cli.shell import Commands


@click.group(cls=Commands)
@click.version_option(__version__, prog_name="audit")
def main() -> None:
    """Audit multilingual benchmarks for pretraining-corpus contamination, with provenance."""


for command in (
    index.index,
    check.check,
    filter.filter_command,
    report.report_command,
    calibrate.calibrate_command,
    exchangeability.exchangeability_command,
    export.export_command,
    corpora.corpora_command,
    formats.formats_command,
    langlinks.langlinks,
    serve.probe_group,
    serve.serve_command,
):
    main.add_command(command)
serve.probe_group.add_command(plant.plant_command)
