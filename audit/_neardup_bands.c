/*
 * `collisions`: the LSH candidates of a field.  An index keeps, per band, every window's key
 * sorted (`bands.npy`) with the window each sorted key belongs to (`band_windows.npy`); the
 * field's chunks have one key per band.  For every band at once, each distinct chunk key is
 * searched in that band's sorted keys (first among every 64th key, kept in memory, then in one
 * block of the map: a few cache misses where a plain binary search takes one a step), the
 * windows of every match are gathered, and the result is each window once, ascending, with the
 * number of bands it matched in (what `np.unique(..., return_counts=True)` gives).  The radix
 * sort here also orders `agreement`'s runs (_neardup_agreement.c).
 */
#include "_neardup.h"

/* Bits sorted per radix pass: 256 counters, cheap to clear for the few hundred keys of a band. */
#define DIGIT_BITS 8
#define DIGITS (1 << DIGIT_BITS)
/* Below this many values, insertion sort beats the radix passes' counter setup. */
#define SMALL_SORT 32

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
uint64_t *radix_sort(uint64_t *a, uint64_t *tmp, Py_ssize_t n)
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

/* First index in [lo, hi) of a sorted column whose key is >= key. */
static inline Py_ssize_t key_bound(const uint8_t *column, int width, Py_ssize_t lo, Py_ssize_t hi,
                                   uint64_t key)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        uint64_t v = item_at(column, width, mid);
        if (v < key)
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
    const uint8_t *fences;  /* bands x ceil(count / step): every step-th key of each band */
    const uint8_t *query;   /* chunks x bands keys */
    int key_width, owner_width;
    Py_ssize_t bands, count, chunks, step;
} Lookup;

/* First index >= from of a band's sorted keys whose key is >= key: the fences (small, so they
 * stay in cache) narrow the search to one block of `step` keys of the memory-mapped column. */
static inline Py_ssize_t fenced_bound(const Lookup *l, const uint8_t *column, const uint8_t *fences,
                                      Py_ssize_t from, uint64_t key)
{
    Py_ssize_t nfences = (l->count + l->step - 1) / l->step;
    Py_ssize_t f = key_bound(fences, l->key_width, from / l->step, nfences, key);
    /* keys[(f - 1) * step] < key <= keys[f * step]: the bound lies between them. */
    Py_ssize_t lo = f ? (f - 1) * l->step + 1 : 0, hi = f * l->step < l->count ? f * l->step : l->count;
    if (lo < from)
        lo = from;
    return key_bound(column, l->key_width, lo, hi > lo ? hi : lo, key);
}

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
        const uint8_t *fences = l->fences + (size_t)band * ((l->count + l->step - 1) / l->step) * l->key_width;
        Py_ssize_t from = 0;
        for (Py_ssize_t i = 0; i < n && from < l->count; i++) {
            if (i && sorted[i] == sorted[i - 1])
                continue;
            Py_ssize_t at = fenced_bound(l, column, fences, from, sorted[i]);
            /* The run of equal keys is walked rather than searched: its windows are copied anyway. */
            for (; at < l->count && item_at(column, l->key_width, at) == sorted[i]; at++) {
                if (hits_reserve(hits, 1) < 0) {
                    free(wanted);
                    return -1;
                }
                hits->items[hits->size++] = item_at(owners, l->owner_width, at);
            }
            from = at;
        }
    }
    free(wanted);
    return 0;
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

/* collisions(keys, owners, fences, query, bands, count, chunks, step) -> (windows, counts) as
 * int64 bytes; `fences` holds every `step`-th key of each band (keys[:, ::step]). */
PyObject *collisions(PyObject *self, PyObject *args)
{
    Py_buffer keys, owners, fences, query;
    Py_ssize_t bands, count, chunks, step;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nnnn", &keys, &owners, &fences, &query, &bands, &count, &chunks, &step))
        return NULL;
    PyObject *result = NULL;
    Lookup l = {keys.buf, owners.buf, fences.buf, query.buf, 0, 0, bands, count, chunks, step};
    if (bands < 1 || count < 0 || chunks < 0 || step < 1)
        PyErr_SetString(PyExc_ValueError, "bands and step must be positive, windows and chunks not negative");
    else if ((l.key_width = width_of(&keys, "keys")) && (l.owner_width = width_of(&owners, "owners"))) {
        if (query.itemsize != keys.itemsize || fences.itemsize != keys.itemsize)
            PyErr_SetString(PyExc_ValueError, "query keys and fences must have the width of the band keys");
        else if (keys.len != bands * count * keys.itemsize || owners.len != bands * count * owners.itemsize)
            PyErr_Format(PyExc_ValueError, "band arrays must hold %zd x %zd items", bands, count);
        else if (fences.len != bands * ((count + step - 1) / step) * fences.itemsize)
            PyErr_Format(PyExc_ValueError, "fences must hold every %zd-th key of %zd bands", step, bands);
        else if (query.len != chunks * bands * query.itemsize)
            PyErr_Format(PyExc_ValueError, "query keys must hold %zd x %zd items", chunks, bands);
        else
            result = collisions_of(&l);
    }
    PyBuffer_Release(&keys);
    PyBuffer_Release(&owners);
    PyBuffer_Release(&fences);
    PyBuffer_Release(&query);
    return result;
}

