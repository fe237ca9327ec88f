"""The command line's shell, shared by every command: bad input and system refusals as one
line (never a traceback), SIGINT and SIGTERM as one line saying what was kept, and progress
that is never silent (bars on a terminal, a line per step in a log)."""
from __future__ import annotations

import errno
import re
import sqlite3
from concurrent.futures.process import BrokenProcessPool
from signal import SIGINT, Signals

import click

from audit.children import received, signals_caught
from audit.outputs import disk_full


class InputError(click.ClickException):
    """Bad input from the user: reported on one line, exit status 2.  Control characters
    quoted from the input are shown escaped, never sent to the terminal."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(_CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", message))


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Stopped(click.ClickException):
    """SIGINT or SIGTERM ended the command: one line saying what was kept, exit 128 + signal."""

    def __init__(self, signum: int, detail: str) -> None:
        super().__init__(f"interrupted by {Signals(signum).name}: {detail}")
        self.exit_code = 128 + signum

    def show(self, file: object = None) -> None:
        click.echo(self.format_message(), err=True)


# What the running command has written whole so far, for the line an interruption prints.
KEPT: list[str] = []


def kept() -> str:
    return "; ".join(KEPT) if KEPT else "nothing written"


class Commands(click.Group):
    """Reports a file the system refused (no room, no permission) as one line naming the file,
    never as a traceback; a worker process killed under any command as one line saying what was
    kept; and an interruption (SIGINT, SIGTERM) as one line saying what was kept."""

    def invoke(self, ctx: click.Context) -> object:
        KEPT.clear()
        with signals_caught():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as stop:
                raise Stopped(getattr(stop, "signum", SIGINT), kept()) from None
            except click.ClickException as error:
                if (signum := received()) is not None:
                    message = error.format_message()
                    raise Stopped(signum, message.removeprefix("interrupted; ") if message.startswith("interrupted; ") else kept()) from None
                raise
            except (OSError, sqlite3.OperationalError) as error:
                if (signum := received()) is not None:
                    raise Stopped(signum, kept()) from None
                raise click.ClickException(system_error(error)) from None
            except BrokenProcessPool:
                # A pool's worker was killed (a forked check names how: `WorkerDied`).
                if (signum := received()) is not None:
                    raise Stopped(signum, kept()) from None
                raise click.ClickException(f"a worker process died (killed, often by the system when memory runs out); {kept()}") from None


def system_error(error: OSError | sqlite3.OperationalError) -> str:
    """A system's refusal as one line naming the file: a full disk as `audit.outputs` words it."""
    if isinstance(error, sqlite3.OperationalError):
        if "disk is full" in str(error):
            full = disk_full(OSError(errno.ENOSPC, str(error)))
            return str(full) if full else str(error)
        return f"database error: {error}"
    full = disk_full(error)
    if full is not None:
        return str(full)
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"
