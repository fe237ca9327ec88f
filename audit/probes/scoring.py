"""Scoring probe outputs without a model, and cutting passages into probes.

Everything here is a pure function of text, the same in every language: scores compare
normalised strings, and the units of comparison follow the script (words where words are
separated by spaces, characters in Chinese, Japanese, Korean and Thai), as in `audit.text`.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from audit.text import UNSEGMENTED_SCRIPTS, dominant_script, script_of

# Below this many characters a passage is too short to probe by prefix: half of it (about 20
# characters, three or four English words) is too little to recognise a text by, and a suffix
# that short makes chrF and similarity swing on a single word.
MIN_PROBE_CHARS = 40

# Scripts scored in characters: unsegmented ones, plus Hangul, whose space-separated words
# carry attached particles (독일에, "in Germany"), so a whole word would rarely match.
_CHAR_SCRIPTS = UNSEGMENTED_SCRIPTS | {"hangul"}
# Scripts in which capitalisation marks names, so a capitalised span is a candidate entity.
_CASED_SCRIPTS = frozenset({"latin", "cyrillic", "greek"})
# Languages that capitalise every noun: a single capitalised word says nothing about a name.
_NOUN_CAPITALISING = frozenset({"de", "lb"})
# Scripts that attach prefixes (articles, prepositions) to a name without a space: בברמרהאפן.
_PREFIXING_SCRIPTS = frozenset({"hebrew", "arabic"})

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s)|[。！？]+[」』）”]*|[।॥]|\n")
_TRAILING_HEADINGS = re.compile(r"(?:\n[ \t]*=+[^=\n]*=+[ \t]*)+\s*$")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_OPENERS = "\"'“”‘’«»„‚([{=*#-–—• \t\u00a0"
_SENTENCE_MARKS = ".!?…。！？।॥\n"


def normalize(text: str) -> str:
    """NFKC (full-width and compatibility forms become plain), casefold, every punctuation
    and symbol character a space, whitespace collapsed: the form answers are compared in.
    Punctuation becomes a space rather than nothing, so `l'Allemagne` and `AFN-Bremen` still
    split into their words."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = "".join(" " if unicodedata.category(char)[0] in "PS" else char for char in folded)
    return " ".join(spaced.split())


def _tokens(normalised: str) -> list[str]:
    """Words of a normalised text, with every character of a `_CHAR_SCRIPTS` script its own token."""
    tokens: list[str] = []
    for word in normalised.split():
        run = ""
        for char in word:
            if script_of(char) in _CHAR_SCRIPTS:
                tokens += [run, char] if run else [char]
                run = ""
            else:
                run += char
        if run:
            tokens.append(run)
    return tokens


def answer_recall(answer_forms: Sequence[str], text: str) -> float:
    """The best, over the answer's forms, of the share of the form's tokens that the text
    contains (counted with multiplicity, as SQuAD's token overlap is).  Recall, not F1:
    a summary is long and should be credited for naming the answer, not penalised for saying
    more.  Tokens match exactly after `normalize`, without stemming, so an inflected form
    (`Deutschlands` for `Deutschland`) does not count; the LLM judge sits beside this score
    for such cases."""
    have = Counter(_tokens(normalize(text)))
    best = 0.0
    for form in answer_forms:
        want = Counter(_tokens(normalize(form)))
        if want and have:
            best = max(best, sum((want & have).values()) / sum(want.values()))
    return best


def chrf(hypothesis: str, reference: str) -> float:
    """chrF (character 6-grams, sacrebleu's defaults) in [0, 1]: it needs no tokenizer, so a
    continuation is scored the same way in Chinese as in German, and it gives partial credit
    for a continuation that is close to the original but not verbatim."""
    import sacrebleu  # imported here: it takes half a second, and most commands never score a probe

    return min(1.0, max(0.0, sacrebleu.sentence_chrf(hypothesis, [reference]).score / 100))


def similarity(a: str, b: str) -> float:
    """rapidfuzz's normalised edit similarity (`fuzz.ratio`) of the normalised texts, in
    [0, 1], as OWL scores names and titles.  An empty text is similar to nothing, so an empty
    output never matches."""
    left, right = normalize(a), normalize(b)
    return fuzz.ratio(left, right) / 100 if left and right else 0.0


@dataclass(frozen=True)
class Match:
    """The target closest to an output, how close (0 to 1), and whether that passes."""

    target: str | None
    similarity: float
    matched: bool


def _separated(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] stands as whole words: each end touches a space, the text's
    edge, or a character of a `_CHAR_SCRIPTS` script, where words have no spaces around them
    (or take particles); in Hebrew and Arabic a prefix may also come before."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    left = before.isspace() or script_of(before) in _CHAR_SCRIPTS or script_of(text[start]) in _CHAR_SCRIPTS | _PREFIXING_SCRIPTS
    right = after.isspace() or script_of(after) in _CHAR_SCRIPTS or script_of(text[end - 1]) in _CHAR_SCRIPTS
    return left and right


def _contains_words(text: str, part: str) -> bool:
    start = text.find(part)
    while start >= 0:
        if _separated(text, start, start + len(part)):
            return True
        start = text.find(part, start + 1)
    return False


def best_match(output: str, targets: Sequence[str], threshold: float) -> Match:
    """The target (a title, a name) an output names best, OWL-style.  The whole output and its
    first line are both compared, since models often add an explanation after the answer;
    a target found whole in the output (as whole words; anywhere in unsegmented scripts)
    counts as 1.0, since `Title: X` or `X (film)` names X.  Ties go to the earlier target."""
    text = normalize(output)
    first_line = normalize(next((line for line in output.splitlines() if line.strip()), ""))
    best = Match(None, 0.0, False)
    for target in targets:
        wanted = normalize(target)
        if not wanted:
            continue
        score = 1.0 if text and _contains_words(text, wanted) else max(similarity(text, wanted), similarity(first_line, wanted))
        if best.target is None or score > best.similarity:
            best = Match(target, score, score >= threshold)
    return best


def probe_passage(passage: str, max_chars: int) -> str:
    """The passage cut to at most `max_chars`: after the last sentence end that keeps at
    least half of that budget, else at the last space that does, else (a text without
    spaces, as in Chinese or Japanese) at `max_chars` itself.  Whole sentences make the most
    natural probe; half the budget is the most given up for one.  A wiki section heading
    (`== History ==`) left dangling at the end is dropped: nothing of its section follows."""
    text = passage.strip()
    if len(text) > max_chars:
        window = text[: max_chars + 1]
        half = max_chars // 2
        ends = [m.end() for m in _SENTENCE_END.finditer(window) if half <= m.end() <= max_chars]
        space = max((i for i, char in enumerate(window) if char.isspace()), default=-1)
        cut = ends[-1] if ends else (space if space >= half else max_chars)
        text = text[:cut]
    return _TRAILING_HEADINGS.sub("", text).rstrip()


def _split_points(text: str) -> list[tuple[int, int]]:
    """(end of the prefix, start of the suffix) at every space run, and between characters
    where either side is unsegmented script, unless the suffix would start with punctuation."""
    points = [(m.start(), m.end()) for m in re.finditer(r"\s+", text)]
    for i in range(1, len(text)):
        before, after = text[i - 1], text[i]
        if before.isspace() or after.isspace() or unicodedata.category(after)[0] == "P":
            continue
        if script_of(before) in UNSEGMENTED_SCRIPTS or script_of(after) in UNSEGMENTED_SCRIPTS:
            points.append((i, i))
    return points


def split_passage(passage: str, max_chars: int) -> tuple[str, str] | None:
    """(prefix, true continuation) for prefix probing: the passage cut by `probe_passage`,
    split at the word boundary (character boundary in unsegmented scripts) nearest its middle,
    so the model gets as much context as it must reproduce.  None when the cut passage is
    shorter than `MIN_PROBE_CHARS` or has no place to split."""
    text = probe_passage(passage, max_chars)
    if len(text) < MIN_PROBE_CHARS:
        return None
    points = _split_points(text)
    if not points:
        return None
    middle = len(text) / 2
    end, start = min(points, key=lambda point: abs(point[0] - middle))
    prefix, suffix = text[:end].rstrip(), text[start:].lstrip()
    return (prefix, suffix) if prefix and suffix else None


def _occurs_as_name(passage: str, name: str) -> bool:
    """Whether `name` occurs where a word starts: after a space, punctuation, a symbol or the
    text's start (not after a letter, digit or combining mark, as inside a Devanagari word);
    anywhere in unsegmented scripts and in Hebrew and Arabic, which attach prefixes."""
    if script_of(name[0]) in UNSEGMENTED_SCRIPTS | _PREFIXING_SCRIPTS:
        return name in passage
    start = passage.find(name)
    while start >= 0:
        if start == 0 or unicodedata.category(passage[start - 1])[0] in "PSZC":
            return True
        start = passage.find(name, start + 1)
    return False


def _at_sentence_start(passage: str, start: int) -> bool:
    before = passage[:start].rstrip(_OPENERS)
    return not before or before[-1] in _SENTENCE_MARKS


def _capitalised_spans(passage: str) -> list[tuple[str, bool]]:
    """(span, starts a sentence) for every maximal run of capitalised words joined only by
    spaces (punctuation, a line break or a lower-case word ends a run), less its leading
    words that the passage also writes in lower case (`The`, `La`, `Die`: common words
    capitalised by position or title case); what is left after such a word does not start
    a sentence."""
    lower = {word.group() for word in _WORD.finditer(passage) if word.group().islower()}
    runs: list[list[re.Match[str]]] = []
    for word in _WORD.finditer(passage):
        if not word.group()[0].isupper():
            continue
        gap = passage[runs[-1][-1].end():word.start()] if runs else ""
        if runs and re.fullmatch(r"[ \t\u00a0]+", gap):
            runs[-1].append(word)
        else:
            runs.append([word])
    spans: list[tuple[str, bool]] = []
    for run in runs:
        while run and run[0].group().lower() in lower:
            run = run[1:]
        if run:
            spans.append((passage[run[0].start():run[-1].end()], _at_sentence_start(passage, run[0].start())))
    return spans


def cloze_entity(passage: str, names: Sequence[str], lang: str) -> str | None:
    """The named entity to mask for a name cloze, chosen without an NER model:

    1. the longest of `names` (the item's title and answer forms) that occurs in the passage
       where a word starts (see `_occurs_as_name`), skipping names without a letter (a year
       is not a name); the item's own names make the cloze about the item;
    2. else, if the passage is in a cased script (Latin, Cyrillic, Greek), the most frequent
       run of capitalised words (see `_capitalised_spans`; two letters or more) that occurs at
       least once away from a sentence start, where capitals are grammar, not names; in
       German and Luxembourgish, which capitalise every noun, only runs of two or more words;
       ties go to the longer run, then the earlier;
    3. else None: in uncased scripts nothing marks a name without a model.
    """
    candidates = sorted(dict.fromkeys(name.strip() for name in names if name and name.strip()), key=len, reverse=True)
    for name in candidates:
        if any(char.isalpha() for char in name) and _occurs_as_name(passage, name):
            return name
    if dominant_script(passage) not in _CASED_SCRIPTS:
        return None
    min_words = 2 if lang.split("-")[0] in _NOUN_CAPITALISING else 1
    counts: Counter[str] = Counter()
    free: set[str] = set()
    order: dict[str, int] = {}
    for span, at_start in _capitalised_spans(passage):
        if len(span.split()) < min_words or sum(char.isalpha() for char in span) < 2:
            continue
        counts[span] += 1
        order.setdefault(span, len(order))
        if not at_start:
            free.add(span)
    if not free:
        return None
    return max(free, key=lambda span: (counts[span], len(span), -order[span]))


def mask(passage: str, entity: str, token: str = "[MASK]") -> str:
    """The passage with every occurrence of `entity` replaced by `token`, ignoring case and
    also inside longer words (`Deutschlands`, `Norddeutschland`): any copy left visible would
    let the model read the answer off the passage instead of recalling it."""
    if not entity:
        raise ValueError("cannot mask an empty entity")
    return re.sub(re.escape(entity), lambda _: token, passage, flags=re.IGNORECASE)
