"""One timestamp format for everything the tool writes (manifests, jobs), so they sort and
compare as strings."""
from __future__ import annotations

import time


def utc_timestamp() -> str:
    """Now, in UTC, to the second: 2026-11-23T09:30:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
