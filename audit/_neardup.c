/*
 * The near-duplicate query's two counting steps, in C because a field asks them once each
 * and in numpy they cost a Python call per band and a dense comparison matrix.
 *
 * `collisions`: the LSH candidates of a field.  An index keeps, per band, every window's key
 * sorted (`bands.npy`) with the window each sorted key belongs to (`band_windows.npy`); the
 * field's chunks have one key per band.  For every band at once, each distinct chunk key is
 * searched in that band's sorted keys, the windows of every match are gathered, and the
 * result is each window once, ascending, with the number of bands it matched in (what
 * `np.unique(..., return_counts=True)` gives over the gathered windows).
 *
 * `agreement`: per candidate window, the most signature positions it shares with any one
 * chunk of the field, and the first chunk that shares that many.  Counted chunk by chunk, so
 * no candidates x chunks x positions matrix is ever built; a run of identical consecutive
 * chunks (sliding minima repeat) is compared once.
 *
 * Arrays are passed as contiguous buffers (numpy arrays, memory maps); results come back as
 * bytearrays of little-endian int64 for numpy to view.  The GIL is released while counting.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bits sorted per radix pass: 2,048 counters, small enough to stay in L1. */
#define DIGIT_BITS 11
#define DIGITS (1 << DIGIT_BITS)
/* Below this many values, insertion sort beats the radix passes' counter setup. */
#define SMALL_SORT 48

static void insertion_sort(uint64_t *a, Py_ssize_t n)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        Py_ssize_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* Sort a[0:n] ascending (LSD radix over the bits the largest value uses); `tmp` holds n
 * values.  The result may end in `tmp`: the returned pointer says where it is. */
static uint64_t *radix_sort(uint64_t *a, uint64_t *tmp, Py_ssize_t n)
{
    if (n < SMALL_SORT) {
        insertion_sort(a, n);
        return a;
    }
    uint64_t top = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        top |= a[i];
    Py_ssize_t counts[DIGITS];
    for (int shift = 0; shift < 64 && (top >> shift); shift += DIGIT_BITS) {
        memset(counts, 0, sizeof counts);
        for (Py_ssize_t i = 0; i < n; i++)
            counts[(a[i] >> shift) & (DIGITS - 1)]++;
        Py_ssize_t total = 0;
        for (int d = 0; d < DIGITS; d++) {
            Py_ssize_t c = counts[d];
            counts[d] = total;
            total += c;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            tmp[counts[(a[i] >> shift) & (DIGITS - 1)]++] = a[i];
        uint64_t *swap = a;
        a = tmp;
        tmp = swap;
    }
    return a;
}

/* Element `i` of a little-endian array of 4- or 8-byte unsigned integers. */
static inline uint64_t item_at(const uint8_t *base, int width, Py_ssize_t i)
{
    if (width == 4) {
        uint32_t v;
        memcpy(&v, base + i * 4, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, base + i * 8, 8);
    return v;
}

/* First index in [lo, hi) of a sorted column whose key is >= key (> key when `upper`). */
static inline Py_ssize_t key_bound(const uint8_t *column, int width, Py_ssize_t lo, Py_ssize_t hi,
                                   uint64_t key, int upper)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        uint64_t v = item_at(column, width, mid);
        if (v < key || (upper && v == key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A growable array of window ids. */
typedef struct {
    uint64_t *items;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Hits;

static int hits_reserve(Hits *h, Py_ssize_t more)
{
    if (h->size + more <= h->capacity)
        return 0;
    Py_ssize_t want = h->capacity ? h->capacity : 1024;
    while (want < h->size + more)
        want *= 2;
    uint64_t *grown = realloc(h->items, (size_t)want * sizeof(uint64_t));
    if (!grown)
        return -1;
    h->items = grown;
    h->capacity = want;
    return 0;
}

typedef struct {
    const uint8_t *keys;    /* bands x count sorted keys */
    const uint8_t *owners;  /* bands x count window ids */
    const uint8_t *query;   /* chunks x bands keys */
    int key_width, owner_width;
    Py_ssize_t bands, count, chunks;
} Lookup;

/* Every window matching some chunk's key in some band, once per band (as one band's distinct
 * keys are searched in ascending order, each search starts where the last one ended).
 * Returns 0, or -1 when memory ran out. */
static int gather(const Lookup *l, Hits *hits)
{
    uint64_t *wanted = malloc((size_t)(l->chunks ? l->chunks : 1) * 2 * sizeof(uint64_t));
    if (!wanted)
        return -1;
    for (Py_ssize_t band = 0; band < l->bands; band++) {
        Py_ssize_t n = 0;
        for (Py_ssize_t c = 0; c < l->chunks; c++) {
            uint64_t key = item_at(l->query, l->key_width, c * l->bands + band);
            if (!n || wanted[n - 1] != key) /* sliding minima repeat: drop runs first */
                wanted[n++] = key;
        }
        uint64_t *sorted = radix_sort(wanted, wanted + l->chunks, n);
        const uint8_t *column = l->keys + (size_t)band * l->count * l->key_width;
        const uint8_t *owners = l->owners + (size_t)band * l->count * l->owner_width;
        Py_ssize_t from = 0;
        for (Py_ssize_t i = 0; i < n && from < l->count; i++) {
            if (i && sorted[i] == sorted[i - 1])
                continue;
            Py_ssize_t lo = key_bound(column, l->key_width, from, l->count, sorted[i], 0);
            Py_ssize_t hi = key_bound(column, l->key_width, lo, l->count, sorted[i], 1);
            from = hi;
            if (hi == lo)
                continue;
            if (hits_reserve(hits, hi - lo) < 0) {
                free(wanted);
                return -1;
            }
            for (Py_ssize_t at = lo; at < hi; at++)
                hits->items[hits->size++] = item_at(owners, l->owner_width, at);
        }
    }
    free(wanted);
    return 0;
}

/* A buffer of `count` int64 values, as a bytearray (NULL with an exception set on failure). */
static PyObject *int64_bytes(Py_ssize_t count, int64_t **data)
{
    PyObject *out = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out)
        *data = (int64_t *)PyByteArray_AS_STRING(out);
    return out;
}

static int width_of(const Py_buffer *b, const char *name)
{
    if (b->itemsize == 4 || b->itemsize == 8)
        return (int)b->itemsize;
    PyErr_Format(PyExc_ValueError, "%s: items must be 4 or 8 bytes, not %zd", name, b->itemsize);
    return 0;
}

static PyObject *collisions_of(const Lookup *l)
{
    Hits hits = {NULL, 0, 0};
    uint64_t *sorted = NULL, *spare = NULL;
    int failed = 0;
    Py_ssize_t distinct = 0;
    Py_BEGIN_ALLOW_THREADS
    failed = gather(l, &hits);
    if (!failed && hits.size) {
        spare = malloc((size_t)hits.size * sizeof(uint64_t));
        failed = spare ? 0 : -1;
    }
    if (!failed) {
        sorted = radix_sort(hits.items, spare, hits.size);
        for (Py_ssize_t i = 0; i < hits.size; i++)
            distinct += !i || sorted[i] != sorted[i - 1];
    }
    Py_END_ALLOW_THREADS
    PyObject *windows = NULL, *counts = NULL, *result = NULL;
    int64_t *w = NULL, *c = NULL;
    if (failed)
        PyErr_NoMemory();
    else if ((windows = int64_bytes(distinct, &w)) && (counts = int64_bytes(distinct, &c))) {
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < hits.size; i++) {
            if (!i || sorted[i] != sorted[i - 1]) {
                w[++at] = (int64_t)sorted[i];
                c[at] = 0;
            }
            c[at]++;
        }
        result = PyTuple_Pack(2, windows, counts);
    }
    Py_XDECREF(windows);
    Py_XDECREF(counts);
    free(hits.items);
    free(spare);
    return result;
}

/* collisions(keys, owners, query, bands, count, chunks) -> (windows, counts) as int64 bytes. */
static PyObject *collisions(PyObject *self, PyObject *args)
{
    Py_buffer keys, owners, query;
    Py_ssize_t bands, count, chunks;
    if (!PyArg_ParseTuple(args, "y*y*y*nnn", &keys, &owners, &query, &bands, &count, &chunks))
        return NULL;
    PyObject *result = NULL;
    Lookup l = {keys.buf, owners.buf, query.buf, 0, 0, bands, count, chunks};
    if (bands < 1 || count < 0 || chunks < 0)
        PyErr_SetString(PyExc_ValueError, "bands must be positive, windows and chunks not negative");
    else if ((l.key_width = width_of(&keys, "keys")) && (l.owner_width = width_of(&owners, "owners"))) {
        if (query.itemsize != keys.itemsize)
            PyErr_SetString(PyExc_ValueError, "query keys must have the width of the band keys");
        else if (keys.len != bands * count * keys.itemsize || owners.len != bands * count * owners.itemsize)
            PyErr_Format(PyExc_ValueError, "band arrays must hold %zd x %zd items", bands, count);
        else if (query.len != chunks * bands * query.itemsize)
            PyErr_Format(PyExc_ValueError, "query keys must hold %zd x %zd items", chunks, bands);
        else
            result = collisions_of(&l);
    }
    PyBuffer_Release(&keys);
    PyBuffer_Release(&owners);
    PyBuffer_Release(&query);
    return result;
}

/* For candidate row `row`, the most positions equal with a kept chunk, and the first such
 * chunk (0 when there are no chunks).  `kept` lists the chunks that differ from the one
 * before them; a dropped chunk equals a kept one earlier, so the first maximum is unchanged. */
static inline void best_chunk(const uint32_t *row, const uint32_t *chunks, const Py_ssize_t *kept,
                              Py_ssize_t nkept, Py_ssize_t perm, int64_t *count, int64_t *pick)
{
    int64_t best = -1, first = 0;
    for (Py_ssize_t k = 0; k < nkept && best < perm; k++) {
        const uint32_t *chunk = chunks + kept[k] * perm;
        int64_t equal = 0;
        for (Py_ssize_t p = 0; p < perm; p++)
            equal += row[p] == chunk[p];
        if (equal > best) {
            best = equal;
            first = kept[k];
        }
    }
    *count = best < 0 ? 0 : best;
    *pick = first;
}

/* agreement(signatures, candidates, chunks, perm) -> (counts, picks) as int64 bytes. */
static PyObject *agreement(PyObject *self, PyObject *args)
{
    Py_buffer sigs, cands, chunks;
    Py_ssize_t perm;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &sigs, &cands, &chunks, &perm))
        return NULL;
    PyObject *counts = NULL, *picks = NULL, *result = NULL;
    Py_ssize_t *kept = NULL;
    int64_t *c = NULL, *p = NULL;
    Py_ssize_t rows = perm > 0 ? sigs.len / (perm * 4) : 0;
    Py_ssize_t ncand = cands.len / 8, nchunks = perm > 0 ? chunks.len / (perm * 4) : 0;
    const int64_t *wanted = cands.buf;
    if (perm < 1 || sigs.itemsize != 4 || chunks.itemsize != 4 || cands.itemsize != 8
        || sigs.len != rows * perm * 4 || chunks.len != nchunks * perm * 4 || cands.len != ncand * 8) {
        PyErr_SetString(PyExc_ValueError, "agreement needs uint32 signatures and chunks of `perm` columns and int64 candidates");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ncand; i++)
        if (wanted[i] < 0 || wanted[i] >= rows) {
            PyErr_Format(PyExc_IndexError, "candidate %lld is not a window (%zd windows)", (long long)wanted[i], rows);
            goto done;
        }
    kept = malloc((size_t)(nchunks ? nchunks : 1) * sizeof(Py_ssize_t));
    if (!kept) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(counts = int64_bytes(ncand, &c)) || !(picks = int64_bytes(ncand, &p)))
        goto done;
    const uint32_t *table = sigs.buf, *query = chunks.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t nkept = 0;
    for (Py_ssize_t k = 0; k < nchunks; k++)
        if (!k || memcmp(query + k * perm, query + (k - 1) * perm, (size_t)perm * 4))
            kept[nkept++] = k;
    for (Py_ssize_t i = 0; i < ncand; i++)
        best_chunk(table + wanted[i] * perm, query, kept, nkept, perm, c + i, p + i);
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, counts, picks);
done:
    Py_XDECREF(counts);
    Py_XDECREF(picks);
    free(kept);
    PyBuffer_Release(&sigs);
    PyBuffer_Release(&cands);
    PyBuffer_Release(&chunks);
    return result;
}

static PyMethodDef methods[] = {
    {"collisions", collisions, METH_VARARGS,
     "collisions(keys, owners, query, bands, windows, chunks) -> (windows, counts): the windows "
     "sharing a band key with some chunk, ascending, and in how many bands (int64 bytes)."},
    {"agreement", agreement, METH_VARARGS,
     "agreement(signatures, candidates, chunks, perm) -> (counts, picks): per candidate, the most "
     "signature positions equal with one chunk and the first chunk with that many (int64 bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_neardup", NULL, -1, methods};

PyMODINIT_FUNC PyInit__neardup(void) { return PyModule_Create(&module); }
