"""`audit index`: build, add near-duplicate sketches to, describe, label and verify local indexes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from pydantic import ValidationError
from rich.markup import escape
from rich.progress import DownloadColumn, Progress

from audit.bars import console, progress_display
from audit.cli.common import build_progress_display
from audit.cli.shell import InputError
from audit.corpora.local import LocalIndex
from audit.corpora.shards import IndexOpenError
from audit.corpora.soundness import OPEN_CHECKS
from audit.corpora.verify import EXTRA, verify_index
from audit.executors import ExecutorError, parse_executor
from audit.index.build import build_index
from audit.index.errors import IndexBuildError
from audit.index.format import read_manifest
from audit.index.limits import describe_size
from audit.index.progress import ProgressHook as IndexProgress
from audit.index.sharded.build import build_sharded
from audit.index.sources import nested_outputs
from audit.langupgrade import LanguageUpgradeError, add_languages
from audit.neardup import NEARDUP_DIR, NearDupError, NearDupParams, add_neardup, load_redis
from audit.policyfile import PolicyError, load_policy
from audit.ranges import RangeError, document_limit, memory_budget, worker_count
from audit.signals import minhash


def _shardprogress_display() -> tuple[Progress, IndexProgress]:
    """A display of shards finished, for sharded builds (`audit.index.sharded`)."""
    progress = progress_display()
    tasks: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks[stage] = progress.add_task("building shards", total=total)
        progress.update(tasks[stage], completed=done)

    return progress, report


@click.group()
def index() -> None:
    """Build and inspect local byte-level infini-gram indexes."""


@index.command("build")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Index directory to create.")
@click.option("--mem", "memory", default="8G", show_default=True, help="Memory budget, 16M up to this machine's memory; larger corpora are split into shards that fit it.")
@click.option(
    "--normalize",
    "normalization",
    type=click.Choice(["text", "none"]),
    default="text",
    show_default=True,
    help="`text`: store NFC with whitespace collapsed, as queries are issued; `none`: raw bytes, as infini-gram's indexer does.",
)
@click.option(
    "--text-field",
    "text_field",
    default="text",
    show_default=True,
    metavar="NAME",
    help="The JSONL field or Parquet/datasets column holding each document's text (e.g. `content`); every other field is kept as provenance.",
)
@click.option(
    "--text-docs",
    "text_docs",
    type=click.Choice(["file", "block"]),
    default="file",
    show_default=True,
    help="What one document of a .txt/.txt.gz/.md file is: `file`, the whole file; `block`, each blank-line-separated block (its first line is recorded).",
)
@click.option("--force", is_flag=True, help="Replace an existing index at --out (only one audit wrote; never other files).")
@click.option("--no-minhash", "no_minhash", is_flag=True, help="Skip the near-duplicate (MinHash) index built after the suffix array; add it later with `audit index minhash`.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Build the near-duplicate index with this policy's [minhash.index] parameters (default: the built-in ones).")
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    help="Cut the input into N byte-balanced shards built apart (--mem bounds each), resumable: run the same command again after a failure.",
)
@click.option("--executor", default="local", show_default=True, help="Where --shards builds run: `local` (--workers processes), `ray` ($RAY_ADDRESS or a new local Ray), or `ray://HOST:PORT`.")
@click.option("--max-document", "max_document", default="64M", show_default=True, help="The longest document (a line, a text block or a text file read whole) read; a longer one, as a small gzip or zstd file can inflate to, is an error.")
@click.option("--workers", type=click.IntRange(min=1), help="Local processes: parsers of the plain build, or shards built at once with --shards [default: CPU count; more than the CPUs or the shards are not started].")
def index_build(
    sources: tuple[Path, ...],
    out: Path,
    memory: str,
    normalization: str,
    text_field: str,
    text_docs: str,
    force: bool,
    no_minhash: bool,
    policy_path: Path | None,
    shards: int | None,
    executor: str,
    max_document: str,
    workers: int | None,
) -> None:
    """Index corpus documents: JSONL(.gz), Parquet, `datasets` directories, plain text.

    SOURCES are files, read by suffix (.jsonl/.json[.gz] JSONL, .parquet, .arrow, .txt/.txt.gz/.md
    text; any other name as JSONL), `save_to_disk` directories of Hugging Face `datasets`, or
    other directories (every *.json* file below, in sorted order).  The suffix array is followed
    by the near-duplicate index, unless --no-minhash.

    With --shards N the input is cut into N shards built apart, on this machine or a Ray
    cluster (--executor); finished shards are kept, so the same command resumes a build that
    failed or was interrupted.
    """
    try:
        where = parse_executor(executor)
    except ExecutorError as error:
        raise InputError(str(error)) from None
    if where.distributed and shards is None:
        raise InputError(f"--executor {executor} builds shards: give --shards N")
    if where.distributed and workers is not None:
        raise InputError("--workers sets local processes; on Ray each shard takes one CPU of the cluster")
    limits = _build_limits(list(sources), memory, workers, shards, max_document)
    params = None if no_minhash else _minhash_params(policy_path, None)
    options = {"normalization": normalization, "text_field": text_field, "text_docs": text_docs, "force": force, **limits}
    progress, report = build_progress_display() if shards is None else _shardprogress_display()
    try:
        if shards is None:
            manifest, note = build_index(list(sources), out, progress=report, **options), ""
        else:
            built = build_sharded(list(sources), out, shards=shards, executor=where, progress=report, **options)
            manifest, note = built.manifest, f" ({built.built} built, {built.reused} already built; executor {where.kind.value})"
    except IndexBuildError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    click.echo(
        f"{out}: {manifest.documents:,} documents, {describe_size(manifest.bytes)} in {len(manifest.shards)} shard(s){note}, "
        f"built in {manifest.build_seconds:.1f} s (fingerprint {manifest.fingerprint})"
    )
    click.echo(f"{out}: languages {_languages_line(manifest.extra['languages'])}")
    if params is not None:
        _add_minhash(out, params, force=False)


def _build_limits(sources: list[Path], memory: str, workers: int | None, shards: int | None, max_document: str) -> dict[str, int]:
    """The memory budget, worker count and longest document of a build, refused out of range
    before any work, with a note for workers clamped and for directories audit wrote that the
    build skips."""
    try:
        budget, processes, longest = memory_budget(memory), worker_count(workers, shards), document_limit(max_document)
    except RangeError as error:
        raise InputError(str(error)) from None
    if processes.note:
        console.print(f"[yellow]note[/yellow] {processes.note}", markup=True, highlight=False)
    for nested in nested_outputs(sources):
        console.print(f"[yellow]note[/yellow] skipping {escape(str(nested))}: a directory audit wrote, not corpus files", markup=True, highlight=False)
    return {"memory_bytes": budget, "workers": processes.count, "max_document": longest}


def _minhash_params(policy_path: Path | None, sketcher: str | None) -> NearDupParams:
    """Build parameters from a policy's `[minhash.index]` table (checked before any work)."""
    try:
        expected = minhash.MinhashConfig.model_validate(load_policy(policy_path).settings.get(minhash.NAME, {})).index
        return expected.build_params(sketcher=sketcher)
    except PolicyError as error:
        raise InputError(str(error)) from None
    except ValidationError as error:
        raise InputError(f"{policy_path or 'the built-in policy'}: [minhash.index]: {error.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def _minhashprogress_display() -> tuple[Progress, IndexProgress]:
    """A display for the near-duplicate build and Redis load; like `build_progress_display`, it starts
    on the first report, after the build has forked its workers."""
    progress = progress_display()
    tasks: dict[str, int] = {}
    labels = {"minhash": "sketching windows (documents)", "bands": "sorting LSH bands", "redis": "loading bands into Redis (windows)"}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
        if stage not in tasks:
            tasks[stage] = progress.add_task(labels.get(stage, stage), total=total)
        progress.update(tasks[stage], completed=done)

    return progress, report


def _add_minhash(directory: Path, params: NearDupParams, force: bool) -> None:
    progress, report = _minhashprogress_display()
    try:
        built = add_neardup(LocalIndex(directory), params, force=force, progress=report)
    except (IndexOpenError, NearDupError) as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    size = sum(f.bytes for f in built.files)
    click.echo(
        f"{directory / NEARDUP_DIR}: {built.windows:,} windows of {built.documents:,} documents ({built.hash_family['sketcher']}, "
        f"{built.params['num_perm']} permutations, {built.params['bands']} bands x {built.params['rows']} rows), "
        f"{describe_size(size)}, built in {built.build_seconds:.1f} s"
    )


@index.command("minhash")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--redis", "redis_url", metavar="URL", help="Also load the LSH bands into Redis (redis://host:port/db), to share them between processes and machines.")
@click.option("--sketcher", type=click.Choice(["datasketch", "rensa"]), help="MinHash implementation: datasketch (the reference, the default) or rensa (Rust, faster; pip install 'corpus-audit[rensa]'); overrides the policy's.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), help="Build with this policy's [minhash.index] parameters (default: the built-in ones).")
@click.option("--force", is_flag=True, help="Rebuild a near-duplicate index the directory already has.")
def index_minhash(directory: Path, redis_url: str | None, sketcher: str | None, policy_path: Path | None, force: bool) -> None:
    """Add the near-duplicate (MinHash LSH) index to an index built by `audit index build`.

    It goes into DIRECTORY/minhash/ and is listed in the index's manifest, so `audit index
    verify` checks it.  With --redis, an index that already has one is only loaded into Redis
    (add --force to rebuild it first).
    """
    exists = (directory / NEARDUP_DIR).exists()
    if force or not exists or not redis_url:
        _add_minhash(directory, _minhash_params(policy_path, sketcher), force=force)
    if redis_url:
        progress, report = _minhashprogress_display()
        try:
            windows = load_redis(directory, redis_url, report)
        except NearDupError as error:
            raise InputError(str(error)) from None
        finally:
            progress.stop()
        click.echo(f"{redis_url}: loaded the LSH bands of {windows:,} windows of {directory / NEARDUP_DIR}")


@index.command("info")
@click.argument("directory", type=click.Path(path_type=Path))
def index_info(directory: Path) -> None:
    """Describe an index: documents, size, shards, sources, fingerprint (after the open checks;
    `checked` says what they cover and what only `audit index verify` finds)."""
    try:
        corpus = LocalIndex(directory)
    except IndexOpenError as error:
        raise InputError(str(error)) from None
    manifest = read_manifest(directory)
    languages = corpus.info.details.get("languages") or f"language unknown: built without a language table; write one with `audit index languages {directory}`"
    info = {"corpus": corpus.info.__dict__, "languages": languages, "checked": OPEN_CHECKS, "manifest": json.loads(manifest.to_json()) if manifest else None}
    click.echo(json.dumps(info, indent=2, ensure_ascii=False))


@index.command("languages")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Write the table anew when the index has one (a damaged one included).")
@click.option("--workers", type=click.IntRange(min=1), help="Processes identifying documents [default: CPU count; more than the CPUs are not started].")
def index_languages(directory: Path, force: bool, workers: int | None) -> None:
    """Write the per-document language table of an index built before tables were written, in
    place: each document's language from its metadata, its input's name, or identified from its
    text, as `audit index build` does; the manifest records it."""
    progress = progress_display()
    tasks: list[int] = []

    def report(_: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks.append(progress.add_task("identifying documents' languages", total=total))
        progress.update(tasks[0], completed=done)

    try:
        upgrade = add_languages(directory, force=force, workers=worker_count(workers).count, progress=report)
    except LanguageUpgradeError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    done = upgrade.summary
    click.echo(f"{directory}: {'rewrote' if upgrade.replaced else 'wrote'} the language table of {done['documents']:,} documents ({_languages_line(done)}) in {upgrade.seconds:.1f} s")


def _languages_line(summary: dict) -> str:
    """Documents per language and how their languages were known (`audit.index.doclangs.summary`)."""
    counts = ", ".join(f"{lang} {n:,}" for lang, n in summary["counts"].items())
    known = ", ".join(f"{how} {n:,}" for how, n in summary["known_by"].items() if n)
    return f"{counts}; known by {known}"


@index.command("verify")
@click.argument("directory", type=click.Path(path_type=Path))
def index_verify(directory: Path) -> None:
    """Re-hash every file of an index against its manifest; exit 1 if any differs.

    Indexes whose manifest records no hashes (built by infini-gram's indexer, or by an older
    corpus-audit) get the structural checks only, and exit 0 if those pass.
    """
    progress = progress_display(DownloadColumn())
    tasks: list[int] = []

    def report(done: int, total: int) -> None:
        if not tasks:
            progress.start()
            tasks.append(progress.add_task("hashing index files", total=total))
        progress.update(tasks[0], completed=done)

    try:
        result = verify_index(directory, report)
    except IndexOpenError as error:
        raise InputError(str(error)) from None
    finally:
        progress.stop()
    for file in result.files:
        click.echo(f"{file.status:<22} {file.name:<14} {file.detail}".rstrip())
    if result.damaged:
        extra = sum(file.status == EXTRA for file in result.damaged)
        differ = f"{len(result.damaged) - extra} of {len(result.files) - extra} files differ from the manifest" + (f", {extra} unexpected" if extra else "")
        click.echo(f"{directory}: damaged, {differ}; rebuild it (audit index build ... --force)")
    elif result.structure:
        click.echo(f"{directory}: damaged, {result.structure}; rebuild it (audit index build ... --force)")
    elif result.hashed:
        click.echo(f"{directory}: all {len(result.files)} files match the manifest")
    else:
        click.echo(f"{directory}: sizes and offsets are consistent; not verifiable: no recorded hashes (rebuild with audit index build to record them)")
    if not result.ok:
        sys.exit(1)
