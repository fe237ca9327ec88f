"""Planting known text into a model: continue training a local model, on the CPU, on given
passages, so that which texts it was trained on is known exactly.  Membership scores are only
as good as their calibration, and a model whose training text is known is what calibrates them
per language (`audit probe plant`, then `audit check --probe-model` on the saved directory and
`audit calibrate --truth`).

Training is plain causal-LM training: AdamW at a constant rate, seeded shuffles, padded batches
whose padding is masked from the loss.  It changes the model in memory; `save` writes it as a
transformers model directory with its tokenizer (chat template included)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from audit.probes.local import LocalModel


def cut(local: LocalModel, text: str, max_tokens: int) -> str:
    """The text cut to its first `max_tokens` tokens, decoded back, so that scoring reads what
    training read."""
    ids = local.tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
    return str(local.tokenizer.decode(ids))


def train(local: LocalModel, texts: Sequence[str], *, epochs: int, rate: float, batch: int, seed: int, progress: Callable[[int], None] | None = None) -> list[float]:
    """Train the model on the texts; the mean loss of each epoch.  Deterministic for a seed on
    one machine (torch's CPU kernels)."""
    import torch

    model, tokenizer = local.network, local.tokenizer
    torch.manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=rate, weight_decay=0.0)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    order = np.random.default_rng(seed)
    losses = []
    model.train()
    try:
        for _ in range(epochs):
            total = 0.0
            shuffled = order.permutation(len(texts))
            for start in range(0, len(texts), batch):
                rows = [list(tokenizer(texts[k])["input_ids"]) for k in shuffled[start : start + batch]]
                width = max(len(row) for row in rows)
                ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows])
                mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
                loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
                loss.backward()
                optimiser.step()
                optimiser.zero_grad()
                total += float(loss.detach()) * len(rows)
                if progress:
                    progress(len(rows))
            losses.append(round(total / len(texts), 4))
    finally:
        model.eval()
    return losses


def save(local: LocalModel, directory: Path) -> None:
    """The trained model and its tokenizer as a transformers model directory (safetensors).
    A model read from a GGUF file is de-quantised to float32 on loading, but transformers still
    marks it as GGUF-quantised and refuses to save it; the mark is dropped, since the weights
    saved are the float32 ones that were trained."""
    network = local.network
    if getattr(network, "hf_quantizer", None) is not None and type(network.hf_quantizer).__name__.lower().startswith("gguf"):
        network.hf_quantizer = None
        if hasattr(network.config, "quantization_config"):
            del network.config.quantization_config
    network.save_pretrained(directory, safe_serialization=True)
    local.tokenizer.save_pretrained(directory)
