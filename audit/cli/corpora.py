"""`audit corpora`: the corpora --corpus accepts and whether each answers."""
from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from audit.cli.shell import InputError
from audit.corpora.registry import CorpusError, check_corpora, chosen_entries


@click.command("corpora")
@click.option("--registry", type=click.Path(path_type=Path), help="Corpus registry TOML [default: indexes/corpora.toml].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True, help="Seconds to wait for each API request.")
@click.option("--live", is_flag=True, help="Ask each API endpoint what it serves (GET /, else a count per name): mark names it no longer has (exit 1) and list indexes it offers that the registry lacks.")
@click.option("--corpus", "names", multiple=True, help="Only this registered name; repeat for several [default: every one].")
def corpora_command(registry: Path | None, timeout: float, live: bool, names: tuple[str, ...]) -> None:
    """List the corpora --corpus accepts, whether each answers now, and what is cached."""
    from audit.corpora.discovery import apply_to, discover, summary_lines

    try:
        checks = check_corpora(registry, timeout=timeout, probe_remote=not live, names=names)
        found = discover(chosen_entries(registry, names), timeout, chosen_entries(registry)) if live else None
    except CorpusError as error:
        raise InputError(str(error)) from None
    if found is not None:
        apply_to(checks, found)
    table = Table(title="Corpora")
    for column in ("name", "backend", "location", "reachable", "cached", "note"):
        table.add_column(column)
    for entry in checks:
        reachable = {True: "yes", False: "no", None: "?"}[entry.reachable]
        cached = "" if entry.cached is None else f"{entry.cached:,}"
        table.add_row(*(Text(cell) for cell in (entry.name, entry.backend, entry.location, reachable, cached, entry.message or entry.description)))
    Console(emoji=False).print(table)
    if found is not None:
        for line in summary_lines(found):
            click.echo(line)
        if found.exit_code:
            sys.exit(found.exit_code)
