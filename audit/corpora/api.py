"""The infini-gram HTTP API as a corpus: the public indexes (OLMo-2's training data, Dolma, DCLM,
RedPajama, the Pile, C4) or a team's own `audit serve`, behind the same `Corpus` interface as a
local index, so the signals run over it unchanged.  Requests go through
`audit.corpora.client` (retries, cache, offline mode).

What is derived, and how exact it is:

- `count` of a string within the query limits (1,000 characters and 500 tokens; a string is
  kept under 500 UTF-8 bytes, since a token holds at least one byte) is the server's count.  A
  longer string is counted in consecutive windows: 0 if any window is absent (exact), else
  anywhere from 0 to the smallest window count, which `count_range` says.
- `match_lengths` (the longest match at every position) has no endpoint in the public API.  A
  server that answers infini-gram's `creativity` query for a byte-level index (as `audit serve`
  does) gives it directly, window by window: the next window starts where the first match
  reaching the current window's end starts, so lengths are exact up to the query limit, except
  where that start comes within `creativity_stride` bytes of the window's start: those lengths
  are capped at the window's reach, at least `max_query_tokens` minus the stride (450 bytes by
  default).  Otherwise it is derived from counts (`audit.corpora.counting`): with profile
  `decide` (the default) only what the field's rules ask (does the longest match reach L
  characters? does the share of windows found reach t?), by seed-and-extend and by sampling
  windows; with profile `full` at every position.  Every variant may spend `budget` count
  requests on this; what the answers leave open is returned as bounds
  (`MatchLengths.highest`, `MatchLengths.coverage`), so the signal reports bounded figures and
  the policy says `unknown` where a bound leaves a rule undecided; `details.fields_capped` and
  `details.fields_bounded` count capped fields and fields that ran out of budget.
- On a token-level index (the public ones use the Llama-2 tokenizer) a string query matches
  only on token boundaries.  Derived matches then start and end at word boundaries only (any
  character of a script written without spaces).  Which surface forms a text is asked in
  depends on the tokenizer (`ApiOptions.tokenizer`, by default from the index name's suffix,
  else learned from the first answer; see `audit.corpora.surface`): on Llama-2 the form without
  a leading space alone, which finds everything the other finds; on a server that prepends the
  space itself (GPT-2, OLMo, GPT-NeoX types) the text without its own; elsewhere the second
  form only when the first finds nothing.  `details.variant_matches` counts which form found
  a count, and provenance records it.
- Requests (`audit.corpora.asking`): every plain answer is kept for the run and a string
  known absent is not asked again; counts are asked as `find`s, which also serve a later
  search for the same string; presence questions (does this piece occur in any form?) are
  packed into OR queries of up to `group_terms` terms and answered by group testing
  (`audit.corpora.grouped`), exact; a text of more than a few words is asked with its first
  chunks, and chunks in doubling batches.  `details.grouped` counts them.
- Co-occurrence (a question's anchor and its answer near each other) comes from one CNF query
  where the server has them (`audit.corpora.cooccur`: `find_cnf` within `max_diff_tokens`,
  then the matched documents only; its reach and approximation are documented there), else
  from the documents of the rarer string's occurrences; `details.cooccurrence` counts both.
- `occurrences` samples ranks spread over each shard's `find` range, as the local backend does.
  Up to 10 are resolved to their documents (one `get_doc_by_rank` each) and sorted by document
  and offset, as the local backend sorts them; a larger sample (co-occurrence looks at up to
  500) stays in suffix-array order, each occurrence resolved only when a signal looks at it.
  Offsets are exact when the match lies within the first half of the displayed window
  (`max_disp_len`, 10,000 tokens at most); otherwise the provenance entry says
  `offset_exact: false` and the offset is a lower bound.
"""
from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from audit.corpora import counting
from audit.corpora.apidocs import ApiOccurrence, DocumentWindow, displayed, parse_metadata
from audit.corpora.apioptions import ApiOptions
from audit.corpora.asking import KEYS, FieldState, Requests
from audit.corpora.base import Budget, CorpusInfo, DocumentHit, JsonObject, MatchLengths, MatchQuestions, OutOfBudget, Profile, cut_snippet
from audit.corpora.client import ApiQueryError, ApiResponseError, InfiniGramClient
from audit.corpora.cooccur import Found, near_documents
from audit.corpora.creativity import creativity_lengths
from audit.corpora.grouped import QueryLimits
from audit.corpora.querycuts import query_cut, query_pieces, query_reaches
from audit.corpora.surface import AS_IS, LEADING_SPACE, WORD_START, TokenizerKind, forms, kind_of_index, learned_kind
from audit.text import unit_count

T = TypeVar("T")
R = TypeVar("R")

SORTED_OCCURRENCES = 10
__all__ = ["AS_IS", "LEADING_SPACE", "WORD_START", "ApiCorpus", "ApiOccurrence", "ApiOptions", "DocumentWindow", "parse_metadata"]


class ApiCorpus:
    """A corpus served over the infini-gram API."""

    BACKEND = "infini-gram-api"

    def __init__(self, client: InfiniGramClient, name: str, options: ApiOptions | None = None, description: str = "") -> None:
        self.client = client
        self.options = options or ApiOptions()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        kind = self.options.tokenizer
        self._kind: TokenizerKind | None = kind_of_index(client.settings.index) if kind == TokenizerKind.AUTO else kind
        self._byte_level: bool | None = None if self._kind is None else self._kind == TokenizerKind.BYTES
        self._mode = self.options.longest_match
        self._found: dict[str, tuple[str, str]] = {}
        self._absent_texts: set[str] = set()
        settings = client.settings
        identity = f"{self.BACKEND}\n{settings.url.rstrip('/')}\n{settings.index}"
        self.details: dict[str, Any] = {
            "url": settings.url,
            "index": settings.index,
            "description": description,
            "offline": settings.offline,
            "tokenization": "unknown" if self._byte_level is None else "bytes" if self._byte_level else "tokens",
            "tokenizer": str(self._kind or TokenizerKind.AUTO),
            "longest_match": self._mode,
            "profile": str(self.options.profile),
            "count_budget_per_variant": self.options.budget,
            "limits": {"max_query_chars": self.options.max_query_chars, "max_query_tokens": self.options.max_query_tokens, "max_disp_len": self.options.max_disp_len},
            "fields_bounded": 0,
            "fields_capped": 0,
            "counts_over_limit": 0,
            "occurrences_by_prefix": 0,
            "variant_matches": {AS_IS: 0, LEADING_SPACE: 0, WORD_START: 0},
            "grouped": {"questions": 0, "found": 0, "requests": 0, "cnf_refused": ""},
            "cooccurrence": {"cnf_queries": 0, "cnf_pairs": 0, "documents_read": 0, "by_documents": 0, "approx": 0},
            "requests": client.stats,
        }
        limits = QueryLimits(self.options.group_terms, self.options.max_query_chars, self.options.max_query_tokens)
        self._requests = Requests(client, limits, self._map, self.details["grouped"])
        if self.BACKEND != ApiCorpus.BACKEND:
            # Only the infini-gram protocol has AND/OR queries; infini-gram mini counts them as text.
            self.refuse_cnf(f"{self.BACKEND} has no CNF queries")
            self._requests.find_for_count = False
        self.info = CorpusInfo(
            name=name,
            backend=self.BACKEND,
            location=f"{settings.url} index={settings.index}",
            fingerprint=hashlib.blake2b(identity.encode(), digest_size=16).hexdigest(),
            details=self.details,
        )

    def _note(self, key: str, sub: str | None = None) -> None:
        with self._lock:
            if sub is None:
                self.details[key] += 1
            else:
                self.details[key][sub] += 1

    def _map(self, function: Callable[[T], R], items: list[T]) -> list[R]:
        """Independent requests of one field, issued side by side (the client bounds them)."""
        if len(items) < 2 or self.client.pool_size < 2:
            return [function(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.client.pool_size, thread_name_prefix="infini-gram-api")
            pool = self._pool
        return list(pool.map(function, items))

    @property
    def max_bytes(self) -> int:
        """The longest query in UTF-8 bytes: within the token limit whatever the tokenizer,
        since every token holds at least one byte (one more for a word-start token)."""
        return self.options.max_query_tokens - 1

    def fits(self, text: str) -> bool:
        return len(text) <= self.options.max_query_chars and len(text.encode("utf-8")) <= self.max_bytes

    def _learn(self, text: str, response: JsonObject) -> None:
        """The tokenizer type, unless configured or known from the index name: from how the
        server tokenized a plain string query (`audit.corpora.surface.learned_kind`)."""
        if self._kind is not None:
            return
        kind = learned_kind(text, response)
        if kind is not None:
            with self._lock:
                self._kind, self._byte_level = kind, kind == TokenizerKind.BYTES
                self.details["tokenization"] = "bytes" if self._byte_level else "tokens"
                self.details["tokenizer"] = f"{kind} (learned)"

    def _variants(self, text: str) -> list[tuple[str, str]]:
        """(label, query) for the surface forms the index may hold the text as (see
        `audit.corpora.surface.forms`)."""
        return forms(self._kind, text, self.options.variants)

    def _best(self, query_type: str, text: str, key: str) -> tuple[str, str, JsonObject]:
        """(variant, query, response) for the surface form the corpus holds: the first that
        finds something (with forms `both`, the one found most often)."""
        answers: dict[str, dict[str, Any]] = {}

        def ask(form: str) -> JsonObject:
            if form not in answers:
                answers[form] = self._requests.ask(query_type, form) if query_type in KEYS else self.client.query(query_type, query=form)
            return answers[form]

        if self._kind is None:
            self._learn(text, ask(text))
        best: tuple[str, str, dict[str, Any]] | None = None
        for variant, form in self._variants(text):
            response = ask(form)
            if best is None or int(response.get(key, 0)) > int(best[2].get(key, 0)):
                best = (variant, form, response)
            if self.options.forms == "when-absent" and int(best[2].get(key, 0)):
                break
        assert best is not None
        return best

    def _count_fitting(self, text: str) -> int:
        variant, _, response = self._best("count", text, "count")
        found = int(response.get("count", 0))
        if found:
            self._note("variant_matches", variant)
        return found

    def _answer_all(self, occurs: Callable[[str], bool], pieces: list[str], state: FieldState | None = None) -> list[bool]:
        """Whether each piece occurs in any of its surface forms: by group testing over OR
        queries (`audit.corpora.asking`) with forms `when-absent`, else each piece asked with
        `occurs`, side by side."""
        if self.options.forms != "when-absent" or self.options.group_terms < 2 or self.cnf_refused:
            return self._map(occurs, pieces)
        return self._requests.answer_all([tuple(form for _, form in self._variants(piece)) for piece in pieces], state or FieldState())

    def _pieces(self, text: str, start: int = 0) -> Iterator[tuple[int, int]]:
        return query_pieces(text, start, self.max_bytes, self.options.max_query_chars)

    def _occurs(self, text: str) -> bool:
        """Whether the text occurs in any surface form: one request for all of them."""
        if self.options.forms == "when-absent" and self.options.group_terms > 1 and self._kind is not None:
            return self._answer_all(lambda piece: self._count_fitting(piece) > 0, [text])[0]
        return self.count(text) > 0

    def count(self, text: str) -> int:
        return self.count_range(text)[1]

    def count_range(self, text: str) -> tuple[int, int]:
        if not text or text in self._absent_texts:
            return 0, 0
        if self.fits(text):
            found = self._count_fitting(text)
            return found, found
        self._note("counts_over_limit")
        pieces = [text[a:b] for a, b in self._pieces(text)]
        if not all(self._answer_all(lambda piece: self._count_fitting(piece) > 0, pieces)):
            return 0, 0
        counts = self._map(self._count_fitting, pieces)
        return (0, 0) if 0 in counts else (0, min(counts))

    def match_lengths(self, text: str, questions: MatchQuestions | None = None) -> MatchLengths:
        n = len(text)
        if not n:
            return MatchLengths([])
        if self.fits(text) and not self._asked_with_chunks(text, questions) and self._occurs(text):
            return MatchLengths([n - i for i in range(n)])
        if self.fits(text[:1]) and self._byte_level is None:
            self._learn(text[:1], self.client.query("count", query=text[:1]))
        if self._mode != "count" and self._byte_level:
            try:
                return self._by_creativity(text)
            except ApiQueryError:
                if self._mode == "creativity":
                    raise
                with self._lock:
                    self._mode = "count"
                    self.details["longest_match"] = "count (the server has no creativity query)"
        elif self._mode == "creativity":
            raise ApiQueryError(f"{self.client.settings.url}: creativity needs a byte-level index; this one is tokenized")
        return self._by_counts(text, questions)

    def _by_creativity(self, text: str) -> MatchLengths:
        lengths, capped = creativity_lengths(self, text)
        if capped:
            self._note("fields_capped")
        return lengths

    def _boundary(self, text: str, i: int) -> bool:
        return query_cut(text, i, bool(self._byte_level))

    def _reaches(self, text: str) -> list[int]:
        return query_reaches(text, self.max_bytes, self.options.max_query_chars)

    def _asked_with_chunks(self, text: str, questions: MatchQuestions | None) -> bool:
        """Whether the whole text is asked in one request with its first chunks (OR queries,
        lengths derived from counts for the rules' questions), rather than alone first: for a
        text of more than a few words, which seldom occurs whole."""
        grouped = self.options.forms == "when-absent" and self.options.group_terms > 1 and self._kind is not None and not self.cnf_refused
        derived = self._mode == "count" or self._byte_level is False
        return grouped and derived and questions is not None and bool(questions.longest) and self.options.profile == Profile.DECIDE and self.fits(text) and unit_count(text) > 4

    def _by_counts(self, text: str, questions: MatchQuestions | None) -> MatchLengths:
        """Longest matches from count requests (see `audit.corpora.counting`): what `questions`
        asks, charged to the variant's budget; every position with profile `full` or when
        nothing is asked in particular."""
        geometry = counting.Geometry.of(len(text), lambda i: self._boundary(text, i), self._reaches(text))
        budget = questions.budget if questions is not None else Budget()
        ask = counting.Asker(text, lambda piece: self._count_fitting(piece) > 0, counting.Known(geometry), budget, self.options.budget, partial(self._answer_all, state=FieldState()))
        if questions is None or self.options.profile == Profile.FULL:
            spent = False
            try:
                counting.scan(ask)
            except OutOfBudget:
                spent = True
            lengths = ask.known.lengths()
        else:
            seed = counting.sample_seed(self.options.sample_seed, text)
            whole = self._asked_with_chunks(text, questions)
            lengths, spent = counting.derive(ask, questions.longest, questions.windows, questions.coverage, seed, self.max_bytes // 4, whole)
        if spent:
            self._note("fields_bounded")
        if not all(ask.known.answers.values()):
            # A piece of the text occurs nowhere, so neither does the text: its count is 0.
            with self._lock:
                self._absent_texts.add(text)
        return lengths

    def occurrences(self, text: str, limit: int) -> tuple[int, list[ApiOccurrence]]:
        original = text
        if not self.fits(text):
            self._note("occurrences_by_prefix")
            _, end = next(self._pieces(text))
            text = text[:end]
        variant, form, response = self._best("find", text, "cnt")
        total = int(response.get("cnt", 0))
        segments = response.get("segment_by_shard")
        if not isinstance(segments, list):
            raise ApiResponseError(f"{self.client.settings.url}: find answered without segment_by_shard")
        found: list[ApiOccurrence] = []
        for shard, (lo, hi) in enumerate(segments):
            if hi <= lo or limit <= 0 or not total:
                continue
            share = max(1, round(limit * (hi - lo) / total))
            ranks = np.unique(np.linspace(lo, hi - 1, num=min(share, hi - lo)).round().astype(np.int64))
            found.extend(ApiOccurrence(self, shard, int(rank), form, variant) for rank in ranks)
        if total:
            self._note("variant_matches", variant)
            self._found[original] = (variant, form)
        found = found[: max(limit, 0)]
        if len(found) <= SORTED_OCCURRENCES and limit <= SORTED_OCCURRENCES:
            found.sort(key=lambda o: (o.document, o.offset))
        return total, found

    def _fetch_window(self, occurrence: ApiOccurrence) -> DocumentWindow:
        """The document around an occurrence, as much of it as one request may display
        (`max_disp_len` tokens, centred on the match): the match's offset is then exact when
        it lies in the document's first `max_disp_len / 2` tokens, and one request serves every
        later question about this occurrence (a token holds at least one byte, so a reach of
        up to `max_disp_len / 2` bytes each side is covered)."""
        wanted = self.options.max_disp_len
        response = self.client.query("get_doc_by_rank", query=occurrence.query, s=occurrence.shard, rank=occurrence.rank, max_disp_len=wanted)
        return displayed(response, wanted, f"{self.client.settings.url}: get_doc_by_rank").window

    def near_documents(self, strings: Sequence[str], counts: Sequence[int], window: int, limit: int) -> Found | None:
        """Documents holding all `strings` within `window` bytes, from one CNF query where the
        server has it (`audit.corpora.cooccur`); None where documents must be read one
        occurrence at a time."""
        found = near_documents(self, strings, counts, window, limit)
        if found is None:
            self.note_cooccurrence("by_documents")
        return found

    def found_form(self, text: str) -> str | None:
        """The surface form `occurrences` found `text` in, if it did."""
        found = self._found.get(text)
        return None if found is None else found[1]

    @property
    def byte_level(self) -> bool:
        return bool(self._byte_level)

    @property
    def cnf_refused(self) -> bool:
        return self._requests.cnf is False

    def refuse_cnf(self, reason: str) -> None:
        with self._lock:
            self._requests.cnf = False
            self.details["grouped"]["cnf_refused"] = reason

    def note_cooccurrence(self, key: str, amount: int = 1) -> None:
        with self._lock:
            self.details["cooccurrence"][key] += amount

    def occurrence_at(self, shard: int, ptr: int, form: str, text: str, window: DocumentWindow) -> ApiOccurrence:
        variant = self._found.get(text, (AS_IS, form))[0]
        return ApiOccurrence(self, shard, -1, form, variant, ptr=ptr, window=window)

    def surrounding(self, occurrence: ApiOccurrence, before: int, after: int) -> bytes:
        window = occurrence.window()
        return window.data[max(0, window.needle_at - before) : window.needle_at + after]

    def document_hit(self, occurrence: ApiOccurrence, length_bytes: int, context_chars: int) -> DocumentHit:
        reach = 4 * context_chars
        window = occurrence.window()
        data = self.surrounding(occurrence, reach, length_bytes + reach)
        snippet, start, end = cut_snippet(data, min(window.needle_at, reach), length_bytes, context_chars)
        metadata = dict(window.metadata)
        if occurrence.variant != AS_IS or not window.offset_exact:
            where = {"rank": occurrence.rank} if occurrence.ptr is None else {"ptr": occurrence.ptr}
            metadata["infini_gram_api"] = {"variant": occurrence.variant, "offset_exact": window.offset_exact, "shard": occurrence.shard, **where}
        return DocumentHit(window.document, metadata, window.needle_at, length_bytes, snippet, start, end)
