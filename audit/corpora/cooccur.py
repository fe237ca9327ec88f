"""Strings near each other in one document, from one infini-gram CNF query instead of reading
the documents of every occurrence of the rarest.

`find_cnf` with `A AND B` (each string in the surface form that found it) and `max_diff_tokens`
D answers the places where a match of each clause starts within D tokens of the others' in one
document (engine `find_cnf`: for each match of the rarest clause, the nearest match of each
other clause before and after it), as `ptrs_by_shard`.  Each place's document is read with
`get_doc_by_ptr` (the CNF query labels the matches), the strings' bytes are looked for within
`window` bytes of each other exactly as for documents read one occurrence at a time, and the
document's language comes from its metadata, as before.  Places inside a window already read are
not read again.

Only where the rarest string occurs more than `cnf_above` times (10): below that, reading its
documents costs as few requests and is exact.

How exact: the engine keeps, for each match of the rarest clause, one range from the nearest
other match before it to the nearest after it when both lie within D, and drops a range that
crosses a document boundary, so a pair is missed when the other string also stands within D
tokens before the rare one in the preceding document (measured on the Llama-2 demo index: no
tag differs from reading every document).  Beyond that, a token holds at least one byte, so every pair within `window` bytes lies within
`window + 2 * longest string` tokens: when D reaches that, no pair is missed.  The public server
caps D at 1,000 tokens, below the default 2,000-byte window: a pair is then missed only when
more than 1,000 tokens separate the strings while fewer than `window` + lengths bytes do, i.e.
the text between them averages under about 2 bytes a token (Llama-2 averages about 3 on
Wikipedia text in these languages); `exhaustive` is then false.  On a byte-level index a token
is one byte, so a D short of the window would certainly miss pairs: there the documents are read
occurrence by occurrence, as before, unless D reaches.  A clause with more than
`max_clause_freq` matches (50,000 by default) is sampled and the answer is `approx`: the
documents are then read occurrence by occurrence as before, and so they are when the server has
no CNF query (infini-gram mini; `audit serve` with shard actors) or a string does not fit one.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from audit.corpora.apidocs import ApiOccurrence, Displayed, DocumentWindow, displayed
from audit.corpora.apioptions import ApiOptions
from audit.corpora.client import ApiQueryError, ApiResponseError, InfiniGramClient
from audit.corpora.surface import conjunction

Found = tuple[dict[int, tuple[ApiOccurrence, str]], bool]


class CnfCorpus(Protocol):
    """What a CNF search needs of an API corpus (`audit.corpora.api.ApiCorpus`): its client and
    options, the forms its occurrences were found in, and where it notes what the search did."""

    client: InfiniGramClient
    options: ApiOptions

    @property
    def byte_level(self) -> bool: ...

    @property
    def cnf_refused(self) -> bool: ...

    def found_form(self, text: str) -> str | None: ...

    def refuse_cnf(self, reason: str) -> None: ...

    def note_cooccurrence(self, key: str, amount: int = 1) -> None: ...

    def occurrence_at(self, shard: int, ptr: int, form: str, text: str, window: DocumentWindow) -> ApiOccurrence: ...


def _places(response: Mapping[str, object], where: str) -> list[tuple[int, int]]:
    shards = response.get("ptrs_by_shard")
    if not isinstance(shards, list) or not all(isinstance(p, list) for p in shards):
        raise ApiResponseError(f"{where}: find_cnf answered without ptrs_by_shard")
    return [(shard, int(ptr)) for shard, ptrs in enumerate(shards) for ptr in sorted(ptrs)]


def _near(data: bytes, rare: bytes, others: Sequence[bytes], window: int) -> int | None:
    """The first offset of `rare` in `data` with every one of `others` within `window` bytes."""
    reach = window + max(map(len, others))
    at = data.find(rare)
    while at >= 0:
        if all(other in data[max(0, at - reach) : at + len(rare) + reach] for other in others):
            return at
        at = data.find(rare, at + 1)
    return None


def _read(corpus: CnfCorpus, query: str, shard: int, ptr: int) -> Displayed:
    """The document at a pointer.  infini-gram's engine takes only even pointers (it assumes
    ids of two or four bytes); on a byte-level index an odd one is read one byte earlier, which
    lies in the same document (its first byte follows the separator, itself in the document)."""
    wanted = corpus.options.max_disp_len
    if corpus.byte_level and ptr % 2:
        ptr -= 1
    answer = corpus.client.query("get_doc_by_ptr", query=query, s=shard, ptr=ptr, max_disp_len=wanted)
    return displayed(answer, wanted, f"{corpus.client.settings.url}: get_doc_by_ptr")


def near_documents(corpus: CnfCorpus, strings: Sequence[str], counts: Sequence[int], window: int, limit: int) -> Found | None:
    """The documents holding all `strings` within `window` bytes (each with an occurrence of the
    rarest and that string), and whether the search was exhaustive; None when a CNF query cannot
    answer (the caller then reads documents occurrence by occurrence)."""
    forms = [corpus.found_form(text) for text in strings]
    if corpus.options.cooccurrence != "auto" or corpus.cnf_refused or None in forms or len(strings) > 4 or min(counts) <= corpus.options.cnf_above:
        return None
    query = conjunction([f for f in forms if f is not None])
    if query is None or len(query) > corpus.options.max_query_chars or sum(len(f.encode("utf-8")) + 1 for f in forms if f) > corpus.options.max_query_tokens:
        return None
    needles = [text.encode("utf-8") for text in strings]
    needed = window + 2 * max(map(len, needles))
    reach = min(corpus.options.max_diff_tokens, needed)
    if corpus.byte_level and reach < needed:
        return None
    where = f"{corpus.client.settings.url}: find_cnf"
    try:
        response = corpus.client.query("find_cnf", query=query, max_diff_tokens=reach)
    except ApiQueryError as error:
        corpus.refuse_cnf(str(error))
        return None
    corpus.note_cooccurrence("cnf_queries")
    if response.get("approx"):
        corpus.note_cooccurrence("approx")
        return None
    rarest = min(range(len(strings)), key=counts.__getitem__)
    rare, others = needles[rarest], [n for i, n in enumerate(needles) if i != rarest]
    documents: dict[int, tuple[ApiOccurrence, str]] = {}
    read, covered = 0, (-1, -1, -1)
    places = _places(response, where)
    for shard, ptr in places:
        if shard == covered[0] and covered[1] <= ptr < covered[2]:
            continue
        if read >= limit:
            return documents, False
        try:
            shown = _read(corpus, query, shard, ptr)
        except ApiQueryError as error:
            corpus.refuse_cnf(str(error))
            return None
        read += 1
        corpus.note_cooccurrence("documents_read")
        # Token positions shown, in pointer units of at least one byte per token.
        covered = (shard, ptr - shown.needle_offset, ptr + shown.disp_len - shown.needle_offset)
        at = _near(shown.window.data, rare, others, window)
        if at is not None and shown.window.document not in documents:
            shown.window.needle_at = at
            documents[shown.window.document] = (corpus.occurrence_at(shard, ptr, forms[rarest] or "", strings[rarest], shown.window), strings[rarest])
    corpus.note_cooccurrence("cnf_pairs", len(places))
    return documents, reach >= needed
