"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp's server, our `audit probe
serve-model`) as a probe backend, through the `openai` client.

The client retries connection errors, timeouts, 408/409/429 and 5xx answers with exponential
backoff and honours `Retry-After`; what still fails after `max_retries` becomes that request's
error, never an answer.  At most `concurrency` requests are in flight.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from urllib.parse import urlsplit

from audit.probes.generation import Output, ProbeError, Progress, Request

_PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def unreachable(base_url: str, timeout: float = 5.0) -> str | None:
    """Why nothing can answer at an endpoint (refused, no such host), or None: checked once, so
    a closed port fails in seconds instead of after every request's retries.  Behind a proxy
    the endpoint is the proxy's business, and is not checked."""
    if any(os.environ.get(name) for name in _PROXIES):
        return None
    parts = urlsplit(base_url)
    try:
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        return f"{base_url}: not a URL ({error})"
    if not host:
        return f"{base_url}: no host in the URL"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        return f"{base_url}: nothing answers at {host}:{port} ({error.strerror or error})"
    return None


@dataclass(frozen=True)
class RemoteSettings:
    base_url: str
    model: str
    api_key: str | None = None
    concurrency: int = 4
    max_retries: int = 4
    timeout: float = 120.0
    # The endpoint constrains replies to a JSON schema (`response_format`), so a judge's reply
    # is always one of the allowed verdicts.
    structured_outputs: bool = False

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ProbeError(f"base_url {self.base_url!r} is not an http(s) URL")
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout <= 0:
            raise ProbeError("concurrency must be at least 1, max_retries 0 or more and timeout positive")


class RemoteModel:
    def __init__(self, settings: RemoteSettings) -> None:
        try:
            from openai import OpenAI
        except ImportError:
            raise ProbeError('the OpenAI-compatible backend needs the openai package: pip install "corpus-audit[probe]"') from None
        self.settings = settings
        self.model_id = f"{settings.model}@{settings.base_url.rstrip('/')}"
        # A placeholder key: local servers need none, but the client refuses to start without one.
        self._client = OpenAI(base_url=settings.base_url, api_key=settings.api_key or "none", max_retries=settings.max_retries, timeout=settings.timeout)

    def describe(self) -> dict[str, object]:
        s = self.settings
        return {"backend": "openai", "model": s.model, "base_url": s.base_url, "concurrency": s.concurrency, "max_retries": s.max_retries} | (
            {"structured_outputs": True} if s.structured_outputs else {})

    def _ask(self, request: Request) -> Output:
        from openai import OpenAIError

        decoding = request.decoding
        constrained = {"response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": json.loads(request.schema), "strict": True}}} if request.schema else {}
        try:
            completion = self._client.chat.completions.create(
                model=self.settings.model,
                messages=[{"role": m.role.value, "content": m.content} for m in request.messages],
                temperature=decoding.temperature,
                top_p=decoding.top_p,
                max_tokens=decoding.max_tokens,
                seed=decoding.seed,
                n=1,
                **constrained,  # type: ignore[arg-type]
            )
        except OpenAIError as error:
            return Output(None, error=f"{self.settings.base_url}: {type(error).__name__}: {error}")
        if not completion.choices:
            return Output(None, error="the endpoint answered with no choices")
        choice = completion.choices[0]
        content = choice.message.content
        if content is None:
            return Output(None, error=f"the endpoint answered with no text (finish_reason {choice.finish_reason})")
        return Output(content, finish_reason=choice.finish_reason)

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        if requests and (refused := unreachable(self.settings.base_url)):
            raise ProbeError(refused)
        outputs: list[Output | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            futures = {pool.submit(self._ask, request): index for index, request in enumerate(requests)}
            for future in as_completed(futures):
                outputs[futures[future]] = future.result()
                if progress:
                    progress(1)
        return [output for output in outputs if output is not None]
