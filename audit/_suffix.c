/*
 * Suffix-array queries over an infini-gram index shard, in C because the signal layer asks
 * millions of them per benchmark and each is a binary search with byte comparisons.
 *
 * A shard is a byte string `data` (the `tokenized.N` file) and its suffix array `table`
 * (`table.N`): one little-endian pointer of `ratio` bytes per suffix, in lexicographic order,
 * a suffix that ends before another differs being the smaller one (libdivsufsort's order,
 * which is also infini-gram's).  Both are passed as read-only buffers (mmap objects), and the
 * GIL is released while searching so callers may search shards from several threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

/* Prefetch hints; no-ops where the compiler has none. */
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch((address), 0, 1)
#else
#define PREFETCH(address) ((void)(address))
#endif

typedef struct {
    const uint8_t *data;
    Py_ssize_t size;
    const uint8_t *table;
    Py_ssize_t count;
    int ratio;
} Shard;

static inline Py_ssize_t pointer_at(const Shard *s, Py_ssize_t rank)
{
    const uint8_t *p = s->table + rank * s->ratio;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (s->ratio == 4) { /* a shard under 4 GiB: one load instead of four */
        uint32_t word;
        memcpy(&word, p, sizeof(word));
        return (Py_ssize_t)word;
    }
#endif
    uint64_t value = 0;
    for (int i = s->ratio - 1; i >= 0; i--)
        value = (value << 8) | p[i];
    return (Py_ssize_t)value;
}

/* Compare the suffix starting at byte `start` (`compare_prefix`: at `rank`) with pattern[0:m],
 * skipping the `skip` bytes already known equal.  Returns <0, 0 or >0 as the suffix's first m
 * bytes sort before, equal or after the pattern, and stores the length of their common prefix
 * in *lcp. */
static inline int compare_at(const Shard *s, Py_ssize_t start, const uint8_t *pattern, Py_ssize_t m,
                             Py_ssize_t skip, Py_ssize_t *lcp)
{
    Py_ssize_t available = s->size - start;
    Py_ssize_t limit = available < m ? available : m;
    const uint8_t *suffix = s->data + start;
    Py_ssize_t i = skip;
    while (i < limit && suffix[i] == pattern[i])
        i++;
    *lcp = i;
    if (i == m)
        return 0;
    if (i == available)
        return -1;
    return suffix[i] < pattern[i] ? -1 : 1;
}

static inline int compare_prefix(const Shard *s, Py_ssize_t rank, const uint8_t *pattern,
                                 Py_ssize_t m, Py_ssize_t skip, Py_ssize_t *lcp)
{
    return compare_at(s, pointer_at(s, rank), pattern, m, skip, lcp);
}

static int parse_shard(PyObject *data_obj, PyObject *table_obj, int ratio, Py_buffer *data,
                       Py_buffer *table, Shard *shard)
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
    return 0;
}

/* The ranks [*lo, *hi) whose suffix starts with pattern[0:m]: two binary searches, the lower
 * bound's skipping the bytes both its ends share with the pattern, the upper bound's only between
 * the lower one (or past the last probe that started with the pattern) and the first probe
 * that sorted after it. */
static void range_of(const Shard *s, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t *lo_out, Py_ssize_t *hi_out)
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

/* The longest-match searches run in lockstep, LANES at a time.  Each step of a binary search
 * reads the table then the data at unpredictable places (two cache misses), so a lane asks the
 * memory for what its next step reads (`__builtin_prefetch`) and yields to the other lanes,
 * which hide the latency.  A lane's search is the lower bound of `range_of` step for step, so it
 * ends at the same rank with the same common prefixes. */
#define LANES 32

typedef struct {
    const uint8_t *pattern;
    Py_ssize_t m, lo, hi, lcp_lo, lcp_hi, mid, start, slot;
    int stage; /* 0: idle; 1: its probe's table entry was prefetched; 2: its suffix bytes were */
} Lane;

/* Choose the lane's next probe and prefetch its table entry; 0 when its search is over: the
 * suffixes either side of the insertion point (ranks lo - 1 and lo) are then the only ones
 * that can share the longest prefix with the pattern, and lcp_lo, lcp_hi hold theirs. */
static inline int lane_probe(Lane *lane, const Shard *s)
{
    if (lane->lo >= lane->hi)
        return 0;
    lane->mid = lane->lo + (lane->hi - lane->lo) / 2;
    PREFETCH(s->table + lane->mid * s->ratio);
    lane->stage = 1;
    return 1;
}

/* The answers for `count` start positions of query q (n bytes): lengths[k] is the length of
 * the longest prefix of q[positions[k]:] found in the shard, each 0 <= positions[k] < n, and
 * (unless `ranks` is NULL) ranks[k] a rank whose suffix starts with that prefix (-1 for none):
 * the language-restricted search finds each shorter prefix's range around it. */
static void longest_at(const Shard *s, const uint8_t *q, Py_ssize_t n, const Py_ssize_t *positions,
                       Py_ssize_t count, int64_t *lengths, int64_t *ranks)
{
    Lane lanes[LANES];
    Py_ssize_t next = 0, busy = 0;
    for (int j = 0; j < LANES; j++)
        lanes[j].stage = 0;
    for (;;) {
        for (int j = 0; j < LANES; j++) {
            Lane *lane = &lanes[j];
            if (lane->stage == 0) {
                /* Idle: take the next position, if any is left. */
                while (next < count) {
                    lane->pattern = q + positions[next];
                    lane->m = n - positions[next];
                    lane->lo = 0;
                    lane->hi = s->count;
                    lane->lcp_lo = lane->lcp_hi = 0;
                    lane->slot = next++;
                    if (lane_probe(lane, s)) {
                        busy++;
                        break;
                    }
                    lengths[lane->slot] = 0; /* an empty shard */
                    if (ranks != NULL)
                        ranks[lane->slot] = -1;
                }
            } else if (lane->stage == 1) {
                /* The table entry has arrived: fetch the first suffix byte not known equal. */
                Py_ssize_t skip = lane->lcp_lo < lane->lcp_hi ? lane->lcp_lo : lane->lcp_hi;
                lane->start = pointer_at(s, lane->mid);
                PREFETCH(s->data + lane->start + skip);
                lane->stage = 2;
            } else {
                Py_ssize_t skip = lane->lcp_lo < lane->lcp_hi ? lane->lcp_lo : lane->lcp_hi, lcp;
                if (compare_at(s, lane->start, lane->pattern, lane->m, skip, &lcp) < 0) {
                    lane->lo = lane->mid + 1;
                    lane->lcp_lo = lcp;
                } else {
                    lane->hi = lane->mid;
                    lane->lcp_hi = lcp;
                }
                if (!lane_probe(lane, s)) {
                    /* Rank lo - 1 was the last probe below, rank lo the last at or above. */
                    int below = lane->lcp_lo > lane->lcp_hi;
                    Py_ssize_t length = below ? lane->lcp_lo : lane->lcp_hi;
                    lengths[lane->slot] = length;
                    if (ranks != NULL)
                        ranks[lane->slot] = length == 0 ? -1 : below ? lane->lo - 1 : lane->lo;
                    lane->stage = 0;
                    busy--;
                    j--; /* refill this lane at once */
                }
            }
        }
        if (busy == 0 && next >= count)
            break;
    }
}

/* Parse (data, table, ratio, query) and run `longest_at` over the positions `choose` picks:
 * the bytes of int64 it returns hold one length per position picked; with `with_ranks`, a
 * tuple of those and the bytes of the ranks. */
static PyObject *longest_over(PyObject *args, Py_ssize_t (*choose)(const uint8_t *, Py_ssize_t, Py_ssize_t *), int with_ranks)
{
    PyObject *data_obj, *table_obj;
    int ratio;
    Py_buffer data, table, query;
    Shard shard;
    if (!PyArg_ParseTuple(args, "OOiy*", &data_obj, &table_obj, &ratio, &query))
        return NULL;
    if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0) {
        PyBuffer_Release(&query);
        return NULL;
    }
    Py_ssize_t n = query.len, count = 0;
    PyObject *result = NULL, *found = NULL;
    Py_ssize_t *positions = PyMem_Malloc((n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (positions == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    count = choose(query.buf, n, positions);
    result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    found = with_ranks ? PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t)) : NULL;
    if (result != NULL && (found != NULL || !with_ranks)) {
        int64_t *lengths = (int64_t *)PyBytes_AS_STRING(result);
        int64_t *ranks = with_ranks ? (int64_t *)PyBytes_AS_STRING(found) : NULL;
        const uint8_t *q = query.buf;
        Py_BEGIN_ALLOW_THREADS
        longest_at(&shard, q, n, positions, count, lengths, ranks);
        Py_END_ALLOW_THREADS
        if (with_ranks) {
            PyObject *pair = PyTuple_Pack(2, result, found);
            Py_SETREF(result, pair);
        }
    } else
        Py_CLEAR(result);
    Py_XDECREF(found);
    PyMem_Free(positions);
done:
    PyBuffer_Release(&query);
    PyBuffer_Release(&data);
    PyBuffer_Release(&table);
    return result;
}

/* Every byte position of the query. */
static Py_ssize_t every_byte(const uint8_t *q, Py_ssize_t n, Py_ssize_t *positions)
{
    for (Py_ssize_t l = 0; l < n; l++)
        positions[l] = l;
    return n;
}

/* The byte positions where a UTF-8 character starts: every byte but a continuation byte
 * (10xxxxxx), so a stray continuation byte is skipped and any other invalid byte counts. */
static Py_ssize_t character_starts(const uint8_t *q, Py_ssize_t n, Py_ssize_t *positions)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t l = 0; l < n; l++)
        if ((q[l] & 0xC0) != 0x80)
            positions[count++] = l;
    return count;
}

/* For every start position l of the query, the length of the longest prefix of query[l:] that
 * occurs in the shard.  The suffix sharing the longest prefix with query[l:] sits next to the
 * insertion point of query[l:] in the suffix array, so one binary search per position suffices. */
static PyObject *longest_matches(PyObject *self, PyObject *args)
{
    return longest_over(args, every_byte, 0);
}

/* `longest_matches` at character starts only: the figures are per character, and a match
 * starting inside a character is never read. */
static PyObject *longest_char_matches(PyObject *self, PyObject *args)
{
    return longest_over(args, character_starts, 0);
}

/* `longest_char_matches` and, per character start, a rank whose suffix starts with the match. */
static PyObject *longest_char_ranks(PyObject *self, PyObject *args)
{
    return longest_over(args, character_starts, 1);
}

/* A shard's documents as a pointer is looked up in them: their offsets, and optionally a
 * directory (`document_directory`) narrowing each lookup to the documents of one block. */
typedef struct {
    const int64_t *offsets;
    Py_ssize_t documents;
    const int64_t *directory; /* NULL: search every offset */
    int shift;
    Py_ssize_t blocks;
} Documents;

/* The directory's block size, 2^shift bytes: about as many blocks as documents, so the
 * directory is no larger than the offsets. */
static int directory_shift(Py_ssize_t size, Py_ssize_t documents)
{
    int shift = 0;
    while (shift < 48 && (size >> shift) > documents)
        shift++;
    return shift;
}

/* The document a pointer is in: the last whose offset is at most the pointer
 * (`searchsorted(..., "right") - 1`, -1 being the last document as numpy indexes it), halving
 * without branches (a conditional move per step: which half holds it is unpredictable), over
 * the documents of the pointer's block where there is a directory. */
static inline Py_ssize_t document_of(const Documents *d, int64_t pointer)
{
    Py_ssize_t first = 0, last = d->documents - 1;
    if (d->directory != NULL && pointer >= 0 && (pointer >> d->shift) < d->blocks) {
        Py_ssize_t block = (Py_ssize_t)(pointer >> d->shift);
        first = d->directory[block] > 0 ? d->directory[block] : 0;
        last = d->directory[block + 1] > 0 ? d->directory[block + 1] : 0;
    }
    const int64_t *base = d->offsets + first;
    Py_ssize_t left = last - first + 1;
    while (left > 1) {
        Py_ssize_t half = left / 2;
        base = base[half] <= pointer ? base + half : base;
        left -= half;
    }
    return base[0] <= pointer ? base - d->offsets : d->documents - 1;
}

/* For a shard of `size` bytes and its documents' offsets: int64 [shift, e_0, ..., e_blocks],
 * e_j the last document whose offset is at most j * 2^shift (-1: none), blocks = size >> shift
 * plus one.  A pointer in block j is then in a document from e_j to e_{j+1}. */
static PyObject *document_directory(PyObject *self, PyObject *args)
{
    Py_buffer offsets;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*n", &offsets, &size))
        return NULL;
    Py_ssize_t documents = offsets.len / (Py_ssize_t)sizeof(int64_t);
    if (offsets.len % (Py_ssize_t)sizeof(int64_t) || documents == 0 || size < 0) {
        PyBuffer_Release(&offsets);
        PyErr_SetString(PyExc_ValueError, "document_directory: offsets must be int64 and not empty, size not negative");
        return NULL;
    }
    int shift = directory_shift(size, documents);
    Py_ssize_t blocks = (size >> shift) + 1;
    PyObject *result = PyBytes_FromStringAndSize(NULL, (blocks + 2) * (Py_ssize_t)sizeof(int64_t));
    if (result != NULL) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
        const int64_t *at = offsets.buf;
        Py_ssize_t document = -1;
        out[0] = shift;
        for (Py_ssize_t j = 0; j <= blocks; j++) {
            int64_t start = (int64_t)j << shift;
            while (document + 1 < documents && at[document + 1] <= start)
                document++;
            out[j + 1] = document;
        }
    }
    PyBuffer_Release(&offsets);
    return result;
}

/* Read a `document_directory` into `d` (None: none); -1 with an exception when it does not
 * fit a shard of `size` bytes and `d->documents` documents. */
static int parse_directory(PyObject *obj, Py_ssize_t size, Py_buffer *view, Documents *d)
{
    d->directory = NULL;
    if (obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    const int64_t *words = view->buf;
    int shift = directory_shift(size, d->documents);
    Py_ssize_t blocks = (size >> shift) + 1;
    if (view->len != (blocks + 2) * (Py_ssize_t)sizeof(int64_t) || words[0] != shift) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "the document directory is not this shard's");
        return -1;
    }
    d->directory = words + 1;
    d->shift = shift;
    d->blocks = blocks;
    return 1;
}

/* The k-th of `picks` ranks spread evenly over [lo, hi), exactly as numpy's
 * `linspace(lo, hi - 1, picks).round()` picks it (a product and a sum, each rounded, the last
 * rank hi - 1, halves to even), so sampled answers are the same as numpy's. */
static inline Py_ssize_t spread_rank(Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t picks, Py_ssize_t k)
{
    double first = (double)lo, step = picks > 1 ? ((double)(hi - 1) - first) / (double)(picks - 1) : 0.0;
    volatile double scaled = (double)k * step; /* rounded before the sum, as numpy does */
    return k == picks - 1 && picks > 1 ? hi - 1 : (Py_ssize_t)nearbyint(scaled + first);
}

/* Whether a rank of [lo, hi) points into a document `allowed` marks (`audit.corpora.inlanguage`):
 * every rank when the range holds at most `most`, else `most` ranks `spread_rank` picks. */
static int any_allowed_in(const uint8_t *table, int ratio, const Documents *d, const uint8_t *allowed,
                          Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t most)
{
    Py_ssize_t picks = hi - lo <= most ? hi - lo : most;
    Shard s = {NULL, 0, table, 0, ratio};
    for (Py_ssize_t k = 0; k < picks; k++) {
        Py_ssize_t rank = hi - lo > most ? spread_rank(lo, hi, picks, k) : lo + k;
        if (allowed[document_of(d, (int64_t)pointer_at(&s, rank))])
            return 1;
    }
    return 0;
}

static PyObject *any_allowed(PyObject *self, PyObject *args)
{
    Py_buffer table, offsets, allowed, view;
    PyObject *directory = Py_None;
    int ratio;
    Py_ssize_t lo, hi, most;
    if (!PyArg_ParseTuple(args, "y*iy*y*nnn|O", &table, &ratio, &offsets, &allowed, &lo, &hi, &most, &directory))
        return NULL;
    Documents d = {offsets.buf, offsets.len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    int found = 0, bad = 0, held = 0;
    if (ratio < 1 || ratio > 8 || table.len % ratio || offsets.len % (Py_ssize_t)sizeof(int64_t) || allowed.len != d.documents ||
        d.documents == 0 || lo < 0 || hi > table.len / ratio || most < 1)
        bad = 1;
    else if ((held = parse_directory(directory, table.len / ratio, &view, &d)) < 0)
        bad = 2;
    else if (lo < hi) {
        Py_BEGIN_ALLOW_THREADS
        found = any_allowed_in(table.buf, ratio, &d, allowed.buf, lo, hi, most);
        Py_END_ALLOW_THREADS
    }
    if (held > 0)
        PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&allowed);
    if (bad == 1)
        PyErr_SetString(PyExc_ValueError, "any_allowed: ratio, table, offsets, mask or ranks out of range");
    if (bad)
        return NULL;
    return PyBool_FromLong(found);
}

/* The documents and in-document byte offsets of `count` ranks `spread_rank` picks over [lo, hi)
 * (each distinct rank once, in rank order): a field's sample of where a text occurs, asked of
 * every field, so one call per shard instead of numpy's several on a few hundred ranks. */
static PyObject *sample_ranks(PyObject *self, PyObject *args)
{
    Py_buffer table, offsets;
    int ratio;
    Py_ssize_t lo, hi, count;
    if (!PyArg_ParseTuple(args, "y*iy*nnn", &table, &ratio, &offsets, &lo, &hi, &count))
        return NULL;
    Documents d = {offsets.buf, offsets.len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    PyObject *documents = NULL, *within = NULL, *result = NULL;
    if (ratio < 1 || ratio > 8 || table.len % ratio || offsets.len % (Py_ssize_t)sizeof(int64_t) || d.documents == 0 || lo < 0 ||
        hi > table.len / ratio || lo >= hi || count < 1) {
        PyErr_SetString(PyExc_ValueError, "sample_ranks: ratio, table, offsets, ranks or count out of range");
        goto done;
    }
    if ((documents = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t))) == NULL ||
        (within = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t))) == NULL)
        goto done;
    int64_t *doc = (int64_t *)PyBytes_AS_STRING(documents), *off = (int64_t *)PyBytes_AS_STRING(within);
    Shard s = {NULL, 0, table.buf, 0, ratio};
    Py_ssize_t kept = 0, previous = -1;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t rank = spread_rank(lo, hi, count, k);
        if (rank == previous)
            continue;
        int64_t pointer = (int64_t)pointer_at(&s, rank);
        Py_ssize_t document = document_of(&d, pointer);
        doc[kept] = document;
        off[kept++] = pointer - d.offsets[document] - 1;
        previous = rank;
    }
    if (_PyBytes_Resize(&documents, kept * (Py_ssize_t)sizeof(int64_t)) == 0 && _PyBytes_Resize(&within, kept * (Py_ssize_t)sizeof(int64_t)) == 0)
        result = PyTuple_Pack(2, documents, within);
done:
    Py_XDECREF(documents);
    Py_XDECREF(within);
    PyBuffer_Release(&table);
    PyBuffer_Release(&offsets);
    return result;
}

/* One shard as the language-restricted search reads it: its suffix array, its documents and
 * whether each is allowed, and optionally its own unrestricted answer per character start
 * (`longest_char_ranks`: a length and a rank whose suffix starts with that many bytes), from
 * which each shorter prefix's range is found around that rank. */
typedef struct {
    Shard shard;
    Documents documents;
    const uint8_t *allowed;
    const int64_t *lengths, *ranks; /* NULL: search each range from scratch */
    Py_buffer views[7];
    int held;
} Restricted;

/* The ranks [*lo_out, *hi_out) whose suffix starts with pattern[0:m], given a rank r whose
 * suffix does: they are the run of ranks around r, found by doubling steps out from r, then
 * halving between the last step that matched and the first that did not (every suffix between
 * two ranks shares with the pattern at least the lesser of their common prefixes, so those
 * bytes are skipped).  Near r the table is read in order: for the long prefixes a restricted
 * search mostly asks about, a few comparisons instead of two whole binary searches. */
static void range_around(const Shard *s, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t r, Py_ssize_t *lo_out, Py_ssize_t *hi_out)
{
    for (int side = 0; side < 2; side++) {
        int direction = side == 0 ? -1 : 1;
        Py_ssize_t inside = r, outside = side == 0 ? -1 : s->count, step = 1, lcp, lcp_out = 0;
        for (;;) {
            Py_ssize_t x = r + direction * step;
            if (x < 0 || x >= s->count)
                break;
            if (compare_prefix(s, x, pattern, m, 0, &lcp) == 0) {
                inside = x;
                step <<= 1;
                continue;
            }
            outside = x;
            lcp_out = lcp;
            break;
        }
        /* The boundary lies between `inside` (matches) and `outside` (does not, or is past the
         * table's end). */
        while (inside - outside > 1 || outside - inside > 1) {
            Py_ssize_t mid = inside + (outside - inside) / 2;
            if (compare_prefix(s, mid, pattern, m, lcp_out, &lcp) == 0)
                inside = mid;
            else {
                outside = mid;
                lcp_out = lcp;
            }
        }
        if (side == 0)
            *lo_out = inside;
        else
            *hi_out = inside + 1;
    }
}

/* How `holds` reads a range: ranks read whole up to `few`, else `first_look` then `scan_cap`
 * ranks sampled. */
typedef struct {
    Py_ssize_t few, first_look, scan_cap;
} Reading;

/* Whether an allowed document holds pattern[0:m], the prefix asked at character start `at`:
 * 1, 0, or -1 when a sampled range found none (a sampled answer cannot tell absence from what
 * the sample missed).  A shard whose own longest match there is shorter than m holds none. */
static int holds(const Restricted *shards, Py_ssize_t count, const Reading *r, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t at)
{
    int open = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        const Restricted *s = &shards[k];
        Py_ssize_t lo, hi;
        if (s->lengths == NULL)
            range_of(&s->shard, pattern, m, &lo, &hi);
        else if (s->lengths[at] < m)
            continue;
        else
            range_around(&s->shard, pattern, m, (Py_ssize_t)s->ranks[at], &lo, &hi);
        Py_ssize_t width = hi - lo;
        if (width <= 0)
            continue;
        const uint8_t *table = s->shard.table;
        int ratio = s->shard.ratio;
        if (width <= r->few) {
            if (any_allowed_in(table, ratio, &s->documents, s->allowed, lo, hi, r->few))
                return 1;
            continue;
        }
        if (any_allowed_in(table, ratio, &s->documents, s->allowed, lo, hi, r->first_look))
            return 1;
        if (width <= r->first_look)
            continue;
        if (any_allowed_in(table, ratio, &s->documents, s->allowed, lo, hi, r->scan_cap))
            return 1;
        if (width > r->scan_cap)
            open = 1;
    }
    return open ? -1 : 0;
}

/* The largest n in [floor, top] an allowed document holds (floor is known to), trying top
 * first, then halving; *open is set when a check above the answer stayed open. */
static Py_ssize_t restricted_search(const Restricted *shards, Py_ssize_t count, const Reading *r, const uint8_t *pattern,
                                    Py_ssize_t floor, Py_ssize_t top, Py_ssize_t at, int *open)
{
    *open = 0;
    if (top <= floor)
        return top;
    int first = holds(shards, count, r, pattern, top, at);
    if (first == 1)
        return top;
    *open = first == -1;
    Py_ssize_t lo = floor, hi = top - 1;
    while (lo < hi) {
        Py_ssize_t middle = (lo + hi + 1) >> 1;
        int answer = holds(shards, count, r, pattern, middle, at);
        if (answer == 1)
            lo = middle;
        else {
            *open |= answer == -1;
            hi = middle - 1;
        }
    }
    return lo;
}

/* Every start's search, each floored by the previous start's length less the bytes between
 * them (a suffix of a string found is found), from the unrestricted length `tops[k]` down. */
static void restricted_pass(const Restricted *shards, Py_ssize_t count, const Reading *r, const uint8_t *q, Py_ssize_t n,
                            const Py_ssize_t *positions, Py_ssize_t starts, const int64_t *tops, int64_t *lows, int64_t *highs)
{
    Py_ssize_t previous = 0, at = 0;
    for (Py_ssize_t k = 0; k < starts; k++) {
        Py_ssize_t i = positions[k], top = (Py_ssize_t)tops[k];
        if (top > n - i)
            top = n - i; /* a length past the query's end cannot be asked */
        if (top < 0)
            top = 0;
        Py_ssize_t floor = previous - (i - at);
        floor = floor < top ? floor : top;
        floor = floor > 0 ? floor : 0;
        int open;
        Py_ssize_t length = restricted_search(shards, count, r, q + i, floor, top, k, &open);
        lows[k] = length;
        highs[k] = open ? top : length;
        previous = length;
        at = i;
    }
}

static void release_restricted(Restricted *shards, Py_ssize_t count)
{
    for (Py_ssize_t k = 0; k < count; k++)
        for (int v = 0; v < shards[k].held; v++)
            PyBuffer_Release(&shards[k].views[v]);
    PyMem_Free(shards);
}

/* Read one (data, table, ratio, offsets, allowed[, directory, lengths, ranks]) tuple into `s`;
 * the optional parts may be None. */
static int parse_restricted(PyObject *item, Restricted *s)
{
    PyObject *data_obj, *table_obj, *offsets_obj, *allowed_obj, *directory = Py_None, *lengths = Py_None, *ranks = Py_None;
    int ratio;
    s->held = 0;
    s->lengths = s->ranks = NULL;
    if (!PyArg_ParseTuple(item, "OOiOO|OOO", &data_obj, &table_obj, &ratio, &offsets_obj, &allowed_obj, &directory, &lengths, &ranks))
        return -1;
    if (parse_shard(data_obj, table_obj, ratio, &s->views[0], &s->views[1], &s->shard) < 0)
        return -1;
    s->held = 2;
    if (PyObject_GetBuffer(offsets_obj, &s->views[2], PyBUF_SIMPLE) < 0)
        return -1;
    s->held = 3;
    if (PyObject_GetBuffer(allowed_obj, &s->views[3], PyBUF_SIMPLE) < 0)
        return -1;
    s->held = 4;
    s->documents = (Documents){s->views[2].buf, s->views[2].len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    s->allowed = s->views[3].buf;
    if (s->views[2].len % (Py_ssize_t)sizeof(int64_t) || s->documents.documents == 0 || s->views[3].len != s->documents.documents) {
        PyErr_SetString(PyExc_ValueError, "offsets must be int64, one allowed byte per document");
        return -1;
    }
    int got = parse_directory(directory, s->shard.size, &s->views[s->held], &s->documents);
    if (got < 0)
        return -1;
    s->held += got;
    if ((lengths == Py_None) != (ranks == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "a shard's lengths and ranks go together");
        return -1;
    }
    if (lengths == Py_None)
        return 0;
    if (PyObject_GetBuffer(lengths, &s->views[s->held], PyBUF_SIMPLE) < 0)
        return -1;
    s->lengths = s->views[s->held++].buf;
    if (PyObject_GetBuffer(ranks, &s->views[s->held], PyBUF_SIMPLE) < 0)
        return -1;
    s->ranks = s->views[s->held++].buf;
    return 0;
}

/* Whether each shard's own answers (if given) hold one length and one rank per character
 * start, every rank of a match inside its shard. */
static int answers_fit(const Restricted *shards, Py_ssize_t count, Py_ssize_t starts)
{
    for (Py_ssize_t k = 0; k < count; k++) {
        const Restricted *s = &shards[k];
        if (s->lengths == NULL)
            continue;
        const Py_buffer *lengths = &s->views[s->held - 2], *ranks = &s->views[s->held - 1];
        if (lengths->len != starts * (Py_ssize_t)sizeof(int64_t) || ranks->len != lengths->len)
            return 0;
        for (Py_ssize_t j = 0; j < starts; j++)
            if (s->lengths[j] > 0 && (s->ranks[j] < 0 || s->ranks[j] >= s->shard.count))
                return 0;
    }
    return 1;
}

/* For each character start of the UTF-8 query, the longest match in allowed documents (lowest
 * and highest, in bytes): `restricted_pass` over the shards parsed from their tuples. */
static PyObject *restricted_longest(PyObject *self, PyObject *args)
{
    PyObject *list;
    Py_buffer query, upper;
    Reading r;
    if (!PyArg_ParseTuple(args, "Oy*y*(nnn)", &list, &query, &upper, &r.few, &r.first_look, &r.scan_cap))
        return NULL;
    PyObject *result = NULL, *low = NULL, *high = NULL;
    Py_ssize_t *positions = NULL, count = 0, starts = 0;
    Restricted *shards = NULL;
    PyObject *items = PySequence_Fast(list, "shards must be a sequence");
    if (items == NULL)
        goto done;
    count = PySequence_Fast_GET_SIZE(items);
    shards = PyMem_Calloc(count > 0 ? count : 1, sizeof(Restricted));
    positions = PyMem_Malloc((query.len > 0 ? query.len : 1) * sizeof(Py_ssize_t));
    if (shards == NULL || positions == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++)
        if (parse_restricted(PySequence_Fast_GET_ITEM(items, k), &shards[k]) < 0)
            goto done;
    starts = character_starts(query.buf, query.len, positions);
    if (upper.len != starts * (Py_ssize_t)sizeof(int64_t) || r.few < 1 || r.first_look < 1 || r.scan_cap < 1) {
        PyErr_SetString(PyExc_ValueError, "upper must hold one int64 per character start, every reading cap at least 1");
        goto done;
    }
    if (!answers_fit(shards, count, starts)) {
        PyErr_SetString(PyExc_ValueError, "a shard's lengths and ranks must hold one int64 per character start, each rank in the shard");
        goto done;
    }
    low = PyBytes_FromStringAndSize(NULL, starts * (Py_ssize_t)sizeof(int64_t));
    high = PyBytes_FromStringAndSize(NULL, starts * (Py_ssize_t)sizeof(int64_t));
    if (low == NULL || high == NULL)
        goto done;
    int64_t *lows = (int64_t *)PyBytes_AS_STRING(low), *highs = (int64_t *)PyBytes_AS_STRING(high);
    Py_BEGIN_ALLOW_THREADS
    restricted_pass(shards, count, &r, query.buf, query.len, positions, starts, upper.buf, lows, highs);
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, low, high);
done:
    Py_XDECREF(low);
    Py_XDECREF(high);
    Py_XDECREF(items);
    if (shards != NULL)
        release_restricted(shards, count);
    PyMem_Free(positions);
    PyBuffer_Release(&query);
    PyBuffer_Release(&upper);
    return result;
}

/* Counting runs in lanes as the longest-match search does: a lane makes `range_of`'s two
 * searches step for step (the lower bound, then the upper one inside the bracket the first left),
 * prefetching each probe's table entry, then its suffix bytes, while the other lanes compare.
 * The loop is `longest_at`'s, written again: one loop for both kinds of lane (a flag, even a
 * constant one in always-inlined code) made the longest-match search 10% slower
 * (bench/bench_search_parts.py), and that search is the larger cost of a check. */
typedef struct {
    const uint8_t *pattern;
    Py_ssize_t m, lo, hi, lcp_lo, lcp_hi, mid, start, slot, first, within, after;
    int stage, upper; /* stage as a `Lane`'s; upper: the second search */
} CountLane;

/* The lane's next probe, its table entry prefetched; 0 when both searches are over. */
static inline int count_probe(CountLane *lane, const Shard *s)
{
    if (lane->lo >= lane->hi && !lane->upper) {
        lane->first = lane->lo;
        lane->lo = lane->within > lane->lo ? lane->within : lane->lo;
        lane->hi = lane->after;
        lane->lcp_lo = lane->lcp_hi = 0;
        lane->upper = 1;
    }
    if (lane->lo >= lane->hi)
        return 0;
    lane->mid = lane->lo + (lane->hi - lane->lo) / 2;
    PREFETCH(s->table + lane->mid * s->ratio);
    lane->stage = 1;
    return 1;
}

/* One comparison of the lane's probe, moving the bounds as `range_of` does. */
static inline void count_step(CountLane *lane, const Shard *s)
{
    Py_ssize_t skip = lane->lcp_lo < lane->lcp_hi ? lane->lcp_lo : lane->lcp_hi, lcp;
    int c = compare_at(s, lane->start, lane->pattern, lane->m, skip, &lcp);
    if (lane->upper ? c <= 0 : c < 0) {
        lane->lo = lane->mid + 1;
        lane->lcp_lo = lcp;
        return;
    }
    if (!lane->upper && c > 0 && lane->mid < lane->after)
        lane->after = lane->mid;
    if (!lane->upper && c == 0 && lane->mid + 1 > lane->within)
        lane->within = lane->mid + 1;
    lane->hi = lane->mid;
    lane->lcp_hi = lcp;
}

/* counts[k]: how many suffixes start with patterns[k] (lengths[k] bytes), for `count` patterns. */
static void count_lanes(const Shard *s, const uint8_t *const *patterns, const Py_ssize_t *lengths, Py_ssize_t count, int64_t *counts)
{
    CountLane lanes[LANES];
    Py_ssize_t next = 0, busy = 0;
    for (int j = 0; j < LANES; j++)
        lanes[j].stage = 0;
    for (;;) {
        for (int j = 0; j < LANES; j++) {
            CountLane *lane = &lanes[j];
            if (lane->stage == 0) {
                while (next < count) {
                    *lane = (CountLane){patterns[next], lengths[next], 0, s->count, 0, 0, 0, 0, next, 0, 0, s->count, 0, 0};
                    next++;
                    if (count_probe(lane, s)) {
                        busy++;
                        break;
                    }
                    counts[lane->slot] = lane->lo - lane->first;
                }
            } else if (lane->stage == 1) {
                Py_ssize_t skip = lane->lcp_lo < lane->lcp_hi ? lane->lcp_lo : lane->lcp_hi;
                lane->start = pointer_at(s, lane->mid);
                PREFETCH(s->data + lane->start + skip);
                lane->stage = 2;
            } else {
                count_step(lane, s);
                if (!count_probe(lane, s)) {
                    counts[lane->slot] = lane->lo - lane->first;
                    lane->stage = 0;
                    busy--;
                    j--; /* refill this lane at once */
                }
            }
        }
        if (busy == 0 && next >= count)
            break;
    }
}

/* The spellings a shingle's surface form is counted in, as `audit.neardup.rarity` defines them:
 * as written, lower-cased, and capitalised (the first character upper-cased, the rest
 * lower-cased), each distinct one once, made by str's own methods.  New references in out[];
 * returns how many, or -1 with an exception set. */
static int casings(PyObject *surface, PyObject *out[3])
{
    PyObject *first = NULL, *rest = NULL, *upper = NULL, *lowered_rest = NULL;
    PyObject *lower = PyObject_CallMethod(surface, "lower", NULL);
    PyObject *capital = NULL;
    int n = -1;
    if (lower == NULL || (first = PyUnicode_Substring(surface, 0, 1)) == NULL ||
        (rest = PyUnicode_Substring(surface, 1, PY_SSIZE_T_MAX)) == NULL ||
        (upper = PyObject_CallMethod(first, "upper", NULL)) == NULL ||
        (lowered_rest = PyObject_CallMethod(rest, "lower", NULL)) == NULL ||
        (capital = PyUnicode_Concat(upper, lowered_rest)) == NULL)
        goto done;
    Py_INCREF(surface);
    out[0] = surface;
    n = 1;
    if (PyUnicode_Compare(lower, surface) != 0) {
        out[n++] = lower;
        lower = NULL;
    }
    if (PyUnicode_Compare(capital, surface) != 0 && (n == 1 || PyUnicode_Compare(capital, out[1]) != 0)) {
        out[n++] = capital;
        capital = NULL;
    }
done:
    Py_XDECREF(lower);
    Py_XDECREF(first);
    Py_XDECREF(rest);
    Py_XDECREF(upper);
    Py_XDECREF(lowered_rest);
    Py_XDECREF(capital);
    return n;
}

/* Each surface's spellings as UTF-8 (`casings`): pointers and lengths into str objects kept
 * in `keep`, and per surface the end of its spellings in `ends`.  0, or -1 with an exception. */
static int spell_all(PyObject *surfaces, PyObject *keep, const uint8_t **patterns, Py_ssize_t *lengths, Py_ssize_t *ends)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(surfaces); k++) {
        PyObject *surface = PyList_GET_ITEM(surfaces, k), *spelled[3];
        if (!PyUnicode_CheckExact(surface)) { /* a subclass's methods could change the list */
            PyErr_Format(PyExc_TypeError, "surface %zd is not str", k);
            return -1;
        }
        int n = casings(surface, spelled);
        if (n < 0)
            return -1;
        for (int j = 0; j < n; j++) {
            const char *utf8 = PyList_Append(keep, spelled[j]) < 0 ? NULL : PyUnicode_AsUTF8AndSize(spelled[j], &lengths[total]);
            Py_DECREF(spelled[j]);
            if (utf8 == NULL) {
                for (j++; j < n; j++)
                    Py_DECREF(spelled[j]);
                return -1;
            }
            patterns[total++] = (const uint8_t *)utf8;
        }
        ends[k] = total;
    }
    return 0;
}

/* The occurrences of each surface form in its spellings together (`casings`), over a list of
 * shards: what the common-shingle cut asks of every shingle of a field, in one call, so
 * neither the casings nor the sums cost a Python step per shingle. */
static PyObject *casing_counts(PyObject *self, PyObject *args)
{
    PyObject *shards, *surfaces, *keep = NULL, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &shards, &PyList_Type, &surfaces))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(surfaces), most = 3 * n + 1;
    const uint8_t **patterns = PyMem_Calloc(most, sizeof(*patterns));
    Py_ssize_t *lengths = PyMem_Calloc(most, sizeof(*lengths)), *ends = PyMem_Calloc(n + 1, sizeof(*ends));
    int64_t *counts = PyMem_Calloc(most, sizeof(*counts)), *found = PyMem_Calloc(most, sizeof(*found));
    if (patterns == NULL || lengths == NULL || ends == NULL || counts == NULL || found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((keep = PyList_New(0)) == NULL || spell_all(surfaces, keep, patterns, lengths, ends) < 0)
        goto done;
    Py_ssize_t spellings = n ? ends[n - 1] : 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(shards); k++) {
        PyObject *data_obj, *table_obj;
        int ratio;
        Py_buffer data, table;
        Shard shard;
        PyObject *item = PyList_GET_ITEM(shards, k);
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "OOi", &data_obj, &table_obj, &ratio)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "shard %zd is not a (data, table, ratio) tuple", k);
            goto done;
        }
        if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0)
            goto done;
        Py_BEGIN_ALLOW_THREADS
        count_lanes(&shard, patterns, lengths, spellings, found);
        for (Py_ssize_t j = 0; j < spellings; j++)
            counts[j] += found[j];
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&data);
        PyBuffer_Release(&table);
    }
    if ((result = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t))) != NULL) {
        int64_t *totals = (int64_t *)PyBytes_AS_STRING(result);
        for (Py_ssize_t k = 0, j = 0; k < n; k++)
            for (totals[k] = 0; j < ends[k]; j++)
                totals[k] += counts[j];
    }
done:
    Py_XDECREF(keep);
    PyMem_Free(patterns);
    PyMem_Free(lengths);
    PyMem_Free(ends);
    PyMem_Free(counts);
    PyMem_Free(found);
    return result;
}

static PyMethodDef methods[] = {
    {"find_range", find_range, METH_VARARGS,
     "find_range(data, table, ratio, pattern) -> (lo, hi): suffix-array ranks whose suffix starts "
     "with pattern."},
    {"casing_counts", casing_counts, METH_VARARGS,
     "casing_counts(shards, surfaces) -> bytes of int64: per str of surfaces, the occurrences of "
     "it as written, lower-cased and capitalised (each distinct spelling once), summed over shards, "
     "a list of (data, table, ratio)."},
    {"longest_matches", longest_matches, METH_VARARGS,
     "longest_matches(data, table, ratio, query) -> bytes of int64: for each byte position l, "
     "the length of the longest prefix of query[l:] found in the shard."},
    {"longest_char_matches", longest_char_matches, METH_VARARGS,
     "longest_char_matches(data, table, ratio, query) -> bytes of int64: longest_matches at the "
     "positions where a UTF-8 character starts (every byte but 10xxxxxx), in order."},
    {"longest_char_ranks", longest_char_ranks, METH_VARARGS,
     "longest_char_ranks(data, table, ratio, query) -> (lengths, ranks): longest_char_matches and, "
     "per character start, a rank whose suffix starts with the match (-1 where there is none)."},
    {"document_directory", document_directory, METH_VARARGS,
     "document_directory(offsets, size) -> bytes of int64: [shift, e_0 .. e_blocks], e_j the last "
     "document whose offset is at most j << shift; narrows any_allowed's and restricted_longest's "
     "lookup of a pointer's document."},
    {"any_allowed", any_allowed, METH_VARARGS,
     "any_allowed(table, ratio, offsets, allowed, lo, hi, most[, directory]) -> bool: whether a rank "
     "of [lo, hi) (every one, or `most` spread as numpy's linspace spreads them) points into a "
     "document whose `allowed` byte is set; offsets are int64, one per document."},
    {"sample_ranks", sample_ranks, METH_VARARGS,
     "sample_ranks(table, ratio, offsets, lo, hi, count) -> (documents, offsets): bytes of int64, "
     "the shard-local document and the byte offset in it of each distinct rank numpy's "
     "linspace(lo, hi - 1, count).round() picks."},
    {"restricted_longest", restricted_longest, METH_VARARGS,
     "restricted_longest(shards, query, upper, (few, first_look, scan_cap)) -> (low, high): "
     "bytes of int64, per character start, the longest match in allowed documents; shards are "
     "(data, table, ratio, offsets, allowed[, directory, lengths, ranks]), upper the unrestricted "
     "lengths, lengths and ranks the shard's own (`longest_char_ranks`)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_suffix", NULL, -1, methods};

PyMODINIT_FUNC PyInit__suffix(void) { return PyModule_Create(&module); }
