r"""Tour, step 6: serve the demo index over HTTP and audit the sample there, as a job.

`audit serve` answers the infini-gram API protocol over local indexes and runs audit jobs off the
request path: POST the benchmark to /jobs, poll /jobs/ID, download /jobs/ID/result. Run it from an
empty directory; the server keeps its jobs in ./jobs and this script saves the audit file here.

expects: job \S+: done
expects: "Bremerhaven" occurs \d+ times? in demo
expects: 78 records: 39 seen, 39 unseen, 0 unknown
writes: job.audit.jsonl
"""
from __future__ import annotations

import collections
import json
import subprocess
import time
from importlib import resources

import requests

SAMPLE = resources.files("audit") / "data/demo/eclektic_sample.csv.gz"


def start_server() -> tuple[subprocess.Popen[str], str]:
    """Start `audit serve` on a free port of 127.0.0.1 (`--port 0`) and wait for its address."""
    server = subprocess.Popen(["audit", "serve", "--index", "demo", "--port", "0", "--jobs-dir", "jobs"], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()  # "... listening on http://127.0.0.1:PORT"
    if "listening on" not in line:
        server.kill()
        raise SystemExit(f"audit serve did not start: {line!r}")
    return server, line.split("listening on ", 1)[1].strip()


def run_job(url: str) -> bytes:
    """Upload the sample as a job on the demo index, in English and German, and wait for it."""
    params = {"index": "demo", "langs": "en,de", "filename": "eclektic_sample.csv.gz"}
    job = requests.post(f"{url}/jobs", params=params, data=SAMPLE.read_bytes(), headers={"Content-Type": "application/octet-stream"}, timeout=60).json()
    while job["status"] in ("queued", "running"):
        time.sleep(0.5)
        job = requests.get(f"{url}/jobs/{job['id']}", timeout=60).json()
    print(f"job {job['id']}: {job['status']}")
    if job["status"] != "done":
        raise SystemExit(f"the job failed: {job.get('error')}")
    return requests.get(f"{url}/jobs/{job['id']}/result", timeout=60).content


def main() -> None:
    server, url = start_server()
    try:
        # The infini-gram protocol, as the public API answers it.
        count = requests.post(url + "/", json={"index": "demo", "query_type": "count", "query": "Bremerhaven"}, timeout=60).json()
        print(f'"Bremerhaven" occurs {count["count"]} times in demo')
        audit = run_job(url)
    finally:
        server.terminate()
        server.wait(timeout=60)
    with open("job.audit.jsonl", "wb") as out:
        out.write(audit)
    records = [json.loads(line) for line in audit.decode("utf-8").splitlines()[1:]]
    tags = collections.Counter(record["exposure"] for record in records)
    print(f"{len(records)} records: {tags['seen']} seen, {tags['unseen']} unseen, {tags['unknown']} unknown")


if __name__ == "__main__":
    main()
