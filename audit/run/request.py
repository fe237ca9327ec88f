"""What one audit is asked to do: the check command's inputs, by their option names.

The command line parses its options into an `AuditRequest`, a server job validates its query
into one, and the Python API builds one from keywords; `run_audit` takes it from there.
Problems a request can have before any work starts are `RequestError`s naming the option.
"""
from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from audit.corpora.base import Profile
from audit.errors import AuditError
from audit.executors import Executor, ExecutorError, parse_executor
from audit.readers import FORMATS


class RequestError(AuditError):
    """A request that cannot run: `field` names the option (`langs` for `--langs`), or is
    None when the message comes whole from what refused it (a benchmark's reader, a registry);
    `place()` then gives that error's path, line and field."""

    def __init__(self, field: str | None, message: str, *, named: bool = True) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.named = named and field is not None

    @classmethod
    def wrap(cls, error: AuditError) -> RequestError:
        """An error raised while the request's inputs were read or opened, as it said it."""
        wrapped = cls(None, str(error))
        wrapped.path, wrapped.line, wrapped.field = error.place()
        return wrapped

    def __str__(self) -> str:
        """As the command line says it: `--langs: ...`."""
        return f"--{(self.field or '').replace('_', '-')}: {self.message}" if self.named else self.message

    def by_field(self) -> str:
        """As a server says it, naming its query field: `langs: ...`."""
        return f"{self.field}: {self.message}" if self.named else self.message


class Header(StrEnum):
    FIRST = "first"
    NONE = "none"


def _comma_joined(value: object) -> object:
    return ",".join(value) if isinstance(value, list | tuple) else value


class AuditRequest(BaseModel):
    """`langs` and `signals` are comma-separated as the options take them (a list is joined);
    without `out` the audit is written to BENCH.CORPUS.audit.jsonl (corpora joined by +)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: Path
    corpora: tuple[str, ...] = Field(min_length=1)
    format: str | None = None
    mapping: str | None = None
    source_lang: str | None = None
    header: Header | None = None
    langs: str | None = None
    skip_bad_rows: bool = False
    registry: Path | None = None
    signals: str | None = None
    policy: Path | None = None
    links: tuple[str, ...] = ()
    as_of: date | None = None
    probe_model: str | None = None
    judge_model: str | None = None
    reference_model: str | None = None
    probe_prompts: Path | None = None
    probe_batch_size: int | None = Field(default=None, ge=1)
    offline: bool = False
    max_requests: int | None = Field(default=None, ge=1)
    profile: Profile | None = None
    workers: int | None = Field(default=None, ge=1)
    executor: str = "local"
    actors: int | None = Field(default=None, ge=1)
    out: Path | None = None

    _joined = field_validator("langs", "signals", mode="before")(_comma_joined)

    @field_validator("as_of", mode="before")
    @classmethod
    def _day(cls, value: object) -> object:
        return value.date() if isinstance(value, datetime) else value

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        if value is not None and value not in FORMATS:
            raise ValueError(f"{value!r} is not one of {', '.join(FORMATS)}")
        return value

    @classmethod
    def of(cls, **fields: object) -> AuditRequest:
        """A request from keywords; a value of the wrong kind is a RequestError naming it."""
        try:
            return cls.model_validate(fields)
        except ValidationError as error:
            first = error.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else None
            raise RequestError(field, first["msg"].removeprefix("Value error, ")) from None

    @property
    def target(self) -> Path:
        """The audit file to write."""
        return self.out or default_out(self.benchmark, self.corpora)

    def inputs(self) -> list[Path]:
        """The files the audit reads that exist: no output may be written over one of them."""
        named = (self.benchmark, self.policy, self.registry, self.probe_prompts, *map(Path, self.corpora), *map(Path, self.links))
        return [path for path in named if path is not None and path.exists()]

    def where(self) -> Executor:
        """Where variants run, checked with what goes with it; and no corpus named twice."""
        try:
            where = parse_executor(self.executor)
        except ExecutorError as error:
            raise RequestError.wrap(error) from None
        if self.actors and not where.distributed:
            raise RequestError("actors", "--actors applies to a Ray executor (--executor ray or ray://HOST:PORT)", named=False)
        twice = sorted({c for c in self.corpora if self.corpora.count(c) > 1})
        if twice:
            raise RequestError("corpus", f"{', '.join(twice)} given twice")
        return where


def default_out(benchmark: Path, corpora: tuple[str, ...]) -> Path:
    """Named after the benchmark (a glob's nearest named directory: `data/*/test.*.jsonl` → data)."""
    globbed = any(c in str(benchmark) for c in "*?[")
    named = next((part for part in reversed(benchmark.parts) if not any(c in part for c in "*?[")), "") if globbed else benchmark.name
    stem = Path(named).name.split(".")[0] or "benchmark"
    return Path(f"{stem}.{'+'.join(Path(corpus).name for corpus in corpora)}.audit.jsonl")
