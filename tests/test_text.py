"""Window units per script: words where words are spaced, characters where they are not."""
from audit.text import dominant_script, normalize, units, windows


def surface(text: str, size: int) -> list[str]:
    return [text[s:e] for s, e in windows(text, size)]


def test_normalize_composes_and_collapses():
    assert normalize("Cafe\u0301  au\n\tlait ") == "Café au lait"


def test_han_windows_are_characters():
    text = "西汉册封谁为武安侯？"
    assert dominant_script(text) == "han"
    assert surface(text, 3)[:3] == ["西汉册", "汉册封", "册封谁"]
    assert len(units(text)) == 9


def test_kana_with_han_is_character_windowed():
    text = "西漢は誰を武安侯に封じましたか？"
    assert dominant_script(text) == "kana"
    assert surface(text, 4)[0] == "西漢は誰"


def test_hangul_windows_are_words():
    text = "서한은 누구를 무안후로 봉했습니까?"
    assert dominant_script(text) == "hangul"
    assert surface(text, 2) == ["서한은 누구를", "누구를 무안후로", "무안후로 봉했습니까?"]


def test_hebrew_and_devanagari_windows_are_words():
    hebrew = 'מי קיבל את התואר "המרקיז של ווֹאָן"'
    assert dominant_script(hebrew) == "hebrew"
    assert surface(hebrew, 3)[0] == "מי קיבל את"
    hindi = "पश्चिमी हान राजवंश में उपाधि किसे दी गई थी?"
    assert dominant_script(hindi) == "devanagari"
    assert surface(hindi, 4)[-1] == "किसे दी गई थी?"


def test_mixed_script_keeps_latin_words_whole():
    text = "田中はPython programmingが好き"
    assert [text[u.start : u.end] for u in units(text)] == ["田", "中", "は", "Python", "programming", "が", "好", "き"]


def test_short_text_is_one_window():
    assert surface("Tian Fen", 8) == ["Tian Fen"]
    assert windows("   ", 8) == ()
