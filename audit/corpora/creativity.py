"""Longest matches from infini-gram `creativity` answers (a server that has the query, such as
`audit serve` for a byte-level index), window by window over the text's bytes."""
from __future__ import annotations

from typing import Protocol

import numpy as np

from audit.corpora.apidocs import char_starts
from audit.corpora.apioptions import ApiOptions
from audit.corpora.base import MatchLengths
from audit.corpora.client import ApiResponseError, InfiniGramClient
from audit.corpora.shardread import bytes_to_char_lengths
from audit.ranges import merged


class CreativityCorpus(Protocol):
    """What the creativity query needs of an API corpus: its client, options and query limit."""

    client: InfiniGramClient
    options: ApiOptions

    @property
    def max_bytes(self) -> int: ...


def creativity_lengths(corpus: CreativityCorpus, text: str) -> tuple[MatchLengths, bool]:
    """Lengths from `creativity` answers over successive windows of the text's bytes.

    A window's lengths are exact until the first position whose match reaches the window's
    end (the matches of all later positions reach it too, since a suffix of a match is a
    match); the next window starts there.  To make progress it starts at least
    `creativity_stride` bytes on, and the positions skipped keep their capped lengths (the
    second value says whether any did)."""
    encoded = text.encode("utf-8")
    starts = np.append(np.asarray(char_starts(encoded), dtype=np.int64), len(encoded))
    lengths = np.zeros(len(encoded), dtype=np.int64)
    capped: list[tuple[int, int]] = []
    char = 0
    while char < len(text):
        a = int(starts[char])
        last = min(char + corpus.options.max_query_chars, len(text), int(np.searchsorted(starts, a + corpus.max_bytes, side="right")) - 1)
        b = int(starts[max(last, char + 1)])
        response = corpus.client.query("creativity", query=encoded[a:b].decode("utf-8"))
        rs = response.get("rs")
        if not isinstance(rs, list) or len(rs) != b - a:
            raise ApiResponseError(f"{corpus.client.settings.url}: creativity answered {len(rs) if isinstance(rs, list) else rs!r} values for {b - a} bytes")
        values = np.asarray(rs, dtype=np.int64) - np.arange(b - a)
        if b == len(encoded):
            lengths[a:b] = values
            break
        reaching = np.flatnonzero(np.asarray(rs, dtype=np.int64) >= b - a)
        stop = a + int(reaching[0]) if reaching.size else b
        following = max(stop, a + corpus.options.creativity_stride)
        next_char = min(int(np.searchsorted(starts, following, side="left")), max(last, char + 1))
        b_next = int(starts[next_char])
        lengths[a:b_next] = values[: b_next - a]
        if stop < b_next:
            capped.append((int(np.searchsorted(starts, stop, side="left")), next_char))
        char = next_char
    chars = bytes_to_char_lengths(encoded, lengths)
    if not capped:
        return MatchLengths(chars), False
    highest = list(chars)
    for a, b in merged(capped):
        highest[a:b] = [len(text) - i for i in range(a, b)]
    return MatchLengths(chars, highest), True
