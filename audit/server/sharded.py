"""infini-gram's engine answers for a byte-level index, computed from its shard groups: the
server's engine when the shards are held by Ray actors (`audit serve --executor ray`).

`ShardedEngine` takes the calls `ServedIndex` makes of `infini_gram.engine.InfiniGramEngine` and
returns what the engine returns for the same u8 index, field for field: per-shard suffix-array
ranges from the groups, merged here; documents read by the group holding their shard.  Two
things of the engine's are reproduced on purpose:

- Shard order.  The engine lists each kind's files sorted as text, so `tokenized.10` comes
  before `tokenized.2`: its shard `s` and its document numbers (`doc_ix`) follow that order,
  not the index's shard numbers (`EngineOrder`).
- Sampling.  `ntd` with more occurrences than `max_support` counts a deterministic sample; the
  groups run the engine's own procedure (`ShardGroup.next_byte_counts`).  `search_docs` picks
  `maxnum` occurrences at random with replacement, as the engine does: each uniformly among all
  occurrences (the engine draws a shard in proportion to its count, then a rank in it, which is
  the same law), so its picks, like the engine's, differ from call to call.

CNF queries (AND/OR) are not answered: the engine subsamples their clauses per shard with its
own seeded generator over all shards at once.
"""
from __future__ import annotations

import bisect
import random
from dataclasses import dataclass

from audit.corpora.local import LocalIndex
from audit.corpora.shardread import ShardDocument
from audit.corpora.shards import Layout
from audit.server.answers import Answer

# The engine's document numbers, counts and pointers are unsigned 64-bit.
U64 = 1 << 64
# InfiniGramEngine's `max_support` when a call gives none.
MAX_SUPPORT = 1000


@dataclass(frozen=True)
class EngineOrder:
    """The engine's shard order over an index's layout: engine shard `s` is layout position
    `positions[s]`; its first document is number `firsts[s]` to the engine and `own_firsts[s]`
    to the index."""

    positions: list[int]
    firsts: list[int]
    own_firsts: list[int]

    @classmethod
    def of(cls, layout: Layout, total_documents: int) -> EngineOrder:
        bounds = [*layout.first_documents, total_documents]
        positions = sorted(range(len(layout.numbers)), key=lambda p: f"tokenized.{layout.numbers[p]}")
        documents = [bounds[p + 1] - bounds[p] for p in positions]
        return cls(positions, [sum(documents[:s]) for s in range(len(positions))], [bounds[p] for p in positions])

    def own_document(self, doc_ix: int) -> int:
        """The index's own number of the engine's document `doc_ix`."""
        s = bisect.bisect_right(self.firsts, doc_ix) - 1
        return self.own_firsts[s] + doc_ix - self.firsts[s]


class ShardedEngine:
    """The engine's answers from `index`'s shard groups (in this process or Ray actors)."""

    def __init__(self, index: LocalIndex, eos_id: int) -> None:
        self.index = index
        self.eos_id = eos_id
        self.order = EngineOrder.of(index.layout, index.info.documents)
        self.shard_bytes = [index.layout.shard_bytes[p] for p in self.order.positions]
        self._random = random.SystemRandom()

    def get_num_shards(self) -> int:
        return len(self.order.positions)

    def get_total_doc_cnt(self) -> int:
        return self.index.info.documents

    def get_total_tok_cnt(self) -> int:
        return sum(self.shard_bytes)

    def _segments(self, ids: list[int]) -> list[tuple[int, int]]:
        """Each engine shard's suffix-array range of the bytes `ids`."""
        ranges = [span for group in self.index.ask("ranges", bytes(ids)) for span in group]
        return [tuple(ranges[p]) for p in self.order.positions]

    def _count(self, ids: list[int]) -> int:
        return sum(hi - lo for lo, hi in self._segments(ids))

    def find(self, input_ids: list[int]) -> Answer:
        segments = self._segments(input_ids)
        return {"cnt": sum(hi - lo for lo, hi in segments), "segment_by_shard": segments}

    def count(self, input_ids: list[int]) -> Answer:
        return {"count": self._count(input_ids), "approx": False}

    def prob(self, prompt_ids: list[int], cont_id: int) -> Answer:
        prompt = self._count(prompt_ids)
        if prompt == 0:
            return {"prompt_cnt": 0, "cont_cnt": 0, "prob": -1.0}
        cont = self._count([*prompt_ids, cont_id])
        return {"prompt_cnt": prompt, "cont_cnt": cont, "prob": cont / prompt}

    def ntd(self, prompt_ids: list[int], max_support: int | None = None) -> Answer:
        max_support = MAX_SUPPORT if max_support is None else max_support
        found = self._count(prompt_ids)
        if found == 0:
            return {"prompt_cnt": 0, "result_by_token_id": {}, "approx": False}
        unit = 1
        while found > unit * max_support:
            unit <<= 1
        counts: dict[int, int] = {}
        for group in self.index.ask("next_byte_counts", bytes(prompt_ids), unit, self.eos_id):
            for token, count in group.items():
                counts[token] = counts.get(token, 0) + count
        total = sum(counts.values())
        by_token = {token: {"cont_cnt": counts[token], "prob": counts[token] / total} for token in sorted(counts)}
        return {"prompt_cnt": total, "result_by_token_id": by_token, "approx": unit > 1}

    def _suffix_len(self, prompt_ids: list[int]) -> int:
        """The longest suffix of the prompt found: the longest any group finds, which is what
        the engine's binary search over the whole index finds (every suffix of a string found
        is found), in one call to the groups instead of one per step."""
        return max(self.index.ask("longest_suffix", bytes(prompt_ids)))

    def infgram_prob(self, prompt_ids: list[int], cont_id: int) -> Answer:
        length = self._suffix_len(prompt_ids)
        return {**self.prob(prompt_ids[len(prompt_ids) - length :], cont_id), "suffix_len": length}

    def infgram_ntd(self, prompt_ids: list[int], max_support: int | None = None) -> Answer:
        length = self._suffix_len(prompt_ids)
        return {**self.ntd(prompt_ids[len(prompt_ids) - length :], max_support), "suffix_len": length}

    def _document(self, s: int, shown: ShardDocument) -> Answer:
        """The engine's document record, in its unsigned arithmetic: a pointer at a document's
        separator is shown with needle_offset 2**64 - 1, as the engine shows it."""
        return {
            "doc_ix": self.order.firsts[s] + shown.document - self.order.own_firsts[s],
            "doc_len": shown.end - shown.start,
            "disp_len": len(shown.text),
            "needle_offset": (shown.pointer - shown.shown) % U64,
            "metadata": shown.metadata.decode("utf-8"),
            "token_ids": list(shown.text),
            "blocked": False,
        }

    def _shown(self, method: str, s: int, at: int, max_disp_len: int) -> Answer:
        """`method` (by rank or by pointer) asked of the group holding engine shard `s`, with
        the engine's window: half of `max_disp_len` before the needle, the rest from it."""
        first = self.order.own_firsts[s]
        return self._document(s, self.index.ask_owner(first, method, first, at, max_disp_len // 2, (max_disp_len + 1) // 2))

    def _checked(self, s: int, max_disp_len: int) -> str | None:
        """The engine's own refusal of a shard or window, word for word."""
        if max_disp_len <= 0:
            return "max_disp_len must be a positive integer"
        if not 0 <= s < self.get_num_shards():
            return f"s must be an integer in range [0, {self.get_num_shards()})"
        return None

    def get_doc_by_rank(self, s: int, rank: int, max_disp_len: int) -> Answer:
        refused = self._checked(s, max_disp_len)
        if refused is None and not 0 <= rank < self.shard_bytes[s]:
            refused = f"ptr must be an integer in range [0, {self.shard_bytes[s]})"
        return {"error": refused} if refused else self._shown("document_at_rank", s, rank, max_disp_len)

    def get_doc_by_ptr(self, s: int, ptr: int, max_disp_len: int) -> Answer:
        refused = self._checked(s, max_disp_len)
        # The engine asks for an even pointer whatever the token width.
        if refused is None and not (0 <= ptr < self.shard_bytes[s] and ptr % 2 == 0):
            refused = f"ptr must be an even integer in range [0, {self.shard_bytes[s]})"
        return {"error": refused} if refused else self._shown("document_at", s, ptr, max_disp_len)

    def search_docs(self, input_ids: list[int], maxnum: int, max_disp_len: int) -> Answer:
        segments = self._segments(input_ids)
        counts = [hi - lo for lo, hi in segments]
        total = sum(counts)
        if total == 0:
            return {"cnt": 0, "approx": False, "idxs": [], "documents": []}
        befores = [sum(counts[:s]) for s in range(len(counts))]
        idxs = [self._random.randrange(total) for _ in range(maxnum)]
        documents = []
        for idx in idxs:
            s = bisect.bisect_right(befores, idx) - 1  # the last shard starting at or before idx: never an empty one
            documents.append(self._shown("document_at_rank", s, segments[s][0] + idx - befores[s], max_disp_len))
        return {"cnt": total, "approx": False, "idxs": idxs, "documents": documents}
