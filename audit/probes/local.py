"""A local transformers model as a probe backend: a Hugging Face model directory, or a GGUF file
that transformers de-quantises on load.

Answers are meant to be cached and compared across runs, so decoding depends on the request
alone: the model's own `generation_config.json` sampling defaults are dropped at load, the batches
are formed from the request set (grouped by identical `Decoding`, ordered by prompt tokens), not
from the caller's order, and each sampled request runs on its own under its seed.  The same
requests with the same settings therefore give byte-identical answers.

Greedy answers may still depend on the batch size: a prompt left-padded in a batch of 8 goes
through other matrix shapes than alone, and float kernels that round differently by shape can
flip a near-tie between two tokens.  On a 2-core x86 CPU with torch 2.13 they did not (SmolLM2,
48 prompts: batch sizes 1, 4 and 8 byte-identical), but nothing promises it on other hardware:
compare answers across runs with one batch size.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from audit.errors import special_kind
from audit.probes.generation import Decoding, Message, Output, ProbeError, Progress, Request, scored
from audit.probes.membership import TokenScores, from_logits

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

INSTALL_HINT = 'pip install "corpus-audit[probe]"'
_BLOCK = 1 << 20
# What decides a directory model's answers; a README or an image beside them does not.
_MODEL_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.json", "*.model", "*.tiktoken", "*.jinja", "merges.txt", "vocab.txt")


def _sha256(path: Path, digest: hashlib._Hash | None = None) -> hashlib._Hash:
    digest = digest or hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest


def fingerprint(path: Path, gguf_file: str | None = None) -> str:
    """The first 16 hex digits of a sha256 over the model's files, so that a changed file never
    matches another's cached answers: the GGUF file's bytes, or a directory's weight, config and
    tokenizer files, each as its relative name and contents, in name order."""
    try:
        if gguf_file is not None:
            return _sha256(path / gguf_file).hexdigest()[:16]
        files = sorted({p for pattern in _MODEL_FILES for p in path.rglob(pattern) if p.is_file()})
        digest = hashlib.sha256()
        for file in files:
            name = file.relative_to(path).as_posix().encode()
            digest.update(len(name).to_bytes(8, "big") + name + file.stat().st_size.to_bytes(8, "big"))
            _sha256(file, digest)
        return digest.hexdigest()[:16]
    except OSError as error:
        raise ProbeError(f"{path}: cannot read the model files ({error.strerror or error})") from None


def _require(*packages: str) -> None:
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise ProbeError(f"a local model needs {', '.join(missing)}: {INSTALL_HINT}")


_GGUF_MAGIC = b"GGUF"
_GGUF_VERSIONS = (1, 2, 3)
_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def check_model_files(path: Path, gguf_file: str | None) -> None:
    """Refuse, before any work, what cannot be a model: a `.gguf` without GGUF's magic and a
    readable header, or a model directory without a config object and weights.  Otherwise a
    text file named `.gguf` fails only at the first uncached prompt, after the corpora ran."""
    if gguf_file is not None:
        file = path / gguf_file
        try:
            if file.is_dir() or special_kind(file):
                raise ProbeError(f"{file}: not a regular file, so not a GGUF model")
            with open(file, "rb") as handle:
                header = handle.read(24)
        except OSError as error:
            raise ProbeError(f"{file}: cannot read the model file ({error.strerror or error})") from None
        if len(header) < 24 or header[:4] != _GGUF_MAGIC:
            raise ProbeError(f"{file}: not a GGUF model (no GGUF header)")
        version, tensors, keys = struct.unpack("<IQQ", header[4:])
        if version not in _GGUF_VERSIONS or not 0 < tensors <= 2**20 or not 0 < keys <= 2**20:
            raise ProbeError(f"{file}: not a readable GGUF model (version {version}, {tensors} tensors, {keys} metadata keys)")
        _read_gguf(file)
        return
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ProbeError(f"{path / 'config.json'}: not a readable model config ({error})") from None
    if not isinstance(config, dict):
        raise ProbeError(f"{path / 'config.json'}: not a model config (a JSON object)")
    if not any(p.is_file() for pattern in _WEIGHTS for p in path.glob(pattern)):
        raise ProbeError(f"{path}: no model weights ({', '.join(_WEIGHTS)})")


def _read_gguf(file: Path) -> None:
    """Parse the whole header (metadata and tensor table) where the `gguf` package is installed
    (with the probe extra): a file cut short or scrambled after its first bytes is refused too."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return
    try:
        GGUFReader(file)
    except (ValueError, IndexError, KeyError, TypeError, OSError, struct.error) as error:
        raise ProbeError(f"{file}: not a readable GGUF model ({type(error).__name__}: {str(error)[:120]})") from None


def _locate(path: Path, gguf_file: str | None) -> tuple[Path, str | None]:
    """The model's directory and GGUF file name, or a ProbeError naming what is wrong."""
    if path.is_file():
        if path.suffix != ".gguf" or gguf_file not in (None, path.name):
            raise ProbeError(f"{path}: a model is a .gguf file or a Hugging Face model directory")
        return path.parent, path.name
    if not path.is_dir():
        raise ProbeError(f"{path}: no such model file or directory")
    if gguf_file is not None:
        if not (path / gguf_file).is_file():
            raise ProbeError(f"{path / gguf_file}: no such GGUF file")
        return path, gguf_file
    if not (path / "config.json").is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        hint = f"; pass gguf_file= one of {', '.join(ggufs)}" if ggufs else ""
        raise ProbeError(f"{path}: not a Hugging Face model directory (no config.json){hint}")
    return path, None


def _fallback_prompt(messages: Sequence[Message]) -> str:
    """For a tokenizer without a chat template (a base model): each turn as `Role: text` on its
    own line, ending with `Assistant:` for the model to continue."""
    return "".join(f"{m.role.value.capitalize()}: {m.content}\n" for m in messages) + "Assistant:"


class LocalModel:
    """A transformers causal LM answering probe requests on one device, one thread at a time."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, model_id: str, path: Path, gguf_file: str | None, device: str, batch_size: int) -> None:
        """From a loaded model and tokenizer; `load` is the way in from files."""
        self.model_id = model_id
        self.path = path
        self.gguf_file = gguf_file
        self.device = device
        self.batch_size = batch_size
        self._model = model
        self._tokenizer = tokenizer
        config = model.generation_config
        eos = {tokenizer.eos_token_id} | set(config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id])
        self._eos = sorted(token for token in eos if token is not None)
        if not self._eos:
            raise ProbeError(f"{path}: the model has no end-of-sequence token")
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self._eos[0]

    @classmethod
    def load(cls, path: Path, *, gguf_file: str | None = None, name: str | None = None, device: str = "cpu", batch_size: int = 8, threads: int | None = None,
             model_id: str | None = None) -> LocalModel:
        """`threads` sets torch's (process-wide) CPU thread count; None leaves torch's default.
        `model_id`, when the caller has fingerprinted the files already, spares hashing them again."""
        if batch_size < 1:
            raise ProbeError(f"batch_size must be at least 1, not {batch_size}")
        path = Path(path)
        directory, gguf_file = _locate(path, gguf_file)
        _require("torch", "transformers", *(("accelerate", "gguf") if gguf_file else ()))
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.utils import logging as transformers_logging

        # The tool shows its own progress; transformers' per-tensor bars would interleave with it.
        transformers_logging.disable_progress_bar()
        if threads is not None:
            torch.set_num_threads(threads)
        where = directory / gguf_file if gguf_file else directory
        model_id = model_id or f"{name or (Path(gguf_file).stem if gguf_file else directory.resolve().name)}@{fingerprint(directory, gguf_file)}"
        # float32 on a CPU: bfloat16 checkpoints are slow there on most processors.
        dtype = torch.float32 if device == "cpu" else "auto"
        try:
            tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=gguf_file)
            model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf_file, dtype=dtype)
            model.to(device)
        except ImportError as error:
            raise ProbeError(f"{where}: cannot load the model ({error}); {INSTALL_HINT}") from None
        except Exception as error:
            raise ProbeError(f"{where}: cannot load the model ({type(error).__name__}: {error})") from None
        model.eval()
        # Keep only the token ids: a checkpoint's sampling defaults (temperature, top_k, ...)
        # would otherwise change answers that the cache keys by the request's Decoding alone.
        own = model.generation_config
        model.generation_config = GenerationConfig(bos_token_id=own.bos_token_id, eos_token_id=own.eos_token_id, pad_token_id=own.pad_token_id)
        return cls(model, tokenizer, model_id=model_id, path=path, gguf_file=gguf_file, device=device, batch_size=batch_size)

    @property
    def network(self) -> PreTrainedModel:
        """The loaded network, for training it further (`audit.probes.plant`)."""
        return self._model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._tokenizer

    def describe(self) -> dict[str, object]:
        return {"backend": "transformers", "model": self.model_id, "path": str(self.path), "gguf_file": self.gguf_file, "device": self.device, "batch_size": self.batch_size}

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The prompt's token ids, through the chat template when the tokenizer has one."""
        tokenizer = self._tokenizer
        if tokenizer.chat_template:
            text = tokenizer.apply_chat_template([{"role": m.role.value, "content": m.content} for m in messages], add_generation_prompt=True, tokenize=False)
            # The template writes its own special tokens (BOS included, where the model wants one).
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
        return list(tokenizer(_fallback_prompt(messages))["input_ids"])

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        outputs: dict[int, Output] = {}
        prompts: dict[int, list[int]] = {}
        failed = 0
        for index, request in enumerate(requests):
            try:
                prompts[index] = self.prompt_ids(request.messages)
            except Exception as error:
                outputs[index] = Output(None, error=f"cannot build the prompt: {type(error).__name__}: {error}")
                failed += 1
        if failed and progress:
            progress(failed)
        for index in [index for index in prompts if requests[index].choices]:
            outputs[index] = self._scored(prompts.pop(index), requests[index].choices)
            if progress:
                progress(1)
        for batch in self._batches(requests, prompts):
            try:
                answers = self._run([prompts[index] for index in batch], requests[batch[0]].decoding)
            except Exception as error:
                answers = [Output(None, error=f"{type(error).__name__}: {error}")] * len(batch)
            for index, answer in zip(batch, answers, strict=True):
                outputs[index] = answer
            if progress:
                progress(len(batch))
        return [outputs[index] for index in range(len(requests))]

    def _batches(self, requests: Sequence[Request], prompts: dict[int, list[int]]) -> list[list[int]]:
        """Request indices to run together: greedy requests with one Decoding, ordered by prompt
        length (then tokens) so the same request set always makes the same batches; each sampled
        request alone, so its answer depends on its seed only."""
        groups: dict[Decoding, list[int]] = {}
        for index in prompts:
            groups.setdefault(requests[index].decoding, []).append(index)
        batches = []
        for decoding, indices in groups.items():
            indices.sort(key=lambda index: (len(prompts[index]), prompts[index]))
            size = self.batch_size if decoding.greedy else 1
            batches.extend(indices[start : start + size] for start in range(0, len(indices), size))
        return batches

    def token_scores(self, texts: Sequence[str], max_tokens: int) -> list[TokenScores | str]:
        """Each text read once (its first `max_tokens` + 1 tokens, with the tokenizer's special
        tokens): TokenScores, or why it could not be read."""
        import torch

        found: list[TokenScores | str] = []
        for text in texts:
            try:
                tokens = list(self._tokenizer(text)["input_ids"])[: max_tokens + 1]
                with torch.inference_mode():
                    logits = self._model(input_ids=torch.tensor([tokens], device=self.device)).logits[0]
                found.append(from_logits(logits.double().cpu().numpy(), tokens))
            except Exception as error:
                found.append(f"{type(error).__name__}: {error}")
        return found

    def _scored(self, prompt: list[int], choices: Sequence[str]) -> Output:
        """Each choice's summed token log-probability as the reply, in one forward pass over the
        prompt followed by each choice (right-padded, so positions are the unpadded ones)."""
        import torch

        try:
            rows = [prompt + list(self._tokenizer(choice, add_special_tokens=False)["input_ids"]) for choice in choices]
            width = max(len(row) for row in rows)
            input_ids = torch.tensor([row + [self._pad] * (width - len(row)) for row in rows], device=self.device)
            attention = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], device=self.device)
            with torch.inference_mode():
                logits = self._model(input_ids=input_ids, attention_mask=attention).logits.double()
            logprobs = torch.log_softmax(logits, dim=-1)
            totals = [sum(float(logprobs[k, position - 1, row[position]]) for position in range(len(prompt), len(row))) for k, row in enumerate(rows)]
        except Exception as error:
            return Output(None, error=f"{type(error).__name__}: {error}")
        return scored(choices, totals)

    def _run(self, prompts: list[list[int]], decoding: Decoding) -> list[Output]:
        import torch

        width = max(len(ids) for ids in prompts)
        input_ids = torch.tensor([[self._pad] * (width - len(ids)) + ids for ids in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], device=self.device)
        settings: dict[str, int | bool | float | None] = {"max_new_tokens": decoding.max_tokens, "eos_token_id": self._eos, "pad_token_id": self._pad, "do_sample": not decoding.greedy}
        if not decoding.greedy:
            settings.update(temperature=decoding.temperature, top_p=decoding.top_p, top_k=0)
        device = torch.device(self.device)
        # A forked RNG: seeding for this request leaves the caller's random state as it was.
        with torch.inference_mode(), torch.random.fork_rng(devices=[] if device.type == "cpu" else None, device_type=device.type):
            torch.manual_seed(decoding.seed)
            generated = self._model.generate(input_ids=input_ids, attention_mask=attention, **settings)
        answers = []
        for row in generated[:, width:].tolist():
            stop = next((position for position, token in enumerate(row) if token in self._eos), None)
            tokens = row if stop is None else row[:stop]
            text = self._tokenizer.decode(tokens, skip_special_tokens=True)
            answers.append(Output(text, finish_reason="length" if stop is None and len(row) >= decoding.max_tokens else "stop"))
        return answers
