"""The langlinks signal in `audit check`: the bundled ECLeKTic sample's real article URLs,
resolved through a lookup built from dump rows written here (the SQL dump format; which
articles have which translations is made up, and each test says so), and judged against a
cutoff."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ECLEKTIC_CSV, FIXTURES

from audit.cli import main
from audit.items import Item, Variant
from audit.links.dump import build
from audit.links.lookup import LanglinksLookup
from audit.links.sources import DumpSource
from audit.readers import load_benchmark
from audit.signals.langlinks import LinkChecker, item_article, variant_evidence

ITEMS = load_benchmark(ECLEKTIC_CSV).items
ARTICLES = list(dict.fromkeys(item_article(item) for item in ITEMS))


def sql(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def sample_dumps(root: Path, date: str = "20230701") -> tuple[Path, Path]:
    """The sample's English articles as pages 1..n; every third has a German article, every
    fourth a Norwegian one (`no`, the old prefix, and `nb`, the code newer dumps use)."""
    pages, links = [], []
    for n, article in enumerate(ARTICLES, start=1):
        pages.append(f"({n},0,'{sql(article.title)}',0,0,0.5,'20230601000000',NULL,1,100,'wikitext',NULL)")
        if n % 3 == 0:
            links.append(f"({n},'de','{sql(article.title.replace('_', ' '))} (de)')")
        if n % 4 == 0:
            links.append(f"({n},'{'no' if n % 8 else 'nb'}','{sql(article.title.replace('_', ' '))} (nb)')")
    root.mkdir(parents=True, exist_ok=True)
    page = root / f"enwiki-{date}-page.sql"
    page.write_text("INSERT INTO `page` VALUES " + ",".join(pages) + ";\n", encoding="utf-8")
    langlinks = root / f"enwiki-{date}-langlinks.sql"
    langlinks.write_text("INSERT INTO `langlinks` VALUES " + ",".join(links) + ";\n", encoding="utf-8")
    return page, langlinks


@pytest.fixture(scope="module")
def lookup(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("links")
    build(list(sample_dumps(root / "dumps")), root / "lookup")
    return root / "lookup"


def numbered(item: Item) -> int:
    return ARTICLES.index(item_article(item)) + 1


def checker(lookup: Path, cutoff: str | None = None) -> LinkChecker:
    from datetime import date

    found = LinkChecker(DumpSource(LanglinksLookup.open(lookup), "july-2023"), date.fromisoformat(cutoff) if cutoff else None)
    found.prepare(ITEMS, None, lambda description, total: lambda done: None)
    return found


def test_every_sample_item_names_its_english_article():
    assert all(article is not None and article.wiki == "en" for article in ARTICLES)
    assert ARTICLES[0].title == "AFN_Bremerhaven" and len(ARTICLES) == 39


def test_without_a_cutoff_an_article_in_the_snapshot_counts(lookup):
    found = checker(lookup)
    for item in ITEMS:
        n = numbered(item)
        german = variant_evidence(found, item, "de")
        assert german.status == "ok" and german.figures["existed"] is (n % 3 == 0) and german.figures["judged_at"] == "2023-07-01"
        if n % 3 == 0:
            assert german.figures["url"].startswith("https://de.wikipedia.org/wiki/") and german.provenance[0]["as_of"] == "2023-07-01"
        english = variant_evidence(found, item, "en")
        assert english.figures["existed"] is True and english.figures["title"] == item_article(item).title.replace("_", " ")
    norwegian = next(item for item in ITEMS if numbered(item) == 4)
    both = next(item for item in ITEMS if numbered(item) == 8)
    for code in ("nb", "no"):  # the old prefix and the new code name one wiki, asked either way
        assert variant_evidence(found, norwegian, code).figures["url"].startswith("https://no.wikipedia.org/")
        assert variant_evidence(found, both, code).figures["existed"] is True


def test_a_snapshot_after_the_cutoff_cannot_date_what_it_holds(lookup):
    found = checker(lookup, "2023-01-01")
    german = next(item for item in ITEMS if numbered(item) == 3)
    exists = variant_evidence(found, german, "de")
    assert exists.status == "unknown" and "creation date is unknown" in exists.error and exists.figures["article"] == "exists"
    absent = variant_evidence(found, next(item for item in ITEMS if numbered(item) == 1), "de")
    assert absent.status == "ok" and absent.figures["existed"] is False  # absent in July means absent in January


def test_a_snapshot_before_the_cutoff_cannot_rule_out_later_articles(lookup):
    found = checker(lookup, "2024-06-30")
    absent = variant_evidence(found, next(item for item in ITEMS if numbered(item) == 1), "de")
    assert absent.status == "unknown" and "before the cutoff 2024-06-30" in absent.error
    exists = variant_evidence(found, next(item for item in ITEMS if numbered(item) == 3), "de")
    assert exists.status == "ok" and exists.figures["existed"] is True


def test_items_without_an_article_and_articles_the_snapshot_lacks(lookup):
    found = checker(lookup)
    bare = Item("x1", "en", {"en": Variant(question="q?", answer="a"), "de": Variant(question="f?", answer="a")})
    assert item_article(bare) is None and variant_evidence(found, bare, "de").status == "absent"
    missing = Item("x2", "en", {"en": Variant(question="q?", url="https://en.wikipedia.org/wiki/Not_in_the_dump")})
    evidence = variant_evidence(found, missing, "en")
    assert evidence.status == "unknown" and "the source gave no answer" in evidence.error  # not prepared: never read as absent
    found.prepare([missing], None, lambda description, total: lambda done: None)
    evidence = variant_evidence(found, missing, "en")
    assert evidence.status == "unknown" and "Not in the dump" in evidence.error
    xfactr = Item("x3", "en", {"en": Variant(question="q")}, meta={"sub_uri": "Q571"})
    assert str(item_article(xfactr)) == "Q571"


def run(args: list[str], cache: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env={"AUDIT_CACHE_DIR": str(cache)})
    return result.exit_code, result.output


def records(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:]


def test_audit_check_tags_target_languages_seen_where_an_article_existed(lookup, wiki_index, tmp_path):
    out = tmp_path / "a.jsonl"
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--links", str(lookup), "--langs", "en,de,fr", "--out", str(out), "--no-report"], tmp_path / "cache")
    assert code == 0, output
    manifest, rows = records(out)
    assert manifest["links"]["sources"][0]["backend"] == "dump" and manifest["links"]["sources"][0]["wikis"] == {"en": "2023-07-01"}
    assert {"signal": "langlinks", "source": "lookup", "ran": True, "reason": None} in manifest["signal_runs"]
    for row in rows:
        links = [e for e in row["evidence"] if e["signal"] == "langlinks"]
        assert len(links) == 1
        n = ARTICLES.index(item_article(next(i for i in ITEMS if i.item_id == row["item_id"]))) + 1
        if row["lang"] == "de" and n % 3 == 0:
            assert row["exposure"] == "seen" and any(d["signal"] == "langlinks" and d["figure"] == "existed" for d in row["decided_by"])
        if row["lang"] == "fr":
            assert links[0]["figures"]["existed"] is False
    de = manifest["summary"]["languages"]["de"]
    assert de["seen"] >= 13 and de["unknown"] == 0


def test_the_rule_can_be_switched_off(lookup, wiki_index, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text("[rules.langlinks.article]\nexisted = false\n", encoding="utf-8")
    out = tmp_path / "a.jsonl"
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--links", str(lookup), "--langs", "de", "--policy", str(policy), "--out", str(out), "--no-report"], tmp_path / "cache")
    assert code == 0, output
    _, rows = records(out)
    assert all(e["figures"]["existed"] in (True, False) for row in rows for e in row["evidence"] if e["signal"] == "langlinks")
    assert not any(d.get("signal") == "langlinks" for row in rows for d in row["decided_by"])


def test_link_options_are_checked_before_anything_runs(lookup, wiki_index, tmp_path):
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--signals", "langlinks", "--out", str(tmp_path / "a.jsonl")], tmp_path / "cache")
    assert code == 2 and "--signals langlinks: it asks a link source, and none is given (--links)" in output
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--links", str(tmp_path / "nowhere"), "--out", str(tmp_path / "a.jsonl")], tmp_path / "cache")
    assert code == 2 and "nor a lookup directory" in output
    registry = tmp_path / "corpora.toml"
    registry.write_text('[links.mirror]\nbackend = "api"\nendpoint = "http://127.0.0.1:9/w/api.php"\n', encoding="utf-8")
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--registry", str(registry), "--links", "mirror", "--out", str(tmp_path / "a.jsonl")], tmp_path / "cache")
    assert code == 2 and "links.mirror.endpoint: must contain {wiki}" in output
    registry.write_text('[links.mirror]\nbackend = "api"\ncolour = "blue"\n', encoding="utf-8")
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--registry", str(registry), "--links", "mirror", "--out", str(tmp_path / "a.jsonl")], tmp_path / "cache")
    assert code == 2 and "unknown key(s) colour" in output
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("audit-langlinks.json", "langlinks.sqlite"):
        (damaged / name).write_bytes((lookup / name).read_bytes())
    with open(damaged / "langlinks.sqlite", "r+b") as handle:
        handle.truncate(4096)
    code, output = run(["check", str(ECLEKTIC_CSV), "--corpus", str(wiki_index), "--links", str(damaged), "--out", str(tmp_path / "a.jsonl")], tmp_path / "cache")
    assert code == 2 and "the lookup is damaged" in output and not (tmp_path / "a.jsonl").exists()


def test_xcopa_items_name_no_article(lookup, wiki_index, tmp_path):
    bench = FIXTURES / "xcopa" / "data" / "it" / "val.it.jsonl"
    out = tmp_path / "x.jsonl"
    code, output = run(["check", str(bench), "--corpus", str(wiki_index), "--links", str(lookup), "--out", str(out), "--no-report"], tmp_path / "cache")
    assert code == 0, output
    _, rows = records(out)
    assert rows and all(e["status"] == "absent" for row in rows for e in row["evidence"] if e["signal"] == "langlinks")


def test_a_server_job_runs_the_langlinks_signal_on_a_named_source(lookup, wiki_index, tmp_path):
    """`audit serve --links DIR` offers the lookup by its name; a job names it (`links=`) with
    a cutoff (`as_of=`), and a client can name nothing else: no path, no unknown source."""
    import requests
    from test_server import start_server, wait_for

    served = start_server("--index", f"wiki={wiki_index}", "--links", str(lookup), "--jobs-dir", str(tmp_path / "jobs"))
    try:
        assert requests.get(served.url + "health", timeout=10).json()["links"] == ["lookup"]
        refused = requests.post(served.url + "jobs", params={"index": "wiki", "links": "/etc"}, data=ECLEKTIC_CSV.read_bytes(), timeout=30)
        assert refused.status_code == 400 and "not a link source of this server (it has lookup" in refused.json()["error"]
        refused = requests.post(served.url + "jobs", params={"index": "wiki", "links": "lookup", "as_of": "July"}, data=ECLEKTIC_CSV.read_bytes(), timeout=30)
        assert refused.status_code == 400 and "as_of: 'July' is not a date" in refused.json()["error"]
        params = {"index": "wiki", "langs": "en,de", "links": "lookup", "as_of": "2024-06-30", "filename": ECLEKTIC_CSV.name}
        job = wait_for(served.url, requests.post(served.url + "jobs", params=params, data=ECLEKTIC_CSV.read_bytes(), timeout=30).json(), seconds=60)
        assert job["status"] == "done" and job["links"] == ["lookup"] and job["as_of"] == "2024-06-30", job
        result = tmp_path / "job.audit.jsonl"
        result.write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", timeout=30).content)
    finally:
        served.stop()
    manifest, rows = records(result)
    assert manifest["links"]["as_of"] == "2024-06-30" and manifest["links"]["sources"][0]["name"] == "lookup"
    german = {row["item_id"]: row for row in rows if row["lang"] == "de"}
    for item in ITEMS:
        evidence = next(e for e in german[item.item_id]["evidence"] if e["signal"] == "langlinks")
        if numbered(item) % 3 == 0:  # in the July 2023 snapshot, so before the cutoff
            assert evidence["figures"]["existed"] is True and german[item.item_id]["exposure"] == "seen"
        else:  # absent in July 2023 says nothing of June 2024
            assert evidence["status"] == "unknown" and german[item.item_id]["exposure"] != "unseen"


def test_registry_link_entries_are_checked_key_by_key(tmp_path):
    from audit.links.model import LinksError
    from audit.links.sources import open_links

    registry = tmp_path / "corpora.toml"
    for table, message in (
        ('backend = "api"\nmax_age_days = -1\n', "links.x.max_age_days must be a whole number of days"),
        ('backend = "api"\nendpoint = "ftp://x/{wiki}"\n', "links.x.endpoint: 'ftp://x/{wiki}' is not an http(s) URL"),
        ('backend = "api"\nmin_interval = -1.0\n', "links.x:"),
        ('backend = "dump"\n', "a dump entry has backend, path"),
        ('backend = "wiki"\n', "links.x.backend: 'wiki' is not one of api, dump"),
    ):
        registry.write_text("[links.x]\n" + table, encoding="utf-8")
        with pytest.raises(LinksError) as raised:
            open_links("x", registry)
        assert message in str(raised.value) and str(registry) in str(raised.value)
