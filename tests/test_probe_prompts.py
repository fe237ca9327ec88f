"""The shipped probe prompts and the checks on users' prompt files."""
from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from audit.probes.prompts import ALLOWED, REQUIRED, PromptError, Task, Template, load_templates

ECLEKTIC_LANGS = ("en", "fr", "he", "zh", "de", "es", "hi", "id", "it", "ja", "ko", "pt")
PROBES = (Task.SUMMARY, Task.DIRECT, Task.CLOZE, Task.PREFIX)
VALUES = {
    "entity": "ENTITY-VALUE", "passage": "PASSAGE-VALUE", "masked_passage": "MASKED [MASK] VALUE",
    "prefix": "PREFIX-VALUE", "summary": "SUMMARY-VALUE", "reference": "REFERENCE-VALUE", "answer": "ANSWER-VALUE",
}


def values_for(task: Task) -> dict[str, str]:
    return {name: VALUES[name] for name in ALLOWED[task] if name in VALUES}


def write(tmp_path: Path, text: str, name: str = "prompts.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_file_has_every_probe_for_every_eclektic_language():
    templates = load_templates()
    assert set(templates.languages) == set(ECLEKTIC_LANGS)
    shipped = tomllib.loads(resources.files("audit").joinpath("data/probe_prompts.toml").read_text(encoding="utf-8"))
    for lang in ECLEKTIC_LANGS:
        assert set(shipped[lang]) == {str(task) for task in PROBES}, lang
        for task in PROBES:
            assert templates.for_lang(task, lang).table == lang
        assert templates.for_lang(Task.JUDGE, lang).table == "default"
    assert set(shipped["default"]) == {str(task) for task in Task}


@pytest.mark.parametrize("lang", ECLEKTIC_LANGS)
@pytest.mark.parametrize("task", list(Task))
def test_every_template_renders_with_its_values(task: Task, lang: str):
    template = load_templates().for_lang(task, lang)
    prompt = template.render(**values_for(task))
    for name in REQUIRED[task]:
        assert VALUES[name] in prompt
    assert "{" not in prompt.replace('{"verdict"', "") and "}" not in prompt.replace('"}', "")
    if task is Task.CLOZE:
        assert "[MASK]" in prompt.replace(VALUES["masked_passage"], "")


def test_native_templates_do_not_fall_back_to_english():
    templates = load_templates()
    english = templates.for_lang(Task.SUMMARY, "en").render(entity="X")
    for lang in set(ECLEKTIC_LANGS) - {"en"}:
        assert templates.for_lang(Task.SUMMARY, lang).render(entity="X") != english


def test_judge_prompt_asks_for_the_json_verdict():
    prompt = load_templates().for_lang(Task.JUDGE, "ko").render(**values_for(Task.JUDGE))
    assert '{"verdict": "known"}' in prompt and '{"verdict": "not_known"}' in prompt
    assert "Korean" in prompt


def test_language_without_a_table_uses_default_naming_the_language():
    templates = load_templates()
    template = templates.for_lang(Task.SUMMARY, "sw")
    assert template.table == "default" and template.key == "default.summary"
    assert "Swahili" in template.render(entity="Mlima Kilimanjaro")
    assert "Swahili" in templates.for_lang(Task.PREFIX, "swa").render(prefix="Mlima")


def test_region_falls_back_to_language_but_script_does_not():
    templates = load_templates()
    assert templates.for_lang(Task.DIRECT, "pt-BR").table == "pt"
    assert templates.for_lang(Task.DIRECT, "iw").table == "he"
    hant = templates.for_lang(Task.DIRECT, "zh-Hant")
    assert hant.table == "default"
    assert "Chinese (Hant)" in hant.render(passage="香港")


def test_render_refuses_a_missing_or_foreign_value():
    template = load_templates().for_lang(Task.CLOZE, "de")
    with pytest.raises(PromptError, match=r"probe_prompts\.toml: key 'de\.cloze': no value given for \{masked_passage\}"):
        template.render()
    with pytest.raises(PromptError, match=r"key 'de\.cloze': \{passage\} is not a value"):
        template.render(masked_passage="x [MASK]", passage="x")


def test_render_keeps_braces_in_values():
    template = load_templates().for_lang(Task.DIRECT, "en")
    assert "f(x) = {x | x > 0}" in template.render(passage="f(x) = {x | x > 0}")


def test_user_file_overrides_per_language_and_key(tmp_path: Path):
    shipped = load_templates()
    path = write(tmp_path, """
[de]
summary = "Erzähl mir von {entity}."
[sw]
direct = "Kifungu hiki kimetoka makala gani ya Wikipedia?\\n\\n{passage}"
[default]
judge = "Entity {entity}. Answer: {summary}. Reference: {reference}. Reply {{\\"verdict\\": \\"known\\"}} or {{\\"verdict\\": \\"not_known\\"}}."
""")
    merged = load_templates(path)
    summary = merged.for_lang(Task.SUMMARY, "de")
    assert summary.render(entity="Bremerhaven") == "Erzähl mir von Bremerhaven."
    assert summary.source == str(path)
    assert merged.for_lang(Task.DIRECT, "de") == shipped.for_lang(Task.DIRECT, "de")
    assert merged.for_lang(Task.DIRECT, "sw").table == "sw"
    assert merged.for_lang(Task.SUMMARY, "sw").table == "default"
    assert merged.for_lang(Task.JUDGE, "fr").render(entity="E", summary="S", reference="R").startswith("Entity E. Answer: S.")
    assert merged.sources == (*shipped.sources, str(path))
    assert merged.digest != shipped.digest
    assert load_templates(path).digest == merged.digest
    assert load_templates().digest == shipped.digest


def test_language_override_of_the_judge(tmp_path: Path):
    path = write(tmp_path, '[ja]\njudge = "{summary} / {reference}"\n')
    templates = load_templates(path)
    assert templates.for_lang(Task.JUDGE, "ja").render(summary="S", reference="R") == "S / R"
    assert templates.for_lang(Task.JUDGE, "ko").table == "default"


def test_identical_override_keeps_the_digest(tmp_path: Path):
    shipped = load_templates()
    text = shipped.for_lang(Task.SUMMARY, "en").text
    path = write(tmp_path, f"[en]\nsummary = '''{text}'''\n")
    assert load_templates(path).digest == shipped.digest


@pytest.mark.parametrize(("toml", "key", "message"), [
    ('[de]\nsumary = "{entity}"', "de.sumary", "unknown task; expected one of summary, direct, cloze, prefix, judge"),
    ("[de]\nsummary = 3", "de.summary", "expected a string, not an integer"),
    ('[de]\nsummary = ["{entity}"]', "de.summary", "expected a string, not an array"),
    ('[de]\nsummary = "{entity} {passage}"', "de.summary", r"placeholder \{passage\} is not allowed in a summary template"),
    ('[fr]\ncloze = "{masked_passage} {answer}"', "fr.cloze", r"placeholder \{answer\} is not allowed"),
    ('[de]\nsummary = "Was weißt du?"', "de.summary", r"missing the required placeholder \{entity\}"),
    ('[de]\ndirect = "Titel?"', "de.direct", r"missing the required placeholder \{passage\}"),
    ('[de]\ncloze = "{passage}"', "de.cloze", r"not allowed in a cloze template"),
    ('[de]\nprefix = "Weiter:"', "de.prefix", r"missing the required placeholder \{prefix\}"),
    ('[default]\njudge = "{summary}"', "default.judge", r"missing the required placeholder \{reference\}"),
    ('[de]\nsummary = "{entity"', "de.summary", "malformed braces"),
    ('[de]\nsummary = "{entity} }"', "de.summary", "malformed braces"),
    ('[de]\nsummary = "{entity} {}"', "de.summary", "is not a placeholder"),
    ('[de]\nsummary = "{entity!r}"', "de.summary", "must be written plain"),
    ('[de]\nsummary = "{entity:>20}"', "de.summary", "must be written plain"),
    ('[de]\nsummary = "{entity.title}"', "de.summary", "is not a placeholder"),
    ('[xx]\nsummary = "{entity}"', "xx", "unknown language code 'xx'"),
    ('[jp]\nsummary = "{entity}"', "jp", "did you mean 'ja'"),
    ('summary = "{entity}"', "summary", r"expected a table of templates per language \(\[default\], \[de\], ...\), not a string"),
    ('[he]\nsummary = "{entity}"\n[iw]\nsummary = "{entity}"', "iw", r"the same language as \[he\]"),
])
def test_bad_user_file_names_file_and_key(tmp_path: Path, toml: str, key: str, message: str):
    path = write(tmp_path, toml + "\n")
    with pytest.raises(PromptError, match=rf"^{path}: key '{key}': .*{message}"):
        load_templates(path)


def test_unreadable_user_file(tmp_path: Path):
    with pytest.raises(PromptError, match=r"missing\.toml: no such prompt file"):
        load_templates(tmp_path / "missing.toml")
    with pytest.raises(PromptError, match=r"bad\.toml: not valid TOML"):
        load_templates(write(tmp_path, "[de\nsummary =", "bad.toml"))


def test_template_records_where_it_came_from():
    template = load_templates().for_lang(Task.PREFIX, "ja")
    assert isinstance(template, Template)
    assert (template.task, template.lang, template.table, template.key) == (Task.PREFIX, "ja", "ja", "ja.prefix")
    assert template.placeholders == {"prefix"}
    assert template.source.endswith("probe_prompts.toml")


def test_for_lang_refuses_an_unknown_language():
    with pytest.raises(PromptError, match="cannot choose a summary prompt: unknown language code 'klingon'"):
        load_templates().for_lang(Task.SUMMARY, "klingon")
