#!/usr/bin/env bash
# Tour, step 1: audit the bundled ECLeKTic sample (39 questions in 12 languages) against the
# bundled demo corpus. No network: the demo index is built into $AUDIT_CACHE_DIR on first use.
# Run it from an empty directory; it writes the audit file there.
# expects: items: seen_in_source_only: 39
# expects: 468 variants: 39 seen, 429 unseen, 0 unknown
# writes: eclektic_sample.demo.audit.jsonl
set -euo pipefail

# The sample ships inside the package, so this works from any directory.
sample=$(python -c 'from importlib import resources; print(resources.files("audit") / "data/demo/eclektic_sample.csv.gz")')
cp "$sample" eclektic_sample.csv.gz

# Prints what it read, then the seen rate per language; --no-report skips the HTML report.
audit check eclektic_sample.csv.gz --corpus demo --no-report

# The audit file is JSON Lines: a manifest, then one record per (item, language) with its tag.
python - <<'PY'
import collections
import json

with open("eclektic_sample.demo.audit.jsonl", encoding="utf-8") as handle:
    manifest = json.loads(next(handle))
    records = [json.loads(line) for line in handle]
tags = collections.Counter(record["exposure"] for record in records)
print(f"{len(records)} variants: {tags['seen']} seen, {tags['unseen']} unseen, {tags['unknown']} unknown")
first = records[0]
print(f"item {first['item_id']} in {first['lang']}: {first['exposure']}, decided by {first['decided_by'][0]['signal']} on {first['decided_by'][0]['source']}")
PY
