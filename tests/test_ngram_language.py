"""n-gram evidence counts a variant's language only: real indexes of real Portuguese and Spanish
text (the demo corpus's PUD sentences) with a per-document language table, holding a Finnish
question's name and year."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import strip_table, write_jsonl

from audit.corpora.local import LocalIndex
from audit.corpora.shardread import bytes_to_char_lengths
from audit.exposure import SEEN, UNSEEN, decide
from audit.index.build import build_index
from audit.index.doclangs import UNKNOWN, DocumentLanguages, How
from audit.items import Item, Variant
from audit.langupgrade import install_table
from audit.policyfile import load_policy
from audit.signals.ngram import NgramConfig, run

DEMO = Path(__file__).resolve().parent.parent / "audit" / "data" / "demo" / "corpus"
CONFIG = NgramConfig()
PT = {"text": "Em 1859, Charles Darwin publicou A Origem das Espécies, o livro que fundou a biologia evolutiva moderna.", "lang": "pt"}
ES = {"text": "Charles Darwin publicó El origen de las especies en 1859 y cambió la historia natural.", "lang": "es"}
UND = {"text": "Alfred Russel Wallace 1858 Ternate letter, notes and copies.", "lang": UNKNOWN}
FI = {"text": "Charles Darwin julkaisi teoksen Lajien synty vuonna 1859, ja se muutti biologian.", "lang": "fi"}
MIXED = {"text": "A frase russa citada na página diz: Москва была основана князем Юрием Долгоруким в 1147 году. Isto é tudo o que o artigo diz.", "lang": "pt"}
FINNISH = Item("tydi-fi", "fi", {"fi": Variant(question="Minä vuonna Charles Darwin julkaisi kirjansa Lajien synty?", answer="1859", title="Charles Darwin")})
ENGLISH = Item("tydi-en", "en", {"en": Variant(question="In what year did Charles Darwin publish his famous book?", answer="1859", title="Charles Darwin")})
WALLACE = Item("tydi-wallace", "pt", {"pt": Variant(question="Em que ano Wallace escreveu a carta de Ternate?", answer="1858", title="Alfred Russel Wallace")})


def demo_rows(lang: str, limit: int) -> list[dict]:
    with gzip.open(DEMO / f"pud-{lang}.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [{"text": row["text"], "lang": lang} for row in map(json.loads, lines)][:limit]


def with_table(rows: list[dict], out: Path, memory_bytes: int | None = None) -> LocalIndex:
    """An index of the rows and the language table their `lang` gives (every language known
    by metadata, `und` not known), written as the build would write it."""
    write_jsonl(out.with_suffix(".jsonl"), rows)
    build_index([out.with_suffix(".jsonl")], out, **({"memory_bytes": memory_bytes} if memory_bytes else {}))
    languages = [UNKNOWN, *sorted({row["lang"] for row in rows} - {UNKNOWN})]
    codes = np.array([languages.index(row["lang"]) for row in rows], dtype=np.uint16)
    how = np.where(codes == 0, How.NONE, How.METADATA).astype(np.uint8)
    install_table(out, DocumentLanguages(languages, codes, how))
    return LocalIndex(out)


@pytest.fixture(scope="module")
def base_rows() -> list[dict]:
    return [*demo_rows("pt", 150), PT, *demo_rows("es", 150), ES, UND, MIXED]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, base_rows) -> LocalIndex:
    return with_table(base_rows, tmp_path_factory.mktemp("lang") / "index")


@pytest.fixture(scope="module")
def planted(tmp_path_factory, base_rows) -> LocalIndex:
    return with_table([*base_rows, FI], tmp_path_factory.mktemp("planted") / "index")


def field(evidence, name):
    return next(e for e in evidence if e.field == name)


def tag(corpus, item: Item, lang: str, config: NgramConfig = CONFIG):
    return decide(load_policy(), run(corpus, item, lang, config)).exposure


def test_a_finnish_question_is_unseen_through_portuguese_and_spanish_pages(corpus):
    evidence = run(corpus, FINNISH, "fi", CONFIG)
    pair = field(evidence, "question+answer")
    assert (pair.figures["documents"], pair.figures["documents_in_language"]) == (0, 0)
    assert pair.figures["any_language"] == {"documents": 2, "documents_in_language": 2}
    assert pair.figures["languages"] == {"es": 1, "pt": 1}
    assert pair.figures["language"] == {"lang": "fi", "by": "table", "unknown_language": "count", "unknown_documents": 0}
    assert {p["language"] for p in pair.provenance} == {"pt", "es"} and {p["language_by"] for p in pair.provenance} == {"metadata"}
    assert tag(corpus, FINNISH, "fi") is UNSEEN


def test_an_english_source_is_unseen_through_other_languages_pages(corpus):
    pair = field(run(corpus, ENGLISH, "en", CONFIG), "question+answer")
    assert pair.figures["documents"] == 0 and pair.figures["languages"] == {"es": 1, "pt": 1}
    assert tag(corpus, ENGLISH, "en") is UNSEEN


def test_a_finnish_copy_makes_it_seen(planted):
    pair = field(run(planted, FINNISH, "fi", CONFIG), "question+answer")
    assert pair.figures["documents"] == 1 and pair.figures["languages"] == {"es": 1, "fi": 1, "pt": 1}
    assert pair.provenance[0]["language"] == "fi"
    assert tag(planted, FINNISH, "fi") is SEEN


def test_a_question_copied_verbatim_counts_only_in_its_language(planted):
    finnish = Item("copy", "fi", {"fi": Variant(question=FI["text"])})
    question = field(run(planted, finnish, "fi", CONFIG), "question")
    assert question.figures["exact_count"] == 1 and question.figures["longest_match_fraction"] == 1.0
    assert question.provenance[0]["language"] == "fi" and question.figures["languages"] == {"fi": 1}
    portuguese = Item("copy", "pt", {"pt": Variant(question=FI["text"])})
    seen_elsewhere = field(run(planted, portuguese, "pt", CONFIG), "question")
    assert seen_elsewhere.figures["exact_count"] == 0 and seen_elsewhere.figures["longest_match_chars"] < 20
    assert seen_elsewhere.figures["any_language"]["exact_count"] == 1 and seen_elsewhere.figures["any_language"]["longest_match_fraction"] == 1.0
    assert tag(planted, finnish, "fi") is SEEN and tag(planted, portuguese, "pt") is UNSEEN


def test_documents_of_unknown_language_count_flagged_or_are_ignored(corpus):
    pair = field(run(corpus, WALLACE, "pt", CONFIG), "question+answer")
    assert pair.figures["documents"] == 1 and pair.figures["languages"] == {UNKNOWN: 1}
    assert pair.figures["language"]["unknown_documents"] == 1 and pair.figures["language"]["unknown_language"] == "count"
    assert tag(corpus, WALLACE, "pt") is SEEN
    ignoring = NgramConfig(unknown_language="ignore")
    pair = field(run(corpus, WALLACE, "pt", ignoring), "question+answer")
    assert pair.figures["documents"] == 0 and pair.figures["language"]["unknown_documents"] == 0 and pair.figures["any_language"]["documents"] == 1
    assert tag(corpus, WALLACE, "pt", ignoring) is UNSEEN


def test_a_language_absent_from_the_corpus_gets_zero_everywhere(corpus):
    """With unknown-language documents ignored nothing is left to count; counted, only the one
    unknown-language document could match (it shares " 185" with the text)."""
    copy = Item("de", "de", {"de": Variant(question=PT["text"], answer="1859", title="Charles Darwin", context=PT["text"])})
    counted = field(run(corpus, copy, "de", CONFIG), "question").figures
    assert counted["exact_count"] == 0 and counted["longest_match_chars"] == len(" 185")
    evidence = run(corpus, copy, "de", NgramConfig(unknown_language="ignore"))
    for name in ("question", "context"):
        figures = field(evidence, name).figures
        assert (figures["exact_count"], figures["longest_match_chars"], figures["coverage"], figures["windows_found"]) == (0, 0, 0.0, 0)
        assert figures["any_language"]["exact_count"] == 1 and figures["languages"] == {"pt": 1}
    assert field(evidence, "question+answer").figures["documents"] == 0
    assert decide(load_policy(), evidence).exposure is UNSEEN


def test_a_field_in_another_language_is_counted_in_that_language(corpus):
    """MLQA's cross-lingual files: a German question over a Portuguese context."""
    variant = Variant(question="Wann veröffentlichte Darwin sein Buch?", context=PT["text"], answer="1859", field_languages={"context": "pt"})
    evidence = run(corpus, Item("x", "de", {"de": variant}), "de", CONFIG)
    context = field(evidence, "context")
    assert context.figures["language"]["lang"] == "pt" and context.figures["exact_count"] == 1


@pytest.mark.parametrize(("text_cap", "kept"), [(1 << 20, 64 << 20), (0, 64 << 20), (40_000, 64 << 20), (1 << 20, 1)])
def test_restricted_longest_matches_are_those_of_the_allowed_documents_alone(tmp_path, base_rows, monkeypatch, text_cap, kept):
    """Against brute force over the documents' text, on an index of several shards: every
    shard's allowed documents asked through their own small index, none, or some; and with
    room to keep only the last small index asked."""
    from audit.corpora import inlanguage

    monkeypatch.setattr(inlanguage, "TEXT_CAP", text_cap)
    monkeypatch.setattr(inlanguage, "SMALL_KEPT", kept)
    index = with_table([*base_rows, FI], tmp_path / "index", memory_bytes=5 * 65_536)
    assert index.info.details["shards"] >= 2
    rng = random.Random(7)
    texts = [row["text"] for row in [*base_rows, FI]]
    for langs in ({"fi"}, {"pt"}, {"es", "pt"}):
        view = index.in_language(frozenset(langs), unknown=False)
        allowed = [row["text"].encode("utf-8") for row in [*base_rows, FI] if row["lang"] in langs]
        for _ in range(6):
            a, b = rng.sample(texts, 2)
            query = a[rng.randrange(len(a) // 2) :][:40] + " " + b[: rng.randrange(5, 40)]
            encoded = query.encode("utf-8")
            expected = [max((n for n in range(len(encoded) - i + 1) if any(encoded[i : i + n] in doc for doc in allowed)), default=0) for i in range(len(encoded))]
            assert view.match_lengths(query).lengths == bytes_to_char_lengths(encoded, np.array(expected)), (langs, query)
            piece = query[:12]
            assert view.count_range(piece) == (sum(doc.count(piece.encode()) for doc in allowed),) * 2
            total, found = view.occurrences(piece, 5)
            assert total == sum(doc.count(piece.encode()) for doc in allowed) and all(index.languages.language(o.document) in langs for o in found)
    portuguese = next(d for d in range(index.info.documents) if PT["text"].encode() in index.documents(d, d + 1).__next__()[1])
    finnish = index.in_language(frozenset({"fi"}), unknown=False)
    assert finnish.count_range("Charles Darwin") == (1, 1)
    let_in = finnish.with_documents(frozenset({portuguese}))
    assert let_in.count_range("Charles Darwin") == (2, 2)
    both = [FI["text"].encode("utf-8"), PT["text"].encode("utf-8")]
    query = PT["text"][:50] + " " + FI["text"][:30]
    encoded = query.encode("utf-8")
    expected = [max((n for n in range(len(encoded) - i + 1) if any(encoded[i : i + n] in doc for doc in both)), default=0) for i in range(len(encoded))]
    assert let_in.match_lengths(query).lengths == bytes_to_char_lengths(encoded, np.array(expected)), "a let-in document counts as the language's own"


def _lengths_in_a_forked_child(view, text: str, results) -> None:
    results.put(view.match_lengths(text).lengths)


def test_a_worker_forked_after_an_index_build_sorts_its_small_indexes(tmp_path, base_rows):
    """The index build sorts suffixes with OpenMP threads in this process; a worker forked
    afterwards builds a language's small index (`_allowed_index`) without waiting forever for
    threads it did not inherit, and answers as this process does."""
    import multiprocessing

    index = with_table([*base_rows, FI], tmp_path / "index")
    text = FI["text"][:60] + " " + base_rows[0]["text"][:30]
    fork = multiprocessing.get_context("fork")
    results = fork.Queue()
    child = fork.Process(target=_lengths_in_a_forked_child, args=(index.in_language(frozenset({"fi"}), unknown=False), text, results))
    child.start()
    child.join(300)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and child.exitcode == 0, "the forked worker did not finish"
    assert results.get(timeout=10) == index.in_language(frozenset({"fi"}), unknown=False).match_lengths(text).lengths


def test_a_quotation_in_another_script_counts_for_the_language_of_its_window(corpus):
    """A Portuguese page quoting a Russian sentence holds it for Russian, not for Greek."""
    russian = Item("ru", "ru", {"ru": Variant(question="Москва была основана князем Юрием Долгоруким в 1147 году.")})
    question = field(run(corpus, russian, "ru", CONFIG), "question")
    assert question.figures["exact_count"] == 1 and question.figures["longest_match_fraction"] == 1.0
    assert question.figures["languages"] == {"ru": 1}
    (entry,) = question.provenance
    assert (entry["language"], entry["language_by"]) == ("ru", "window")
    greek = Item("el", "el", {"el": Variant(question=russian.variants["ru"].question)})
    assert field(run(corpus, greek, "el", CONFIG), "question").figures["exact_count"] == 0
    portuguese = Item("pt", "pt", {"pt": Variant(question=russian.variants["ru"].question)})
    (entry,) = field(run(corpus, portuguese, "pt", CONFIG), "question").provenance
    assert (entry["language"], entry["language_by"]) == ("ru", "window")


def test_a_table_works_out_each_languages_flag_once_per_question():
    """The quoting check asks, per language of the table, whether its pages may quote another
    script; the answer is worked out once per question asked and cannot be changed."""
    table = DocumentLanguages(["pt", "ru", "el", UNKNOWN], np.array([0, 1, 2, 3, 0], dtype=np.uint16), np.zeros(5, dtype=np.uint8))
    asked: list[str] = []

    def latin(name: str) -> bool:
        asked.append(name)
        return name in {"pt"}

    first = table.flags(("latin",), latin)
    assert first.tolist() == [True, False, False, False] and asked == ["pt", "ru", "el", UNKNOWN]
    assert table.flags(("latin",), latin) is first and len(asked) == 4
    assert table.flags(("other",), lambda name: name == "el").tolist() == [False, False, True, False]
    assert first[table.codes].tolist() == [True, False, False, False, True]
    with pytest.raises(ValueError):
        first[0] = False


def test_an_index_without_a_table_counts_every_document_and_says_so(tmp_path, base_rows):
    write_jsonl(tmp_path / "docs.jsonl", base_rows)
    build_index([tmp_path / "docs.jsonl"], tmp_path / "index")
    strip_table(tmp_path / "index")
    old = LocalIndex(tmp_path / "index")
    evidence = run(old, FINNISH, "fi", CONFIG)
    assert field(evidence, "question").figures["language"]["by"] == "unavailable"
    pair = field(evidence, "question+answer")
    assert pair.figures["language"]["by"] == "metadata" and pair.figures["languages"] == {"es": 1, "pt": 1} and pair.figures["documents"] == 0


@pytest.fixture(scope="module")
def ray_executor(ray_cluster):
    """This process as a Ray Client of the test cluster, disconnected after the module."""
    import ray

    from audit.executors import parse_executor

    yield parse_executor(ray_cluster.client)
    ray.shutdown()


def test_ray_actors_answer_the_restricted_queries_as_one_process_does(tmp_path, base_rows, ray_executor):
    from audit.corpora.distributed import DistributedIndex

    local = with_table([*base_rows, FI], tmp_path / "index", memory_bytes=5 * 65_536)
    distributed = DistributedIndex(local.path, executor=ray_executor, groups=2)
    try:
        assert len(distributed.groups) == 2
        for item, lang in ((FINNISH, "fi"), (ENGLISH, "en"), (WALLACE, "pt")):
            mine = [(e.field, e.figures, e.provenance) for e in run(distributed, item, lang, CONFIG)]
            assert mine == [(e.field, e.figures, e.provenance) for e in run(local, item, lang, CONFIG)]
    finally:
        distributed.close()


def test_a_short_field_lists_coverage_below_its_floor(corpus):
    short = Item("short", "pt", {"pt": Variant(question="Charles Darwin publicou em 1859 um livro?")})
    figures = field(run(corpus, short, "pt", CONFIG), "question").figures
    assert figures["windows"] == 1 and figures["below_floor"] == ["coverage"]
    assert figures["floor"] == {"coverage": {"needed": 3, "had": 1, "unit": "windows"}}
    longer = field(run(corpus, Item("long", "pt", {"pt": Variant(question=PT["text"])}), "pt", CONFIG), "question").figures
    assert longer["windows"] >= 3 and "below_floor" not in longer


def test_a_common_anchor_carries_no_question(planted):
    """An anchor the corpus holds more often than `anchor_max_count` is set aside."""
    strict = NgramConfig(anchor_max_count=1)
    pair = field(run(planted, FINNISH, "fi", strict), "question+answer")
    assert pair.figures["anchors"][0] == {"text": "Charles Darwin", "count": 3, "common": True}
    assert pair.figures["documents"] == 0 and tag(planted, FINNISH, "fi", strict) is UNSEEN


def test_a_capped_scan_gives_bounds_that_hold_the_true_figure(corpus, monkeypatch):
    """A range longer than the scan cap, in a language with too much text to search as text
    (TEXT_CAP), is read at evenly spread ranks: the count becomes
    [allowed among those read, range less disallowed among those read], and a longest match
    whose check stayed open gets the unrestricted length as its highest."""
    from audit.corpora import inlanguage

    exact = corpus.in_language(frozenset({"es"}), unknown=False)
    text = "Em 1859, Charles Darwin publicou A Origem das Espécies, o livro que fundou"
    truth_count, truth_lengths = exact.count_range(" de "), exact.match_lengths(text).lengths
    monkeypatch.setattr(inlanguage, "SCAN_CAP", 4)
    monkeypatch.setattr(inlanguage, "FIRST_LOOK", 2)
    monkeypatch.setattr(inlanguage, "TEXT_CAP", 0)
    capped = LocalIndex(corpus.path).in_language(frozenset({"es"}), unknown=False)
    low, high = capped.count_range(" de ")
    assert low <= truth_count[0] <= high and (low, high) != truth_count
    found = capped.match_lengths(text)
    assert all(a <= b <= c for a, b, c in zip(found.lengths, truth_lengths, found.upper(), strict=True))
    question = field(run(corpus, Item("pt", "pt", {"pt": Variant(question=text)}), "pt", CONFIG), "question")
    assert question.figures["exact_count"] == 1


def test_a_quotation_too_short_to_identify_is_read_in_its_window(corpus, monkeypatch):
    """A match with too few letters to identify (one Cyrillic letter and a year) is let in by
    the window around it in the Portuguese page quoting it; with no window to read, it is not."""
    short = Item("ru-short", "ru", {"ru": Variant(question="в 1147")})
    question = field(run(corpus, short, "ru", CONFIG), "question")
    assert question.figures["exact_count"] == 1 and question.figures["languages"] == {"ru": 1}
    (entry,) = question.provenance
    assert (entry["language"], entry["language_by"]) == ("ru", "window")
    monkeypatch.setattr("audit.signals.ngram_language.MAX_WINDOWS", 0)
    assert field(run(corpus, short, "ru", CONFIG), "question").figures["exact_count"] == 0


def test_a_match_met_again_is_let_in_from_the_kept_answer(corpus, monkeypatch):
    """A template's match met item after item lets in the documents found the first time,
    without reading its windows again; a cold index lets in the same ones, and a match with
    another sample is worked out afresh."""
    from audit.signals import ngram_language

    short = Item("ru-short", "ru", {"ru": Variant(question="в 1147")})
    first = field(run(corpus, short, "ru", CONFIG), "question")
    read: list[int] = []
    window_is_mine = ngram_language.Scope._window_is_mine
    monkeypatch.setattr(ngram_language.Scope, "_window_is_mine", lambda self, text, found, document: read.append(document) or window_is_mine(self, text, found, document))
    again = field(run(corpus, short, "ru", CONFIG), "question")
    assert read == [] and (again.figures, again.provenance) == (first.figures, first.provenance)
    cold = field(run(LocalIndex(corpus.path), short, "ru", CONFIG), "question")
    assert len(read) == 1 and (cold.figures, cold.provenance) == (first.figures, first.provenance)
    other = Item("ru-other", "ru", {"ru": Variant(question="м в 1147")})
    assert field(run(corpus, other, "ru", CONFIG), "question").figures["languages"] == {"ru": 1} and len(read) == 2


def test_the_kept_quotations_are_bounded(corpus, monkeypatch):
    """Past `QUOTES_KEPT` answers the view forgets them rather than grow with the benchmark."""
    from audit.corpora.base import in_language
    from audit.signals import ngram_language

    monkeypatch.setattr(ngram_language, "QUOTES_KEPT", 2)
    fresh = LocalIndex(corpus.path)
    view = in_language(fresh, frozenset({"ru"}), CONFIG.unknown)[0]
    for number, text in enumerate(("в 1147", "Юрием 1147", "князем 1147", "в 1147")):
        run(fresh, Item(f"ru-{number}", "ru", {"ru": Variant(question=text)}), "ru", CONFIG)
        assert 1 <= len(view.quoted) <= 2


def test_a_field_never_found_whole_is_not_counted_and_its_evidence_stays(corpus, base_rows, monkeypatch):
    """A field whose longest match from its first character falls short of it occurs nowhere,
    so its `exact_count` is 0 without counting it: over every document and in a language, the
    count of real sentences, their openings and names is 0 exactly when the match falls short,
    and every piece of the signal's evidence is what counting every field gives."""
    from audit.signals import ngram

    texts = [row["text"] for row in base_rows[::25]] + [row["text"][:24] for row in base_rows[5::25]] + [PT["text"], FI["text"], ES["text"][:40], "Charles Darwin", "1859"]
    whole = set()
    for view in (corpus, corpus.in_language(frozenset({"pt"}), unknown=False), corpus.in_language(frozenset({"es"}), unknown=True)):
        for text in texts:
            found = view.match_lengths(text)
            counted = view.count_range(text)
            assert (counted[1] > 0) == (found.lengths[0] == len(text)) and counted[0] == counted[1], (text, counted)
            whole.add(counted[1] > 0)
    assert whole == {True, False}
    items = [FINNISH, ENGLISH, WALLACE, Item("pt", "pt", {"pt": Variant(question=PT["text"], answer="1859", title="Charles Darwin")})]
    skipping = [[e.to_dict() for e in run(corpus, item, lang, CONFIG)] for item in items for lang in item.variants]
    asked = []
    monkeypatch.setattr(ngram, "_never_whole", lambda found: asked.append(found.text) or False)
    counting = [[e.to_dict() for e in run(corpus, item, lang, CONFIG)] for item in items for lang in item.variants]
    assert skipping == counting and len(asked) >= 8


def _searches(monkeypatch, *views) -> list[str]:
    """The texts each of `views` is asked to search from now on."""
    asked: list[str] = []
    for view in views:
        search = view.match_lengths
        monkeypatch.setattr(view, "match_lengths", lambda text, questions=None, search=search: asked.append(text) or search(text, questions))
    return asked


def test_a_field_inside_an_earlier_one_takes_its_lengths_from_it(corpus, base_rows, monkeypatch):
    """A field standing inside one the variant measured before (a cloze item's prompt and answer
    in its statement) is not searched: its lengths, cut from the container's, are those a
    search finds, over every document and in a language; a field inside none, or asked of
    another view, is searched, and so is one whose container's lengths were only bounded."""
    from audit.corpora import inlanguage
    from audit.signals.ngram_match import HeldLengths

    views = [corpus, corpus.in_language(frozenset({"pt"}), unknown=False), corpus.in_language(frozenset({"es"}), unknown=True)]
    sentences = [row["text"] for row in base_rows[::30]] + [PT["text"], ES["text"], MIXED["text"]]
    parts = lambda s: [s, s[:20], s[7:31], s[-15:], s[len(s) // 2 : len(s) // 2 + 3]]  # noqa: E731
    truth = {(id(view), text): view.match_lengths(text).lengths for view in views for s in sentences for text in parts(s)}
    asked = _searches(monkeypatch, *views)
    for s in sentences:
        held = HeldLengths()
        for view in views:
            for text in parts(s):
                assert held.match_lengths(view, text).lengths == truth[(id(view), text)], (text, s)
    assert asked == [s for s in sentences for _ in views]
    held = HeldLengths()
    held.match_lengths(views[1], PT["text"])
    held.match_lengths(views[2], "Charles Darwin")
    assert asked[-2:] == [PT["text"], "Charles Darwin"]
    monkeypatch.setattr(inlanguage, "SCAN_CAP", 4)
    monkeypatch.setattr(inlanguage, "FIRST_LOOK", 2)
    monkeypatch.setattr(inlanguage, "TEXT_CAP", 0)
    capped = LocalIndex(corpus.path).in_language(frozenset({"es"}), unknown=False)
    asked = _searches(monkeypatch, capped)
    held = HeldLengths()
    text = "Em 1859, Charles Darwin publicou A Origem das Espécies, o livro que fundou"
    assert held.match_lengths(capped, text).highest is not None
    held.match_lengths(capped, text[:30])
    assert asked == [text, text[:30]]


def test_a_cloze_items_evidence_is_what_searching_every_field_gives(corpus, monkeypatch):
    """The signal's evidence for cloze items, whose prompt and answer stand in the statement,
    is the same whether the lengths are lent or every field is searched."""
    from audit.items import ItemKind
    from audit.signals import ngram_match

    def cloze(item_id: str, sentence: str, answer: str, lang: str) -> Item:
        return Item(item_id, lang, {lang: Variant(question=sentence.replace(answer, "<mask>", 1), answer=answer, subject="Charles Darwin")}, kind=ItemKind.CLOZE, mask="<mask>")

    items = [cloze("pt", PT["text"], "1859", "pt"), cloze("es", ES["text"], "especies", "es"), cloze("fi", FI["text"], "Lajien synty", "fi")]
    lent = [[e.to_dict() for e in run(corpus, item, lang, CONFIG)] for item in items for lang in item.variants]
    asked = []
    monkeypatch.setattr(ngram_match.HeldLengths, "match_lengths", lambda self, view, text: asked.append(text) or view.match_lengths(text))
    searched = [[e.to_dict() for e in run(corpus, item, lang, CONFIG)] for item in items for lang in item.variants]
    assert lent == searched and {"1859", "especies", "Lajien synty"} <= set(asked)
    prompts = [next(e for e in found if e["field"] == "prompt") for found in lent]
    assert all(e["figures"]["longest_match_chars"] > 0 for e in prompts)


def test_a_views_samples_are_kept_apart_from_those_of_a_view_letting_documents_in(corpus, monkeypatch):
    """A language's view answers a string asked again from its store, with the places a fresh
    view finds; a view letting a document in shares the store but not the answers, and the
    store holds at most `SAMPLES_KEPT`."""
    from audit.corpora import inlanguage

    view = corpus.in_language(frozenset({"pt"}), unknown=False)
    fresh = lambda v: inlanguage.LanguageView(corpus, v.languages, v.unknown, v.let_in)  # noqa: E731
    es_document = next(d for d in range(corpus.info.documents) if corpus.in_language(frozenset({"es"}), unknown=False).document_language(d)[0] == "es")
    let_in = view.with_documents(frozenset({es_document}))
    read = []
    occurrences_in = corpus.occurrences_in
    monkeypatch.setattr(corpus, "occurrences_in", lambda *args: read.append(args[0]) or occurrences_in(*args))
    for text in ("de", "Charles Darwin", " a ", "1859"):
        for v in (view, let_in):
            first = v.occurrences(text, 50)
            assert v.occurrences(text, 50) is first
            again = fresh(v).occurrences(text, 50)
            assert first[0] == again[0] and first[1].documents.tolist() == again[1].documents.tolist() and first[1].offsets.tolist() == again[1].offsets.tolist()
    assert view.occurrences("de", 50)[0] < let_in.occurrences("de", 50)[0]
    assert len(read) == 16
    assert view._samples is let_in._samples and view._samples.cache_info().maxsize == inlanguage.SAMPLES_KEPT
