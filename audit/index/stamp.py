"""The code stamp an index's manifest records: a hash of the tool's version, the language
identifier and the modules that decide an index's bytes, so an index or cache built by other
code is noticed (and re-verified) even when the version number did not change."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from audit import __version__
from audit.langid import identifier

# The modules whose code decides the bytes of an index (its language table included), named from
# the package's directory; their hash, with the language identifier's version, is the `code`.
BUILD_CODE = (
    "index/build.py", "index/format.py", "index/shardwriter.py", "index/corpusread.py", "index/documents.py",
    "text.py", "langid.py", "index/langtable.py", "index/doclangs.py",
)


def code_fingerprint() -> str:
    """The stamp of the code running now (see the module's docstring)."""
    digest = hashlib.blake2b(__version__.encode(), digest_size=8)
    digest.update(json.dumps(identifier(), sort_keys=True).encode())
    for name in BUILD_CODE:
        source = Path(__file__).parents[1] / name
        digest.update(source.read_bytes() if source.exists() else name.encode())
    return digest.hexdigest()
