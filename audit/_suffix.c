/*
 * Suffix-array queries over an infini-gram index shard, in C because the signal layer asks
 * millions of them per benchmark and each is a binary search with byte comparisons.
 *
 * A shard is a byte string `data` (the `tokenized.N` file) and its suffix array `table`
 * (`table.N`): one little-endian pointer of `ratio` bytes per suffix, in lexicographic order,
 * a suffix that ends before another differs being the smaller one (libdivsufsort's order,
 * which is also infini-gram's).  Both are passed as read-only buffers (mmap objects), and the
 * GIL is released while searching so callers may search shards from several threads.
 *
 * The searches are spread over files that share `_suffix.h`; this one parses a shard, finds a
 * pattern's range, and holds the module's method table.
 */
#include "_suffix.h"

int parse_shard(PyObject *data_obj, PyObject *table_obj, int ratio, Py_buffer *data, Py_buffer *table, Shard *shard)
{
    if (ratio < 1 || ratio > 8) {
        PyErr_SetString(PyExc_ValueError, "ratio must be between 1 and 8");
        return -1;
    }
    if (PyObject_GetBuffer(data_obj, data, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(table_obj, table, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(data);
        return -1;
    }
    if (table->len != data->len * ratio) {
        PyBuffer_Release(data);
        PyBuffer_Release(table);
        PyErr_Format(PyExc_ValueError, "table has %zd bytes, expected %zd (data %zd x ratio %d)",
                     table->len, data->len * ratio, data->len, ratio);
        return -1;
    }
    shard->data = data->buf;
    shard->size = data->len;
    shard->table = table->buf;
    shard->count = data->len;
    shard->ratio = ratio;
    shard->keys = NULL;
    shard->samples = shard->key_step = 0;
    return 0;
}

/* The ranks [*lo, *hi) whose suffix starts with pattern[0:m]: two binary searches, the lower
 * bound's skipping the bytes both its ends share with the pattern, the upper bound's only between
 * the lower one (or past the last probe that started with the pattern) and the first probe
 * that sorted after it. */
void range_of(const Shard *s, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t *lo_out, Py_ssize_t *hi_out)
{
    Py_ssize_t lo = 0, hi = s->count, lcp_lo = 0, lcp_hi = 0, lcp;
    Py_ssize_t after = s->count, within = 0; /* the upper bound is in [within, after] */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        Py_ssize_t skip = lcp_lo < lcp_hi ? lcp_lo : lcp_hi;
        /* Both possible next probes' table entries travel while this one compares. */
        PREFETCH(s->table + (lo + (mid - lo) / 2) * s->ratio);
        PREFETCH(s->table + (mid + 1 + (hi - mid - 1) / 2) * s->ratio);
        int c = compare_prefix(s, mid, pattern, m, skip, &lcp);
        if (c < 0) {
            lo = mid + 1;
            lcp_lo = lcp;
        } else {
            if (c > 0 && mid < after)
                after = mid;
            if (c == 0 && mid + 1 > within)
                within = mid + 1;
            hi = mid;
            lcp_hi = lcp;
        }
    }
    *lo_out = lo;
    lo = within > lo ? within : lo;
    hi = after;
    lcp_lo = lcp_hi = 0;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        Py_ssize_t skip = lcp_lo < lcp_hi ? lcp_lo : lcp_hi;
        if (compare_prefix(s, mid, pattern, m, skip, &lcp) <= 0) {
            lo = mid + 1;
            lcp_lo = lcp;
        } else {
            hi = mid;
            lcp_hi = lcp;
        }
    }
    *hi_out = lo;
}

static PyObject *find_range(PyObject *self, PyObject *args)
{
    PyObject *data_obj, *table_obj;
    int ratio;
    Py_buffer data, table, pattern;
    Shard shard;
    if (!PyArg_ParseTuple(args, "OOiy*", &data_obj, &table_obj, &ratio, &pattern))
        return NULL;
    if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0) {
        PyBuffer_Release(&pattern);
        return NULL;
    }
    Py_ssize_t lo, hi;
    Py_BEGIN_ALLOW_THREADS
    range_of(&shard, pattern.buf, pattern.len, &lo, &hi);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&pattern);
    PyBuffer_Release(&data);
    PyBuffer_Release(&table);
    return Py_BuildValue("nn", lo, hi);
}

static PyMethodDef methods[] = {
    {"find_range", find_range, METH_VARARGS,
     "find_range(data, table, ratio, pattern) -> (lo, hi): suffix-array ranks whose suffix starts "
     "with pattern."},
    {"casing_counts", casing_counts, METH_VARARGS,
     "casing_counts(shards, surfaces) -> bytes of int64: per str of surfaces, the occurrences of "
     "it as written, lower-cased and capitalised (each distinct spelling once), summed over shards, "
     "a list of (data, table, ratio)."},
    {"shard_keys", shard_keys, METH_VARARGS,
     "shard_keys(data, table, ratio, step) -> bytes: the shard's sampled keys, every step-th suffix's, which longest_matches, "
     "longest_char_matches, longest_char_ranks and casing_counts take as a last argument (or "
     "shard tuple member) to narrow each search before reading the suffix array; the same answers."},
    {"longest_matches", longest_matches, METH_VARARGS,
     "longest_matches(data, table, ratio, query) -> bytes of int64: for each byte position l, "
     "the length of the longest prefix of query[l:] found in the shard."},
    {"longest_char_matches", longest_char_matches, METH_VARARGS,
     "longest_char_matches(data, table, ratio, query[, keys[, skip]]) -> bytes of int64: longest_matches at the "
     "positions where a UTF-8 character starts (every byte but 10xxxxxx), in order; with skip (a byte per "
     "character start), those whose byte is not 0 are not searched and answered 0."},
    {"longest_char_ranks", longest_char_ranks, METH_VARARGS,
     "longest_char_ranks(data, table, ratio, query) -> (lengths, ranks): longest_char_matches and, "
     "per character start, a rank whose suffix starts with the match (-1 where there is none)."},
    {"document_directory", document_directory, METH_VARARGS,
     "document_directory(offsets, size) -> bytes of int64: [shift, e_0 .. e_blocks], e_j the last "
     "document whose offset is at most j << shift; narrows any_allowed's and restricted_longest's "
     "lookup of a pointer's document."},
    {"block_verdicts", block_verdicts, METH_VARARGS,
     "block_verdicts(allowed, directory) -> bytes: per block of a document_directory, 1 when every "
     "document a pointer in it can be in is allowed, 0 when none is, 2 when some are (then the "
     "pointer's document is looked up); spares any_allowed and restricted_longest that lookup."},
    {"any_allowed", any_allowed, METH_VARARGS,
     "any_allowed(table, ratio, offsets, allowed, lo, hi, most[, directory, verdicts]) -> bool: whether a rank "
     "of [lo, hi) (every one, or `most` spread as numpy's linspace spreads them) points into a "
     "document whose `allowed` byte is set; offsets are int64, one per document."},
    {"sample_ranks", sample_ranks, METH_VARARGS,
     "sample_ranks(table, ratio, offsets, lo, hi, count) -> (documents, offsets): bytes of int64, "
     "the shard-local document and the byte offset in it of each distinct rank numpy's "
     "linspace(lo, hi - 1, count).round() picks."},
    {"restricted_longest", restricted_longest, METH_VARARGS,
     "restricted_longest(shards, query, upper, (first_look, scan_cap)) -> (low, high): "
     "bytes of int64, per character start, the longest match in allowed documents; shards are "
     "(data, table, ratio, offsets, allowed[, directory, lengths, ranks, verdicts]), upper the "
     "unrestricted lengths, lengths and ranks the shard's own (`longest_char_ranks`), verdicts "
     "block_verdicts(allowed, directory)."},
    {"held_starts", held_starts, METH_VARARGS,
     "held_starts(shards, query, upper) -> bytes, one per character start: 1 where the restricted "
     "longest match is known to be upper's without a search (upper is 0, a shard's own match of "
     "that length lies, at its rank, in an allowed document, or the previous start is held and "
     "upper follows from it); shards as restricted_longest's, each with its lengths and ranks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_suffix", NULL, -1, methods};

PyMODINIT_FUNC PyInit__suffix(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "KEY_BYTES", KEY_BYTES) < 0)
        Py_CLEAR(m);
    return m;
}
