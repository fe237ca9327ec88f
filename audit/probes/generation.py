"""What is asked of a model and what it answered, the same for every backend.

A request is chat messages plus decoding settings; its `key` under a model id is what the
cache stores the answer by, so a changed prompt, model or setting is never answered from an
old output.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Protocol

from audit.errors import PlacedError


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Decoding:
    """Greedy at temperature 0; otherwise sampled with `seed`, so a sample is reproducible
    (k samples for a majority vote use seeds seed, seed+1, ...)."""

    temperature: float = 0.0
    max_tokens: int = 128
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class Request:
    """Chat messages to answer; or, with `choices`, the replies whose likelihood to score: a
    scored request is answered by the backend's log-probability of each choice as the whole
    reply, so a small model that never writes the asked-for JSON still picks one of them.
    `schema`: a JSON schema (as JSON text) the reply must follow, for an endpoint with
    structured outputs."""

    messages: tuple[Message, ...]
    decoding: Decoding = field(default_factory=Decoding)
    choices: tuple[str, ...] = ()
    schema: str = ""

    def key(self, model_id: str) -> str:
        """sha256 of the model id, the messages, the decoding settings and any choices or schema
        (absent from the payload when there are none, so generation keys stay as they were)."""
        payload: dict[str, object] = {"model": model_id, "messages": [[m.role.value, m.content] for m in self.messages], "decoding": asdict(self.decoding)}
        if self.choices:
            payload["choices"] = list(self.choices)
        if self.schema:
            payload["schema"] = self.schema
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, object]:
        shown: dict[str, object] = {"messages": [{"role": m.role.value, "content": m.content} for m in self.messages], "decoding": asdict(self.decoding)}
        if self.choices:
            shown["choices"] = list(self.choices)
        if self.schema:
            shown["schema"] = json.loads(self.schema)
        return shown


def chat(user: str, system: str | None = None, decoding: Decoding | None = None, choices: tuple[str, ...] = (), schema: str = "") -> Request:
    messages = ((Message(Role.SYSTEM, system),) if system else ()) + (Message(Role.USER, user),)
    return Request(messages, decoding or Decoding(), choices, schema)


SCORED = "scored"


@dataclass(frozen=True)
class Output:
    """One answer: its text, or the error that kept the backend from giving one.  `cached`
    says it came from the cache, not the model.  A scored request's answer is the likeliest
    choice, with every choice's summed token log-probability in `logprobs` (request order)
    and `finish_reason` `scored`."""

    text: str | None
    error: str | None = None
    cached: bool = False
    finish_reason: str | None = None
    logprobs: tuple[float, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.text is not None


def scored(choices: Sequence[str], logprobs: Sequence[float]) -> Output:
    """The Output of a scored request: the first of the likeliest choices, and every score."""
    best = max(range(len(choices)), key=lambda index: logprobs[index])
    return Output(choices[best], finish_reason=SCORED, logprobs=tuple(float(value) for value in logprobs))


class ProbeError(PlacedError):
    """A model that cannot be loaded or reached, or a bad model setting; the message names it."""


Progress = Callable[[int], None]


class Backend(Protocol):
    """Answers requests; one Output per request, in order, never raising for one failed
    request (its Output carries the error)."""

    model_id: str

    def describe(self) -> dict[str, object]:
        """What the audit manifest records about the model: backend, model id, path or endpoint."""
        ...

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        """Answers; for a request with choices, its scores (a backend that cannot score
        answers such a request with an error Output)."""
        ...
