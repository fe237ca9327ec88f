"""How an API corpus turns signal questions into requests: the registry keys of an
`infini-gram-api` or `infini-gram-mini` entry (see `audit.corpora.api`)."""
from __future__ import annotations

from dataclasses import dataclass

from audit.corpora.base import Profile
from audit.corpora.protocol import MAX_CTX_LEN, MAX_DISP_LEN, MAX_QUERY_CHARS, MAX_QUERY_TOKENS
from audit.corpora.surface import TokenizerKind

LONGEST_MATCH_MODES = ("auto", "creativity", "count")
FORMS = ("when-absent", "both")
COOCCURRENCE = ("auto", "documents")


@dataclass(frozen=True)
class ApiOptions:
    """How the corpus turns signal questions into requests (see the module docstring)."""

    longest_match: str = "auto"
    budget: int = 256
    profile: Profile = Profile.DECIDE
    sample_seed: int = 0
    max_query_chars: int = MAX_QUERY_CHARS
    max_query_tokens: int = MAX_QUERY_TOKENS
    max_disp_len: int = MAX_DISP_LEN
    max_ctx_len: int = MAX_CTX_LEN
    creativity_stride: int = 50
    variants: bool = True
    tokenizer: str = "auto"
    forms: str = "when-absent"
    cooccurrence: str = "auto"
    group_terms: int = 4
    max_diff_tokens: int = 1000
    cnf_above: int = 10

    def __post_init__(self) -> None:
        if self.profile not in tuple(Profile):
            raise ValueError(f"profile {self.profile!r} is not one of {', '.join(Profile)}")
        object.__setattr__(self, "profile", Profile(self.profile))
        if self.longest_match not in LONGEST_MATCH_MODES:
            raise ValueError(f"longest_match {self.longest_match!r} is not one of {', '.join(LONGEST_MATCH_MODES)}")
        if self.budget < 1 or self.max_query_chars < 2 or self.max_query_tokens < 2 or self.max_disp_len < 2 or not 1 <= self.max_ctx_len <= MAX_CTX_LEN:
            raise ValueError(f"budget, max_query_chars, max_query_tokens and max_disp_len must be positive, max_ctx_len in [1, {MAX_CTX_LEN}]")
        if not 0 < self.creativity_stride < self.max_query_tokens:
            raise ValueError("creativity_stride must be positive and below max_query_tokens")
        for name, value, allowed in (("tokenizer", self.tokenizer, tuple(TokenizerKind)), ("forms", self.forms, FORMS), ("cooccurrence", self.cooccurrence, COOCCURRENCE)):
            if value not in allowed:
                raise ValueError(f"{name} {value!r} is not one of {', '.join(allowed)}")
        object.__setattr__(self, "tokenizer", TokenizerKind(self.tokenizer))
        if self.group_terms < 1 or self.max_diff_tokens < 1 or self.cnf_above < 0:
            raise ValueError("group_terms and max_diff_tokens must be positive, cnf_above at least 0")
