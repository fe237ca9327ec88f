"""LLM-as-judge through any OpenAI-compatible chat endpoint, with a persistent cache.

The judge sees what ECLeKTic's judge sees (Goldman et al. 2025, arXiv:2502.21228): the
question, the gold answer and the context passage, in the language asked, and answers one
English word, YES or NO. The prompt follows the judge prompt of the authors' published
evaluation notebook (as reproduced in stanford-crfm/helm,
`src/helm/benchmark/annotation/eclektic_annotator.py`), which shows the context, question and
prediction; the gold answer is added because the paper's judge is given it.

Every raw output is kept with how it was parsed. The published code counts a judgment correct
when "yes" occurs anywhere in the output (so "not yes" or "yesterday" pass); here the verdict
is the first word if it is YES or NO, else the only one of the two that occurs as a word,
else none (`ambiguous` / `unparsed`), and an unparsed judgment scores nothing rather than NO.

Requests run on a bounded thread pool; the openai client retries rate limits, server errors
and dropped connections with backoff. Outputs are cached in SQLite keyed by endpoint, model,
sampling settings and the full prompt, so a re-run asks nothing already answered.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from audit.errors import AuditError
from audit.paths import cache_dir
from audit.probes.remote import unreachable
from audit.records import JsonObject

if TYPE_CHECKING:
    from openai import OpenAI

PROMPT_VERSION = 1
OK, FOUND, AMBIGUOUS, UNPARSED, EMPTY, ERROR, SKIPPED = "ok", "found", "ambiguous", "unparsed", "empty", "error", "skipped"

_PROMPT = """\
**Task:** Determine if a predicted answer to the question is correct, given a text and the gold answer.

**Input (in {language}):**
- Text
- Question
- Gold answer
- Predicted answer

**Single Word Output (in English):**
- YES: The predicted answer gives the gold answer, as supported by the text.
- NO: The predicted answer is wrong, incomplete, or not an answer.

Text:
{context}

Question:
{question}

Gold answer:
{gold}

Predicted answer:
{prediction}

Output:
"""
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")

Progress = Callable[[int, int], None]


class JudgeError(AuditError):
    """The judge cannot run: missing configuration, or an endpoint that answered nothing."""


def default_cache_path() -> Path:
    return cache_dir() / "judge-cache.sqlite"


@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to judge; unset fields come from the environment in `resolve`.

    model: `AUDIT_JUDGE_MODEL`; base_url: `AUDIT_JUDGE_BASE_URL`, else `OPENAI_BASE_URL`, else
    OpenAI's; api_key: `AUDIT_JUDGE_API_KEY`, else `OPENAI_API_KEY` (any value for a server that
    needs none); cache_path: see `default_cache_path`. `retries` is per request, `timeout` in
    seconds per attempt; `max_tokens` None sends no limit (some models reject one).
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    retries: int = 3
    timeout: float = 60.0
    cache_path: Path | None = None
    temperature: float | None = 0.0
    max_tokens: int | None = None

    def resolve(self) -> JudgeConfig:
        env = os.environ
        resolved = replace(
            self,
            model=self.model or env.get("AUDIT_JUDGE_MODEL"),
            base_url=self.base_url or env.get("AUDIT_JUDGE_BASE_URL") or env.get("OPENAI_BASE_URL"),
            api_key=self.api_key or env.get("AUDIT_JUDGE_API_KEY") or env.get("OPENAI_API_KEY"),
            cache_path=Path(self.cache_path) if self.cache_path else default_cache_path(),
        )
        if not resolved.model:
            raise JudgeError("no judge model: set AUDIT_JUDGE_MODEL or give JudgeConfig(model=...)")
        if not resolved.api_key:
            raise JudgeError("no API key: set AUDIT_JUDGE_API_KEY or OPENAI_API_KEY (any value for a server that needs none)")
        if resolved.concurrency < 1:
            raise JudgeError(f"concurrency must be at least 1, got {resolved.concurrency}")
        if resolved.retries < 0 or resolved.timeout <= 0:
            raise JudgeError(f"retries must be >= 0 and timeout > 0, got {resolved.retries} and {resolved.timeout}")
        return resolved


@dataclass(frozen=True)
class JudgeRequest:
    """One answer to judge, with the material the judge sees (all in the language asked)."""

    language: str
    question: str | None
    gold: str | None
    context: str | None
    prediction: str


@dataclass(frozen=True)
class JudgeResult:
    verdict: bool | None
    status: str
    raw: str | None
    cached: bool
    model: str
    error: str | None = None

    def to_dict(self) -> JsonObject:
        return asdict(self)


def build_prompt(request: JudgeRequest) -> str:
    return _PROMPT.format(
        language=request.language,
        context=request.context or "(none)",
        question=request.question or "(none)",
        gold=request.gold or "(none)",
        prediction=request.prediction,
    )


def parse_verdict(output: str | None) -> tuple[bool | None, str]:
    """(verdict, how it was read): the first word if YES/NO, else the only one present."""
    if output is None or not output.strip():
        return None, EMPTY
    words = _WORD.findall(_THINKING.sub(" ", output).lower())
    if words and words[0] in ("yes", "no"):
        return words[0] == "yes", OK
    kinds = {word for word in words if word in ("yes", "no")}
    if len(kinds) == 1:
        return kinds.pop() == "yes", FOUND
    return None, AMBIGUOUS if kinds else UNPARSED


class JudgeCache:
    """Raw judge outputs in SQLite, written only from the calling thread."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, model TEXT, output TEXT, created REAL)"
            )
        except sqlite3.DatabaseError as exc:
            raise JudgeError(f"{path}: cannot use as the judge cache ({exc})") from None

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT output FROM judgments WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, model: str, output: str) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?)", (key, model, output, time.time()))

    def close(self) -> None:
        self._db.close()


def cache_key(config: JudgeConfig, prompt: str) -> str:
    material = {
        "version": PROMPT_VERSION, "base_url": config.base_url, "model": config.model,
        "temperature": config.temperature, "max_tokens": config.max_tokens, "prompt": prompt,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def judge(requests: list[JudgeRequest], config: JudgeConfig, progress: Progress | None = None) -> list[JudgeResult]:
    """Judge every request, cached ones first; raises only if the endpoint answered none at all."""
    config = config.resolve()
    model, cache_path = str(config.model), Path(str(config.cache_path))
    prompts = [build_prompt(r) if r.gold or r.context else None for r in requests]
    keys = [cache_key(config, p) if p is not None else None for p in prompts]
    results: list[JudgeResult | None] = [None] * len(requests)
    cache = JudgeCache(cache_path)
    try:
        wanted: dict[str, str] = {}
        for index, (prompt, key) in enumerate(zip(prompts, keys, strict=True)):
            if key is None or prompt is None:
                results[index] = JudgeResult(None, SKIPPED, None, False, model, "no gold answer or context to judge against")
                continue
            stored = cache.get(key)
            if stored is None:
                wanted[key] = prompt
            else:
                results[index] = _result(stored, True, model)
        sharing = Counter(key for key in keys if key in wanted)
        answers = _ask_all(wanted, sharing, config, cache, progress, total=len(requests))
    finally:
        cache.close()
    for index, key in enumerate(keys):
        if results[index] is None and key is not None:
            results[index] = answers[key]
    return [r for r in results if r is not None]


def _result(output: str, cached: bool, model: str) -> JudgeResult:
    verdict, status = parse_verdict(output)
    return JudgeResult(verdict, status, output, cached, model)


def _ask_all(
    wanted: dict[str, str],
    sharing: Counter[str],
    config: JudgeConfig,
    cache: JudgeCache,
    progress: Progress | None,
    *,
    total: int,
) -> dict[str, JudgeResult]:
    """Ask each distinct prompt once; `sharing` counts the requests waiting on each."""
    done = total - sum(sharing.values())
    if progress:
        progress(done, total)
    if not wanted:
        return {}
    from openai import OpenAI

    model = str(config.model)
    url = config.base_url or "https://api.openai.com/v1"
    if refused := unreachable(url):
        raise JudgeError(f"the judge endpoint {refused}")
    client = OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout, max_retries=config.retries)
    answers: dict[str, JudgeResult] = {}
    try:
        with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
            futures = {pool.submit(_ask, client, config, prompt): key for key, prompt in wanted.items()}
            for future in as_completed(futures):
                key = futures[future]
                output, error = future.result()
                if error is None and output is not None:
                    cache.put(key, model, output)
                    answers[key] = _result(output, False, model)
                else:
                    answers[key] = JudgeResult(None, ERROR, output, False, model, error)
                done += sharing[key]
                if progress:
                    progress(done, total)
    finally:
        client.close()
    if all(result.status == ERROR for result in answers.values()):
        first = next(iter(answers.values()))
        raise JudgeError(f"the judge endpoint {url} answered none of {len(answers)} requests: {first.error}")
    return answers


def _ask(client: OpenAI, config: JudgeConfig, prompt: str) -> tuple[str | None, str | None]:
    """(output, error): one chat completion, with the client's own retries."""
    from openai import OpenAIError

    options: JsonObject = {}
    if config.temperature is not None:
        options["temperature"] = config.temperature
    if config.max_tokens is not None:
        options["max_tokens"] = config.max_tokens
    try:
        completion = client.chat.completions.create(
            model=config.model, messages=[{"role": "user", "content": prompt}], **options
        )
    except OpenAIError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if not completion.choices:
        return None, "the endpoint returned no choices"
    return completion.choices[0].message.content or "", None
