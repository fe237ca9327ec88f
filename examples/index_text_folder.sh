#!/usr/bin/env bash
# Tour, step 5: index a small folder of plain-text notes and audit the sample against it.
# The notes hold the English source passages of five of the sample's questions, one passage a
# paragraph, so those five are `seen` in English and the other 34 `unseen`.
# Run it from an empty directory; it writes notes/, indexes/notes/ and the audit file there.
# expects: indexes/notes: 5 documents
# expects: items: seen_in_source_only: 5, unseen_everywhere: 34
# writes: indexes/notes/audit-index.json
set -euo pipefail

sample=$(python -c 'from importlib import resources; print(resources.files("audit") / "data/demo/eclektic_sample.csv.gz")')
cp "$sample" eclektic_sample.csv.gz

# Two text files; with --text-docs block every blank-line-separated paragraph is a document.
mkdir -p notes
python - <<'PY'
import csv
import gzip

with gzip.open("eclektic_sample.csv.gz", "rt", encoding="utf-8-sig") as handle:
    passages = [row["content"] for row in csv.DictReader(handle) if row["language"] == row["original_lang"]][:5]
with open("notes/kept.txt", "w", encoding="utf-8") as out:
    out.write("\n\n".join(passages[:3]) + "\n")
with open("notes/more.txt", "w", encoding="utf-8") as out:
    out.write("\n\n".join(passages[3:]) + "\n")
PY

# A byte-level suffix-array index (infini-gram's format) plus its near-duplicate index.
audit index build notes/*.txt --text-docs block --out indexes/notes

# An index directory is a corpus like any other.
audit check eclektic_sample.csv.gz --corpus indexes/notes --no-report
