"""`audit langlinks`: build and ask lookups of which Wikipedias hold an article."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.progress import TextColumn

from audit.bars import progress_display
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.links.model import LinksError
from audit.links.sources import open_links
from audit.outputs import OutputError


@click.group("langlinks")
def langlinks() -> None:
    """Which Wikipedias hold an item's article: lookups built from langlinks dumps."""


@langlinks.command("build")
@click.argument("dumps", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Lookup directory to create (replaced only if audit wrote it).")
@click.option("--wiki", help="The wiki the dumps are of (e.g. en), when their names do not say (enwiki-20230701-langlinks.sql.gz does).")
@click.option("--dump-date", "dump_date", type=click.DateTime(formats=["%Y-%m-%d"]), help="The snapshot's date, when neither the names nor the dumps' footers give it.")
def langlinks_build(dumps: tuple[Path, ...], out: Path, wiki: str | None, dump_date: object) -> None:
    """Build a langlinks lookup from `{wiki}-langlinks.sql(.gz)` dumps, with the `page` dumps that
    map titles to page ids and, optionally, the `redirect` dumps; and from Wikidata's JSON entity
    dumps (`wikidata-YYYYMMDD-all.json.gz`), whose sitelinks answer by entity id or by title."""
    from audit.links.dump import build, summary

    progress = progress_display(TextColumn("{task.completed:,} rows"))
    task = progress.add_task("reading dump rows", total=None)
    started = time.perf_counter()
    try:
        with progress:
            manifest = build(list(dumps), out, wiki=wiki, dump_date=dump_date.date() if dump_date else None, on_rows=lambda n: progress.advance(task, n))
    except (LinksError, OutputError) as error:
        raise InputError(str(error)) from None
    for line in summary(manifest):
        click.echo(f"{out}: {line} ({time.perf_counter() - started:.1f} s)")


@langlinks.command("lookup")
@click.argument("article")
@click.option("--lang", help="The article's wiki (a language code), when ARTICLE is a title rather than a URL or a Wikidata id.")
@click.option("--links", "--dump", "links", required=True, help="Where to look: a lookup built by `audit langlinks build`, `wikipedia-api`, or a [links.NAME] entry of the registry.")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [links.NAME] entries [default: indexes/corpora.toml].")
@click.option("--offline", is_flag=True, help="Answer from the langlinks cache only.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def langlinks_lookup(article: str, lang: str | None, links: str, registry: Path | None, offline: bool, as_json: bool) -> None:
    """Which Wikipedias hold ARTICLE (a URL, a title with --lang, or a Wikidata id such as
    Q42), as of the source's snapshot."""
    from audit.links.dump import parse_article
    from audit.links.entities import is_qid
    from audit.links.model import Article
    from audit.links.wikis import wiki_for

    try:
        if is_qid(article):
            asked = Article(qid=article.strip())
        else:
            wiki, title = parse_article(article, wiki_for(lang) if lang else None)
            asked = Article(wiki=wiki, title=title)
        answers = open_links(links, registry, offline=offline).resolve([asked])
    except (AuditError, ValueError) as error:
        raise InputError(str(error)) from None
    resolution = answers.found.get(asked)
    if resolution is None:
        reason = answers.errors.get(asked, "no answer")
        click.echo(json.dumps({"article": str(asked), "found": False, "reason": reason}) if as_json else f"{asked}: unknown: {reason}")
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(resolution.to_dict(), ensure_ascii=False, indent=2))
    elif not resolution.found:
        click.echo(f"{asked}: unknown: {resolution.reason}")
    else:
        moved = f" (redirected from {resolution.redirected_from!r})" if resolution.redirected_from else ""
        click.echo(f"{resolution.wiki}: {resolution.title}{moved}, as of {resolution.as_of}: {len(resolution.links)} other wikis")
        for link in resolution.links:
            click.echo(f"  {link.wiki:<12} {link.lang or '(no language)':<10} {link.title}  {link.url}")
    if not resolution.found:
        sys.exit(1)
