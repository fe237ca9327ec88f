"""The langlinks signal as the policy knows it (its code is `audit.signals.langlinks`): the
`[langlinks]` table and the `[rules.langlinks]` rules on its one field, `article`."""
from __future__ import annotations

from pydantic import Field

from audit.items import Item
from audit.rules import Table, verdict
from audit.signals.spec import Asks, Signal

NAME = "langlinks"
FIELD = "article"


class LanglinksConfig(Table):
    """The signal's parameters (the policy's `[langlinks]` table)."""

    ask_created: bool = True


class ArticleRules(Table):
    existed: verdict() = None


class Rules(Table):
    """The policy's `[rules.langlinks]`: `article` is the one field."""

    article: ArticleRules = Field(default_factory=ArticleRules)


def fields_for(item: Item) -> tuple[str, ...]:
    return (FIELD,)


SIGNAL = Signal(
    name=NAME,
    description="whether an article on the item's subject existed in each language's Wikipedia (at the cutoff, with --as-of): langlinks dumps, the MediaWiki API, Wikidata sitelinks",
    config=LanglinksConfig,
    rules=Rules,
    fields=fields_for,
    implementation="audit.signals.langlinks",
    asks=Asks.LINKS,
)
