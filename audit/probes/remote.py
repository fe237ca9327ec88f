"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp's server, our `audit probe
serve-model`) as a probe backend, through the `openai` client.

The client retries connection errors, timeouts, 408/409/429 and 5xx answers with exponential
backoff and honours `Retry-After`; what still fails after `max_retries` becomes that request's
error, never an answer.  At most `concurrency` requests are in flight.
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from audit.probes.generation import Output, ProbeError, Progress, Request


@dataclass(frozen=True)
class RemoteSettings:
    base_url: str
    model: str
    api_key: str | None = None
    concurrency: int = 4
    max_retries: int = 4
    timeout: float = 120.0

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
        return {"backend": "openai", "model": s.model, "base_url": s.base_url, "concurrency": s.concurrency, "max_retries": s.max_retries}

    def _ask(self, request: Request) -> Output:
        from openai import OpenAIError

        decoding = request.decoding
        try:
            completion = self._client.chat.completions.create(
                model=self.settings.model,
                messages=[{"role": m.role.value, "content": m.content} for m in request.messages],
                temperature=decoding.temperature,
                top_p=decoding.top_p,
                max_tokens=decoding.max_tokens,
                seed=decoding.seed,
                n=1,
            )
        except OpenAIError as error:
            return Output(None, error=f"{type(error).__name__}: {error}")
        if not completion.choices:
            return Output(None, error="the endpoint answered with no choices")
        choice = completion.choices[0]
        content = choice.message.content
        if content is None:
            return Output(None, error=f"the endpoint answered with no text (finish_reason {choice.finish_reason})")
        return Output(content, finish_reason=choice.finish_reason)

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        outputs: list[Output | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            futures = {pool.submit(self._ask, request): index for index, request in enumerate(requests)}
            for future in as_completed(futures):
                outputs[futures[future]] = future.result()
                if progress:
                    progress(1)
        return [output for output in outputs if output is not None]
