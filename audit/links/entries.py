"""The keys of a registry's `[links.NAME]` entry, one model per backend (see
`audit.links.sources`).  The HTTP keys are `HttpSettings`'s, whose values it checks itself."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from audit.entries import EntryModel

DEFAULT_ENDPOINT = "https://{wiki}.wikipedia.org/w/api.php"
DEFAULT_WIKIDATA = "https://www.wikidata.org/w/api.php"
MAX_AGE_DAYS = 30
HTTP_KEYS = ("timeout", "attempts", "backoff", "max_backoff", "min_interval", "maxlag", "user_agent", "max_response_bytes")
_DUMP = "a dump entry has backend, path (a lookup directory) and description"


class DumpKeys(EntryModel):
    backend: Literal["dump"]
    path: str
    description: str = ""

    required: ClassVar[Mapping[str, str]] = {"path": f"is required: {_DUMP}"}

    @classmethod
    def unknown(cls, keys: list[str]) -> str:
        return f"{_DUMP}; unknown key(s) {', '.join(keys)}"


def _http(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


class ApiKeys(EntryModel):
    backend: Literal["api"]
    description: str = ""
    endpoint: str = DEFAULT_ENDPOINT
    wikidata_endpoint: str = DEFAULT_WIKIDATA
    cache: str | None = None
    max_age_days: Annotated[int, Field(ge=0)] = MAX_AGE_DAYS
    timeout: int | float | None = None
    attempts: int | None = None
    backoff: int | float | None = None
    max_backoff: int | float | None = None
    min_interval: int | float | None = None
    maxlag: int | None = None
    user_agent: str | None = None
    max_response_bytes: int | None = None

    expected: ClassVar[Mapping[str, str]] = {"cache": "must be a file path", "max_age_days": "must be a whole number of days, 0 or more"}

    @field_validator("endpoint")
    @classmethod
    def _wiki_endpoint(cls, value: str) -> str:
        if "{wiki}" not in _http(value):
            raise ValueError("must contain {wiki}, where the wiki's prefix goes")
        return value

    @field_validator("wikidata_endpoint")
    @classmethod
    def _wikidata_endpoint(cls, value: str) -> str:
        return _http(value)

    def http(self) -> dict[str, str | int | float]:
        """The HTTP settings the entry gives."""
        return {key: value for key in HTTP_KEYS if (value := getattr(self, key)) is not None}


ENTRY_KINDS: Mapping[str, type[ApiKeys | DumpKeys]] = {"api": ApiKeys, "dump": DumpKeys}
