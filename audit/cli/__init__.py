"""The `audit` command line: the one place that knows every loader, corpus and signal.  Each
command group lives in its own module; this one gathers them under `main`, and imports a
command's module only when that command is run or listed: importing all of them, every
signal, corpus and report renderer with them, was half a second before `audit --version` or
`audit formats` could answer."""
from __future__ import annotations

import importlib

import click

from audit import __version__
from audit.cli.shell import Commands

# Each command's name, and the module of `audit.cli` and the name its click command has there.
COMMANDS = {
    "calibrate": ("calibrate", "calibrate_command"),
    "check": ("check", "check"),
    "corpora": ("corpora", "corpora_command"),
    "exchangeability": ("exchangeability", "exchangeability_command"),
    "export": ("export", "export_command"),
    "filter": ("filter", "filter_command"),
    "formats": ("formats", "formats_command"),
    "index": ("index", "index"),
    "langlinks": ("langlinks", "langlinks"),
    "probe": ("serve", "probe_group"),
    "report": ("report", "report_command"),
    "serve": ("serve", "serve_command"),
}


def _command(name: str) -> click.Command:
    module, attribute = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(f"audit.cli.{module}"), attribute)
    if name == "probe":
        from audit.cli.plant import plant_command

        assert isinstance(command, click.Group)
        command.add_command(plant_command)
    return command


class LazyCommands(Commands):
    """`Commands` whose commands are imported by name when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _command(cmd_name) if cmd_name in COMMANDS else None


@click.group(cls=LazyCommands)
@click.version_option(__version__, prog_name="audit")
def main() -> None:
    """Audit multilingual benchmarks for pretraining-corpus contamination, with provenance."""
