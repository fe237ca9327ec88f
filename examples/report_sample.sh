#!/usr/bin/env bash
# Tour, step 4: score a model's answers on the sample and split the scores by measured exposure.
# To run quickly it keeps the sample's English and German rows only. The "model" here answers
# every English question right and, in German, only the questions with an even id (19 of 39):
# a made-up run whose transfer score is known, 19/39.
# Run it from an empty directory; it audits the two-language sample first.
# expects: overall success 0\.487 \[0\.\d+, 0\.\d+\], transfer 0\.487
# expects: transfer score: 0\.487 over 39 pairs
# writes: answers.report/report.html
set -euo pipefail

sample=$(python -c 'from importlib import resources; print(resources.files("audit") / "data/demo/eclektic_sample.csv.gz")')

# The English and German rows of the sample, still in ECLeKTic's CSV layout; and one answer per
# item and language, with a judgment in `correct` (so the report's --method is `given`).
python - "$sample" <<'PY'
import csv
import gzip
import json
import sys

with gzip.open(sys.argv[1], "rt", encoding="utf-8-sig") as handle:
    reader = csv.DictReader(handle)
    rows = [row for row in reader if row["language"] in ("en", "de")]
with open("sample_en_de.csv", "w", encoding="utf-8", newline="") as out:
    writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
    writer.writeheader()
    writer.writerows(rows)
with open("answers.jsonl", "w", encoding="utf-8") as out:
    for row in rows:
        right = row["language"] == row["original_lang"] or int(row["q_id"]) % 2 == 0
        answer = {"item_id": row["q_id"], "lang": row["language"], "prediction": row["answer"] if right else "", "correct": right}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
PY

audit check sample_en_de.csv --corpus demo --no-report > /dev/null

# Writes report.json, report.md, report.html and a provenance page per item, and prints the
# scores with their 95% bootstrap intervals.
audit report --audit sample_en_de.demo.audit.jsonl --predictions answers.jsonl --out answers.report

python - <<'PY'
import json

with open("answers.report/report.json", encoding="utf-8") as handle:
    report = json.load(handle)
transfer = report["evaluation"]["total"]["transfer_score"]
print(f"transfer score: {transfer['value']:.3f} over {transfer['n']} pairs")
PY
