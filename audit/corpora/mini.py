"""The infini-gram mini API as a corpus: Common Crawl's 2025 crawls, DCLM-baseline and the Pile,
indexed as text (FM-indexes), with character-level `count`, `find` and `get_doc_by_rank`
queries (docs/source/api.rst of xuhaoxh/infini-gram-mini).

It differs from the infini-gram API in three ways, and only those are handled here; requests,
retries, the cache, offline mode and the decisions from counts are the infini-gram backend's:
- no tokenizer: a query may start and end at any character, so every position is a possible
  match start, as on a byte-level index, and no leading-space form is tried;
- no longest-match query: longest matches are always derived from counts;
- a document is fetched as `max_ctx_len` characters either side of the match (`text`, with
  `needle_offset` characters before it), so the match's offset in its document is exact only
  when that context reaches back to the document's start.
"""
from __future__ import annotations

from audit.corpora.api import ApiCorpus, ApiOccurrence, ApiOptions, DocumentWindow, parse_metadata
from audit.corpora.client import ApiQueryError, ApiResponseError, InfiniGramClient

MINI_ENDPOINT = "https://api.infini-gram-mini.io/"


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
        self.details.update({"tokenization": "characters", "longest_match": "count", "limits": {"max_query_chars": options.max_query_chars, "max_ctx_len": options.max_ctx_len}})

    @property
    def max_bytes(self) -> int:
        """Queries are limited in characters only; a character is at most four bytes."""
        return 4 * self.options.max_query_chars

    def _learn(self, text: str, response: dict) -> None:
        """Nothing to learn: the index is character-level."""

    def _fetch_window(self, occurrence: ApiOccurrence) -> DocumentWindow:
        """The document around an occurrence: `max_ctx_len` characters either side."""
        context = self.options.max_ctx_len
        response = self.client.query("get_doc_by_rank", query=occurrence.query, s=occurrence.shard, rank=occurrence.rank, max_ctx_len=context)
        try:
            document = int(response["doc_ix"])
            text = str(response["text"])
            before = int(response["needle_offset"])
            doc_len = int(response.get("doc_len", len(text)))
            metadata = parse_metadata(response.get("metadata", ""))
        except (KeyError, TypeError, ValueError) as error:
            raise ApiResponseError(f"{self.client.settings.url}: get_doc_by_rank answer lacks {error}") from None
        if not 0 <= before <= len(text):
            raise ApiQueryError(f"{self.client.settings.url}: get_doc_by_rank answered needle_offset {before} for {len(text)} characters")
        exact = before < context or len(text) >= doc_len
        return DocumentWindow(document=document, data=text.encode("utf-8"), needle_at=len(text[:before].encode("utf-8")), offset_exact=exact, metadata=metadata)
