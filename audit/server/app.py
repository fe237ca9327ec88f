"""`audit serve`: the infini-gram query protocol over local indexes, plus audit jobs.

Routes:
- `POST /`: an infini-gram query (`index`, `query_type`, `query` or `query_ids`, ...), answered
  as the public API answers it, errors included (`{"error": "..."}`).
- `POST /mini/`: an infini-gram mini query (`count`, `find`, `get_doc_by_rank` with
  `max_ctx_len`) over a byte-level index, as the infini-gram mini API answers it.
- `GET /health`: liveness, the indexes served and by what (`served_by`: the engine in this
  process, or N Ray actors at an address), and what jobs may name: link sources and probe
  models (with how many prompts each answered from its cache or by running).
  `GET /indexes`: what each index holds.  `GET /`: the index names, a JSON list, as the public
  infini-gram server lists them.
- `POST /jobs?index=NAME[&format=...][&langs=en,fr][&policy=DIGEST][&map=key=col,...][&source_lang=en][&links=NAME,...][&as_of=YYYY-MM-DD][&probe_model=NAME]`
  with a benchmark file as the body: an audit job (`probe_model`: one of the models `/health`
  lists; without it no model is probed); `GET /jobs/{id}` its status (`prepare`: the step
  under way before variants are checked, such as the probe's prompts, and how far it is;
  `done`/`total`: variants checked); `GET /jobs/{id}/result` the audit file once done.  `POST /policies` with a policy TOML as the body keeps it and answers its digest,
  for `policy=`; without one a job uses the server's policy (`--policy`, else the built-in).

`DELETE /jobs/{id}` removes a finished job and its folder (409 while it is queued or running).

Every failure is JSON `{"error": "..."}`.  What a request must pass first (Host, Origin,
token, content type, body size and deadline) is guard.py's.  Past `max_concurrent` requests in
flight a request waits `queue_seconds` for a place, then gets 503 with `Retry-After`, which the
project's client retries with backoff; so does a query whose shard actor failed even after
Ray's restarts and retries.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from audit import __version__
from audit.server.answers import Answer
from audit.server.engine import ServedIndex
from audit.server.guard import Access, GuardMiddleware, ServerLimits
from audit.server.jobmodels import JobRequest, JobStatus
from audit.server.jobs import JobError, JobManager
from audit.server.messages import QueryError, QueryRequest
from audit.server.mini import MiniRequest, answer_mini
from audit.server.probing import ModelHealth, model_health

Model = TypeVar("Model", bound=BaseModel)
__all__ = ["ServerLimits", "create_app"]


def error(message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _parse(body: bytes, model: type[Model]) -> Model | JSONResponse:
    """A request body as `model`, or the protocol's JSON error."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return error(f"request body is not valid JSON ({exc})", 400)
    if not isinstance(data, dict):
        return error("request body must be a JSON object", 400)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return error(_describe(exc.errors()), 400)


async def _answer(served: ServedIndex | None, name: str, ask: Callable[[ServedIndex], Answer]) -> JSONResponse:
    if served is None:
        return error(f"Invalid index: {name}", 400)
    try:
        result = await asyncio.to_thread(ask, served)
    except QueryError as exc:
        return error(str(exc), exc.status, {"Retry-After": "1"} if exc.status == 503 else None)
    return JSONResponse(result)


class Health(BaseModel):
    """`GET /health`: liveness, what is served and by what, and what jobs may name."""

    status: str
    version: str
    indexes: list[str]
    jobs: bool
    policy: str | None
    served_by: dict[str, str]
    links: list[str]
    probe_models: list[ModelHealth]
    judge_model: ModelHealth | None


def create_app(indexes: dict[str, ServedIndex], jobs: JobManager | None = None, limits: ServerLimits | None = None, access: Access | None = None) -> FastAPI:
    """The service over `indexes`; `jobs` enables the audit-job routes.  `access` says which
    Host values and token requests must carry (see guard.py); without it any Host is taken."""
    limits = limits or ServerLimits()
    app = FastAPI(title="corpus-audit", version=__version__, description=__doc__, docs_url=None, redoc_url=None)
    app.add_middleware(GuardMiddleware, limits=limits, access=access or Access())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(str(exc.detail), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(_describe(exc.errors()), 400)

    @app.get("/health", response_model=Health)
    def health() -> Health:
        return Health(
            status="ok", version=__version__, indexes=sorted(indexes), jobs=jobs is not None, policy=jobs.policy.digest if jobs else None,
            served_by={name: indexes[name].served_by for name in sorted(indexes)},
            links=sorted(jobs.links) if jobs else [],
            probe_models=[model_health(model) for _, model in sorted(jobs.probe_models.items())] if jobs else [],
            judge_model=model_health(jobs.probes.judge) if jobs and jobs.probes and jobs.probes.judge else None,
        )

    @app.get("/")
    def index_names() -> list[str]:
        """The names of the indexes served, a JSON list, as the public infini-gram server's
        `GET /` answers (api/api_server.py of liujch1998/infini-gram, commit 37d2929), so a
        client can ask either what it serves (`audit corpora --live`)."""
        return sorted(indexes)

    @app.get("/indexes", response_model=None)
    def list_indexes() -> list[Answer]:
        return [served.describe() for served in indexes.values()]

    @app.post("/")
    async def query(request: Request) -> JSONResponse:
        parsed = _parse(await request.body(), QueryRequest)
        if isinstance(parsed, JSONResponse):
            return parsed
        name = parsed.index if parsed.index is not None else parsed.corpus
        if name is None:
            return error("Missing required field: 'index'", 400)
        return await _answer(indexes.get(name), name, lambda served: served.answer(parsed))

    @app.post("/mini/")
    @app.post("/mini")
    async def query_mini(request: Request) -> JSONResponse:
        parsed = _parse(await request.body(), MiniRequest)
        if isinstance(parsed, JSONResponse):
            return parsed
        return await _answer(indexes.get(parsed.index), parsed.index, lambda served: answer_mini(served, parsed))

    if jobs is not None:
        _job_routes(app, jobs)
    return app


def _job_routes(app: FastAPI, jobs: JobManager) -> None:
    """The audit-job routes: policies, jobs, their status, result and removal."""

    @app.post("/policies", status_code=201)
    async def add_policy(request: Request) -> JSONResponse:
        body = await request.body()
        try:
            policy = await asyncio.to_thread(jobs.add_policy, body)
        except JobError as exc:
            return error(str(exc), exc.status)
        return JSONResponse({"policy": policy.digest, "name": policy.name, "settings": policy.settings}, status_code=201)

    @app.post("/jobs", status_code=202, response_model=JobStatus)
    async def submit(
        request: Request, index: str, format: str | None = None, langs: str | None = None, filename: str = "benchmark", policy: str | None = None,
        map: str | None = None, source_lang: str | None = None, links: str | None = None, as_of: str | None = None, probe_model: str | None = None,
    ) -> JSONResponse:
        body = await request.body()
        fields = {"index": index, "format": format, "langs": langs, "filename": filename, "policy": policy, "map": map, "source_lang": source_lang, "links": links, "as_of": as_of, "probe_model": probe_model}
        try:
            job = await asyncio.to_thread(jobs.submit, JobRequest.parse(fields), body)
        except JobError as exc:
            return error(str(exc), exc.status)
        return _status(job.public(), 202, headers={"Location": f"/jobs/{job.id}"})

    @app.get("/jobs/{job_id}", response_model=JobStatus)
    def status(job_id: str) -> JSONResponse:
        try:
            return _status(jobs.get(job_id).public())
        except JobError as exc:
            return error(str(exc), exc.status)

    @app.get("/jobs/{job_id}/result", response_model=None)
    def result(job_id: str) -> FileResponse | JSONResponse:
        try:
            path = jobs.result_path(job_id)
        except JobError as exc:
            return error(str(exc), exc.status)
        return FileResponse(path, media_type="application/jsonl", filename=f"{job_id}.audit.jsonl")

    @app.delete("/jobs/{job_id}")
    def delete(job_id: str) -> JSONResponse:
        try:
            job = jobs.delete(job_id)
        except JobError as exc:
            return error(str(exc), exc.status)
        return JSONResponse({"deleted": job.id, "status": job.status})


def _status(job: JobStatus, code: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(job.model_dump(mode="json"), status_code=code, headers=headers)


def _describe(errors: Sequence[Mapping[str, object]]) -> str:
    """Pydantic's validation errors as one line: `field: problem; ...`."""
    parts = []
    for item in errors:
        loc = item.get("loc", ())
        where = ".".join(str(p) for p in loc if p != "body") if isinstance(loc, tuple | list) else ""
        where = where or "request"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)

