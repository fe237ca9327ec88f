/*
 * `agreement`: per candidate window, the most signature positions it shares with any one
 * chunk of the field, and the first chunk that shares that many.  Counted only where they
 * agree, so no candidates x chunks x positions matrix is ever built: each signature position's
 * values are listed once per run of chunks holding them (sliding minima repeat), a candidate's
 * values pick out the runs that agree with it, and a sweep over the chunks adds those up.
 */
#include "_neardup.h"

/* A field's chunk signatures by position: for each signature position, the runs of
 * consecutive chunks holding one value there, sorted by value (then by first chunk).  A
 * window's value at a position names the runs that agree with it there, so its agreement with
 * every chunk is counted from those runs alone. */
typedef struct {
    uint64_t *order;     /* per run: value << 32 | run number, sorted within each position */
    int32_t *first;      /* per run: first chunk */
    int32_t *end;        /* per run: one past its last chunk */
    Py_ssize_t *offset;  /* perm + 1: where each position's runs start in `order` */
} Runs;

static void runs_free(Runs *r)
{
    free(r->order);
    free(r->first);
    free(r->end);
    free(r->offset);
}

/* `r` holds room for nchunks x perm runs, `spare` for nchunks values. */
static void runs_of(const uint32_t *chunks, Py_ssize_t nchunks, Py_ssize_t perm, Runs *r, uint64_t *spare)
{
    Py_ssize_t total = 0;
    r->offset[0] = 0;
    for (Py_ssize_t p = 0; p < perm; p++) {
        Py_ssize_t from = total;
        for (Py_ssize_t c = 0; c < nchunks; c++) {
            uint32_t v = chunks[c * perm + p];
            if (c && chunks[(c - 1) * perm + p] == v) {
                r->end[total - 1] = (int32_t)(c + 1);
                continue;
            }
            r->first[total] = (int32_t)c;
            r->end[total] = (int32_t)(c + 1);
            /* run numbers of a position fit 32 bits: a field has fewer than 2^31 chunks */
            r->order[total] = (uint64_t)v << 32 | (uint64_t)(total - from);
            total++;
        }
        uint64_t *sorted = radix_sort(r->order + from, spare, total - from);
        if (sorted != r->order + from)
            memcpy(r->order + from, sorted, (size_t)(total - from) * sizeof(uint64_t));
        r->offset[p + 1] = total;
    }
}

/* One agreement event: a run of agreeing chunks starts (odd) or ends (even) at a chunk. */
static inline uint64_t event(Py_ssize_t chunk, int starts) { return (uint64_t)chunk << 1 | (uint64_t)starts; }

/* For candidate signature `row`: the most positions equal with one chunk, and the first chunk
 * with that many (0 and chunk 0 when none agrees anywhere, as argmax over zeros gives).  The
 * agreeing runs become start and end events; sweeping them in chunk order counts, at each
 * chunk, how many positions agree.  `events` and `spare` hold 2 x perm x (most runs of one
 * value at one position) entries. */
static void best_chunk(const uint32_t *row, const Runs *r, Py_ssize_t perm, uint64_t *events, uint64_t *spare,
                       int64_t *count, int64_t *pick)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t p = 0; p < perm; p++) {
        uint64_t want = (uint64_t)row[p] << 32;
        Py_ssize_t lo = r->offset[p], hi = r->offset[p + 1], from = lo;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (r->order[mid] < want)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < r->offset[p + 1] && r->order[lo] >> 32 == row[p]; lo++) {
            Py_ssize_t run = from + (Py_ssize_t)(r->order[lo] & 0xFFFFFFFFu);
            events[n++] = event(r->first[run], 1);
            events[n++] = event(r->end[run], 0);
        }
    }
    /* At one chunk, ends sort before starts: the running count never overstates a chunk. */
    uint64_t *sorted = radix_sort(events, spare, n);
    int64_t agreeing = 0, best = 0, first = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        agreeing += sorted[i] & 1 ? 1 : -1;
        if (agreeing > best) {
            best = agreeing;
            first = (int64_t)(sorted[i] >> 1);
        }
    }
    *count = best;
    *pick = first;
}

/* The most runs one value has at one position, over all positions: what one position can add
 * to a candidate's events. */
static Py_ssize_t widest_value(const Runs *r, Py_ssize_t perm)
{
    Py_ssize_t widest = 1;
    for (Py_ssize_t p = 0; p < perm; p++)
        for (Py_ssize_t i = r->offset[p], same = 0; i < r->offset[p + 1]; i++) {
            same = i > r->offset[p] && r->order[i] >> 32 == r->order[i - 1] >> 32 ? same + 1 : 1;
            if (same > widest)
                widest = same;
        }
    return widest;
}

/* Whether the buffers hold uint32 signatures and chunks of `perm` columns and int64
 * candidates that are all windows (an exception set when not). */
static int shapes_ok(const Py_buffer *sigs, const Py_buffer *cands, const Py_buffer *chunks, Py_ssize_t perm, Py_ssize_t rows, Py_ssize_t ncand, Py_ssize_t nchunks)
{
    if (perm < 1 || sigs->itemsize != 4 || chunks->itemsize != 4 || cands->itemsize != 8
        || sigs->len != rows * perm * 4 || chunks->len != nchunks * perm * 4 || cands->len != ncand * 8) {
        PyErr_SetString(PyExc_ValueError, "agreement needs uint32 signatures and chunks of `perm` columns and int64 candidates");
        return 0;
    }
    if (nchunks >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "agreement takes fewer than 2^31 chunks");
        return 0;
    }
    const int64_t *wanted = cands->buf;
    for (Py_ssize_t i = 0; i < ncand; i++)
        if (wanted[i] < 0 || wanted[i] >= rows) {
            PyErr_Format(PyExc_IndexError, "candidate %lld is not a window (%zd windows)", (long long)wanted[i], rows);
            return 0;
        }
    return 1;
}

/* Room for the runs of `nchunks` chunks of `perm` positions (0 with MemoryError set). */
static int runs_alloc(Runs *r, Py_ssize_t nchunks, Py_ssize_t perm)
{
    size_t most = (size_t)(nchunks ? nchunks : 1) * (size_t)perm;
    r->order = malloc(most * sizeof(uint64_t));
    r->first = malloc(most * sizeof(int32_t));
    r->end = malloc(most * sizeof(int32_t));
    r->offset = malloc((size_t)(perm + 1) * sizeof(Py_ssize_t));
    if (r->order && r->first && r->end && r->offset)
        return 1;
    PyErr_NoMemory();
    return 0;
}

/* agreement(signatures, candidates, chunks, perm) -> (counts, picks) as int64 bytes. */
PyObject *agreement(PyObject *self, PyObject *args)
{
    Py_buffer sigs, cands, chunks;
    Py_ssize_t perm;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &sigs, &cands, &chunks, &perm))
        return NULL;
    PyObject *counts = NULL, *picks = NULL, *result = NULL;
    Runs r = {NULL, NULL, NULL, NULL};
    uint64_t *spare = NULL, *events = NULL;
    int64_t *c = NULL, *p = NULL;
    Py_ssize_t rows = perm > 0 ? sigs.len / (perm * 4) : 0;
    Py_ssize_t ncand = cands.len / 8, nchunks = perm > 0 ? chunks.len / (perm * 4) : 0;
    const int64_t *wanted = cands.buf;
    if (!shapes_ok(&sigs, &cands, &chunks, perm, rows, ncand, nchunks) || !runs_alloc(&r, nchunks, perm))
        goto done;
    if (!(spare = malloc((size_t)(nchunks ? nchunks : 1) * sizeof(uint64_t)))) {
        PyErr_NoMemory();
        goto done;
    }
    size_t room;
    Py_BEGIN_ALLOW_THREADS
    runs_of(chunks.buf, nchunks, perm, &r, spare);
    room = 2 * (size_t)perm * (size_t)widest_value(&r, perm);
    Py_END_ALLOW_THREADS
    free(spare);
    spare = malloc(room * sizeof(uint64_t));
    events = malloc(room * sizeof(uint64_t));
    if (!spare || !events) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(counts = int64_bytes(ncand, &c)) || !(picks = int64_bytes(ncand, &p)))
        goto done;
    const uint32_t *table = sigs.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < ncand; i++)
        best_chunk(table + wanted[i] * perm, &r, perm, events, spare, c + i, p + i);
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, counts, picks);
done:
    Py_XDECREF(counts);
    Py_XDECREF(picks);
    runs_free(&r);
    free(spare);
    free(events);
    PyBuffer_Release(&sigs);
    PyBuffer_Release(&cands);
    PyBuffer_Release(&chunks);
    return result;
}
