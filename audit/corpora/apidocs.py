"""An occurrence in an infini-gram API corpus, and its document as the API displays it: the window
of text around the occurrence, its metadata, and where the occurrence lies in it."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from audit.corpora.cache import JsonObject
from audit.corpora.client import ApiResponseError

if TYPE_CHECKING:
    from audit.corpora.api import ApiCorpus


@dataclass
class DocumentWindow:
    """A displayed stretch of one document around one occurrence."""

    document: int
    data: bytes
    needle_at: int
    offset_exact: bool
    metadata: JsonObject



@dataclass(frozen=True)
class Displayed:
    """A `get_doc_by_rank` / `get_doc_by_ptr` answer: the window, and where the occurrence lies
    in it in tokens (`needle_offset`) of the `disp_len` displayed."""

    window: DocumentWindow
    needle_offset: int
    disp_len: int


def displayed(response: JsonObject, wanted: int, where: str) -> Displayed:
    """The window an answer displays when `wanted` tokens were asked for, centred on the
    occurrence: its offset is exact when the window starts at the document's start."""
    try:
        document = int(response["doc_ix"])
        disp_len = int(response["disp_len"])
        doc_len = int(response.get("doc_len", disp_len))
        needle = int(response.get("needle_offset", wanted // 2))
        metadata = parse_metadata(response.get("metadata", ""))
    except (KeyError, TypeError, ValueError) as error:
        raise ApiResponseError(f"{where} answer lacks {error}") from None
    exact = needle < wanted // 2 or disp_len == doc_len
    data, needle_at = locate_in_spans(response.get("spans") or [], needle, disp_len)
    return Displayed(DocumentWindow(document=document, data=data, needle_at=needle_at, offset_exact=exact, metadata=metadata), needle, disp_len)


class ApiOccurrence:
    """An occurrence known by its shard and suffix-array rank (or, found by a CNF query, by its
    pointer into the shard, with its document already read); the document is fetched the first
    time a signal asks for it (and kept, as is the response in the cache)."""

    def __init__(self, corpus: ApiCorpus, shard: int, rank: int, query: str, variant: str, ptr: int | None = None, window: DocumentWindow | None = None) -> None:
        self.corpus, self.shard, self.rank, self.query, self.variant, self.ptr = corpus, shard, rank, query, variant, ptr
        self._window = window
        self._lock = threading.Lock()

    def window(self) -> DocumentWindow:
        with self._lock:
            if self._window is None:
                self._window = self.corpus._fetch_window(self)
            return self._window

    @property
    def document(self) -> int:
        return self.window().document

    @property
    def offset(self) -> int:
        return self.window().needle_at

    def __repr__(self) -> str:
        return f"ApiOccurrence(shard={self.shard}, rank={self.rank}, query={self.query!r})"


def char_starts(encoded: bytes) -> list[int]:
    return [i for i, b in enumerate(encoded) if b & 0xC0 != 0x80]


def parse_metadata(raw: JsonValue) -> JsonObject:
    """A document's metadata as a dict: the API sends the index's JSON line as a string."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"raw": value}


def locate_in_spans(spans: list[JsonValue], needle_offset: int, disp_len: int) -> tuple[bytes, int]:
    """The displayed text and the byte offset of the occurrence in it.  The protocol gives the
    text only as `spans` (its `token_ids` are the query's) and the occurrence's position only
    in tokens, and the client has no tokenizer: of the spans labelled as matches, the one whose
    position in the text is nearest the occurrence's position in the tokens is taken (exact on
    a byte-level index, where a token is a byte)."""
    texts = [str(span[0]) for span in spans if isinstance(span, list | tuple) and span]
    data = "".join(texts).encode("utf-8")
    if not data:
        return data, 0
    target = len(data) * needle_offset / max(disp_len, 1)
    best, at = None, 0
    for span in spans:
        width = len(str(span[0]).encode("utf-8"))
        if len(span) > 1 and span[1] is not None and (best is None or abs(at - target) < abs(best - target)):
            best = at
        at += width
    return data, int(best if best is not None else round(target))
