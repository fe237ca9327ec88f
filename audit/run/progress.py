"""What a run tells whoever started it, as it goes: the command line draws bars and prints
notes, a server job keeps counters its clients poll, the Python API stays quiet."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from enum import StrEnum

from audit.corpora.client import InfiniGramClient
from audit.items import LoadReport

# An index build's progress: (stage, done, total).
BuildHook = Callable[[str, int, int], None]
# A prepare step's start: (what it does, how many parts or None) -> advance by a count.
StepStart = Callable[[str, int | None], Callable[[int], None]]


class NoteKind(StrEnum):
    NOTE = "note"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Note:
    """Something the user should read that stops nothing: a clamped option, a skipped signal,
    an API corpus stopped by its request budget."""

    kind: NoteKind
    text: str


class Progress:
    """Every hook a run calls, doing nothing: subclasses show what they need."""

    def read(self, report: LoadReport) -> None:
        """The benchmark was read (before any corpus is opened)."""

    def note(self, note: Note) -> None:
        """A note, in the order the run meets it."""

    def building(self) -> AbstractContextManager[BuildHook | None]:
        """Held while the corpora open: a local index may be built (the demo's, first time)."""
        return nullcontext()

    def variants(self, total: int) -> None:
        """The variants to check, known before any signal prepares."""

    def preparing(self) -> AbstractContextManager[StepStart]:
        """Held while signals with batched work (the langlinks' requests, the probe's prompts)
        do it before any variant is checked; each step starts a counter."""
        return nullcontext(_no_step)

    def checking(self, description: str, total: int, clients: list[InfiniGramClient]) -> AbstractContextManager[Callable[[], None]]:
        """Held while variants are checked; the advance is called once per variant."""
        return _quiet_check()


def _no_step(description: str, total: int | None) -> Callable[[int], None]:
    return lambda done: None


@contextmanager
def _quiet_check() -> Iterator[Callable[[], None]]:
    yield lambda: None


QUIET = Progress()
