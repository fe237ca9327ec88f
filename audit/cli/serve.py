"""`audit probe serve-model` and `audit serve`: the commands that serve models and indexes."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from audit.bars import console, step
from audit.cli.shell import InputError
from audit.probes.generation import ProbeError
from audit.probes.models import open_model


@click.group("probe")
def probe_group() -> None:
    """Probe models outside an audit."""


@probe_group.command("serve-model")
@click.option("--probe-model", "model", required=True, help="The model to serve: smollm2, gemma3-270m, a [models.NAME] local entry of the registry, a .gguf file or a model directory.")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [models.NAME] entries [default: indexes/corpora.toml].")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535))
@click.option("--batch-size", type=click.IntRange(min=1), help="Requests answered together [default: the registry's, else 8].")
def serve_model(model: str, registry: Path | None, host: str, port: int, batch_size: int | None) -> None:
    """Offer a local model on an OpenAI-compatible endpoint (/v1/chat/completions), so several
    audits, or `--probe-model openai:NAME`, share one loaded model."""
    from audit.probes.compat_server import check_address, serve_forever

    try:
        check_address(host, port)
        opened = open_model(model, registry, batch_size=batch_size)
        if opened.describe().get("backend") == "openai":
            raise ProbeError(f"--probe-model {model}: already an endpoint; serve-model offers local models (llama.cpp or transformers)")
        with step(f"loading the model {opened.model_id}"):
            backend = opened.backend()
    except ProbeError as error:
        raise InputError(str(error)) from None
    console.print(f"serving {opened.model_id} at http://{host}:{port}/v1 as model {model!r}", markup=False)
    serve_forever(backend, host, port)


@click.command("serve", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve_command(args: tuple[str, ...]) -> None:
    """Serve local indexes over the infini-gram API protocol, with audit jobs (`audit serve --help`)."""
    try:
        from audit.server import main as serve_main
    except ModuleNotFoundError as error:
        raise InputError(f"audit serve needs the [serve] extra, which is not installed (no module {error.name!r}): pip install \"corpus-audit[serve]\" (in a checkout: pip install \".[serve]\")") from None
    sys.exit(serve_main(list(args)))
