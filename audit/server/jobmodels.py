"""What `POST /jobs` takes (its query, validated into `JobRequest`) and what the job routes
answer (`JobStatus`); the server's own record of a job (`Job`, kept as job.json) adds the
paths a client never sees."""
from __future__ import annotations

import json
from datetime import date
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from audit.langcodes import normalise_lang
from audit.readers import FORMATS
from audit.readers.columns import MappingError, parse_inline
from audit.server.errors import JobError
from audit.timestamps import utc_timestamp

SERVER_PATHS = ("cache", "file", "path")
# A described model: its roles (probe, judge, prompts), each a table of plain values.
Models = dict[str, dict[str, object]]


def _names(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


class JobRequest(BaseModel):
    """`POST /jobs`'s query, checked before the upload is kept: `langs` and `links`
    comma-separated, `map` inline only (a client never names a file on the server)."""

    model_config = ConfigDict(frozen=True)

    index: str
    format: str | None = None
    langs: str | None = None
    filename: str = "benchmark"
    policy: str | None = None
    map: str | None = None
    source_lang: str | None = None
    links: str | None = None
    as_of: str | None = None
    probe_model: str | None = None

    @field_validator("format")
    @classmethod
    def _format(cls, value: str | None) -> str | None:
        if value is not None and value not in FORMATS:
            raise ValueError(f"format {value!r} is not one of {', '.join(FORMATS)}")
        return value

    @field_validator("langs")
    @classmethod
    def _langs(cls, value: str | None) -> str | None:
        try:
            return ",".join(normalise_lang(code) for code in _names(value) or []) or None
        except ValueError as error:
            raise ValueError(f"langs: {error}") from None

    @field_validator("map")
    @classmethod
    def _map(cls, value: str | None) -> str | None:
        try:
            if value:
                parse_inline(value, "map")
        except MappingError as error:
            raise ValueError(str(error)) from None
        return value or None

    @field_validator("source_lang")
    @classmethod
    def _source_lang(cls, value: str | None) -> str | None:
        try:
            return normalise_lang(value) if value else None
        except ValueError as error:
            raise ValueError(f"source_lang: {error}") from None

    @model_validator(mode="after")
    def _as_of(self) -> JobRequest:
        if self.as_of is not None:
            try:
                object.__setattr__(self, "as_of", date.fromisoformat(self.as_of).isoformat())
            except ValueError:
                raise ValueError(f"as_of: {self.as_of!r} is not a date (YYYY-MM-DD)") from None
            if not self.link_names:
                raise ValueError("as_of: applies to the langlinks signal, which runs only with links=")
        return self

    @property
    def link_names(self) -> list[str] | None:
        return _names(self.links)

    @classmethod
    def parse(cls, query: dict[str, str]) -> JobRequest:
        """The query as a request, or a JobError (400) saying what is wrong with it."""
        try:
            return cls.model_validate(query)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise JobError(message if first["type"] == "value_error" else f"{where}: {message}") from None


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class Step(BaseModel):
    """The step under way before variants are checked (the probe's prompts, the langlinks'
    batches), and how far it is."""

    step: str
    done: int = 0
    total: int | None = None


class JobStatus(BaseModel):
    """A job as its routes answer it."""

    id: str
    index: str
    format: str | None
    langs: list[str] | None
    benchmark: str = "benchmark"
    policy: str | None = None
    mapping: str | None = None
    source_lang: str | None = None
    links: list[str] | None = None
    as_of: str | None = None
    probe_model: str | None = None
    models: Models | None = None
    status: JobState = JobState.QUEUED
    submitted: str = ""
    finished: str | None = None
    done: int = 0
    total: int | None = None
    prepare: Step | None = None
    error: str | None = None
    summary: dict[str, object] | None = None
    restarts: int = 0


class Job(JobStatus):
    """A job as the server keeps it in job.json: `models` with the server's own paths (a
    model's cache and files, the prompt templates' file)."""

    model_config = ConfigDict(validate_assignment=False)

    def public(self) -> JobStatus:
        models = {role: {k: v for k, v in part.items() if k not in SERVER_PATHS} for role, part in self.models.items()} if self.models else self.models
        return JobStatus.model_validate(self.model_dump() | {"models": models})

    def saved(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2)

    @classmethod
    def from_file(cls, path: Path) -> Job:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))

    @classmethod
    def submitted_now(cls, **fields: object) -> Job:
        return cls.model_validate({"submitted": utc_timestamp(), **fields})
