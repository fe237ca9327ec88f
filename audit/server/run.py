"""Starting `audit serve`: which indexes to serve, on which address, with which limits, and
where (`--executor`: in this process, or byte-level indexes held by Ray shard actors)."""
from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from pathlib import Path

from audit.corpora.api import ApiCorpus, ApiOptions
from audit.corpora.client import ClientSettings, InfiniGramClient
from audit.corpora.demo import DEMO, demo_index
from audit.corpora.protocol import MAX_QUERY_CHARS, MAX_QUERY_TOKENS
from audit.corpora.registry import read_registry
from audit.corpora.shards import IndexOpenError
from audit.errors import AuditError
from audit.executors import LOCAL, Executor, ExecutorError, parse_executor
from audit.index.errors import IndexBuildError
from audit.links.sources import LinkSource, open_links
from audit.paths import cache_dir, registry_file
from audit.policyfile import Policy, load_policy
from audit.probes.cache import CachedModel
from audit.probes.generation import ProbeError
from audit.probes.models import open_model
from audit.probes.prompts import PromptError, load_templates
from audit.server.app import create_app
from audit.server.engine import ServedIndex, actors_refusal
from audit.server.guard import Access, ServerLimits
from audit.server.jobs import JobError, JobManager
from audit.server.messages import Limits
from audit.server.probing import ProbeModels
from audit.server.protocol import header_deadline
from audit.server.retention import Retention
from audit.server.tokenizer import Tokenizer

TOKEN_ENV = "AUDIT_SERVE_TOKEN"
MIN_TOKEN = 16


class ServeError(AuditError):
    """A server that cannot start as asked; the message says why."""


def resolve_index(spec: str, registry: Path | None) -> tuple[str, Path, str]:
    """(name, directory, description) for `NAME=DIR`, `demo`, a registry name or a directory."""
    if "=" in spec:
        name, _, where = spec.partition("=")
        if not name or not where:
            raise ServeError(f"--index {spec!r}: expected NAME=DIR")
        return name, Path(where), ""
    if spec == DEMO:
        return DEMO, _demo(), "the bundled demo corpus"
    path = registry_file(registry)
    entry = read_registry(path).get(spec) if path else None
    if entry is not None:
        if entry.backend == "demo":
            return spec, _demo(), entry.description
        if entry.backend != "local" or entry.path is None:
            raise ServeError(f"--index {spec}: registry entry has backend {entry.backend!r}; only local indexes can be served")
        return spec, entry.path, entry.description
    if Path(spec).is_dir():
        return Path(spec).name, Path(spec), ""
    raise ServeError(f"--index {spec!r}: not demo, a local entry of the registry, NAME=DIR nor an index directory")


def _demo() -> Path:
    """The demo index, checked and rebuilt if damaged, or a ServeError saying why it cannot be."""
    try:
        return demo_index(cache_dir())
    except (IndexBuildError, IndexOpenError) as error:
        raise ServeError(f"--index demo: {error}") from None


_OPEN_ERRORS = (IndexOpenError, OSError, ValueError, RuntimeError)


def join_cluster(executor: Executor) -> None:
    """Connect to the Ray cluster, if one is named, before any index opens, so an unreachable
    one is one clear line."""
    try:
        executor.cluster()
    except ExecutorError as error:
        raise ServeError(f"--executor {executor}: {error}") from None


def _cannot_open(name: str, path: Path, error: Exception | str) -> ServeError:
    return ServeError(f"--index {name}: cannot open {path}: {error}")


def load_indexes(
    specs: list[str], tokenizers: dict[str, Path], registry: Path | None, limits: Limits, executor: Executor = LOCAL, actors: int | None = None
) -> dict[str, ServedIndex]:
    """The indexes to serve; with a Ray `executor` each is held by `actors` shard actors (one
    per shard by default).  Every index is named and its tokenizer read first, so what is
    refused without the cluster never waits on it; then the cluster is joined, before any
    index opens, so an unreachable one is one clear line."""
    planned: dict[str, tuple[Path, str, Tokenizer]] = {}
    for spec in specs:
        name, path, description = resolve_index(spec, registry)
        if name in planned:
            raise ServeError(f"--index {name} is given twice")
        try:
            tokenizer = Tokenizer(tokenizers.get(name))
        except _OPEN_ERRORS as error:
            raise _cannot_open(name, path, error) from None
        refusal = actors_refusal(name, tokenizer, executor)
        if refusal is not None:
            raise _cannot_open(name, path, refusal)
        planned[name] = (path, description, tokenizer)
    unknown = set(tokenizers) - set(planned)
    if unknown:
        raise ServeError(f"--tokenizer for {', '.join(sorted(unknown))}, which is not served")
    join_cluster(executor)
    served: dict[str, ServedIndex] = {}
    for name, (path, description, tokenizer) in planned.items():
        try:
            served[name] = ServedIndex(name, path, tokenizer, limits, description, executor, actors)
        except _OPEN_ERRORS as error:
            raise _cannot_open(name, path, error) from None
    return served


def serve(
    indexes: dict[str, ServedIndex],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: ServerLimits | None = None,
    jobs_dir: Path | None = None,
    job_workers: int = 1,
    policy: Policy | None = None,
    links: dict[str, LinkSource] | None = None,
    probes: ProbeModels | None = None,
    executor: Executor = LOCAL,
    announce=print,
    retention: Retention | None = None,
    allowed_hosts: tuple[str, ...] = (),
    token: str | None = None,
) -> None:
    """Serve until interrupted.  Port 0 binds a free port; the bound address is announced
    (on stdout by default) as `audit serve: listening on http://HOST:PORT`."""
    import uvicorn

    limits = limits or ServerLimits()
    require_token(host, token)

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        # Listening before the address is announced: a client that connects at once waits in
        # the backlog until the server accepts, instead of being refused.
        sock.listen(128)
    except OSError as error:
        raise ServeError(f"cannot bind {host}:{port}: {error}") from None
    bound = sock.getsockname()[1]
    own_url = f"http://{_loopback(host)}:{bound}/"
    corpora = {name: s.local if s.local is not None else _through_protocol(own_url, name, token) for name, s in indexes.items()}
    try:
        jobs = JobManager(
            jobs_dir or cache_dir() / "jobs", corpora, policy=policy, workers=job_workers, links=links, probes=probes, executor=executor,
            retention=retention, max_inflated_bytes=limits.max_inflated_bytes,
        )
    except JobError as error:
        raise ServeError(str(error)) from None
    app = create_app(indexes, jobs, limits, Access.bound(host, bound, allowed_hosts, token))
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2, http=header_deadline(limits.header_timeout))
    announce(f"audit serve: listening on http://{host if family == socket.AF_INET else f'[{host}]'}:{bound}")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        jobs.shutdown()
        for served in indexes.values():
            served.close()


def _loopback(host: str) -> str:
    """Where this server reaches itself: its own address, or loopback for a wildcard bind."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server to this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _through_protocol(url: str, name: str, token: str | None = None) -> ApiCorpus:
    """A tokenized index as audit jobs see it: through this server's own protocol, as the API
    backend sees the public indexes (count-derived longest matches, at token boundaries)."""
    return ApiCorpus(InfiniGramClient(ClientSettings(url=url, index=name, token=token or "")), name, ApiOptions(longest_match="count"))


def _pairs(values: list[str], flag: str) -> dict[str, Path]:
    pairs = {}
    for value in values:
        name, _, where = value.partition("=")
        if not name or not where:
            raise ServeError(f"{flag} {value!r}: expected NAME=PATH")
        pairs[name] = Path(where)
    return pairs


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="python -m audit.server", description="Serve local indexes over the infini-gram API protocol, with audit jobs.")
    parse.add_argument("--index", action="append", default=[], help="demo, a local registry name, NAME=DIR or DIR (repeatable; default demo)")
    parse.add_argument("--tokenizer", action="append", default=[], help="NAME=PATH: serve NAME (a u16 or u32 index built by infini-gram) with this tokenizer.json")
    parse.add_argument("--registry", type=Path, help="corpus registry TOML [default: indexes/corpora.toml]")
    parse.add_argument("--executor", default="local", help="where byte-level indexes are served from: local (this process), ray ($RAY_ADDRESS or a new local Ray) or ray://HOST:PORT (shard actors; jobs run in Ray tasks) [default: local]")
    parse.add_argument("--actors", type=int, help="with a Ray executor, the actors holding each index's shards [default: one per node of the cluster]")
    parse.add_argument("--host", default="127.0.0.1", help="address to bind [default: 127.0.0.1, this machine only]")
    parse.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one [default: 8000]")
    parse.add_argument("--max-concurrent", type=int, default=16, help="requests handled at once before others wait, then get 503")
    parse.add_argument("--queue-seconds", type=float, default=2.0, help="how long a request waits for a place before 503")
    parse.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest query request body")
    parse.add_argument("--max-job-bytes", type=int, default=64 << 20, help="largest benchmark file a job may upload")
    parse.add_argument("--max-inflated-bytes", type=int, default=256 << 20, help="most bytes a gzip or Zstandard upload may inflate to (413 past it)")
    parse.add_argument("--header-timeout", type=float, default=10.0, help="seconds a client has to send a request's headers (408 and closed past it)")
    parse.add_argument("--body-timeout", type=float, default=60.0, help="seconds a client has to send a request's whole body (408 past it)")
    parse.add_argument("--allowed-host", action="append", default=[], help="a further name the server answers to in the Host header, e.g. behind a proxy (repeatable; its own address and localhost always)")
    parse.add_argument("--token", help=f"a bearer token every request must carry (Authorization: Bearer TOKEN); required to bind other than loopback [default: ${TOKEN_ENV}]")
    parse.add_argument("--job-retention-days", type=float, default=7.0, help="finished jobs older than this are removed")
    parse.add_argument("--jobs-max-bytes", type=int, default=1 << 30, help="the oldest finished jobs are removed while the jobs folder holds more")
    parse.add_argument("--max-query-chars", type=int, default=MAX_QUERY_CHARS, help="longest query string, as the public API")
    parse.add_argument("--max-query-tokens", type=int, default=MAX_QUERY_TOKENS, help="most query tokens (bytes for byte-level indexes), as the public API")
    parse.add_argument("--jobs-dir", type=Path, help="where audit jobs keep their files [default: CACHE/jobs]")
    parse.add_argument("--job-workers", type=int, default=1, help="audit jobs run at once")
    parse.add_argument("--policy", type=Path, help="policy TOML for audit jobs that name none, merged over the built-in one")
    parse.add_argument("--links", action="append", default=[], help="a link source audit jobs may name (links=NAME): wikipedia-api, a registry [links.NAME] entry, or a lookup directory (repeatable)")
    parse.add_argument("--probe-model", action="append", default=[], help="a model audit jobs may probe (probe_model=NAME, its name): smollm2, gemma3-270m, openai:MODEL, a registry [models.NAME] entry, a .gguf file or a model directory (repeatable)")
    parse.add_argument("--judge-model", help="the model that judges every probe model's self-summaries [default: each probe model judges itself]")
    parse.add_argument("--reference-model", help="a second local model the membership signal reads each text with, for loss_minus_reference, for every probe model")
    parse.add_argument("--probe-prompts", type=Path, help="prompt templates (TOML) merged over the shipped ones")
    parse.add_argument("--probe-batch-size", type=int, help="prompts per batch for a local probe model [default: the registry's, else 8]")
    parse.add_argument("--offline", action="store_true", help="link sources and probe models answer from their caches only")
    return parse


def load_links(values: list[str], registry: Path | None, offline: bool) -> dict[str, LinkSource]:
    """Link sources by the name jobs give them (their own name: a directory's, an entry's)."""
    sources: dict[str, LinkSource] = {}
    for value in values:
        source = open_links(value, registry, offline=offline)
        if source.name in sources:
            raise ServeError(f"--links {value}: a source named {source.name!r} is given already")
        sources[source.name] = source
    return sources


def load_probes(values: list[str], judge: str | None, prompts: Path | None, registry: Path | None, *, offline: bool, batch_size: int | None,
                reference: str | None = None) -> ProbeModels | None:
    """The probe models by the name jobs give them (each model's own name), opened as `audit
    check --probe-model` opens one; nothing is loaded until a job asks a prompt the cache lacks."""
    if not values:
        if judge or prompts or batch_size or reference:
            raise ServeError("--judge-model, --reference-model, --probe-prompts and --probe-batch-size apply to probe models, which are offered only with --probe-model")
        return None
    models: dict[str, CachedModel] = {}
    given: dict[str, str] = {}
    for value in values:
        model = _open_model("--probe-model", value, registry, offline, batch_size)
        if model.name in models:
            raise ServeError(f"--probe-model {value}: a model named {model.name!r} is given already (by --probe-model {given[model.name]})")
        models[model.name], given[model.name] = model, value
    judging = None
    if judge is not None:
        opened = _open_model("--judge-model", judge, registry, offline, batch_size)
        same = models.get(opened.name)
        # The judge is one of the probe models: share it, so it loads once and runs one call at a time.
        judging = same if same is not None and same.model_id == opened.model_id else opened
    try:
        templates = load_templates(prompts)
    except PromptError as error:
        raise ServeError(f"--probe-prompts {prompts}: {error}") from None
    referring = _open_model("--reference-model", reference, registry, offline, batch_size) if reference else None
    if referring is not None and referring.name in models:
        raise ServeError(f"--reference-model {reference}: is one of the probe models; a reference is a second model, whose loss each probe model's is compared with")
    return ProbeModels(models, judging, templates, prompts, referring)


def _open_model(flag: str, value: str, registry: Path | None, offline: bool, batch_size: int | None) -> CachedModel:
    try:
        return open_model(value, registry, offline=offline, batch_size=batch_size)
    except ProbeError as error:
        raise ServeError(f"{flag} {value}: {str(error).removeprefix(f'--probe-model {value}: ')}") from None


def check_limits(args: argparse.Namespace) -> None:
    """Every numeric option in its range, so a bad value is a message, not a crash later."""
    positive = ("max_concurrent", "max_body_bytes", "max_job_bytes", "max_query_chars", "max_query_tokens", "job_workers", "max_inflated_bytes", "jobs_max_bytes")
    for name in positive:
        if getattr(args, name) < 1:
            raise ServeError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    for name in ("header_timeout", "body_timeout", "job_retention_days"):
        if not getattr(args, name) > 0:
            raise ServeError(f"--{name.replace('_', '-')} must be more than 0, got {getattr(args, name)}")
    if args.actors is not None and args.actors < 1:
        raise ServeError(f"--actors must be at least 1, got {args.actors}")
    if args.probe_batch_size is not None and args.probe_batch_size < 1:
        raise ServeError(f"--probe-batch-size must be at least 1, got {args.probe_batch_size}")
    if args.queue_seconds < 0:
        raise ServeError(f"--queue-seconds must be 0 or more, got {args.queue_seconds}")
    if not 0 <= args.port <= 65535:
        raise ServeError(f"--port must be between 0 and 65535, got {args.port}")


def _token(given: str | None) -> str | None:
    """The token from --token, else the environment; a short one is refused."""
    token = given if given is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and (len(token) < MIN_TOKEN or not token.isprintable() or " " in token):
        raise ServeError(f"the token (--token or ${TOKEN_ENV}) must be at least {MIN_TOKEN} printable characters without spaces")
    return token


def require_token(host: str, token: str | None) -> None:
    """A server others can reach answers only requests carrying its token."""
    if token is None and not is_loopback(host):
        raise ServeError(
            f"--host {host} opens the server to other machines: give a token (--token or ${TOKEN_ENV}, at least {MIN_TOKEN} characters), "
            "which every request must then carry as Authorization: Bearer TOKEN"
        )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        check_limits(args)
        token = _token(args.token)
        require_token(args.host, token)
        executor = parse_executor(args.executor)
        if args.actors is not None and not executor.distributed:
            raise ServeError("--actors applies to a Ray executor (--executor ray or ray://HOST:PORT)")
        # The probe models first: opening one reads its file only, so a bad value fails fast.
        probes = load_probes(args.probe_model, args.judge_model, args.probe_prompts, args.registry, offline=args.offline, batch_size=args.probe_batch_size,
                             reference=args.reference_model)
        limits = Limits(max_query_chars=args.max_query_chars, max_query_tokens=args.max_query_tokens)
        indexes = load_indexes(args.index or [DEMO], _pairs(args.tokenizer, "--tokenizer"), args.registry, limits, executor, args.actors)
        server_limits = ServerLimits(
            max_body_bytes=args.max_body_bytes, max_job_bytes=args.max_job_bytes, max_concurrent=args.max_concurrent, queue_seconds=args.queue_seconds,
            header_timeout=args.header_timeout, body_timeout=args.body_timeout, max_inflated_bytes=args.max_inflated_bytes,
        )
        serve(
            indexes,
            host=args.host,
            port=args.port,
            limits=server_limits,
            jobs_dir=args.jobs_dir,
            job_workers=args.job_workers,
            policy=load_policy(args.policy) if args.policy else None,
            links=load_links(args.links, args.registry, args.offline),
            probes=probes,
            executor=executor,
            announce=lambda line: print(line, flush=True),
            retention=Retention(max_age_seconds=args.job_retention_days * 86400, max_bytes=args.jobs_max_bytes),
            allowed_hosts=tuple(args.allowed_host),
            token=token,
        )
    except AuditError as error:
        print(f"audit serve: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"audit serve: {error.filename + ': ' if error.filename else ''}{error.strerror or error}", file=sys.stderr)
        return 1
    return 0
