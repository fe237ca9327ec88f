"""Resolve a `--corpus` value: the bundled `demo`, a name in a registry TOML, or an index path.

Registry entries (`indexes/corpora.toml` documents every key):

    [corpora.wiki-sample]
    backend = "local"
    path = "wiki-sample"          # relative to the registry file
    description = "..."

    [corpora.team]
    backend = "infini-gram-api"
    url = "http://127.0.0.1:8000/"   # default: the public endpoint
    index = "wiki"                   # the index id the server knows
    cache = "cache/team.sqlite"      # optional; default CACHE/api-cache.sqlite
    token_env = "TEAM_TOKEN"         # optional; the environment variable holding the server's token

The demo and the public infini-gram indexes (`olmo`, `dolma`, `dclm`, `rpj`, `pile`, `c4`, ...)
are built in, so `--corpus olmo` works from any directory; an entry of the same name in the
user's registry replaces one.
"""
from __future__ import annotations

import os
import tomllib
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path

from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.cache import CacheError, ResponseCache
from audit.corpora.client import PUBLIC_ENDPOINT, ClientSettings, InfiniGramClient, probe
from audit.corpora.demo import DEMO, demo_index
from audit.corpora.distributed import DistributedIndex
from audit.corpora.entries import CLIENT_KEYS, ENTRY_KINDS, OPTION_KEYS, ApiKeys, DemoKeys, LocalKeys, MiniKeys, Setting
from audit.corpora.local import LocalIndex
from audit.corpora.mini import MINI_ENDPOINT, MiniCorpus
from audit.corpora.shards import IndexOpenError
from audit.entries import EntryPlace, validate_entry
from audit.errors import PlacedError, UnreadableFile, read_text_file
from audit.executors import LOCAL, Executor
from audit.index.format import MANIFEST
from audit.index.progress import ProgressHook
from audit.paths import cache_dir, registry_file

API = ApiCorpus.BACKEND
MINI = MiniCorpus.BACKEND
REMOTE = (API, MINI)


@dataclass
class CorpusCheck:
    """What `audit corpora` shows for one registry entry."""

    name: str
    backend: str
    location: str
    description: str = ""
    reachable: bool | None = None
    cached: int | None = None
    message: str = ""


class CorpusError(PlacedError):
    """An unknown corpus name or an unusable registry entry; the message says which."""


@dataclass(frozen=True)
class Entry:
    name: str
    backend: str
    path: Path | None
    description: str
    url: str | None = None
    index: str | None = None
    cache: Path | None = None
    settings: dict[str, Setting] = field(default_factory=dict)
    minhash_redis: str | None = None
    token_env: str | None = None
    where: str = ""

    def token(self) -> str:
        """The server's token from the environment variable the entry names, read when the
        corpus is opened so that the registry file never holds the secret."""
        if not self.token_env:
            return ""
        value = os.environ.get(self.token_env, "")
        if not value:
            raise CorpusError(f"{self.where}.token_env: the environment variable {self.token_env} is not set (it holds the server's token)")
        return value


def _entry(path: Path, name: str, table: object) -> Entry:
    place = EntryPlace(path, "corpora", name)
    keys = validate_entry(ENTRY_KINDS, table, place, CorpusError)
    if isinstance(keys, LocalKeys | DemoKeys):
        redis = keys.minhash_redis if isinstance(keys, LocalKeys) else None
        return Entry(name, keys.backend, (path.parent / keys.path) if keys.path else None, keys.description, minhash_redis=redis)
    assert isinstance(keys, ApiKeys | MiniKeys)
    url = keys.url or (MINI_ENDPOINT if keys.backend == MINI else PUBLIC_ENDPOINT)
    settings = keys.settings()
    try:
        _settings(url, keys.index, settings)
    except ValueError as error:
        raise place.error(CorpusError, None, str(error)) from None
    cache = (path.parent / keys.cache) if keys.cache else None
    return Entry(name, keys.backend, None, keys.description, url, keys.index, cache, settings, token_env=keys.token_env, where=str(place))


def _settings(url: str, index: str, settings: dict[str, Setting], offline: bool = False, token: str = "") -> tuple[ClientSettings, ApiOptions]:
    client = ClientSettings(url=url, index=index, offline=offline, token=token, **{k: v for k, v in settings.items() if k in CLIENT_KEYS})
    return client, ApiOptions(**{k: v for k, v in settings.items() if k in OPTION_KEYS})


def read_registry(path: Path) -> dict[str, Entry]:
    try:
        text = read_text_file(path, "registry file")
    except UnreadableFile as error:
        raise CorpusError(str(error)) from None
    return parse_registry(text, path)


def parse_registry(text: str, path: Path) -> dict[str, Entry]:
    """Entries of a registry file's text; `path` places relative index paths and names errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CorpusError(f"{path}: not valid TOML ({error})") from None
    corpora = data.get("corpora", {})
    if not isinstance(corpora, dict):
        raise CorpusError(f"{path}: corpora must be a table of entries")
    return {name: _entry(path, name, table) for name, table in corpora.items()}


# The registry the package ships (`audit/data/corpora.toml`, a link to `indexes/corpora.toml`
# in the source tree): the bundled demo and the public infini-gram indexes, so these names
# work from any directory.
BUILTIN: dict[str, Entry] = parse_registry(
    resources.files("audit").joinpath("data/corpora.toml").read_text(encoding="utf-8"), Path("audit/data/corpora.toml")
)


def registry_entries(registry: Path | None = None) -> dict[str, Entry]:
    """The built-in entries with the registry's (`--registry`, else ./indexes/corpora.toml)
    laid over them."""
    if registry is not None and not registry.exists():
        raise CorpusError(f"{registry}: no such registry file")
    path = registry_file(registry)
    return {**BUILTIN, **(read_registry(path) if path else {})}


def api_cache(entry: Entry) -> ResponseCache:
    try:
        return ResponseCache(entry.cache or cache_dir() / "api-cache.sqlite")
    except CacheError as error:
        raise CorpusError(str(error)) from None


def open_api(entry: Entry, offline: bool = False, profile: str | None = None) -> ApiCorpus:
    """An infini-gram or infini-gram mini corpus: same client, cache and decisions."""
    assert entry.url is not None and entry.index is not None
    settings = {**entry.settings, **({"profile": profile} if profile else {})}
    client_settings, options = _settings(entry.url, entry.index, settings, offline, entry.token())
    kind = MiniCorpus if entry.backend == MINI else ApiCorpus
    return kind(InfiniGramClient(client_settings, api_cache(entry)), entry.name, options, entry.description)


def open_corpus(
    value: str,
    registry: Path | None = None,
    progress: ProgressHook | None = None,
    *,
    offline: bool = False,
    profile: str | None = None,
    executor: Executor = LOCAL,
    actors: int | None = None,
):
    """The corpus a `--corpus` value names, building the demo index on first use.  `offline`
    makes an API corpus answer from its response cache only; `profile` overrides the
    registry's for corpora that derive longest matches from counts.  With a Ray `executor`, a
    local index is served by Ray actors, one per node unless `actors` says how many.
    (`DistributedIndex`)."""
    entries = registry_entries(registry)
    entry = entries.get(value)
    local = partial(DistributedIndex, executor=executor, groups=actors) if executor.distributed else LocalIndex
    if entry is not None and entry.backend == "demo":
        return local(demo_index(cache_dir(), progress), name=value)
    if entry is not None and entry.backend in REMOTE:
        return open_api(entry, offline, profile)
    if entry is not None:
        return local(entry.path, name=value, neardup_redis=entry.minhash_redis)
    if Path(value).is_dir():
        return local(Path(value))
    known = ", ".join(sorted(entries))
    raise CorpusError(f"unknown corpus {value!r}: not a registered name ({known}) nor an index directory")


def _check(entry: Entry, timeout: float, probe_remote: bool = True) -> CorpusCheck:
    if entry.backend in REMOTE:
        check = CorpusCheck(entry.name, entry.backend, f"{entry.url} index={entry.index}", entry.description, cached=0)
        cache = entry.cache or cache_dir() / "api-cache.sqlite"
        try:
            check.cached = ResponseCache(cache).entries(entry.url, entry.index) if cache.exists() else 0
        except CacheError as error:
            check.message = str(error)
        if not probe_remote:
            return check
        try:
            client_settings, _ = _settings(entry.url or PUBLIC_ENDPOINT, entry.index or "", {**entry.settings, "timeout": timeout, "attempts": 1}, token=entry.token())
        except CorpusError as error:
            check.message = "; ".join(m for m in (check.message, str(error)) if m)
            return check
        check.reachable, detail = probe(InfiniGramClient(client_settings))
        check.message = "; ".join(m for m in (check.message, detail) if m)
        return check
    if entry.backend == "demo":
        built = sorted((cache_dir() / "indexes").glob(f"{DEMO}-*/{MANIFEST}"))
        return CorpusCheck(entry.name, "demo", str(built[-1].parent) if built else "built on first use", entry.description, True, 1 if built else 0, "built" if built else "not built yet")
    check = CorpusCheck(entry.name, entry.backend, str(entry.path), entry.description)
    try:
        index = LocalIndex(entry.path, name=entry.name) if entry.path else None
    except IndexOpenError as error:
        check.reachable, check.message = False, str(error)
    else:
        check.reachable = index is not None
        check.message = f"{index.info.documents:,} documents" if index else ""
    return check


def chosen_entries(registry: Path | None = None, names: Collection[str] = ()) -> list[Entry]:
    """The registry's entries, or only those `names` gives (each of which must exist)."""
    entries = registry_entries(registry)
    unknown = sorted(set(names) - set(entries))
    if unknown:
        raise CorpusError(f"unknown corpus {', '.join(map(repr, unknown))}: not a registered name ({', '.join(sorted(entries))})")
    return [entry for name, entry in entries.items() if not names or name in names]


def check_corpora(registry: Path | None = None, timeout: float = 3.0, probe_remote: bool = True, names: Collection[str] = ()) -> list[CorpusCheck]:
    """Every registered corpus (or those `names` gives) with whether it answers now and what
    its cache holds.  API endpoints are probed side by side, each with `timeout` seconds and no
    retry, so an unreachable endpoint costs one timeout at most; with `probe_remote` False they
    are not asked here (`audit corpora --live` settles them by discovery instead)."""
    entries = chosen_entries(registry, names)
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(entries)))) as pool:
        return list(pool.map(lambda entry: _check(entry, timeout, probe_remote), entries))
