"""The index layer: infini-gram suffix-array indexes built from corpus files, and the records that
describe them on disk.

`audit.index.build` writes an index in one pass, `audit.index.sharded` in shards built apart
and resumed; `audit.index.documents`, `audit.index.corpusread` and `audit.index.langtable` turn
corpus files into the stored documents and their languages.  The query side reads what these
write and imports nothing here but the on-disk format and the language table.
"""
