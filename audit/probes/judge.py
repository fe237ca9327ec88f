"""Reading the judge model's verdict on a self-summary, and voting over k samples of it.

The judge is asked for one JSON object, `{"verdict": "known"}` or `{"verdict": "not_known"}`.
A local judge is not left to write it:
the backend scores both objects as the reply (`JUDGE_CHOICES`), for the summary and, once per
variant, for the same prompt with no summary at all (`NO_SUMMARY`).  A small model prefers one
reply whatever it reads (SmolLM2 always finds `known`, the shorter, likelier), so the verdict is
the direction the summary moves the odds from that baseline (Zhao et al.'s contextual
calibration): `known` when the summary makes `known` likelier than no summary did.  Every
summary gets a verdict, with `p_known` = sigmoid(that shift in log-odds).
A judge behind an OpenAI-compatible
endpoint writes the object; only that object is read, and a reply that is not one is recorded
as unparsed with the reason, never guessed from free text, since a guess would put the
parser's opinion in the judge's place.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

UNPARSED = "unparsed"

# A reasoning model's scratchpad: its drafts are not its answer.  An unclosed one (the output
# was cut off while thinking) hides everything after it.
_THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s_-]+")


class Verdict(StrEnum):
    KNOWN = "known"
    NOT_KNOWN = "not_known"


@dataclass(frozen=True)
class JudgeReading:
    """One judge output: its verdict, or why none could be read (exactly one is set)."""

    verdict: Verdict | None
    parse_error: str | None
    raw: str
    p_known: float | None = None


# The replies a scoring judge chooses between, written as the judge prompt asks for them.
JUDGE_CHOICES = tuple(json.dumps({"verdict": verdict.value}) for verdict in Verdict)
# The same two replies as a JSON schema, for an endpoint with structured outputs.
VERDICT_SCHEMA = json.dumps({"type": "object", "properties": {"verdict": {"type": "string", "enum": [verdict.value for verdict in Verdict]}},
                             "required": ["verdict"], "additionalProperties": False}, sort_keys=True)
# What the judge is shown instead of a summary for its baseline odds.
NO_SUMMARY = "(no answer)"


def scored_verdict(logprobs: tuple[float, ...], baseline: tuple[float, ...]) -> JudgeReading:
    """The verdict of a scored judge request (log-probabilities of `JUDGE_CHOICES`, in order)
    against the same prompt's scores without a summary: `known` when the summary raises the
    log-odds of `known` over `not_known`, `not_known` when it lowers them; `p_known` is the
    sigmoid of the shift.  No shift decides nothing."""
    shift = (logprobs[0] - logprobs[1]) - (baseline[0] - baseline[1])
    p_known = 1.0 / (1.0 + math.exp(min(700.0, -shift)))
    raw = json.dumps({"logprobs": dict(zip(Verdict, logprobs, strict=True)), "baseline": dict(zip(Verdict, baseline, strict=True))})
    if shift == 0:
        return JudgeReading(None, "the summary does not move the verdict's odds", raw, p_known)
    return JudgeReading(Verdict.KNOWN if shift > 0 else Verdict.NOT_KNOWN, None, raw, p_known)


def _objects(text: str) -> Iterator[tuple[int, int] | None]:
    """Spans of the top-level balanced `{...}` in the text, braces inside JSON strings not
    counted; a final None if a `{` is never closed (a truncated output)."""
    depth, start, in_string, escaped = 0, 0, False, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"' and depth:
            in_string = True
        elif char == "{":
            start = i if depth == 0 else start
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                yield start, i + 1
    if depth:
        yield None


def _verdict_of(value: object) -> Verdict | None:
    if not isinstance(value, str):
        return None
    spelled = _SEPARATORS.sub("_", value.strip().casefold())
    return Verdict(spelled) if spelled in set(Verdict) else None


def parse_verdict(text: str | None) -> JudgeReading:
    """The verdict of the JSON object in a judge output, after any `<think>` block.
    Tolerated: code fences or text around the object, other `{...}` without a verdict
    (braces in prose, an explanation object), the value's case and surrounding spaces,
    `not known` or `not-known` for `not_known`, the same verdict repeated.  Everything else
    is a parse error: no object, invalid JSON, no `verdict` key, another value, conflicting
    verdicts, an object cut off."""
    raw = text or ""
    body = _THINKING.sub(" ", raw)
    if not body.strip():
        return JudgeReading(None, "no answer after the reasoning" if raw.strip() else "empty output", raw)
    spans = list(_objects(body))
    found: list[Verdict] = []
    problems: list[str] = []
    for span in spans:
        if span is None:
            problems.append("a JSON object is not closed (truncated output?)")
            continue
        try:
            value = json.loads(body[span[0]:span[1]])
        except json.JSONDecodeError as error:
            problems.append(f"not valid JSON ({error.msg})")
            continue
        keyed = {str(key).strip().casefold(): item for key, item in value.items()}
        if "verdict" not in keyed:
            problems.append("no 'verdict' key in the JSON object")
            continue
        verdict = _verdict_of(keyed["verdict"])
        if verdict is None:
            return JudgeReading(None, f"verdict {keyed['verdict']!r} is neither 'known' nor 'not_known'", raw)
        found.append(verdict)
    if len(set(found)) > 1:
        return JudgeReading(None, "conflicting verdicts: " + ", ".join(found), raw)
    if found:
        return JudgeReading(found[0], None, raw)
    return JudgeReading(None, problems[0] if problems else "no JSON object in the output", raw)


def majority(readings: Iterable[JudgeReading]) -> tuple[Verdict | None, dict[str, int]]:
    """The verdict more than half of all k readings give, else None; unparsed readings count
    in k but vote for nothing, so a judge that mostly fails to answer decides nothing.  The
    counts (per verdict, plus `unparsed`) go into the evidence as they are."""
    counts = dict.fromkeys([*Verdict, UNPARSED], 0)
    total = 0
    for reading in readings:
        counts[reading.verdict or UNPARSED] += 1
        total += 1
    winner = next((verdict for verdict in Verdict if 2 * counts[verdict] > total), None)
    return winner, {str(key): count for key, count in counts.items()}
