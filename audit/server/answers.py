"""The shape of what the server answers: JSON, as the infini-gram engine and API answer it."""
from __future__ import annotations

from typing import TypeAlias

# A JSON value as the engine's answers hold it (token ids key some tables; ranges are pairs).
Json: TypeAlias = "int | float | str | bool | list[Json] | tuple[int, int] | dict[str, Json] | dict[int, Json] | None"
Answer: TypeAlias = "dict[str, Json]"
