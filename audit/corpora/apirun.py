"""What a run of `audit check` shows and says about its API corpora: the requests sent on the
progress bar beside the time left, the request budget given on the command line, and, when the
budget stopped the run, which corpora it stopped and how to resume (the manifest records it in
the corpus's details as `stopped`, beside the request counts of `requests`)."""
from __future__ import annotations

from collections.abc import Sequence

from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, Task, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from audit.bars import Steps
from audit.corpora.base import Corpus
from audit.corpora.client import RESUME_HINT, InfiniGramClient


def api_clients(sources: Sequence[Corpus]) -> list[InfiniGramClient]:
    """The HTTP clients of the API corpora among `sources`, one per corpus."""
    return [source.client for source in sources if isinstance(getattr(source, "client", None), InfiniGramClient)]


def limit_requests(sources: Sequence[Corpus], limit: int) -> list[InfiniGramClient]:
    """Give every API corpus a budget of `limit` HTTP requests; the clients it applies to."""
    clients = api_clients(sources)
    for client in clients:
        client.limit_requests(limit)
    return clients


class RequestsColumn(ProgressColumn):
    """Requests sent so far by every client (and of how many allowed), throttled answers and
    dropped connections: read at each refresh, so the count moves while a variant is asked."""

    def __init__(self, clients: list[InfiniGramClient]) -> None:
        super().__init__()
        self.clients = clients

    def render(self, task: Task) -> Text:
        sent = sum(c.stats["requests"] for c in self.clients)
        allowed = sum(c.stats["max_requests"] for c in self.clients) if all(c.stats["max_requests"] for c in self.clients) else 0
        text = f"{sent:,}" + (f"/{allowed:,}" if allowed else "") + " requests"
        troubles = [f"{n:,} {what}" for what, n in (("throttled", sum(c.stats["throttled"] for c in self.clients)), ("dropped", sum(c.stats["dropped"] for c in self.clients))) if n]
        return Text(text + (f" ({', '.join(troubles)})" if troubles else ""), style="progress.download")


def check_display(clients: list[InfiniGramClient]) -> Steps:
    """The check's progress bar: variants done of all, requests when a corpus is remote, time
    spent and an estimate of the time left (from the pace of variants so far)."""
    middle = [RequestsColumn(clients)] if clients else []
    return Steps(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *middle, TimeElapsedColumn(), TimeRemainingColumn())


def budget_stops(sources: Sequence[Corpus]) -> list[str]:
    """One line per API corpus whose request budget stopped it, recorded in its details too."""
    lines = []
    for source in sources:
        client = getattr(source, "client", None)
        if not isinstance(client, InfiniGramClient) or not client.stopped_on_budget:
            continue
        stats = client.stats
        line = (
            f"{source.info.name}: stopped on its request budget of {stats['max_requests']:,} requests; "
            f"{stats['not_asked']:,} questions were not asked and their fields are unknown; {RESUME_HINT}"
        )
        source.info.details["stopped"] = line
        lines.append(line)
    return lines
