"""The llama.cpp runtime (llama-cpp-python) on the random-weight Llama GGUF fixture: answers that
depend on the request alone, seeded sampling, scored choices checked against transformers on
the same file, the runtime chosen for a GGUF file, and scored answers through the cache."""
from __future__ import annotations

import json
import math
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
import requests
from conftest import FIXTURES

from audit.probes.generation import Decoding, ProbeError, chat
from audit.probes.judge import JUDGE_CHOICES, Verdict, scored_verdict
from audit.probes.llamacpp import LlamaCppModel
from audit.probes.local import LocalModel
from audit.probes.models import Runtime, open_model

pytest.importorskip("llama_cpp")

TINY = FIXTURES / "models" / "llama-2-tiny-random.gguf"
PROMPTS = ["What do you know about Bremerhaven?", "Name a river in Germany.", "Continue: the quick brown fox", "Qui a écrit Les Misérables ?", "東京について教えてください。"]


@pytest.fixture(scope="module")
def model() -> LlamaCppModel:
    return LlamaCppModel.load(TINY, model_id="tiny+llama.cpp", parallel=1)


def test_greedy_answers_depend_on_the_request_alone(model):
    requests = [chat(prompt, decoding=Decoding(max_tokens=24)) for prompt in PROMPTS]
    first = model.generate(requests)
    assert all(output.ok and output.text for output in first)
    assert {output.finish_reason for output in first} <= {"stop", "length"}
    assert model.generate(requests[::-1])[::-1] == first
    side_by_side = LlamaCppModel.load(TINY, model_id="tiny+llama.cpp", parallel=2)
    assert side_by_side.describe()["parallel"] == 2
    assert side_by_side.generate(requests) == first
    assert [model.generate([request])[0] for request in requests] == first


def test_sampling_follows_the_seed(model):
    def sampled(seed: int) -> str | None:
        return model.generate([chat(PROMPTS[0], decoding=Decoding(temperature=1.0, max_tokens=24, seed=seed))])[0].text

    assert sampled(3) == sampled(3)
    assert len({sampled(seed) for seed in range(4)}) > 1


def test_scored_choices_match_transformers_on_the_same_file(model):
    """The tiny model's weights are F16/F32, so both runtimes compute the same log-probabilities
    up to float rounding: an independent check of llama.cpp's token-by-token scoring."""
    reference = LocalModel.load(TINY.parent, gguf_file=TINY.name, batch_size=1)
    choices = (*JUDGE_CHOICES, "Germany", "no")
    for prompt in PROMPTS:
        request = chat(prompt, choices=choices)
        ours, theirs = model.generate([request])[0], reference.generate([request])[0]
        assert ours.finish_reason == theirs.finish_reason == "scored"
        assert ours.logprobs == pytest.approx(theirs.logprobs, abs=2e-3)
        assert ours.text == choices[max(range(len(choices)), key=lambda k: ours.logprobs[k])]
        assert all(value < 0 for value in ours.logprobs)
    assert model.prompt_ids(request.messages) == reference.prompt_ids(request.messages)


def test_a_prompt_longer_than_the_context_is_an_error_not_a_crash():
    small = LlamaCppModel.load(TINY, model_id="tiny+llama.cpp", context=256)
    (output, fits) = small.generate([chat("word " * 300), chat("word", decoding=Decoding(max_tokens=8))])
    assert not output.ok and re.fullmatch(r"the prompt is 3\d\d tokens, too long for the 256-token context with its answer", output.error)
    assert fits.ok


def test_the_judge_verdict_is_the_shift_from_its_baseline():
    # The model prefers `known` either way; the summary makes it less likely than no summary did.
    reading = scored_verdict((-1.0, -3.0), (-0.5, -4.0))
    assert reading.verdict is Verdict.NOT_KNOWN and reading.p_known == pytest.approx(1 / (1 + math.exp(1.5)))
    assert scored_verdict((-1.0, -3.0), (-2.0, -2.5)).verdict is Verdict.KNOWN
    still = scored_verdict((-1.0, -3.0), (-1.0, -3.0))
    assert still.verdict is None and still.parse_error == "the summary does not move the verdict's odds" and still.p_known == 0.5
    assert scored_verdict((-2000.0, -1.0), (0.0, 0.0)).p_known == pytest.approx(0.0)
    assert json.loads(reading.raw) == {"logprobs": {"known": -1.0, "not_known": -3.0}, "baseline": {"known": -0.5, "not_known": -4.0}}


def test_a_gguf_file_runs_on_llama_cpp_unless_told_otherwise(tmp_path):
    chosen = open_model(str(TINY), cache=tmp_path / "c.sqlite")
    assert chosen.model_id.endswith("+llama.cpp") and chosen.describe()["backend"] == "llama.cpp" and chosen.reads_probabilities
    other = open_model(str(TINY), cache=tmp_path / "c.sqlite", runtime=Runtime.TRANSFORMERS)
    assert other.model_id == chosen.model_id.removesuffix("+llama.cpp") and other.describe()["backend"] == "transformers"
    directory = tmp_path / "hf"
    directory.mkdir()
    (directory / "config.json").write_text("{}", encoding="utf-8")
    (directory / "model.safetensors").write_bytes(b"x")
    with pytest.raises(ProbeError, match=r"llama\.cpp runs GGUF files only"):
        open_model(str(directory), cache=tmp_path / "c.sqlite", runtime=Runtime.LLAMA_CPP)
    registry = tmp_path / "models.toml"
    registry.write_text(f'[models.tiny]\nbackend = "local"\npath = "{TINY}"\nruntime = "vllm"\n', encoding="utf-8")
    with pytest.raises(ProbeError, match=r'models\.tiny.*runtime.*must be "llama.cpp" or "transformers"') as raised:
        open_model("tiny", registry, cache=tmp_path / "c.sqlite")
    assert str(registry) in str(raised.value)
    registry.write_text(f'[models.tiny]\nbackend = "local"\npath = "{TINY}"\nparallel = 3\n', encoding="utf-8")
    assert open_model("tiny", registry, cache=tmp_path / "c.sqlite").describe()["parallel"] == 3


def test_scored_answers_are_cached_and_replayed_exactly(tmp_path):
    cache = tmp_path / "c.sqlite"
    requests = [chat(prompt, choices=JUDGE_CHOICES) for prompt in PROMPTS] + [chat(PROMPTS[0], decoding=Decoding(max_tokens=8))]
    fresh = open_model(str(TINY), cache=cache).generate(requests)
    replayed = open_model(str(TINY), cache=cache, offline=True)
    again = replayed.generate(requests)
    assert replayed._backend is None and all(output.cached for output in again)
    assert [(o.text, o.logprobs, o.finish_reason) for o in again] == [(o.text, o.logprobs, o.finish_reason) for o in fresh]
    assert replayed.cache.count_scores() == len(PROMPTS)
    # Scoring the same prompt is another question than answering it: another key.
    assert requests[0].key("m") != chat(PROMPTS[0]).key("m") and chat(PROMPTS[0]).key("m") == chat(PROMPTS[0], choices=()).key("m")
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE scores SET logprobs = '[1.0]'")
    with pytest.raises(ProbeError, match="a damaged scores entry"):
        open_model(str(TINY), cache=cache, offline=True).generate(requests[:1])


def test_serve_model_offers_a_gguf_file_on_llama_cpp(tmp_path):
    """`audit probe serve-model` on a GGUF file runs it where `audit check` would (llama.cpp),
    and answers what the model answers directly.  Run from outside the source tree, so the
    package imported is the installed one (with its compiled parts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    process = subprocess.Popen([sys.executable, "-c", "from audit.cli import main; main()", "probe", "serve-model", "--probe-model", str(TINY), "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(300):
            try:
                listing = requests.get(f"{url}/models", timeout=2).json()
                break
            except requests.ConnectionError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                time.sleep(0.1)
        else:
            raise AssertionError("serve-model did not start")
        assert listing["data"][0]["id"].endswith("+llama.cpp")
        request = chat("Name a city.", decoding=Decoding(max_tokens=6))
        body = {"model": listing["data"][0]["id"], "messages": [{"role": "user", "content": "Name a city."}], "max_tokens": 6, "temperature": 0}
        answer = requests.post(f"{url}/chat/completions", json=body, timeout=60).json()
        (direct,) = LlamaCppModel.load(TINY, model_id="tiny", parallel=1).generate([request])
        assert answer["choices"][0]["message"]["content"] == direct.text
    finally:
        process.terminate()
        process.wait(timeout=30)
