"""The infini-gram mini API as a corpus: Common Crawl's 2025 crawls, DCLM-baseline and the Pile,
indexed as text (FM-indexes over UTF-8 bytes), with `count`, `find` and `get_doc_by_rank`
queries (docs/source/api.rst of xuhaoxh/infini-gram-mini).

It differs from the infini-gram API in these ways, and only those are handled here; requests,
retries, the cache, offline mode and the decisions from counts are the infini-gram backend's:
- no tokenizer: a query may start and end at any character, so every position is a possible
  match start, as on a byte-level index, and no leading-space form is tried;
- no longest-match query: longest matches are always derived from counts;
- a document is fetched as a window around the match, and the server counts that window in
  bytes although its documentation says characters (engine/src/cpp_engine.h
  `get_doc_by_rank` at e628b09): `max_ctx_len` bytes before the match, the needle's length
  plus `max_ctx_len` bytes from its start, where the needle's length is the `query` string's
  length in characters (api/api_server.py); `needle_offset`, `doc_len` and `disp_len` are
  bytes.  The match's offset in its document is exact only when the window reaches back to
  the document's start;
- the window is asked with a `query` string as many characters long as the match has bytes
  (the string only sets the needle's reach and the highlighting in `spans`), so it holds the
  whole match and `max_ctx_len` bytes either side;
- a window whose end cuts a multi-byte character is refused (HTTP 200 with a decode error).
  The request is then asked again with other byte reaches: `max_ctx_len` moves both ends, the
  length of the `query` string the far end alone, and within four consecutive values of each
  both ends land on character boundaries, so at most `DECODE_TRIES` requests are made.
  Provenance says how many were needed (`infini_gram_mini.decode_retries`), and so do the
  corpus details.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from audit.corpora.api import ApiCorpus, ApiOccurrence, ApiOptions, DocumentWindow, parse_metadata
from audit.corpora.base import DocumentHit
from audit.corpora.cache import JsonObject
from audit.corpora.client import ApiQueryError, ApiResponseError, InfiniGramClient, OfflineMiss
from audit.corpora.protocol import MAX_CTX_LEN

MINI_ENDPOINT = "https://api.infini-gram-mini.io/"
DECODE_ERROR_MARK = "Failed to decode document text with UTF-8"
# A UTF-8 character is at most four bytes: of four consecutive reaches, one ends on a boundary.
REACH_STEPS = 4
DECODE_TRIES = REACH_STEPS * REACH_STEPS


@dataclass
class MiniWindow(DocumentWindow):
    """A window as the mini server displayed it, and what it took to get one that decodes."""

    decode_retries: int = 0
    max_ctx_len: int = 0
    needle_len: int = 0


class MiniCorpus(ApiCorpus):
    """A corpus served over the infini-gram mini API."""

    BACKEND = "infini-gram-mini"

    def __init__(self, client: InfiniGramClient, name: str, options: ApiOptions | None = None, description: str = "") -> None:
        options = options or ApiOptions(longest_match="count")
        if options.longest_match == "creativity":
            raise ValueError("longest_match 'creativity' is not offered by the infini-gram mini API; use count")
        super().__init__(client, name, options, description)
        self._byte_level = True
        self._mode = "count"
        self.details.update({
            "tokenization": "characters",
            "longest_match": "count",
            "limits": {"max_query_chars": options.max_query_chars, "max_ctx_len": options.max_ctx_len},
            "document_windows": "bytes",
            "decode_retries": 0,
            "windows_decode_retried": 0,
        })

    @property
    def max_bytes(self) -> int:
        """Queries are limited in characters only; a character is at most four bytes."""
        return 4 * self.options.max_query_chars

    def _learn(self, text: str, response: dict) -> None:
        """Nothing to learn: the index is character-level."""

    def _window_requests(self, query: str) -> Iterator[tuple[int, int]]:
        """(max_ctx_len, needle length) pairs to ask: four consecutive values of each within
        the protocol's limits, the configured context and the match's length in bytes first.
        A needle as long as the match's bytes makes the window `max_ctx_len` bytes either side
        of it, both ends the same distance from a character boundary, so in a script of
        characters of one width the context alone finds a window that decodes: a multiple of
        that width (the match's most usual one) is tried first."""
        width = _usual_width(query)
        contexts = sorted(_consecutive(self.options.max_ctx_len, 1, MAX_CTX_LEN, upward=False), key=lambda c: c % width != 0)
        needles = _consecutive(len(query.encode("utf-8")), 0, self.options.max_query_chars, upward=True)
        for needle in needles:
            for context in contexts:
                yield context, needle

    def _fetch_window(self, occurrence: ApiOccurrence) -> MiniWindow:
        """The document around an occurrence, asked again with other reaches while the server
        cannot decode the window it cut (see the module docstring)."""
        refused, missed = 0, None
        for context, needle in self._window_requests(occurrence.query):
            try:
                response = self.client.query("get_doc_by_rank", query=_of_length(occurrence.query, needle), s=occurrence.shard, rank=occurrence.rank, max_ctx_len=context)
            except OfflineMiss as error:
                # Offline, the requests refused when the cache was filled are the ones it lacks.
                missed = missed or error
                refused += 1
                continue
            except ApiQueryError as error:
                if DECODE_ERROR_MARK not in str(error):
                    raise
                refused += 1
                continue
            if refused:
                with self._lock:
                    self.details["decode_retries"] += refused
                    self.details["windows_decode_retried"] += 1
            return self._window(occurrence, response, context, needle, refused)
        if missed is not None:
            raise missed
        raise ApiQueryError(
            f"{self.client.settings.url}: get_doc_by_rank s={occurrence.shard} rank={occurrence.rank}: no window the server could decode "
            f"after {refused} requests refused with '{DECODE_ERROR_MARK}' (max_ctx_len and needle lengths within 3 of the configured ones)"
        )

    def _window(self, occurrence: ApiOccurrence, response: JsonObject, context: int, needle: int, refused: int) -> MiniWindow:
        """The answer read in bytes, checked: its text holds `disp_len` bytes and the match
        lies at `needle_offset`."""
        where = f"{self.client.settings.url}: get_doc_by_rank s={occurrence.shard} rank={occurrence.rank}"
        try:
            document = int(response["doc_ix"])
            data = str(response["text"]).encode("utf-8")
            at = int(response["needle_offset"])
            doc_len = int(response["doc_len"])
            disp_len = int(response["disp_len"])
            metadata = parse_metadata(response.get("metadata", ""))
        except (KeyError, TypeError, ValueError) as error:
            raise ApiResponseError(f"{where}: answer lacks {error}") from None
        if disp_len != len(data) or not 0 <= at <= len(data) or doc_len < len(data):
            raise ApiResponseError(f"{where}: disp_len {disp_len}, needle_offset {at} and doc_len {doc_len} do not fit the {len(data)} bytes of its text (the mini protocol counts bytes)")
        match = occurrence.query.encode("utf-8")
        if data[at : at + len(match)] != match[: len(data) - at]:
            raise ApiResponseError(f"{where}: the text at needle_offset {at} is not the match {occurrence.query!r}")
        exact = at < context or len(data) >= doc_len
        return MiniWindow(document=document, data=data, needle_at=at, offset_exact=exact, metadata=metadata, decode_retries=refused, max_ctx_len=context, needle_len=needle)

    def document_hit(self, occurrence: ApiOccurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        hit = super().document_hit(occurrence, length_bytes, context_chars)
        window = occurrence.window()
        if isinstance(window, MiniWindow) and window.decode_retries:
            hit.metadata["infini_gram_mini"] = {"decode_retries": window.decode_retries, "max_ctx_len": window.max_ctx_len, "needle_len": window.needle_len}
        return hit


def _consecutive(value: int, low: int, high: int, upward: bool) -> list[int]:
    """`value` first, then the others of four consecutive integers in [low, high] holding it:
    above it if `upward` (a longer needle keeps the whole match in the window), else below
    (a context never wider than asked), where the limits allow."""
    value = min(max(value, low), high)
    first = min(value, high - REACH_STEPS + 1) if upward else value - REACH_STEPS + 1
    first = max(low, first)
    run = range(first, min(high, first + REACH_STEPS - 1) + 1)
    return sorted(run, key=lambda v: abs(v - value))


def _usual_width(text: str) -> int:
    """The most common UTF-8 width of the text's characters (the wider on a tie)."""
    widths = Counter(len(char.encode("utf-8")) for char in text)
    return max(widths, key=lambda width: (widths[width], width)) if widths else 1


def _of_length(query: str, length: int) -> str:
    """A query string of `length` characters: the mini server reads only its length (the
    needle's reach) and highlights it in the spans."""
    return query[:length] if length <= len(query) else query + " " * (length - len(query))
