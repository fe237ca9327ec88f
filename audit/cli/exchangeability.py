"""`audit exchangeability`: Oren et al.'s test of whether a model read the benchmark in its
published order, per language."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from audit.bars import progress_display
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.evaluate.exchangeability import SEPARATOR, LanguageResult, order_test, texts_by_language
from audit.outputs import atomic_write_text, check_file_target
from audit.probes.models import open_model
from audit.readers import FORMATS, load_benchmark

MAX_TOKENS = 3500


@click.command("exchangeability")
@click.argument("bench", type=click.Path(path_type=Path))
@click.option("--probe-model", required=True, help="The model to test: `smollm2`, `gemma3-270m`, a [models.NAME] entry of the registry, a .gguf file or a model directory (a local model: the test reads log-probabilities).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), help="The benchmark's format [default: from its name and content].")
@click.option("--langs", help="Comma-separated languages to test [default: every language of the benchmark].")
@click.option("--shards", type=click.IntRange(min=2), default=10, show_default=True, help="Contiguous runs of items per language; each is read in its own order and shuffled.")
@click.option("--permutations", type=click.IntRange(min=1), default=20, show_default=True, help="Shuffles of each shard.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the shuffles.")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [models.NAME] entries.")
@click.option("--offline", is_flag=True, help="Read from the probe cache only; a text not cached there stops the test.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="JSON file for the results (new, or --force).")
@click.option("--force", is_flag=True, help="Replace an existing --out (never the benchmark).")
def exchangeability_command(bench: Path, probe_model: str, fmt: str | None, langs: str | None, shards: int, permutations: int, seed: int,
                            registry: Path | None, offline: bool, out: Path, force: bool) -> None:
    """Test whether a model read BENCH in its published order (Oren et al. 2023), per language."""
    try:
        check_file_target(out, inputs=[bench], force=force)
        chosen = [lang.strip() for lang in langs.split(",") if lang.strip()] if langs else None
        texts = texts_by_language(load_benchmark(bench, fmt).items, chosen)
        if not texts:
            raise InputError(f"{bench}: no item has a question and answer (or a cloze statement) in {langs or 'any language'}")
        model = open_model(probe_model, registry, offline=offline)
        results = []
        with progress_display() as display:
            for lang, found in sorted(texts.items()):
                task = display.add_task(f"exchangeability: {lang}, {len(found)} items, {shards} shards x {permutations + 1} orders", total=shards * (permutations + 1))

                def read(asked: list[str], bound: int, task: int = task) -> list:
                    return model.token_scores(asked, bound, lambda done: display.advance(task, done))

                results.append(order_test(lang, found, read, shards=shards, permutations=permutations, seed=seed, max_tokens=MAX_TOKENS))
    except AuditError as error:
        raise InputError(str(error)) from None
    data = {"benchmark": str(bench), "model": model.describe(), "shards": shards, "permutations": permutations, "seed": seed,
            "separator": SEPARATOR, "languages": [asdict(result) for result in results]}
    atomic_write_text(out, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    _print(results)
    click.echo(f"wrote {out}")


def _print(results: list[LanguageResult]) -> None:
    table = Table(title="Own order against shuffles (log-likelihood, nats): a small p says the model read this order")
    for column in ("language", "items", "shards", "mean difference", "t", "p (one-sided)", "shards with p ≤ 0.05"):
        table.add_column(column, justify="left" if column == "language" else "right")
    for r in results:
        small = sum(shard.permutation_p <= 0.05 for shard in r.shards)
        table.add_row(Text(r.lang), str(r.items), str(len(r.shards)), f"{r.difference:.3f}", "–" if r.t is None else f"{r.t:.2f}",
                      "–" if r.p_value is None else f"{r.p_value:.3g}", str(small))
    Console().print(table)
