"""The manifest of a finished sharded build, from its shards' records in order.

A sharded index's fingerprint is blake2b-128 over its shards' fingerprints in order (each the
blake2b-128 of the shard's texts and metadata), so it differs from the plain build's
fingerprint of the same input, which hashes all texts and metadata in one pass."""
from __future__ import annotations

import hashlib
from pathlib import Path

from audit import __version__
from audit.index.build import source_info
from audit.index.doclangs import summary
from audit.index.format import MANIFEST_VERSION, FileInfo, IndexManifest, file_order
from audit.index.langtable import TableBuilder, write_languages
from audit.index.sharded.plan import ShardPlan
from audit.index.sharded.records import ShardRecord
from audit.timestamps import utc_timestamp


def _assemble_languages(staging: Path, records: list[ShardRecord]) -> tuple[list[FileInfo], dict]:
    """The shards' language tables concatenated in shard order (global document order), written
    into the staging directory: their file records and the manifest's summary."""
    languages = TableBuilder()
    for record in records:
        languages.extend(TableBuilder.from_part(record.languages))
    table = languages.table()
    return write_languages(staging, table), summary(table)


def assemble(plan: ShardPlan, records: list[ShardRecord], executor: str, seconds: float, staging: Path) -> IndexManifest:
    """The manifest of a finished sharded build, from its shards' records in order; the
    language table is written beside the shards."""
    language_files, languages = _assemble_languages(staging, records)
    sources = [source_info(s.name, s.format, plan.options) for s in plan.sources]
    for record in records:
        for count in record.sources:
            sources[count.source].documents += count.documents
            sources[count.source].skipped_blank_lines += count.skipped_blank_lines
    shards = [record.shard for record in records]
    fingerprint = hashlib.blake2b(b"".join(bytes.fromhex(s.fingerprint) for s in shards), digest_size=16).hexdigest()
    return IndexManifest(
        format="infini-gram",
        version=4,
        manifest_version=MANIFEST_VERSION,
        token_dtype="u8",
        normalization=plan.options.normalization,
        shards=shards,
        sources=sources,
        documents=sum(s.documents for s in shards),
        bytes=sum(s.bytes for s in shards),
        fingerprint=fingerprint,
        created=utc_timestamp(),
        tool=f"corpus-audit {__version__}",
        build_seconds=round(seconds, 3),
        code=plan.code,
        extra={"build": {"shards": len(shards), "executor": executor}, "languages": languages},
        files=sorted([*(f for record in records for f in record.files), *language_files], key=file_order),
    )
