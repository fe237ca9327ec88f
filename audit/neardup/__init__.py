"""The near-duplicate index: MinHash signatures of overlapping windows of every document of a
local index, banded for LSH, so that a benchmark field that was lightly edited, re-punctuated,
reordered or partly copied is still found where exact n-gram matching misses it.

Why it is built this way (the figures are measured by `tests/test_minhash.py` and
`bench/bench_minhash.py`, and written up in the README):

* **Shingles follow the script.**  Text is normalised as the n-gram signal queries it
  (`audit.text.normalize`), then cut into tokens as `audit.text.units` cuts it: words in
  space-separated scripts, single characters in Han, Kana, Thai and the other unsegmented
  scripts.  Punctuation, symbols and spaces only separate tokens, and tokens are case-folded,
  so a copy with other punctuation, spacing or capitals has the same shingles.  A shingle is
  the k tokens starting at a token, k set by that token's script (`ShingleSizes`): 3 words, 3
  Han or Kana characters, 5 characters of the alphabetic unsegmented scripts.  Trigrams, not
  bigrams: with bigrams unrelated text reached containment 0.45 (function-word pairs, Japanese
  `されたのは何年ですか` templates); with trigrams it stays under the thresholds while one
  altered word in seven still leaves over half of a field's shingles.
* **Windows, not whole documents.**  Items are short and documents long: a 12-word question
  inside a 5,000-word article has Jaccard similarity 0.002 with it, far below what any MinHash
  of a practical size resolves, and LSH Ensemble's containment search over whole documents
  has the same limit (its partitions rescale the threshold, not the sketch's resolution), gives
  no position inside the document, and keeps every band in Python dictionaries.  So every
  document is cut into windows of `window` tokens every `stride` tokens (every token in
  `window / stride` windows), each stored with its document number and byte offset and length.
  A field longer than a window is queried as chunks of `window` tokens starting at every token,
  one of which lines up with an indexed window; a shorter one is queried whole.
* **Candidates, then the text itself.**  LSH with `bands` bands of `rows` rows makes a window
  a candidate with probability 1 - (1 - s^rows)^bands at Jaccard similarity s.  A short field
  inside a 32-token window has low Jaccard even when copied whole (9 shingles of 32: 0.28, less
  once edited), so the default (32 bands of 1 row over 32 permutations) rises early: 0.81 at
  s = 0.05, 0.97 at 0.1, 0.999 at 0.2.  Precision is not left to the sketch: candidates are
  ranked by their estimated Jaccard with the best chunk, and the best `candidates` of them are
  read back from the corpus and compared shingle by shingle.  The figures a policy rule reads
  are exact: the containment |Q ∩ S| / |Q| of the field's shingles Q in the best span S of the
  document of the field's own length, and their Jaccard |Q ∩ S| / |Q ∪ S|, a shingle counting
  only where its text is there (`audit.neardup.verify`): hashes propose, text decides.
* **Hash families never mix.**  `datasketch` is the reference: signatures are exactly
  `datasketch.MinHash(num_perm, seed, scheme="affine32")` of the 32-bit shingle hashes,
  computed for all windows at once from per-block minima.  `rensa` (Rust) sketches faster and
  is offered as `sketcher = "rensa"`.  The manifest records the family, its version and every
  parameter, and an index is refused to a query that expects another.

On disk, inside the index directory (`DIR/minhash/`): `windows.npy` (document, byte offset,
byte length and shingle count of each window), `signatures.npy` (windows x num_perm), and per
band the windows' band keys sorted (`bands.npy`) with the window each belongs to
(`band_windows.npy`), so a lookup is a binary search in a memory map and opening costs nothing.
`manifest.json` records the parameters, the hash family, the source index's fingerprint and
every file's size and blake2b hash; the index's own `audit-index.json` lists the files too, so
`audit index verify` hashes them.  The same bands can be loaded into Redis through datasketch's
public storage interface (`RedisBands`), to share one LSH between processes and machines; a
query asks either store (`BandStore`) the same way.

The package reads no corpus itself: the caller hands in the corpus (`source.Texts`, a local
index) that documents are read from, verified against and counted in.

The modules: `tokens` (tokens, shingles, build parameters), `family` (signatures and band
keys), `build` (`audit index minhash`), `store` (the files and their checks), `bands` (the
band store interface, memory-mapped), `redis_bands` (the bands in Redis), `index` (opening,
candidates), `verify` (the figures, from text), `rarity` (common shingles), `source` (what is
read from the corpus).
"""
from audit.neardup.bands import BandStore, MappedBands
from audit.neardup.build import add_neardup, sketch_documents
from audit.neardup.index import ESTIMATED, DocumentSet, NearDuplicateIndex, QueryResult, load_redis
from audit.neardup.redis_bands import RedisBands, redis_settings
from audit.neardup.source import Texts
from audit.neardup.store import (
    ARRAYS,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_NAME,
    NEARDUP_DIR,
    TOKENS_VERSION,
    WINDOW_DTYPE,
    NearDupError,
    NearDupManifest,
    ProgressHook,
    check_expected,
    manifest_digest,
)
from audit.neardup.tokens import SCRIPT_NAMES, NearDupParams, Shingled, ShingleSizes, Sketcher, Tokens, shingle_hashes, shingle_keys, shingle_text, tokenize
from audit.neardup.verify import FieldShingles, Match, field_shingles

__all__ = [
    "ARRAYS", "ESTIMATED", "FORMAT", "FORMAT_VERSION", "MANIFEST_NAME", "NEARDUP_DIR", "SCRIPT_NAMES", "TOKENS_VERSION", "WINDOW_DTYPE",
    "BandStore", "DocumentSet", "FieldShingles", "MappedBands", "Match", "NearDupError", "NearDupManifest", "NearDupParams", "NearDuplicateIndex", "ProgressHook", "QueryResult",
    "RedisBands", "ShingleSizes", "Shingled", "Sketcher", "Texts", "Tokens", "add_neardup", "check_expected", "field_shingles", "load_redis",
    "manifest_digest", "redis_settings", "shingle_hashes", "shingle_keys", "shingle_text", "sketch_documents", "tokenize",
]  # fmt: skip
