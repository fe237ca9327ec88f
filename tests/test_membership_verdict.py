"""The membership verdict (`audit.exposure.decide_membership`): each field's score against the
policy's calibrated threshold for the variant's language, else its script; and the policy's
`[membership.thresholds]` tables refused when they name what the signal cannot read."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.evidence import ABSENT, OK, UNKNOWN, Evidence
from audit.exposure import Membership, decide_membership
from audit.policyfile import PolicyError, load_policy

POLICY = """
[membership.thresholds.context.he]
score = "zlib"
value = 0.02
[membership.thresholds.context."script:Latn"]
score = "min_k_plus"
value = -1.5
[membership.thresholds.question.en]
score = "loss"
value = 2.0
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = tmp_path_factory.mktemp("policy") / "thresholds.toml"
    path.write_text(POLICY, encoding="utf-8")
    return load_policy(path)


def read(name: str, status=OK, **figures: float) -> Evidence:
    return Evidence("membership", "smollm2", name, status=status, figures=dict(figures), error=None if status == OK else "offline")


def test_the_language_threshold_comes_before_the_script_and_direction_follows_the_score(policy):
    hebrew = decide_membership(policy, [read("context", zlib=0.019, min_k_plus=-9.0)], "he")
    assert hebrew.membership is Membership.MEMBER
    (check,) = hebrew.decided_by
    assert check == {"signal": "membership", "source": "smollm2", "field": "context", "group": "he", "figure": "zlib", "op": "<=", "value": 0.019, "threshold": 0.02}
    # French has no threshold of its own: Latin script's, on min_k_plus, where members score higher.
    french = decide_membership(policy, [read("context", min_k_plus=-1.4)], "fr")
    assert french.membership is Membership.MEMBER and french.decided_by[0]["group"] == "script:Latn" and french.decided_by[0]["op"] == ">="
    assert decide_membership(policy, [read("context", min_k_plus=-1.6)], "fr").membership is Membership.NON_MEMBER


def test_any_field_past_its_threshold_makes_a_member(policy):
    found = decide_membership(policy, [read("question", loss=1.9), read("context", min_k_plus=-3.0)], "en")
    assert found.membership is Membership.MEMBER and [c["field"] for c in found.decided_by] == ["question"]
    neither = decide_membership(policy, [read("question", loss=2.1), read("context", min_k_plus=-3.0)], "en")
    assert neither.membership is Membership.NON_MEMBER and [c["field"] for c in neither.decided_by] == ["question", "context"]


def test_what_cannot_be_told_is_undetermined_never_non_member(policy):
    unread = decide_membership(policy, [read("question", status=UNKNOWN), read("context", min_k_plus=-3.0)], "en")
    assert unread.membership is Membership.UNDETERMINED and unread.decided_by[0]["status"] == "unknown"
    # Japanese: no threshold for it or its script.
    nothing = decide_membership(policy, [read("context", zlib=0.001)], "ja")
    assert nothing.membership is Membership.UNDETERMINED and "no calibrated threshold for ja" in nothing.decided_by[0]["reason"]
    assert decide_membership(policy, [read("context", status=ABSENT)], "he").membership is Membership.UNDETERMINED
    assert decide_membership(policy, [Evidence("ngram", "demo", "context", figures={"coverage": 1.0})], "he") is None
    assert decide_membership(load_policy(), [read("context", zlib=0.0)], "he").membership is Membership.UNDETERMINED


@pytest.mark.parametrize(("table", "message"), [
    ('[membership.thresholds.answer.en]\nscore = "loss"\nvalue = 1.0', "key 'membership.thresholds.answer': unknown; expected one of 'question', 'context' or 'statement'"),
    ('[membership.thresholds.context.english]\nscore = "loss"\nvalue = 1.0', "key 'membership.thresholds.context.english'"),
    ('[membership.thresholds.context.iw]\nscore = "loss"\nvalue = 1.0', "key 'membership.thresholds.context.iw': write the language as he"),
    ('[membership.thresholds.context."script:hebr"]\nscore = "loss"\nvalue = 1.0', "key 'membership.thresholds.context.\"script:hebr\"': a script is four letters, title-cased"),
    ('[membership.thresholds.context.en]\nscore = "perplexity"\nvalue = 1.0', "key 'membership.thresholds.context.en.score': must be one of \"loss\""),
    ('[membership.thresholds.context.en]\nscore = "loss"', "key 'membership.thresholds.context.en.value': missing; must be a number"),
])
def test_a_threshold_the_signal_cannot_use_is_refused_naming_the_key(tmp_path: Path, table: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(table, encoding="utf-8")
    with pytest.raises(PolicyError, match=str(path)) as raised:
        load_policy(path)
    assert message in str(raised.value)
