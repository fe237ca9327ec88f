"""`audit probe plant`: a model whose training text is known, for calibrating membership scores."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from audit.bars import progress_display, step
from audit.cli.shell import InputError
from audit.errors import AuditError
from audit.evaluate.membership import read_truth
from audit.outputs import check_directory_target, commit_directory, discard_staging, staging_directory
from audit.probes.generation import ProbeError
from audit.probes.models import Runtime, open_model
from audit.readers import FORMATS, load_benchmark
from audit.signals.membership import field_text
from audit.signals.membership_spec import fields_for

if TYPE_CHECKING:
    from audit.probes.local import LocalModel

PLANTED = "planted model"


@click.command("plant")
@click.argument("bench", type=click.Path(path_type=Path))
@click.option("--truth", required=True, type=click.Path(path_type=Path), help='JSON Lines of {"item_id", "lang", "member": true|false}: the variants whose texts are planted (members); the rest are held out.')
@click.option("--probe-model", required=True, help="The model to train further: smollm2, gemma3-270m, a [models.NAME] local entry of the registry, a .gguf file or a model directory (run on transformers).")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), help="The benchmark's format [default: from its name and content].")
@click.option("--registry", type=click.Path(path_type=Path), help="Registry TOML with [models.NAME] entries.")
@click.option("--epochs", type=click.IntRange(min=1), default=4, show_default=True, help="Passes over the planted texts.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True, help="AdamW learning rate (constant).")
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True, help="Texts per training step.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=2), default=256, show_default=True, help="Each text is cut to this many tokens; the policy's [membership] max_tokens should match.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Directory for the trained model (transformers files), planted.jsonl and plant.json: new, empty, or one this command wrote.")
def plant_command(bench: Path, truth: Path, probe_model: str, fmt: str | None, registry: Path | None, epochs: int, rate: float, batch: int, seed: int, max_tokens: int, out: Path) -> None:
    """Train a local model further on the member variants' texts of BENCH (the fields the
    membership signal reads), so its training text is known; then audit with it as
    --probe-model and calibrate with the same --truth."""
    from audit.probes.local import LocalModel
    from audit.probes.plant import cut, train

    try:
        check_directory_target(out, PLANTED, inputs=[bench, truth])
        members = {key for key, member in read_truth(truth).items() if member}
        items = load_benchmark(bench, fmt).items
        model = open_model(probe_model, registry, runtime=Runtime.TRANSFORMERS)
        with step(f"loading {model.model_id}"):
            local = model.backend()
        if not isinstance(local, LocalModel):
            raise ProbeError(f"--probe-model {probe_model}: an endpoint cannot be trained; give a local model")
        planted = [{"item_id": item.item_id, "lang": lang, "field": name, "text": cut(local, text, max_tokens)}
                   for item in items for lang in item.variants if (item.item_id, lang) in members
                   for name in fields_for(item) if (text := field_text(item, lang, name))]
        if not planted:
            raise InputError(f"{truth}: no member of the truth file has a text in {bench}")
        with progress_display() as display:
            task = display.add_task(f"training on {len(planted)} texts", total=epochs * len(planted))
            losses = train(local, [row["text"] for row in planted], epochs=epochs, rate=rate, batch=batch, seed=seed, progress=lambda done: display.advance(task, done))
        settings = {"base_model": model.model_id, "benchmark": str(bench), "truth": str(truth), "epochs": epochs, "rate": rate, "batch": batch, "seed": seed,
                    "max_tokens": max_tokens, "texts": len(planted), "loss_per_epoch": losses}
        _write(out, local, planted, settings, [bench, truth])
    except AuditError as error:
        raise InputError(str(error)) from None
    click.echo(f"planted {len(planted)} texts into {out} (loss per epoch {losses}); audit with --probe-model {out}")


def _write(out: Path, local: LocalModel, planted: list[dict[str, str]], settings: dict[str, object], inputs: list[Path]) -> None:
    from audit.probes.plant import save

    staging = staging_directory(out)
    try:
        with step(f"writing the model {out}"):
            save(local, staging)
            (staging / "planted.jsonl").write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in planted), encoding="utf-8")
            (staging / "plant.json").write_text(json.dumps(settings, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        commit_directory(staging, out, PLANTED, inputs=inputs)
    except BaseException:
        discard_staging(staging)
        raise
