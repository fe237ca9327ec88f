"""A GGUF file run by llama.cpp (`llama-cpp-python`) as a local probe backend: the default for
GGUF files on a CPU, where it answers faster than transformers with a fraction of the memory
(the file stays quantised and memory-mapped; transformers de-quantises it to float32).

Answers depend on the request alone, as with the transformers backend: the prompt is the GGUF
file's own chat template rendered over the messages, every request starts from an empty context
(no prefix reused from the previous one, which would change the floating-point path), sampling
runs with the request's seed and no sampler but temperature and top-p.  `parallel` contexts
answer requests side by side, each on its own thread (llama.cpp releases the GIL while it
computes) with its share of the cores; the weights are mapped once.

The two runtimes quantise differently (llama.cpp keeps the file's 4-bit weights), so their
answers differ: the model id says which runtime answered, and a cache never replays one
runtime's answers as the other's.
"""
from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from audit.probes.generation import Message, Output, ProbeError, Progress, Request, scored
from audit.probes.membership import TokenScores, from_logits

if TYPE_CHECKING:
    from llama_cpp import Llama

RUNTIME = "llama.cpp"
CONTEXT = 4096


def _fallback_prompt(messages: Sequence[Message]) -> str:
    return "".join(f"{m.role.value.capitalize()}: {m.content}\n" for m in messages) + "Assistant:"


class LlamaCppModel:
    """`parallel` llama.cpp contexts over one GGUF file, answering probe requests."""

    def __init__(self, contexts: list[Llama], *, model_id: str, path: Path, threads: int) -> None:
        """From loaded contexts; `load` is the way in from a file."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.model_id = model_id
        self.path = path
        self.threads = threads
        self._contexts = contexts
        self._reading: Llama | None = None
        self._contexts_to_close = list(contexts)
        # Freed at exit while llama.cpp's bindings are still loaded (freed by their own
        # finaliser during interpreter teardown, they print a TypeError).
        weakref.finalize(self, _close, self._contexts_to_close)
        first = contexts[0]
        template = first.metadata.get("tokenizer.chat_template")

        def text_of(token: int) -> str:
            return first.detokenize([token], special=True).decode("utf-8", errors="replace") if token >= 0 else ""

        self._formatter = Jinja2ChatFormatter(template, eos_token=text_of(first.token_eos()), bos_token=text_of(first.token_bos())) if template else None

    @classmethod
    def load(cls, file: Path, *, model_id: str, parallel: int = 1, threads: int | None = None, context: int = CONTEXT) -> LlamaCppModel:
        """`parallel` contexts sharing `threads` (default: every core) between them."""
        if parallel < 1:
            raise ProbeError(f"parallel must be at least 1, not {parallel}")
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ProbeError(f'{file}: the llama.cpp runtime needs llama-cpp-python: pip install "corpus-audit[probe]"') from None
        threads = threads or os.cpu_count() or 1
        each = max(1, threads // parallel)
        try:
            contexts = [Llama(str(file), n_ctx=context, n_threads=each, n_threads_batch=each, seed=0, verbose=False) for _ in range(parallel)]
        except (ValueError, RuntimeError, OSError) as error:
            raise ProbeError(f"{file}: llama.cpp cannot load the model ({error})") from None
        return cls(contexts, model_id=model_id, path=file, threads=threads)

    def token_scores(self, texts: Sequence[str], max_tokens: int) -> list[TokenScores | str]:
        """Each text read once (its first `max_tokens` + 1 tokens, BOS included where the model
        wants one): TokenScores, or why it could not be read."""
        reader = self._reader(max_tokens + 1)
        found: list[TokenScores | str] = []
        for text in texts:
            try:
                tokens = reader.tokenize(text.encode("utf-8"), add_bos=True, special=False)[: max_tokens + 1]
                reader.reset()
                reader.eval(tokens)
                found.append(from_logits(reader.scores[: len(tokens)], tokens))
            except Exception as error:
                found.append(f"{type(error).__name__}: {error}")
        return found

    def _reader(self, size: int) -> Llama:
        """A context that keeps every position's logits (llama.cpp's `logits_all`), sized for
        `size` tokens; the generation contexts keep only the last position's."""
        from llama_cpp import Llama

        if self._reading is None or self._reading.n_ctx() < size:
            if self._reading is not None:
                self._contexts_to_close.remove(self._reading)
                self._reading.close()
            self._reading = Llama(str(self.path), n_ctx=max(size, 256), n_batch=max(size, 256), n_threads=self.threads, n_threads_batch=self.threads,
                                  logits_all=True, seed=0, verbose=False)
            self._contexts_to_close.append(self._reading)
        return self._reading

    def describe(self) -> dict[str, object]:
        return {"backend": RUNTIME, "model": self.model_id, "path": str(self.path), "parallel": len(self._contexts), "threads": self.threads}

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The prompt's tokens: the file's chat template (which writes its own special tokens),
        else one `Role: text` line per turn."""
        context = self._contexts[0]
        if self._formatter is None:
            return context.tokenize(_fallback_prompt(messages).encode("utf-8"), add_bos=True, special=False)
        text = self._formatter(messages=[{"role": m.role.value, "content": m.content} for m in messages]).prompt
        return context.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def generate(self, requests: Sequence[Request], progress: Progress | None = None) -> list[Output]:
        outputs: list[Output | None] = [None] * len(requests)
        if not requests:
            return []

        def serve(context: Llama, indices: list[int]) -> None:
            for index in indices:
                outputs[index] = self._one(context, requests[index])
                if progress:
                    progress(1)

        shares = [list(range(start, len(requests), len(self._contexts))) for start in range(len(self._contexts))]
        with ThreadPoolExecutor(max_workers=len(self._contexts)) as pool:
            for done in [pool.submit(serve, context, share) for context, share in zip(self._contexts, shares, strict=True)]:
                done.result()
        return [output for output in outputs if output is not None]

    def _one(self, context: Llama, request: Request) -> Output:
        try:
            prompt = self.prompt_ids(request.messages)
            room = context.n_ctx() - len(prompt) - (max(len(choice) for choice in request.choices) if request.choices else request.decoding.max_tokens)
            if room < 0:
                return Output(None, error=f"the prompt is {len(prompt)} tokens, too long for the {context.n_ctx()}-token context with its answer")
            return self._score(context, prompt, request.choices) if request.choices else self._answer(context, prompt, request)
        except Exception as error:
            return Output(None, error=f"{type(error).__name__}: {error}")

    def _answer(self, context: Llama, prompt: list[int], request: Request) -> Output:
        decoding = request.decoding
        context.reset()
        completion = context.create_completion(prompt, max_tokens=decoding.max_tokens, temperature=decoding.temperature, top_p=decoding.top_p, top_k=0, min_p=0.0,
                                               typical_p=1.0, repeat_penalty=1.0, seed=decoding.seed)
        choice = completion["choices"][0]
        return Output(choice["text"], finish_reason=choice["finish_reason"] or "stop")

    def _score(self, context: Llama, prompt: list[int], choices: Sequence[str]) -> Output:
        """Each choice's summed log-probability as the reply: the prompt evaluated once, then each
        choice's tokens one at a time from the prompt's end, reading the next token's logits."""
        context.reset()
        context.eval(prompt)
        after_prompt = _log_softmax(_last_logits(context))
        logprobs = []
        for choice in choices:
            tokens = context.tokenize(choice.encode("utf-8"), add_bos=False, special=False)
            context.n_tokens = len(prompt)
            total, current = 0.0, after_prompt
            for position, token in enumerate(tokens):
                total += float(current[token])
                if position + 1 < len(tokens):
                    context.eval([token])
                    current = _log_softmax(_last_logits(context))
            logprobs.append(total)
        return scored(choices, logprobs)


def _close(contexts: list[Llama]) -> None:
    for context in contexts:
        context.close()


def _last_logits(context: Llama) -> np.ndarray:
    """The logits llama.cpp computed for the last token evaluated, copied out of its buffer."""
    from llama_cpp import llama_get_logits_ith

    return np.ctypeslib.as_array(llama_get_logits_ith(context.ctx, -1), shape=(context.n_vocab(),)).astype(np.float64)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())
