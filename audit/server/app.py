"""`audit serve`: the infini-gram query protocol over local indexes, plus audit jobs.

Routes:
- `POST /`: an infini-gram query (`index`, `query_type`, `query` or `query_ids`, ...), answered
  as the public API answers it, errors included (`{"error": "..."}`).
- `POST /mini/`: an infini-gram mini query (`count`, `find`, `get_doc_by_rank` with
  `max_ctx_len`) over a byte-level index, as the infini-gram mini API answers it.
- `GET /health`: liveness, the indexes served and by what (`served_by`: the engine in this
  process, or N Ray actors at an address), and what jobs may name: link sources and probe
  models (with how many prompts each answered from its cache or by running).
  `GET /indexes`: what each index holds.
- `POST /jobs?index=NAME[&format=...][&langs=en,fr][&policy=DIGEST][&map=key=col,...][&source_lang=en][&links=NAME,...][&as_of=YYYY-MM-DD][&probe_model=NAME]`
  with a benchmark file as the body: an audit job (`probe_model`: one of the models `/health`
  lists; without it no model is probed); `GET /jobs/{id}` its status (`prepare`: the step
  under way before variants are checked, such as the probe's prompts, and how far it is;
  `done`/`total`: variants checked); `GET /jobs/{id}/result` the audit file once done.  `POST /policies` with a policy TOML as the body keeps it and answers its digest,
  for `policy=`; without one a job uses the server's policy (`--policy`, else the built-in).

Every failure is JSON `{"error": "..."}`.  Request bodies over `max_body_bytes` get 413, and
past `max_concurrent` requests in flight a request waits `queue_seconds` for a place, then gets
503 with `Retry-After`, which the project's client retries with backoff; so does a query whose
shard actor failed even after Ray's restarts and retries.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from audit import __version__
from audit.server.engine import QueryError, QueryRequest, ServedIndex
from audit.server.jobs import JobError, JobManager, model_health
from audit.server.mini import MiniRequest, answer_mini

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1 << 20
    max_job_bytes: int = 64 << 20
    max_concurrent: int = 16
    queue_seconds: float = 2.0


def error(message: str, status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class _TooLarge(Exception):
    pass


class GuardMiddleware:
    """Request-size and concurrency limits, applied before a request reaches its route, so an
    oversize or surplus request costs the server almost nothing.  `/health` is exempt."""

    def __init__(self, app: ASGIApp, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits
        self._slots: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/health":
            await self.app(scope, receive, send)
            return
        limit = self.limits.max_job_bytes if scope["path"].startswith("/jobs") else self.limits.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_json(send, 413, {"error": f"request body of {int(declared)} bytes is over the limit of {limit} bytes"})
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.max_concurrent)
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=self.limits.queue_seconds)
        except TimeoutError:
            busy = {"error": f"server busy: {self.limits.max_concurrent} requests in progress; retry shortly"}
            await _send_json(send, 503, busy, [(b"retry-after", b"1")])
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await _send_json(send, 413, {"error": f"request body is over the limit of {limit} bytes"})
        finally:
            self._slots.release()


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


async def _answer(served: ServedIndex | None, name: str, ask: Callable[[ServedIndex], dict[str, Any]]) -> JSONResponse:
    if served is None:
        return error(f"Invalid index: {name}", 400)
    try:
        result = await asyncio.to_thread(ask, served)
    except QueryError as exc:
        return error(str(exc), exc.status, {"Retry-After": "1"} if exc.status == 503 else None)
    return JSONResponse(result)


def create_app(indexes: dict[str, ServedIndex], jobs: JobManager | None = None, limits: ServerLimits | None = None) -> FastAPI:
    """The service over `indexes`; `jobs` enables the audit-job routes."""
    limits = limits or ServerLimits()
    app = FastAPI(title="corpus-audit", version=__version__, description=__doc__)
    app.add_middleware(GuardMiddleware, limits=limits)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(str(exc.detail), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(_describe(exc.errors()), 400)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return error(f"Internal server error: {type(exc).__name__}: {exc}", 500)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok", "version": __version__, "indexes": sorted(indexes), "jobs": jobs is not None, "policy": jobs.policy.digest if jobs else None,
            "served_by": {name: indexes[name].served_by for name in sorted(indexes)},
            "links": sorted(jobs.links) if jobs else [],
            "probe_models": [model_health(model) for _, model in sorted(jobs.probe_models.items())] if jobs else [],
            "judge_model": model_health(jobs.probes.judge) if jobs and jobs.probes and jobs.probes.judge else None,
        }

    @app.get("/indexes")
    def list_indexes() -> list[dict[str, Any]]:
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

        @app.post("/policies", status_code=201)
        async def add_policy(request: Request) -> JSONResponse:
            body = await request.body()
            try:
                policy = await asyncio.to_thread(jobs.add_policy, body)
            except JobError as exc:
                return error(str(exc), exc.status)
            return JSONResponse({"policy": policy.digest, "name": policy.name, "settings": policy.settings}, status_code=201)

        @app.post("/jobs", status_code=202)
        async def submit(
            request: Request, index: str, format: str | None = None, langs: str | None = None, filename: str = "benchmark", policy: str | None = None,
            map: str | None = None, source_lang: str | None = None, links: str | None = None, as_of: str | None = None, probe_model: str | None = None,
        ) -> JSONResponse:
            body = await request.body()
            try:
                job = await asyncio.to_thread(jobs.submit, index, body, filename, format, langs, policy, map, source_lang, links, as_of, probe_model)
            except JobError as exc:
                return error(str(exc), exc.status)
            return JSONResponse(job.public(), status_code=202, headers={"Location": f"/jobs/{job.id}"})

        @app.get("/jobs/{job_id}")
        def status(job_id: str) -> JSONResponse:
            try:
                return JSONResponse(jobs.get(job_id).public())
            except JobError as exc:
                return error(str(exc), exc.status)

        @app.get("/jobs/{job_id}/result", response_model=None)
        def result(job_id: str) -> FileResponse | JSONResponse:
            try:
                path = jobs.result_path(job_id)
            except JobError as exc:
                return error(str(exc), exc.status)
            return FileResponse(path, media_type="application/jsonl", filename=f"{job_id}.audit.jsonl")

    return app


def _describe(errors: list[Any]) -> str:
    """Pydantic's validation errors as one line: `field: problem; ...`."""
    parts = []
    for item in errors:
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "request"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)

