"""The limits of the infini-gram API protocols, as their public endpoints document them, in one
place: `audit serve` enforces them by default and the API backends keep their queries within
them.

- infini-gram (docs/source/api.rst of liujch1998/infini-gram): a query of at most 1,000
  characters and 500 tokens; documents displayed `max_disp_len` tokens at a time, at most
  10,000.
- infini-gram mini (docs/source/api.rst of xuhaoxh/infini-gram-mini): character-level queries
  with no documented length limit, here kept to the same 1,000 characters; documents
  displayed `max_ctx_len` characters either side of the match, at most 10,000.
"""
from __future__ import annotations

MAX_QUERY_CHARS = 1000
MAX_QUERY_TOKENS = 500
MAX_DISP_LEN = 10000
MAX_CTX_LEN = 10000
