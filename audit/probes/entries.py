"""The keys of a registry's `[models.NAME]` entry, one model per backend (see
`audit.probes.models`)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from audit.entries import EntryModel


class _ModelKeys(EntryModel):
    kind: ClassVar[str]
    cache: str | None = None
    description: str = ""

    @classmethod
    def unknown(cls, keys: list[str]) -> str:
        return f"unknown key(s) {', '.join(keys)}; a {cls.kind} entry has {', '.join(sorted(cls.model_fields))}"


class LocalKeys(_ModelKeys):
    kind: ClassVar[str] = "local"
    backend: Literal["local"]
    path: str
    gguf_file: str | None = None
    device: str | None = None
    batch_size: Annotated[int, Field(ge=1)] | None = None
    runtime: Literal["llama.cpp", "transformers"] | None = None
    parallel: Annotated[int, Field(ge=1)] | None = None

    required: ClassVar[Mapping[str, str]] = {"path": "is required: a local entry needs path (a .gguf file or a model directory)"}
    expected: ClassVar[Mapping[str, str]] = {"batch_size": "must be a whole number, at least 1", "parallel": "must be a whole number, at least 1",
                                             "runtime": 'must be "llama.cpp" or "transformers"'}


class OpenAiKeys(_ModelKeys):
    kind: ClassVar[str] = "openai"
    backend: Literal["openai"]
    base_url: str
    model: str
    api_key_env: str | None = None
    concurrency: int = 4
    max_retries: int = 4
    timeout: int | float = 120
    structured_outputs: bool = False

    required: ClassVar[Mapping[str, str]] = {"base_url": "is required: an openai entry needs base_url and model", "model": "is required: an openai entry needs base_url and model"}


ENTRY_KINDS: Mapping[str, type[LocalKeys | OpenAiKeys]] = {"local": LocalKeys, "openai": OpenAiKeys}
