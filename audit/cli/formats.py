"""`audit formats`: the benchmark formats --format names, with what each expects."""
from __future__ import annotations

import click

from audit.readers import FORMATS

_SHAPES = {"file": "a file", "directory": "a directory", "any": "a file, directory or glob", "many": "a directory or glob"}
# The keys, columns or files each reader looks for, all named in the README's format table
# (tests keep the two alike); the table readers take theirs from --map or a preset.
_EXPECTS: dict[str, tuple[str, ...]] = {
    "eclektic-jsonl": ("q_id", "original_lang", "question", "answer", "content", "{L}_q", "{L}_a", "{L}_c"),
    "eclektic-csv": ("q_id", "language", "original_lang", "question", "answer", "content"),
    "bmlama": ("{lang}.tsv", "Prompt", "Ans", "Candidate Ans", "Subject"),
    "jsonl": ("item_id", "source_lang", "variants"),
    "squad": ("data", "paragraphs", "qas", "id", "question", "answers"),
    "mkqa": ("example_id", "queries", "answers"),
    "tydiqa": ("example_id", "language", "question_text", "document_plaintext", "annotations"),
    "xfactr": ("TREx_prompts.csv", "mTRExf/sub/P*.jsonl", "alias/mTRExf/{lang}.txt"),
    "mlama": ("{lang}/templates.jsonl", "{lang}/P*.jsonl", "relation", "template", "sub_uri", "sub_label", "obj_uri", "obj_label"),
    "xcsr": ("{lang}/dev.jsonl", "id", "lang", "question.stem", "question.choices", "answerKey"),
    "table": (),
    "per-language": (),
}
# One command per reader, on the benchmark as it is published.
EXAMPLES: dict[str, str] = {
    "eclektic-jsonl": "audit check eclektic_main.jsonl --corpus demo",
    "eclektic-csv": "audit check eclektic_long.csv --corpus demo",
    "bmlama": "audit check BMLAMA/BMLAMA17 --corpus demo",
    "jsonl": "audit check my_bench.jsonl --corpus demo",
    "squad": "audit check xquad/ --corpus demo   (or MLQA_V1/dev/dev-context-en-question-de.json)",
    "mkqa": "audit check mkqa.jsonl.gz --corpus demo",
    "tydiqa": "audit check tydiqa-v1.0-dev.jsonl.gz --corpus demo",
    "xfactr": "audit check X-FACTR/data --corpus demo",
    "mlama": "audit check mlama1.1 --corpus demo",
    "xcsr": "audit check X-CSR_datasets/X-CSQA --corpus demo",
    "table": "audit check my_bench.csv --corpus demo --map question=Q,answer=A --source-lang fr",
    "per-language": "audit check url-nlp/mgsm --corpus demo --map question=0,answer=1 --header none",
}


@click.command("formats")
def formats_command() -> None:
    """List the benchmark formats --format names, what each reads, the fields it expects and an example."""
    width = max(len(name) for name in FORMATS)
    for spec in FORMATS.values():
        click.echo(f"{spec.name:<{width}}  {spec.description} [reads {_SHAPES[spec.shape]}]")
        click.echo(f"{'':<{width}}  expects: {', '.join(_EXPECTS[spec.name]) or 'the columns --map names, or those of a preset'}")
        click.echo(f"{'':<{width}}  example: {EXAMPLES[spec.name]}")
