#!/usr/bin/env bash
# Tour, step 4: score a model's answers on the sample and split the scores by measured exposure.
# The "model" here answers every English question right and, in German, only the
# questions with an even id (19 of 39): a made-up run whose transfer score is known, 19/39.
# Run it from an empty directory; it audits the sample first, in English and German only.
# expects: overall success 0\.487 \[0\.\d+, 0\.\d+\], transfer 0\.487
# expects: transfer score: 0\.487 over 39 pairs
# writes: answers.report/report.html
set -euo pipefail

sample=$(python -c 'from importlib import resources; print(resources.files("audit") / "data/demo/eclektic_sample.csv.gz")')
cp "$sample" eclektic_sample.csv.gz
audit check eclektic_sample.csv.gz --corpus demo --langs en,de --no-report > /dev/null

# One prediction per item and language, with a judgment in `correct` (so --method is `given`).
python - <<'PY'
import csv
import gzip
import json

with gzip.open("eclektic_sample.csv.gz", "rt", encoding="utf-8-sig") as rows, open("answers.jsonl", "w", encoding="utf-8") as out:
    for row in csv.DictReader(rows):
        if row["language"] not in ("en", "de"):
            continue
        right = row["language"] == row["original_lang"] or int(row["q_id"]) % 2 == 0
        answer = {"item_id": row["q_id"], "lang": row["language"], "prediction": row["answer"] if right else "", "correct": right}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
PY

# Writes report.json, report.md, report.html and a provenance page per item, and prints the
# scores with their 95% bootstrap intervals.
audit report --audit eclektic_sample.demo.audit.jsonl --predictions answers.jsonl --out answers.report

python - <<'PY'
import json

with open("answers.report/report.json", encoding="utf-8") as handle:
    report = json.load(handle)
transfer = report["evaluation"]["total"]["transfer_score"]
print(f"transfer score: {transfer['value']:.3f} over {transfer['n']} pairs")
PY
