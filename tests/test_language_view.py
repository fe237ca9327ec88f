"""A provenance page's language sections (`audit.report.languageview`), written in Python
rather than in the page's template: the bytes the template wrote, and every value escaped."""
from __future__ import annotations

import copy

from audit.report.languageview import language_sections
from audit.report.render import _environment

HOSTILE = "<script>x</script>"
EVIDENCE = {"signal": "ngram", "source": "demo", "field": "answer", "status": "absent", "figures": {}, "provenance": []}
CHECK = {"signal": "ngram", "source": "demo", "field": "answer", "figure": "exact_count", "value": 3, "op": ">=", "threshold": 1}
LANGUAGES = [
    {
        "lang": "pt", "role": "source", "exposure": "seen", "decided_by": [CHECK], "seen_in_languages": ["pt", "es"],
        "knowledge": "known", "knowledge_decided_by": [],
        "alone": {"signal": {"ngram": "seen", "minhash": "unseen"}, "source": {"demo": "seen"}},
        "signals": [("ngram", [("answer", [("demo", [EVIDENCE]), ("other", [])])])],
    },
    {
        "lang": "ja", "role": "target", "exposure": "unseen", "decided_by": [], "seen_in_languages": None,
        "knowledge": None, "knowledge_decided_by": [],
        "alone": {"signal": {}, "source": {}},
        "signals": [("minhash", [])],
    },
]
RUNS = [{"signal": "minhash", "source": "big", "ran": False, "reason": "no near-duplicate index"}, {"signal": "minhash", "source": "demo", "ran": True}]
EXPECTED = '  <div class="lang seen" id="lang-pt">\n    <h2>pt <span class="tag seen">seen</span> <span class="tag known" title="what the probed model knows">model: known</span> <span class="muted" style="font-size:13px">source</span></h2>\n    <div class="muted decided-by">decided by:\n    <code>ngram.answer.exact_count = 3</code> in demo (&gt;= 1)\n    </div>\n    <div class="muted seen-in-languages">seen in: pt, es</div>\n    <div class="muted knowledge-decided-by">model knowledge <span class="verdict known">known</span>, decided by:\n    \n    </div>\n    <div class="muted alone">judged alone:\nsignal <code>ngram</code> <span class="verdict seen" data-signal="ngram">seen</span> · signal <code>minhash</code> <span class="verdict unseen" data-signal="minhash">unseen</span> · source demo <span class="verdict seen" data-source="demo">seen</span>    </div>\n    <div class="signal" data-signal="ngram">\n      <h3>signal <code>ngram</code></h3>\n      <div class="field" data-field="answer">\n        <h4>answer</h4>\n        <div class="sources">\n          <div class="source" data-source="demo">\n            <div class="source-name">demo</div>\n<div class="figures-line muted">absent</div>\n          </div>\n          <div class="source" data-source="other">\n            <div class="source-name">other</div>\n            <div class="muted">no ngram evidence on answer from other</div>\n          </div>\n        </div>\n      </div>\n    </div>\n  </div>\n  <div class="lang unseen" id="lang-ja">\n    <h2>ja <span class="tag unseen">unseen</span> <span class="muted" style="font-size:13px">target</span></h2>\n    <div class="muted decided-by">decided by:\n    \n    </div>\n    <div class="signal" data-signal="minhash">\n      <h3>signal <code>minhash</code></h3>\n      <div class="muted">did not run on big: no near-duplicate index</div>\n    </div>\n  </div>\n'


def _view():
    return _environment().globals["evidence_view"]


def test_the_sections_are_written_as_the_template_wrote_them():
    """Tag, checks, languages seen in, model knowledge, what each signal and source decides
    alone, a run that did not happen, a source without evidence on a field: in that order."""
    assert str(language_sections(LANGUAGES, RUNS, _view())) == EXPECTED


def test_every_value_of_a_section_is_escaped():
    languages = copy.deepcopy(LANGUAGES)
    for language in languages:
        language.update(lang=HOSTILE, role=HOSTILE, exposure=HOSTILE, knowledge=HOSTILE, seen_in_languages=[HOSTILE])
        language["alone"] = {"signal": {HOSTILE: HOSTILE}, "source": {HOSTILE: HOSTILE}}
        language["signals"] = [(HOSTILE, [(HOSTILE, [(HOSTILE, [])])])]
    runs = [{"signal": HOSTILE, "source": HOSTILE, "ran": False, "reason": HOSTILE}]
    html = str(language_sections(languages, runs, _view()))
    assert "<script>" not in html
    assert html.count("&lt;script&gt;") > 20


def test_a_run_that_did_not_happen_is_listed_under_its_own_signal_only():
    html = str(language_sections(LANGUAGES, [*RUNS, {"signal": "ngram", "source": "x", "ran": True}], _view()))
    assert html.count("did not run on") == 1
    assert html.index("did not run on big") > html.index('data-signal="minhash"')
