"""Progress that is never silent: bars on a terminal, a line per step in a log or a pipe.  Kept
apart from the command line's shell, since long runs below it (API corpora) show progress too."""
from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console(stderr=True, emoji=False)


class Steps(Progress):
    """Bars on a terminal; elsewhere (a log, a pipe) one line when a step starts and one when
    it ends, so a long step is never silent.  Steps run one after another: a new one ends the
    one before."""

    def __init__(self, *columns: ProgressColumn) -> None:
        super().__init__(*columns, console=console, transient=True, disable=not console.is_terminal)
        self._open: dict[TaskID, float] = {}

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        self.end_steps()
        task = super().add_task(description, *args, **kwargs)
        if self.disable:
            click.echo(f"{description} ...", err=True)
            self._open[task] = time.perf_counter()
        return task

    def end_steps(self) -> None:
        for task, started in self._open.items():
            click.echo(f"{self._tasks[task].description}: done in {time.perf_counter() - started:.1f} s", err=True)
        self._open.clear()

    def stop(self) -> None:
        if sys.exc_info()[0] is None:
            self.end_steps()
        self._open.clear()
        super().stop()


@contextmanager
def step(description: str) -> Iterator[None]:
    """A step with nothing to count (drawing a report's figures and pages): a line when it
    starts and one when it ends, on a terminal or not.  A step that fails says nothing more:
    the error or the interruption does."""
    click.echo(f"{description} ...", err=True)
    started = time.perf_counter()
    yield
    click.echo(f"{description}: done in {time.perf_counter() - started:.1f} s", err=True)


def progress_display(counter: ProgressColumn | None = None) -> Progress:
    return Steps(TextColumn("{task.description}"), BarColumn(), counter or MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
