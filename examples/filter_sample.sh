#!/usr/bin/env bash
# Tour, step 3: remove the leaky items from the audited sample, as before a release.
# Run it from an empty directory; it audits the sample first (as check_sample.sh does).
# expects: 39 items: removed 0 as leaky \(target-seen\), kept 39; 0 not audited
# expects: 39 items: removed 39 as leaky \(any-seen\), kept 0; 0 not audited
# expects: the clean benchmark holds 39 questions
# writes: eclektic_clean.csv.gz.manifest.json
set -euo pipefail

sample=$(python -c 'from importlib import resources; print(resources.files("audit") / "data/demo/eclektic_sample.csv.gz")')
cp "$sample" eclektic_sample.csv.gz
audit check eclektic_sample.csv.gz --corpus demo --no-report > /dev/null

# The default rule, target-seen, drops items seen in a language other than their source one.
# The demo corpus holds only the English sources, so nothing is dropped.
audit filter eclektic_sample.demo.audit.jsonl --out eclektic_clean.csv.gz

# any-seen also counts the source language: every item goes.
audit filter eclektic_sample.demo.audit.jsonl --out eclektic_unseen_only.csv.gz --rule any-seen

# The clean file is the input's own rows, in its own format (a gzipped CSV here).
python - <<'PY'
import csv
import gzip

with gzip.open("eclektic_clean.csv.gz", "rt", encoding="utf-8-sig") as handle:
    questions = {row["q_id"] for row in csv.DictReader(handle)}
print(f"the clean benchmark holds {len(questions)} questions")
PY
