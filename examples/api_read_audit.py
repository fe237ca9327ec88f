"""Read an audit from Python: one row per (item, language) in a pandas table, and the share
of each language's variants the corpus has seen.

    python examples/api_read_audit.py [AUDIT]

Without an argument it first audits the bundled ECLeKTic sample against the bundled demo
corpus in English, French and Japanese (`audit check`, about a minute), writing
`sample.audit.jsonl` into the current directory.
"""
# expects: 117 records, 39 items, languages en, fr, ja
# expects: ^en\s+1\.0$
# writes: sample.audit.jsonl
from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import audit

SAMPLE = resources.files("audit") / "data" / "demo" / "eclektic_sample.csv.gz"


def sample_audit(out: Path) -> Path:
    """The sample's audit, checked by the `audit` command installed beside this Python."""
    command = Path(sys.executable).parent / "audit"
    subprocess.run([str(command), "check", str(SAMPLE), "--corpus", "demo", "--langs", "en,fr,ja", "--out", str(out), "--no-report"], check=True)
    return out


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else sample_audit(Path("sample.audit.jsonl"))
    result = audit.read(path)  # checked as every command checks it: a damaged file is refused
    print(f"{path}: {len(result)} records, {result.manifest.benchmark.items} items, languages {', '.join(result.languages)}")

    frame = result.to_pandas()
    print(frame[["item_id", "lang", "exposure", "ngram.demo.context.coverage", "minhash.demo.context.containment"]].head(6).to_string(index=False))

    decided = frame[frame.exposure != "unknown"]
    seen_rate = decided.groupby("lang")["exposure"].apply(lambda tags: (tags == "seen").mean()).rename("seen_rate")
    print(seen_rate.to_string())

    # Which checks made the target variants seen, if any did
    targets = frame[(frame.role == "target") & (frame.exposure == "seen")]
    print(f"{len(targets)} target variant(s) seen" + "".join(f"\n  {row.item_id}/{row.lang}: {row.decided_by}" for row in targets.itertuples()))


if __name__ == "__main__":
    main()
