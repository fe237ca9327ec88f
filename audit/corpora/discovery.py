"""Live index discovery (`audit corpora --live`): what each endpoint of the registry serves now,
set against the names the registry gives it.

Public indexes come and go, and a name that no longer answers turns every check against it into
`unknown`.  So each endpoint is asked once what it serves and each registry name is settled:
- `GET /` on an infini-gram server answers a JSON list of index names (api/api_server.py of
  liujch1998/infini-gram, commit 37d2929); its newer form (branch s3, commit eac5260) lists
  objects `{"index": ..., "desc": ...}`, and only the indexes it describes, and a server that
  forwards queries to another may list none at all.  A listed name answers.
- A name not listed, or on a server with no listing (infini-gram mini registers `POST /` only,
  so `GET /` is HTTP 405), is asked to count the empty string: a count settles it as answering,
  HTTP 400 `{"error": "[Flask] Invalid index: NAME"}` as gone.
- The indexes a listing holds that no entry names are reported as missing from the registry.
- A URL that takes no query at all (`POST /` is 404 or 405) is not asked name by name; its
  `GET /indexes` is read for a hint, since that is how Ai2's attribution service
  (allenai/infinigram-api), another protocol with no counts, lists its index ids.

One request at a time per endpoint, no retries and no cache (this is a look at the present).  An
endpoint that cannot be reached, or that throttles (the gateway's `403 {"message": "Forbidden"}`,
429), is not asked further: its names stay unchecked, which is no verdict on them.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum

import requests
from pydantic import JsonValue

from audit.corpora.cache import JsonObject
from audit.corpora.registry import REMOTE, CorpusCheck, CorpusError, Entry
from audit.responses import OversizeResponse, read_limited, snippet

MAX_LISTING_BYTES = 4 << 20
INVALID_INDEX = "Invalid index"


class NameState(StrEnum):
    LISTED = "listed"  # the endpoint's listing names it
    ANSWERS = "answers"  # not listed, but it answered a count
    GONE = "gone"  # the endpoint answered that it has no such index
    UNCHECKED = "unchecked"  # no verdict: unreachable, throttled, or an answer of another kind


@dataclass(frozen=True)
class NameCheck:
    """One registry entry's index at its endpoint, and how that was settled."""

    name: str
    index: str
    state: NameState
    detail: str = ""


@dataclass
class EndpointReport:
    """One endpoint: its listing (None where it has none), each registry name's state, and the
    indexes it lists that no registry entry names."""

    url: str
    backend: str
    listing: tuple[str, ...] | None = None
    listing_note: str = ""
    names: list[NameCheck] = field(default_factory=list)
    requests: int = 0

    def unregistered(self, registered: set[str]) -> tuple[str, ...]:
        return tuple(sorted(set(self.listing or ()) - registered))


@dataclass
class Discovery:
    endpoints: list[EndpointReport]
    registered: dict[str, set[str]]  # url -> every index the registry names there

    def checks(self) -> list[NameCheck]:
        return [check for endpoint in self.endpoints for check in endpoint.names]

    def in_state(self, state: NameState) -> list[NameCheck]:
        return [check for check in self.checks() if check.state == state]

    def unregistered(self) -> dict[str, tuple[str, ...]]:
        """Per endpoint URL, the indexes it lists that no registry entry names."""
        found = {e.url: e.unregistered(self.registered.get(e.url, set())) for e in self.endpoints}
        return {url: names for url, names in found.items() if names}

    @property
    def exit_code(self) -> int:
        """1 when the registry names an index its endpoint says it does not have; 0 otherwise,
        unchecked names included (no answer is no evidence that a name is wrong)."""
        return 1 if self.in_state(NameState.GONE) else 0


class _Stop(Exception):
    """The endpoint is not to be asked further; the message says why."""


@dataclass
class _Asker:
    """One request at a time to one endpoint, counted."""

    report: EndpointReport
    timeout: float
    token: str = ""
    session: requests.Session = field(default_factory=requests.Session)

    def send(self, method: str, payload: JsonObject | None = None, token: str = "", path: str = "", throttle_stops: bool = True) -> tuple[int, bytes]:
        """Status and body of one request.  A throttling answer stops the endpoint, unless
        `throttle_stops` is False (for `GET /`, which a gateway may refuse for good while it
        passes queries: the first count then tells)."""
        headers = {"Authorization": f"Bearer {token or self.token}"} if token or self.token else {}
        self.report.requests += 1
        try:
            response = self.session.request(method, self.report.url + path, json=payload, headers=headers, timeout=self.timeout, stream=True)
            body = read_limited(response, MAX_LISTING_BYTES)
        except requests.RequestException as error:
            raise _Stop(f"unreachable ({type(error).__name__})") from None
        except OversizeResponse as error:
            raise _Stop(str(error)) from None
        if throttle_stops and response.status_code in (403, 429) and _error_text(body) is None:
            raise _Stop(f"throttled (HTTP {response.status_code} {snippet(body, 80)}); try again in a minute")
        return response.status_code, body


def _json(body: bytes) -> JsonValue:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _error_text(body: bytes) -> str | None:
    data = _json(body)
    return str(data["error"]) if isinstance(data, dict) and "error" in data else None


def parse_listing(status: int, body: bytes) -> tuple[tuple[str, ...] | None, str]:
    """The index names a `GET /` answer lists, or None with why it is no listing."""
    data = _json(body)
    if status == 200 and isinstance(data, list):
        if all(isinstance(item, str) for item in data):
            return tuple(data), f"GET / lists {len(data)} index(es)"
        if all(isinstance(item, dict) and isinstance(item.get("index"), str) for item in data):
            return tuple(item["index"] for item in data), f"GET / lists {len(data)} index(es), those it describes"
    shown = _error_text(body) or snippet(body, 80).replace("\n", " ")
    return None, f"no listing (GET / answers HTTP {status}: {shown})"


def _probe(asker: _Asker, entry: Entry) -> NameCheck:
    """Settle one unlisted name by a count of the empty string."""
    assert entry.index is not None
    try:
        token = entry.token()
    except CorpusError as error:
        return NameCheck(entry.name, entry.index, NameState.UNCHECKED, str(error))
    status, body = asker.send("POST", {"index": entry.index, "query_type": "count", "query": ""}, token)
    error = _error_text(body)
    if error is not None and INVALID_INDEX in error:
        return NameCheck(entry.name, entry.index, NameState.GONE, f"HTTP {status}: {error}")
    data = _json(body)
    if status == 200 and error is None and isinstance(data, dict) and isinstance(data.get("count"), int):
        return NameCheck(entry.name, entry.index, NameState.ANSWERS, f"answered a count ({data['count']:,})")
    if status in (404, 405) and error is None:
        raise _Stop(f"no infini-gram query route at this URL (POST answers HTTP {status}: {snippet(body, 80)}){_other_protocol(asker)}")
    return NameCheck(entry.name, entry.index, NameState.UNCHECKED, f"HTTP {status}: {error or snippet(body, 80)}")


def _other_protocol(asker: _Asker) -> str:
    """What the endpoint is, when it takes no query: Ai2's attribution service
    (allenai/infinigram-api, api/src/infinigram/infinigram_router.py) lists its index ids at
    `GET /indexes` and answers only `POST /{index}/attribution`, with no counts."""
    status, body = asker.send("GET", path="indexes")
    listed = _json(body)
    if status != 200 or not isinstance(listed, list) or not listed or not all(isinstance(name, str) for name in listed):
        return ""
    return f"; GET /indexes lists {', '.join(listed)}, as Ai2's attribution service does: its protocol has no counts, so no corpus can use it"


def _endpoint(url: str, backend: str, entries: list[Entry], timeout: float) -> EndpointReport:
    report = EndpointReport(url, backend)
    asker = _Asker(report, timeout, _first_token(entries))
    pending, asked = list(entries), False
    try:
        report.listing, report.listing_note = parse_listing(*asker.send("GET", throttle_stops=False))
        listed = set(report.listing or ())
        for entry in entries:
            if entry.index in listed:
                report.names.append(NameCheck(entry.name, entry.index or "", NameState.LISTED, "listed by GET /"))
                pending.remove(entry)
        while pending:
            asked = True
            report.names.append(_probe(asker, pending[0]))
            pending.pop(0)
    except _Stop as stop:
        report.listing_note = report.listing_note or str(stop)
        report.names += [NameCheck(e.name, e.index or "", NameState.UNCHECKED, f"{'' if asked and i == 0 else 'not asked: '}{stop}") for i, e in enumerate(pending)]
    finally:
        asker.session.close()
    return report


def _first_token(entries: list[Entry]) -> str:
    for entry in entries:
        try:
            token = entry.token()
        except CorpusError:
            continue
        if token:
            return token
    return ""


def discover(entries: Iterable[Entry], timeout: float = 3.0, registry: Iterable[Entry] = ()) -> Discovery:
    """Ask every endpoint the remote `entries` name what it serves; endpoints side by side,
    requests to each one at a time, each with `timeout` seconds and no retry.  An index offered
    is missing from the registry when neither `entries` nor `registry` (the whole registry,
    where `entries` is a part of it) names it at that endpoint."""
    entries = list(entries)
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        if entry.backend in REMOTE and entry.url and entry.index:
            groups.setdefault((entry.url, entry.backend), []).append(entry)
    registered: dict[str, set[str]] = {}
    for entry in [*entries, *registry]:
        if entry.backend in REMOTE and entry.url and entry.index:
            registered.setdefault(entry.url, set()).add(entry.index)
    if not groups:
        return Discovery([], registered)
    with ThreadPoolExecutor(max_workers=min(8, len(groups))) as pool:
        reports = list(pool.map(lambda key: _endpoint(key[0], key[1], groups[key], timeout), groups))
    return Discovery(reports, registered)


def summary_lines(found: Discovery) -> list[str]:
    """What `audit corpora --live` prints below its table: each endpoint, how its names were
    settled and what it offers that the registry lacks; then every gone or unchecked name; then
    one line of totals."""
    lines = []
    for endpoint in found.endpoints:
        states = [check.state for check in endpoint.names]
        counts = ", ".join(f"{states.count(state)} {state}" for state in NameState if state in states)
        lines.append(f"{endpoint.url} ({endpoint.backend}): {endpoint.listing_note}; {len(states)} registry name(s): {counts}; {endpoint.requests} request(s)")
        missing = endpoint.unregistered(found.registered.get(endpoint.url, set()))
        if missing:
            lines.append(f"  offered but not in the registry ({len(missing)}): {', '.join(missing)}")
    for check in found.in_state(NameState.GONE):
        lines.append(f"gone: {check.name} (index {check.index}): {check.detail}; fix or remove the entry")
    for endpoint in found.endpoints:
        reasons: dict[str, list[str]] = {}
        for check in endpoint.names:
            if check.state == NameState.UNCHECKED:
                reasons.setdefault(check.detail, []).append(check.name)
        for detail, names in reasons.items():
            lines.append(f"not checked at {endpoint.url} ({len(names)} name(s): {', '.join(names)}): {detail}")
    checks = found.checks()
    answering = sum(check.state in (NameState.LISTED, NameState.ANSWERS) for check in checks)
    offered = sum(len(names) for names in found.unregistered().values())
    lines.append(
        f"live: {answering} of {len(checks)} registry name(s) answer, {len(found.in_state(NameState.GONE))} gone, "
        f"{len(found.in_state(NameState.UNCHECKED))} not checked; {offered} index(es) offered that the registry lacks"
    )
    return lines


def apply_to(checks: list[CorpusCheck], found: Discovery) -> None:
    """Fill the remote rows of `audit corpora`'s table from the discovery, so that `--live`
    asks each name once: whether it answers, and how that was settled."""
    by_name = {check.name: check for check in found.checks()}
    for check in checks:
        live = by_name.get(check.name)
        if live is not None:
            check.reachable = {NameState.LISTED: True, NameState.ANSWERS: True, NameState.GONE: False}.get(live.state)
            check.message = "; ".join(part for part in (check.message, f"{live.state}: {live.detail}") if part)
