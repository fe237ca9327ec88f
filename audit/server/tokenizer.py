"""Query text to token ids and back, as the public infini-gram API tokenizes: UTF-8 bytes for
a byte-level index, else the Hugging Face tokenizer the index was built with."""
from __future__ import annotations

import json
from pathlib import Path

from audit.corpora.base import JsonValue


class Tokenizer:
    """Query text to token ids and back: UTF-8 bytes for a byte-level index, else a Hugging
    Face `tokenizer.json`, as the public API's `tokenize` does it (api/api_server.py of
    liujch1998/infini-gram, commit 37d2929): it strips the lone word-start token SentencePiece
    puts in front of a query (`llama`), and prepends a space to every non-empty query, and to
    every term of an AND/OR query, for its byte-level BPE types (`gpt2`, `olmo`, `gptneox`),
    which this does for any tokenizer whose pre-tokenizer is byte-level (`prepends_space`)."""

    END_OF_TEXT = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<|eos|>")

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._tokenizer = None
        self._prefix_id: int | None = None
        self.prepends_space = False
        # The byte-level id of a document's end is NUL, as the public API's byte tokenizer has it.
        self.eos_id = 0
        if path is not None:
            from tokenizers import Tokenizer as HFTokenizer

            file = path / "tokenizer.json" if path.is_dir() else path
            if not file.exists():
                raise ValueError(f"{file}: no tokenizer.json")
            self._tokenizer = HFTokenizer.from_file(str(file))
            self._prefix_id = self._tokenizer.token_to_id("\u2581")
            self.prepends_space = _byte_level_bpe(json.loads(file.read_text(encoding="utf-8")).get("pre_tokenizer"))
            self.eos_id = self._end_of_text(file)

    def _end_of_text(self, file: Path) -> int:
        """The id infini-gram's engine reports where a document ends (in `ntd`, `infgram_ntd`):
        the tokenizer's end-of-text token, as the public API passes Hugging Face's
        `eos_token_id`.  That is `tokenizer_config.json`'s `eos_token` beside the file when there
        is one, else the first special token named as an end of text.  A tokenizer without one
        gets the first id past its vocabulary: any real id would count document ends as that
        token."""
        config = file.with_name("tokenizer_config.json")
        if config.is_file():
            eos = json.loads(config.read_text(encoding="utf-8")).get("eos_token")
            found = self._tokenizer.token_to_id(eos.get("content", "") if isinstance(eos, dict) else eos or "")
            if found is not None:
                return found
        special = {token.content: i for i, token in self._tokenizer.get_added_tokens_decoder().items() if token.special}
        return next((special[name] for name in self.END_OF_TEXT if name in special), self.vocab_size)

    @property
    def kind(self) -> str:
        return "bytes" if self._tokenizer is None else "tokenizer"

    @property
    def vocab_size(self) -> int:
        return 255 if self._tokenizer is None else self._tokenizer.get_vocab_size()

    @property
    def engine_vocab_size(self) -> int:
        """The ids the engine must represent: the vocabulary, and the end id past it if any."""
        return max(self.vocab_size, self.eos_id + 1)

    @property
    def token_width(self) -> int:
        """Bytes per token id in the index: infini-gram's indexer writes u16 ids when they all
        fit below the u16 document separator 0xffff, else u32 (`--token_dtype`)."""
        if self._tokenizer is None:
            return 1
        return 2 if self.engine_vocab_size <= 0xFFFF else 4

    @property
    def token_dtype(self) -> str:
        return f"u{8 * self.token_width}"

    def encode(self, text: str) -> list[int]:
        if self._tokenizer is None:
            return list(text.encode("utf-8"))
        if self.prepends_space and text:
            text = " " + text
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if ids and ids[0] == self._prefix_id:
            ids = ids[1:]
        return ids

    def decode(self, ids: list[int]) -> str:
        if self._tokenizer is None:
            return bytes(ids).decode("utf-8", errors="replace")
        return self._tokenizer.decode(ids, skip_special_tokens=False)

    def tokens(self, ids: list[int]) -> list[str]:
        if self._tokenizer is None:
            return [chr(b) if 32 <= b < 127 else f"<0x{b:02X}>" for b in ids]
        return [self._tokenizer.id_to_token(i) or "" for i in ids]


def _byte_level_bpe(pre_tokenizer: JsonValue) -> bool:
    """Whether a `tokenizer.json` pre-tokenizer is (or holds) byte-level BPE's."""
    if not isinstance(pre_tokenizer, dict):
        return False
    return pre_tokenizer.get("type") == "ByteLevel" or any(_byte_level_bpe(p) for p in pre_tokenizer.get("pretokenizers") or [])
