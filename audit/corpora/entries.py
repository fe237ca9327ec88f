"""The keys of a registry's `[corpora.NAME]` entry, one model per backend (see
`audit.corpora.registry`).  The client and query settings of a remote entry are the fields of
`ClientSettings` and `ApiOptions`, typed as there; their values are checked there too."""
from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, get_type_hints

from pydantic import Field, create_model, field_validator

from audit.corpora.apioptions import ApiOptions
from audit.corpora.client import ClientSettings
from audit.entries import EntryModel

API = "infini-gram-api"
MINI = "infini-gram-mini"
CLIENT_KEYS = ("timeout", "attempts", "backoff", "max_backoff", "concurrency", "min_concurrency", "start_concurrency", "fast_seconds", "throttle_wait", "throttle_patience", "max_requests", "max_response_bytes")
OPTION_KEYS = tuple(get_type_hints(ApiOptions))
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A client or query setting's value, as an entry gives it and the dataclasses take it.
Setting = str | int | float | bool


def _key_type(kind: type) -> object:
    """How an entry writes a setting of this type: a choice as its name, a number with or
    without a fraction (kept as written, so `timeout = 2` stays 2)."""
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        return str | None
    return (int | float | None) if kind is float else (kind | None)


def _setting_keys() -> dict[str, tuple[object, None]]:
    client, options = get_type_hints(ClientSettings), get_type_hints(ApiOptions)
    return {key: (_key_type(client[key]), None) for key in CLIENT_KEYS} | {key: (_key_type(options[key]), None) for key in OPTION_KEYS}


class _LocalSide(EntryModel):
    """The keys of an entry served from this machine."""

    description: str = ""

    @classmethod
    def unknown(cls, keys: list[str]) -> str:
        elsewhere = set(ApiKeys.model_fields) - set(cls.model_fields)
        if set(keys) <= elsewhere:
            return f"key(s) {', '.join(keys)} apply to {API} and {MINI} entries only"
        return f"unknown key(s) {', '.join(key for key in keys if key not in elsewhere)}"


class DemoKeys(_LocalSide):
    backend: Literal["demo"]
    path: str | None = None


class LocalKeys(_LocalSide):
    backend: Literal["local"]
    path: str
    minhash_redis: str | None = None

    required: ClassVar[Mapping[str, str]] = {"path": "is required for a local index"}

    @field_validator("minhash_redis")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("redis://"):
            raise ValueError(f"{value!r} is not a redis://host[:port][/db] URL of a local entry")
        return value


class _RemoteSide(EntryModel):
    """The keys of an entry answered by an infini-gram API, besides its settings."""

    index: Annotated[str, Field(min_length=1)]
    url: str | None = None
    cache: str | None = None
    token_env: str | None = None
    description: str = ""

    expected: ClassVar[Mapping[str, str]] = {"cache": "must be a file path"}

    @field_validator("url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("token_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not the name of an environment variable")
        return value

    def settings(self) -> dict[str, Setting]:
        """The client and query settings the entry gives."""
        return {key: value for key in (*CLIENT_KEYS, *OPTION_KEYS) if (value := getattr(self, key)) is not None}


_RemoteKeys = create_model("_RemoteKeys", __base__=_RemoteSide, **_setting_keys())


class ApiKeys(_RemoteKeys):
    backend: Literal["infini-gram-api"]

    required: ClassVar[Mapping[str, str]] = {"index": f"is required for an {API} entry (the server's index id)"}
    expected: ClassVar[Mapping[str, str]] = {**_RemoteSide.expected, "index": required["index"]}


class MiniKeys(_RemoteKeys):
    backend: Literal["infini-gram-mini"]

    required: ClassVar[Mapping[str, str]] = {"index": f"is required for an {MINI} entry (the server's index id)"}
    expected: ClassVar[Mapping[str, str]] = {**_RemoteSide.expected, "index": required["index"]}

    @field_validator("longest_match")
    @classmethod
    def _offered(cls, value: str | None) -> str | None:
        if value == "creativity":
            raise ValueError("'creativity' is not offered by the infini-gram mini API; use count")
        return value


# Each backend's model, in the order messages list them.
ENTRY_KINDS: Mapping[str, type[LocalKeys | DemoKeys | ApiKeys | MiniKeys]] = {"local": LocalKeys, "demo": DemoKeys, API: ApiKeys, MINI: MiniKeys}
