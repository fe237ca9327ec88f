"""Model probes on a 2-core CPU: probes (model requests) per second with the llama.cpp runtime
(the default for a GGUF file on a CPU) beside the transformers one on the same GGUF file and
the same prompts; through the OpenAI-compatible path at concurrency 1, 4 and 16; replayed from
the probe cache; and the whole probe signal on the bundled ECLeKTic sample with SmolLM2 as its
own judge, scoring the two verdicts.

Every step runs in a fresh process and reports its seconds and the peak RSS it added:
  - `sample R`: `Prober.prepare` on the sample's 39 items in two languages (four tasks and the
    judge, all greedy), SmolLM2 on runtime R, an empty cache; the model's load is timed apart.
    It reports how many self-summary verdicts the judge decided and how the verdicts relate to
    answer recall and chrF;
  - `local B`: the same N self-summary prompts (the first items' English and French), greedy,
    on transformers at batch size B (1 and 8), after the model is loaded;
  - `llama.cpp P`: the same prompts on llama.cpp with P contexts side by side (1 and 2), each run
    twice in fresh processes to show the answers are the same bytes;
  - `openai C`: the same prompts through `RemoteModel` (the openai client) at concurrency C against
    `audit.probes.compat_server` over SmolLM2 on transformers (batch size 8) in the same process;
  - `replay`: the sample's requests answered from the cache filled by `sample`.

    python bench/bench_probes.py                      # all steps, about 15 minutes
    python bench/bench_probes.py --prompts 8 --skip-sample
"""
from __future__ import annotations

import argparse
import json
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


def _smollm2(cache: Path | None = None, batch_size: int = 8, runtime: str = "transformers", parallel: int | None = None) -> Any:
    from audit.probes.models import Runtime, open_model

    return open_model("smollm2", cache=cache or Path(tempfile.mkdtemp()) / "c.sqlite", batch_size=batch_size, runtime=Runtime(runtime), parallel=parallel)


def step_sample(cache: str, runtime: str) -> dict[str, Any]:
    from audit.probes.models import Runtime
    from audit.probes.prompts import load_templates
    from audit.signals.probe import ProbeConfig, Prober

    model = _smollm2(Path(cache), runtime=runtime)
    prober = Prober(model, model, load_templates())
    assert Runtime(runtime) is Runtime.TRANSFORMERS or model.model_id.endswith(Runtime.LLAMA_CPP)
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
            "requests_per_s": round(requests / seconds, 2), "variants_per_s": round(len(prober.evidence) / seconds, 3), "statuses": statuses,
            "judge": _judged([e for e in evidence if e.field == "summary" and e.status != "absent"])}


def step_judge(cache: str, judge: str) -> dict[str, Any]:
    """The sample's self-summaries (SmolLM2's, from the cache `sample` filled) judged by `judge`."""
    from audit.probes.models import Runtime, open_model
    from audit.probes.prompts import load_templates
    from audit.signals.probe import ProbeConfig, Prober

    model = open_model("smollm2", cache=Path(cache), offline=True, runtime=Runtime.LLAMA_CPP)
    judging = open_model(judge, cache=Path(cache), runtime=Runtime.LLAMA_CPP)
    prober = Prober(model, judging, load_templates(), config=ProbeConfig(tasks=["summary"]))
    started = time.perf_counter()
    prober.prepare(_sample_items(), list(LANGS), lambda description, total: lambda done: None)
    summaries = [e for found in prober.evidence.values() for e in found if e.field == "summary" and e.status != "absent"]
    return {"judge": judging.model_id, "judge_seconds": round(time.perf_counter() - started, 1), **_judged(summaries)}


def _judged(summaries: list[Any]) -> dict[str, Any]:
    """How many self-summaries the judge decided, and answer recall and chrF by verdict; with
    the AUROC of the judge's p(known) for telling summaries that recall the answer from those
    that do not."""
    decided = [e for e in summaries if e.figures.get("judge") in ("known", "not_known")]
    by_verdict = {}
    for verdict in ("known", "not_known"):
        chosen = [e.figures for e in decided if e.figures["judge"] == verdict]
        by_verdict[verdict] = {"count": len(chosen), "mean_answer_recall": _mean([f.get("answer_recall") for f in chosen]), "mean_chrf": _mean([f.get("chrf") for f in chosen])}
    from audit.probes.membership import auroc

    pairs = [(e.figures["judge_p_known"], (e.figures.get("answer_recall") or 0) > 0) for e in decided if "judge_p_known" in e.figures]
    found = auroc([score for score, recalled in pairs if recalled], [score for score, recalled in pairs if not recalled], member_higher=True)
    return {"summaries": len(summaries), "decided": len(decided), "decided_share": round(len(decided) / len(summaries), 4) if summaries else None,
            "by_verdict": by_verdict, "auroc_p_known_vs_recalled": round(found, 4) if found is not None else None, "recalled": sum(recalled for _, recalled in pairs)}


def _mean(values: list[Any]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def _answers(outputs: list[Any]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([o.text for o in outputs], ensure_ascii=False).encode()).hexdigest()[:12]


def step_local(batch_size: str, count: str) -> dict[str, Any]:
    model = _smollm2(batch_size=int(batch_size)).backend()
    return _timed(model, count)


def step_llamacpp(parallel: str, count: str) -> dict[str, Any]:
    started = time.perf_counter()
    model = _smollm2(runtime="llama.cpp", parallel=int(parallel)).backend()
    loaded = time.perf_counter() - started
    return {**_timed(model, count), "load_seconds": round(loaded, 2)}


def _timed(model: Any, count: str) -> dict[str, Any]:
    requests = _requests(_prompts(int(count)))
    started = time.perf_counter()
    outputs = model.generate(requests)
    seconds = time.perf_counter() - started
    assert all(o.ok for o in outputs), [o.error for o in outputs if not o.ok]
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


def step_replay(cache: str, runtime: str) -> dict[str, Any]:
    import sqlite3

    from audit.probes.generation import Decoding, Message, Request, Role

    with sqlite3.connect(cache) as db:
        stored = [(json.loads(row[0]), row[1]) for row in db.execute("SELECT request, text FROM outputs UNION ALL SELECT request, logprobs FROM scores")]
    requests = [Request(tuple(Message(Role(m["role"]), m["content"]) for m in r["messages"]), Decoding(**r["decoding"]), tuple(r.get("choices", ()))) for r, _ in stored]
    model = _smollm2(cache=Path(cache), runtime=runtime)
    started = time.perf_counter()
    outputs = model.generate(requests)
    seconds = time.perf_counter() - started
    assert all(o.cached for o in outputs) and model._backend is None
    same = all((json.dumps(list(o.logprobs)) if o.logprobs is not None else o.text) == text for o, (_, text) in zip(outputs, stored, strict=True))
    return {"requests": len(requests), "replay_seconds": round(seconds, 3), "requests_per_s": round(len(requests) / seconds), "same_bytes": same}


STEPS = {"sample": step_sample, "judge": step_judge, "local": step_local, "openai": step_openai, "replay": step_replay, "llamacpp": step_llamacpp}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(measure(lambda: STEPS[sys.argv[2]](*sys.argv[3:]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16, help="self-summary prompts for the throughput steps")
    parser.add_argument("--skip-sample", action="store_true", help="skip the whole-sample run (and the replay, which reads its cache)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "work" / "probes.json")
    parser.add_argument("--judges", nargs="*", default=["gemma3-270m"], help="other judges of the sample's summaries (gemma3-270m needs the gemma extra)")
    parser.add_argument("--only-sample", action="store_true", help="the sample, its replay and the judges only")
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, Any]]] = []
    count = str(args.prompts)
    script = __file__
    if not args.skip_sample:
        cache = Path(tempfile.mkdtemp()) / "probe-cache.sqlite"
        rows.append(("sample: 39 items x en,fr on llama.cpp", in_fresh_process(script, "sample", str(cache), "llama.cpp")))
        rows.append(("replay of the sample from the cache", in_fresh_process(script, "replay", str(cache), "llama.cpp")))
        for judge in args.judges:
            rows.append((f"the sample's summaries judged by {judge}", in_fresh_process(script, "judge", str(cache), judge)))
    for batch in ("1", "8") if not args.only_sample else ():
        rows.append((f"transformers, batch {batch}", in_fresh_process(script, "local", batch, count)))
    for parallel in ("1", "2") if not args.only_sample else ():
        for run in ("first", "second"):
            rows.append((f"llama.cpp, {parallel} context(s), {run} run", in_fresh_process(script, "llamacpp", parallel, count)))
    for concurrency in ("1", "4", "16") if not args.only_sample else ():
        rows.append((f"OpenAI-compatible, concurrency {concurrency}", in_fresh_process(script, "openai", concurrency, count)))
    for name, figures in rows:
        print(f"{name:45s} {json.dumps(figures, ensure_ascii=False)}")
    found = dict(rows)
    batched = found.get("transformers, batch 8", {}).get("requests_per_s")
    if batched:
        for name, figures in rows:
            if "requests_per_s" in figures and not name.startswith(("sample", "replay")):
                print(f"  {name:45s} {figures['requests_per_s'] / batched:5.2f}x batched transformers")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(rows), indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
