"""The langlinks signal through the MediaWiki API: `audit check --links` against the replay
server of test_links_api (real recorded langlinks of "Python (programming language)" on the
English Wikipedia; the German and Bokmål pages' creation dates are made here), with its cache,
`--offline` and `--as-of`."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import ECLEKTIC_CSV
from test_links_api import Replay, replay  # noqa: F401  (the fixture)

from audit.cli import main

PYTHON = "https://en.wikipedia.org/wiki/Python_(programming_language)"
LANGS = ("en", "de", "nb", "yue", "yo")


def benchmark(path: Path) -> Path:
    """Two items about the recorded article (its URL, and its title with underscores) and one
    whose article the wiki does not have, in English and four target languages; Yoruba is one
    of the few Wikipedias without a Python article in the recording."""
    rows = []
    for item_id, url in (("python", PYTHON), ("python-title", None), ("missing", "https://en.wikipedia.org/wiki/No_such_article_here")):
        variants = {lang: {"question": f"What is it? ({lang})", "answer": "a language"} for lang in LANGS}
        variants["en"] |= {"url": url} if url else {"title": "Python_(programming_language)"}
        rows.append({"item_id": item_id, "source_lang": "en", "variants": variants})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def registry(path: Path, endpoint: str) -> Path:
    path.write_text(f'[links.replay]\nbackend = "api"\nendpoint = "{endpoint}"\nwikidata_endpoint = "{endpoint.replace("{wiki}", "wikidata")}"\n'
                    f'cache = "links-cache.sqlite"\nmin_interval = 0.0\nbackoff = 0.01\nattempts = 2\n', encoding="utf-8")
    return path


def audit(tmp_path: Path, wiki_index: Path, *extra: str, bench: Path | None = None) -> tuple[dict, dict[tuple[str, str], dict], str]:
    out = tmp_path / "a.jsonl"
    args = ["check", str(bench or tmp_path / "bench.jsonl"), "--corpus", str(wiki_index), "--registry", str(tmp_path / "corpora.toml"), "--out", str(out), "--no-report", *extra]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return lines[0], {(r["item_id"], r["lang"]): r for r in lines[1:]}, result.output


def links(record: dict) -> dict:
    (found,) = [e for e in record["evidence"] if e["signal"] == "langlinks"]
    return found


def test_articles_resolved_through_the_api_decide_each_language(replay: Replay, wiki_index: Path, tmp_path: Path):  # noqa: F811
    benchmark(tmp_path / "bench.jsonl")
    registry(tmp_path / "corpora.toml", replay.endpoint)
    manifest, records, _ = audit(tmp_path, wiki_index, "--links", "replay")
    assert manifest["links"]["sources"][0] | {"cache": None} == {
        "name": "replay", "backend": "api", "endpoint": replay.endpoint, "wikidata_endpoint": replay.endpoint.replace("{wiki}", "wikidata"),
        "cache": None, "offline": False, "max_age_days": 30,
    }
    assert len([s for s in replay.seen if s.params.get("prop") == "langlinks"]) == 1  # three items, one request
    for item in ("python", "python-title"):
        for lang, title in (("de", "Python (Programmiersprache)"), ("nb", "Python"), ("yue", "Python")):
            evidence = links(records[item, lang])
            assert evidence["figures"]["existed"] is True and evidence["figures"]["title"] == title
            assert records[item, lang]["exposure"] == "seen"
        assert links(records[item, "nb"])["figures"]["url"] == "https://no.wikipedia.org/wiki/Python"
        assert links(records[item, "yue"])["figures"]["url"] == "https://zh-yue.wikipedia.org/wiki/Python"
        assert links(records[item, "yo"])["figures"]["existed"] is False
    assert links(records["python-title", "en"])["figures"]["item_article"] == "en:Python_(programming_language)"
    missing = links(records["missing", "de"])
    assert missing["status"] == "unknown" and "no article" in missing["error"] and records["missing", "de"]["exposure"] == "unknown"


def test_the_cache_answers_again_and_offline(replay: Replay, wiki_index: Path, tmp_path: Path):  # noqa: F811
    benchmark(tmp_path / "bench.jsonl")
    registry(tmp_path / "corpora.toml", replay.endpoint)
    _, first, _ = audit(tmp_path, wiki_index, "--links", "replay")
    asked = len(replay.seen)
    _, again, _ = audit(tmp_path, wiki_index, "--links", "replay")
    assert len(replay.seen) == asked == 1  # "no such article" is an answer too, dated like the others
    _, offline, _ = audit(tmp_path, wiki_index, "--links", "replay", "--offline")
    assert len(replay.seen) == asked
    for key, record in first.items():
        assert links(again[key]) == links(record) == links(offline[key])
    (tmp_path / "links-cache.sqlite").unlink()
    _, emptied, _ = audit(tmp_path, wiki_index, "--links", "replay", "--offline")
    assert len(replay.seen) == asked and links(emptied["python", "de"])["error"] == "offline, and the langlinks cache has no answer for it"


def test_a_cutoff_counts_only_articles_created_before_it(replay: Replay, wiki_index: Path, tmp_path: Path):  # noqa: F811
    replay.add_page("de", {"pageid": 11, "ns": 0, "title": "Python (Programmiersprache)"}, created="2003-02-01T10:00:00Z")
    replay.add_page("no", {"pageid": 12, "ns": 0, "title": "Python"}, created="2008-09-30T08:00:00Z")
    benchmark(tmp_path / "bench.jsonl")
    registry(tmp_path / "corpora.toml", replay.endpoint)
    manifest, records, output = audit(tmp_path, wiki_index, "--links", "replay", "--as-of", "2005-01-01", "--langs", "en,de,nb,yue")
    assert manifest["links"]["as_of"] == "2005-01-01"
    asked = {(s.wiki, s.params["titles"]) for s in replay.seen if s.params.get("prop") == "revisions"}
    assert asked == {("en", "Python (programming language)"), ("de", "Python (Programmiersprache)"), ("no", "Python"), ("zh-yue", "Python")}
    english, german, bokmal, cantonese = (links(records["python", lang]) for lang in ("en", "de", "nb", "yue"))
    assert english["figures"]["existed"] is True and english["figures"]["created"] == "2001-12-20T13:15:00Z"
    assert german["figures"]["existed"] is True and german["figures"]["created"] == "2003-02-01T10:00:00Z" and german["figures"]["judged_at"] == "2005-01-01"
    assert bokmal["figures"]["existed"] is False and bokmal["figures"]["created"] == "2008-09-30T08:00:00Z"
    assert records["python", "nb"]["exposure"] != "seen" or any(d["signal"] != "langlinks" for d in records["python", "nb"]["decided_by"])
    assert cantonese["status"] == "unknown" and "creation date is unknown" in cantonese["error"]  # the replay wiki has no such page
    assert "unknown langlinks on replay" in output


def test_a_failing_api_leaves_its_variants_unknown_and_says_why(replay: Replay, wiki_index: Path, tmp_path: Path):  # noqa: F811
    replay.faults.extend([("status", 503, {})] * 4)
    benchmark(tmp_path / "bench.jsonl")
    registry(tmp_path / "corpora.toml", replay.endpoint)
    _, records, output = audit(tmp_path, wiki_index, "--links", "replay", "--langs", "en,de")
    for record in records.values():
        assert links(record)["status"] == "unknown" and "503" in links(record)["error"] and record["exposure"] != "unseen"
    assert "unknown langlinks on replay: 6 field(s) could not be told" in output


def test_the_bundled_sample_offline_is_unknown_never_unseen(wiki_index: Path, tmp_path: Path):
    """With nothing cached, `--offline` asks no one: every variant's langlinks evidence is
    unknown, and no variant is `unseen` for want of an answer."""
    out = tmp_path / "sample.jsonl"
    args = ["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--links", "wikipedia-api", "--offline", "--out", str(out), "--no-report"]
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert len(records) == 468
    assert all(links(r)["status"] == "unknown" and r["exposure"] in ("seen", "unknown") for r in records)
    assert "offline, and the langlinks cache has no answer" in result.output
