"""The manifest of a finished sharded build, from its shards' records in order.

A sharded index's fingerprint is blake2b-128 over its shards' fingerprints in order (each the
blake2b-128 of the shard's texts and metadata), so it differs from the plain build's
fingerprint of the same input, which hashes all texts and metadata in one pass."""
from __future__ import annotations

import hashlib
from pathlib import Path

from audit.index.build import source_info
from audit.index.doclangs import summary
from audit.index.format import FileInfo, IndexManifest, file_order
from audit.index.langtable import TableBuilder, write_languages
from audit.index.sharded.plan import ShardPlan
from audit.index.sharded.records import ShardRecord


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
    return IndexManifest.built(
        normalization=plan.options.normalization,
        shards=shards,
        sources=sources,
        fingerprint=fingerprint,
        seconds=seconds,
        code=plan.code,
        extra={"build": {"shards": len(shards), "executor": executor}, "languages": languages},
        files=sorted([*(f for record in records for f in record.files), *language_files], key=file_order),
    )
