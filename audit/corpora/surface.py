"""How an infini-gram server tokenizes a string query, and the surface forms a text is asked in.

The public server (api/api_server.py `tokenize` of liujch1998/infini-gram, commit 37d2929)
has four tokenizer types: `llama` (SentencePiece: the lone word-start token `▁` it puts in front
of a query is dropped) and `gpt2`, `olmo`, `gptneox` (byte-level BPE: a space is prepended to
every non-empty query, and to every term of an AND/OR query).  Its index names end with the
type (`v4_pileval_llama`, `v4_pileval_gpt2`, `v4_dolmasample_olmo`; `v4_rpj_llama_s4` carries it
before a shard suffix).  A byte-level index (`audit serve`'s own) answers a string with its
UTF-8 bytes as token ids.

Forms asked:
- Llama-2 (`llama`, or learned from a `▁` word-start mark in an answer's tokens): the text
  without its leading space, only.  The tokenizer puts `▁` in front of every query and the
  server drops it when it stands alone, so " word" and "word" both become `▁word` where `▁w`
  merges; where it does not (a digit, which Llama-2 splits, or a CJK character), " 18" becomes
  `▁▁ 1 8` while "18" becomes `1 8`, which every match of the former holds.  The form without
  the space therefore finds everything the other finds: asking both (as before) cost a second
  request per question and decided nothing more (measured: of 2,084 counts that found
  something on the Llama-2 demo index, the form with the space never found more).
- another token-level tokenizer learned from an answer (`tokens`): the text as it is, then with
  its word-start space the other way (added, or dropped when the text starts with one).
- a server that prepends the space itself (`gpt2`, `olmo`, `gptneox`): one form; a text
  starting with a space is sent without it (the server puts it back); any other text is matched
  where a space precedes it, since the server adds one (never at a document's start or after a
  newline or punctuation: such a server cannot be asked for those).
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from audit.corpora.base import JsonObject

AS_IS, LEADING_SPACE, WORD_START = "as-is", "leading space", "word start"
SPACE_MARK = "\u0120"  # byte-level BPE's "Ġ", a space at the start of a token
WORD_MARK = "\u2581"  # SentencePiece's "▁", a word start


class TokenizerKind(StrEnum):
    AUTO = "auto"
    BYTES = "bytes"
    LLAMA = "llama"
    GPT2 = "gpt2"
    OLMO = "olmo"
    GPTNEOX = "gptneox"
    TOKENS = "tokens"  # token-level, learned from an answer; the leading space is the client's


SERVER_SPACE = frozenset({TokenizerKind.GPT2, TokenizerKind.OLMO, TokenizerKind.GPTNEOX})
# `_olmo2` (OLMo-2's byte-level BPE, served by Ai2's infinigram-api, whose `Tokenizer.tokenize`
# encodes the query as given: packages/infini-gram-processor, commit ce2072a) is token-level with
# no space prepended.
_BY_SUFFIX = {
    "llama": TokenizerKind.LLAMA,
    "gpt2": TokenizerKind.GPT2,
    "olmo": TokenizerKind.OLMO,
    "gptneox": TokenizerKind.GPTNEOX,
    "pythia": TokenizerKind.GPTNEOX,
    "olmo2": TokenizerKind.TOKENS,
}


def kind_of_index(name: str) -> TokenizerKind | None:
    """The tokenizer type an index name carries (its last `_`-separated part naming one)."""
    for part in reversed(name.split("_")[1:]):
        if part in _BY_SUFFIX:
            return _BY_SUFFIX[part]
    return None


def learned_kind(text: str, response: JsonObject) -> TokenizerKind | None:
    """The tokenizer type a plain query's answer shows: its ids are the text's bytes (byte-level),
    or its first token starts with byte-level BPE's space mark though the text does not start
    with a space (the server prepended one), or a token carries SentencePiece's word-start mark
    (Llama-2), or else token-level; None when it shows no ids."""
    ids, tokens = response.get("token_ids"), response.get("tokens")
    if not text or not isinstance(ids, list):
        return None
    if ids == list(text.encode("utf-8")):
        return TokenizerKind.BYTES
    if isinstance(tokens, list) and tokens and isinstance(tokens[0], str) and tokens[0].startswith(SPACE_MARK) and not text[0].isspace():
        return TokenizerKind.GPT2
    if isinstance(tokens, list) and any(isinstance(token, str) and token.startswith(WORD_MARK) for token in tokens):
        return TokenizerKind.LLAMA
    return TokenizerKind.TOKENS


def forms(kind: TokenizerKind | None, text: str, variants: bool = True) -> list[tuple[str, str]]:
    """(label, query) for each surface form of `text`, the one most often right first."""
    if kind in SERVER_SPACE:
        return [(AS_IS, text[1:])] if text.startswith(" ") and len(text) > 1 else [(LEADING_SPACE, text)]
    if kind == TokenizerKind.LLAMA and variants:
        return [(WORD_START, text[1:])] if text.startswith(" ") and len(text) > 1 else [(AS_IS, text)]
    found = [(AS_IS, text)]
    if variants and kind == TokenizerKind.TOKENS:
        found.append((WORD_START, text[1:]) if text.startswith(" ") and len(text) > 1 else (LEADING_SPACE, " " + text))
    return found


def disjunction(terms: Sequence[str]) -> str | None:
    """`terms` joined with OR, as one clause of an infini-gram CNF query; None when the server
    would split the result otherwise (a term holding " AND " or " OR ", an empty term)."""
    query = " OR ".join(terms)
    if not terms or not all(terms) or query.split(" AND ") != [query] or query.split(" OR ") != list(terms):
        return None
    return query


def conjunction(terms: Sequence[str]) -> str | None:
    """`terms` joined with AND, each a clause of one term; None as for `disjunction`."""
    query = " AND ".join(terms)
    if len(terms) < 2 or not all(terms) or query.split(" AND ") != list(terms) or any(" OR " in term for term in terms):
        return None
    return query
