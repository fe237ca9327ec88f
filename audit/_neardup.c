/*
 * The near-duplicate query path, in C because every field of a benchmark runs it and in numpy
 * each step cost a Python call per band, per shingle size or per token, or a dense matrix.
 *
 * `collisions`: the LSH candidates of a field.  An index keeps, per band, every window's key
 * sorted (`bands.npy`) with the window each sorted key belongs to (`band_windows.npy`); the
 * field's chunks have one key per band.  For every band at once, each distinct chunk key is
 * searched in that band's sorted keys (first among every 64th key, kept in memory, then in one
 * block of the map: a few cache misses where a plain binary search takes one a step), the
 * windows of every match are gathered, and the result is each window once, ascending, with the
 * number of bands it matched in (what `np.unique(..., return_counts=True)` gives).
 *
 * `agreement`: per candidate window, the most signature positions it shares with any one
 * chunk of the field, and the first chunk that shares that many.  Counted only where they
 * agree, so no candidates x chunks x positions matrix is ever built: each signature position's
 * values are listed once per run of chunks holding them (sliding minima repeat), a candidate's
 * values pick out the runs that agree with it, and a sweep over the chunks adds those up.
 *
 * `tokens`, `shingle_keys`: a text's tokens and their hashes, cut in one pass over its code
 * points, and the key of the shingle starting at each token.  `sliding_min`: a field's chunk
 * signatures, the minimum of every window of permuted shingle hashes.  `field_shingles`
 * (_neardup_field.c): a field's tokens, keys and distinct shingle texts (a slice of the
 * case-folded text when their tokens are one space apart), in one pass.  `region_shingles`
 * (_neardup_regions.c): the same for the stretches of documents verification reads, at once.
 *
 * Arrays are passed as contiguous buffers (numpy arrays, memory maps) and checked against the
 * shapes given; results come back as bytearrays for numpy to view.  The GIL is released around
 * the loops that do not touch Python objects.
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

/* collisions(keys, owners, fences, query, bands, count, chunks, step) -> (windows, counts) as
 * int64 bytes; `fences` holds every `step`-th key of each band (keys[:, ::step]). */
static PyObject *collisions(PyObject *self, PyObject *args)
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

/* agreement(signatures, candidates, chunks, perm) -> (counts, picks) as int64 bytes. */
static PyObject *agreement(PyObject *self, PyObject *args)
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
    if (perm < 1 || sigs.itemsize != 4 || chunks.itemsize != 4 || cands.itemsize != 8
        || sigs.len != rows * perm * 4 || chunks.len != nchunks * perm * 4 || cands.len != ncand * 8) {
        PyErr_SetString(PyExc_ValueError, "agreement needs uint32 signatures and chunks of `perm` columns and int64 candidates");
        goto done;
    }
    if (nchunks >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "agreement takes fewer than 2^31 chunks");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ncand; i++)
        if (wanted[i] < 0 || wanted[i] >= rows) {
            PyErr_Format(PyExc_IndexError, "candidate %lld is not a window (%zd windows)", (long long)wanted[i], rows);
            goto done;
        }
    size_t most = (size_t)(nchunks ? nchunks : 1) * (size_t)perm;
    r.order = malloc(most * sizeof(uint64_t));
    r.first = malloc(most * sizeof(int32_t));
    r.end = malloc(most * sizeof(int32_t));
    r.offset = malloc((size_t)(perm + 1) * sizeof(Py_ssize_t));
    spare = malloc((size_t)(nchunks ? nchunks : 1) * sizeof(uint64_t));
    if (!r.order || !r.first || !r.end || !r.offset || !spare) {
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

/* Cut `t` into tokens (a run of word characters, or one unsegmented-script character) and hash
 * each: the sum of (folded code point + 1) x powers[position in token, at most 63], xor its
 * length times the mixing constant, through MurmurHash3's finaliser.  Returns the count, or -1
 * at a code point whose kind is not learned yet. */
Py_ssize_t cut_tokens(const Text *t, int64_t *starts, int64_t *ends, uint64_t *hashes, uint8_t *scripts)
{
    const uint64_t mix = 0x9E3779B97F4A7C15ULL;
    Py_ssize_t count = 0, i = 0;
    while (i < t->n) {
        uint8_t kind = t->kind[t->points[i]];
        if (kind == UNSEEN)
            return -1;
        if (kind != WORD && kind != CHARACTER) {
            i++;
            continue;
        }
        Py_ssize_t end = i + 1;
        if (kind == WORD)
            while (end < t->n && t->kind[t->points[end]] == WORD)
                end++;
        uint64_t sum = 0;
        for (Py_ssize_t j = i; j < end; j++)
            sum += ((uint64_t)t->fold[t->points[j]] + 1) * t->powers[j - i < POWERS ? j - i : POWERS - 1];
        starts[count] = i;
        ends[count] = end;
        hashes[count] = fmix64(sum ^ ((uint64_t)(end - i) * mix));
        scripts[count] = t->script[t->points[i]];
        count++;
        i = end;
    }
    return count;
}

/* A bytearray copy of `size` bytes (NULL with an exception set on failure). */
static PyObject *copied(const void *data, Py_ssize_t size)
{
    return PyByteArray_FromStringAndSize((const char *)data, size);
}

/* tokens(points, kind, fold, script, powers) -> (starts, ends, hashes, scripts) as bytes:
 * int64, int64, uint64 and uint8 per token; None when some code point's kind is not learned
 * yet (the caller learns them and asks again).  Every code point must be below 0x110000. */
static PyObject *tokens(PyObject *self, PyObject *args)
{
    Py_buffer points, kind, fold, script, powers;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &points, &kind, &fold, &script, &powers))
        return NULL;
    PyObject *result = NULL;
    int64_t *starts = NULL, *ends = NULL;
    uint64_t *hashes = NULL;
    uint8_t *scripts = NULL;
    Text t = {points.buf, points.len / 4, kind.buf, fold.buf, script.buf, powers.buf};
    if (points.itemsize != 4 || points.len % 4 || kind.len != CODE_POINTS || fold.len != CODE_POINTS * 4
        || script.len != CODE_POINTS || powers.len != POWERS * 8) {
        PyErr_SetString(PyExc_ValueError, "tokens needs uint32 code points and the per-code-point tables");
        goto done;
    }
    for (Py_ssize_t i = 0; i < t.n; i++)
        if (t.points[i] >= CODE_POINTS) {
            PyErr_Format(PyExc_ValueError, "code point %u is out of range", t.points[i]);
            goto done;
        }
    size_t room = (size_t)(t.n ? t.n : 1);
    starts = malloc(room * 8);
    ends = malloc(room * 8);
    hashes = malloc(room * 8);
    scripts = malloc(room);
    if (!starts || !ends || !hashes || !scripts) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count;
    Py_BEGIN_ALLOW_THREADS
    count = cut_tokens(&t, starts, ends, hashes, scripts);
    Py_END_ALLOW_THREADS
    if (count < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *parts[4] = {copied(starts, count * 8), copied(ends, count * 8), copied(hashes, count * 8), copied(scripts, count)};
    if (parts[0] && parts[1] && parts[2] && parts[3])
        result = PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
    for (int k = 0; k < 4; k++)
        Py_XDECREF(parts[k]);
done:
    free(starts);
    free(ends);
    free(hashes);
    free(scripts);
    PyBuffer_Release(&points);
    PyBuffer_Release(&kind);
    PyBuffer_Release(&fold);
    PyBuffer_Release(&script);
    PyBuffer_Release(&powers);
    return result;
}

/* shingle_keys(hashes, scripts, sizes, limits) -> (keys, valid) as bytes (uint64, bool): the
 * key of the shingle of sizes[script] tokens starting at each token, when it ends by that
 * token's limit (`limits`: int64 per token, or None for the text's end), else 0 and invalid.
 * Keys combine the token hashes as h * MIX + next, xor the size, through fmix64. */
static PyObject *shingle_keys(PyObject *self, PyObject *args)
{
    Py_buffer hashes, scripts, sizes, limits = {0};
    PyObject *limits_obj;
    if (!PyArg_ParseTuple(args, "y*y*y*O", &hashes, &scripts, &sizes, &limits_obj))
        return NULL;
    PyObject *keys = NULL, *valid = NULL, *result = NULL;
    Py_ssize_t n = hashes.len / 8, nsizes = sizes.len / 8;
    int limited = limits_obj != Py_None;
    if (limited && PyObject_GetBuffer(limits_obj, &limits, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    if (hashes.itemsize != 8 || hashes.len % 8 || scripts.len != n || sizes.itemsize != 8 || sizes.len % 8
        || (limited && (limits.itemsize != 8 || limits.len != n * 8))) {
        PyErr_SetString(PyExc_ValueError, "shingle_keys needs uint64 hashes, a uint8 script and an int64 limit per token, and int64 sizes");
        goto done;
    }
    const uint8_t *script = scripts.buf;
    const int64_t *size = sizes.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (script[i] >= nsizes || size[script[i]] < 1) {
            PyErr_Format(PyExc_ValueError, "token %zd: script %u has no shingle size", i, script[i]);
            goto done;
        }
    if (!(keys = PyByteArray_FromStringAndSize(NULL, n * 8)) || !(valid = PyByteArray_FromStringAndSize(NULL, n)))
        goto done;
    uint64_t *key = (uint64_t *)PyByteArray_AS_STRING(keys);
    uint8_t *ok = (uint8_t *)PyByteArray_AS_STRING(valid);
    const uint64_t *hash = hashes.buf;
    const int64_t *limit = limited ? limits.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = size[script[i]], end = limit ? limit[i] : n;
        ok[i] = i + k <= end && i + k <= n;
        key[i] = shingle_key(hash, i, k, ok[i]);
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, keys, valid);
done:
    Py_XDECREF(keys);
    Py_XDECREF(valid);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&scripts);
    PyBuffer_Release(&sizes);
    if (limited && limits.obj)
        PyBuffer_Release(&limits);
    return result;
}

/* `text` with every code point replaced by its simple case fold, or None when a code point's
 * kind is not learned yet; the string is immutable and held by the caller, so it is read without
 * the GIL. */
PyObject *fold_text(PyObject *text, const uint8_t *kinds, const uint32_t *folds)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_UCS4 *out = malloc((size_t)(n ? n : 1) * sizeof(Py_UCS4));
    if (!out)
        return PyErr_NoMemory();
    int width = PyUnicode_KIND(text), learned = 1;
    const void *data = PyUnicode_DATA(text);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && learned; i++) {
        Py_UCS4 c = PyUnicode_READ(width, data, i);
        learned = kinds[c] != UNSEEN;
        out[i] = folds[c];
    }
    Py_END_ALLOW_THREADS
    PyObject *result = learned ? PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, n) : Py_NewRef(Py_None);
    free(out);
    return result;
}

/* The text of one shingle: tokens first..first+n-1 of `fold`, one space between them.  Tokens
 * one space apart in the text are one slice of it; others are joined. */
PyObject *shingle_text(PyObject *fold, const int64_t *starts, const int64_t *ends, Py_ssize_t first, Py_ssize_t n)
{
    int contiguous = 1;
    for (Py_ssize_t j = first; j + 1 < first + n && contiguous; j++)
        contiguous = ends[j] + 1 == starts[j + 1] && PyUnicode_READ_CHAR(fold, ends[j]) == ' ';
    if (contiguous)
        return PyUnicode_Substring(fold, starts[first], ends[first + n - 1]);
    PyObject *parts = PyList_New(n), *space = NULL, *joined = NULL;
    if (!parts)
        return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *part = PyUnicode_Substring(fold, starts[first + j], ends[first + j]);
        if (!part)
            goto done;
        PyList_SET_ITEM(parts, j, part);
    }
    if ((space = PyUnicode_FromOrdinal(' ')))
        joined = PyUnicode_Join(space, parts);
done:
    Py_XDECREF(space);
    Py_DECREF(parts);
    return joined;
}

/* sliding_min(values, rows, perm, width) -> bytes of uint32, (rows - width + 1) x perm: per
 * column, the minimum of every `width` consecutive rows.  Each block of `width` rows is scanned
 * once forwards and once backwards (van Herk / Gil-Werman), so the cost does not grow with the
 * width: the minimum over rows s..s+width-1 is min(suffix of s's block, prefix of the next). */
static PyObject *sliding_min(PyObject *self, PyObject *args)
{
    Py_buffer values;
    Py_ssize_t rows, perm, width;
    if (!PyArg_ParseTuple(args, "y*nnn", &values, &rows, &perm, &width))
        return NULL;
    PyObject *result = NULL;
    uint32_t *ahead = NULL, *behind = NULL;
    if (rows < 1 || perm < 1 || width < 1 || width > rows || values.itemsize != 4 || values.len != rows * perm * 4) {
        PyErr_SetString(PyExc_ValueError, "sliding_min needs rows x perm uint32 values and a width of 1 to rows");
        goto done;
    }
    ahead = malloc((size_t)rows * perm * 4);  /* running minimum from each block's start */
    behind = malloc((size_t)rows * perm * 4); /* running minimum to each block's end */
    if (!ahead || !behind) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t out_rows = rows - width + 1;
    if (!(result = PyByteArray_FromStringAndSize(NULL, out_rows * perm * 4)))
        goto done;
    uint32_t *out = (uint32_t *)PyByteArray_AS_STRING(result);
    const uint32_t *v = values.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++)
        for (Py_ssize_t p = 0; p < perm; p++) {
            uint32_t x = v[r * perm + p];
            ahead[r * perm + p] = r % width && ahead[(r - 1) * perm + p] < x ? ahead[(r - 1) * perm + p] : x;
        }
    for (Py_ssize_t r = rows - 1; r >= 0; r--)
        for (Py_ssize_t p = 0; p < perm; p++) {
            uint32_t x = v[r * perm + p];
            int last = (r + 1) % width == 0 || r == rows - 1;
            behind[r * perm + p] = !last && behind[(r + 1) * perm + p] < x ? behind[(r + 1) * perm + p] : x;
        }
    for (Py_ssize_t s = 0; s < out_rows; s++) {
        Py_ssize_t e = s + width - 1;
        for (Py_ssize_t p = 0; p < perm; p++) {
            uint32_t a = behind[s * perm + p], b = ahead[e * perm + p];
            /* rows s..e span at most two blocks: s's suffix and e's prefix (one block when aligned) */
            out[s * perm + p] = s % width == 0 ? a : (a < b ? a : b);
        }
    }
    Py_END_ALLOW_THREADS
done:
    free(ahead);
    free(behind);
    PyBuffer_Release(&values);
    return result;
}

static PyMethodDef methods[] = {
    {"collisions", collisions, METH_VARARGS,
     "collisions(keys, owners, fences, query, bands, windows, chunks, step) -> (windows, counts): the windows "
     "sharing a band key with some chunk, ascending, and in how many bands (int64 bytes)."},
    {"agreement", agreement, METH_VARARGS,
     "agreement(signatures, candidates, chunks, perm) -> (counts, picks): per candidate, the most "
     "signature positions equal with one chunk and the first chunk with that many (int64 bytes)."},
    {"tokens", tokens, METH_VARARGS,
     "tokens(points, kind, fold, script, powers) -> (starts, ends, hashes, scripts): a text's "
     "tokens and their hashes, as audit.neardup.tokens cuts them (bytes of int64, int64, uint64, uint8); "
     "None when a code point's kind is not learned yet."},
    {"shingle_keys", shingle_keys, METH_VARARGS,
     "shingle_keys(hashes, scripts, sizes, limits) -> (keys, valid): the key of the shingle starting "
     "at each token and whether one starts there (bytes of uint64 and bool)."},
    {"sliding_min", sliding_min, METH_VARARGS,
     "sliding_min(values, rows, perm, width) -> bytes of uint32: per column, the minimum of every `width` consecutive rows."},
    {"field_shingles", field_shingles, METH_VARARGS,
     "field_shingles(text, kind, fold, script, powers, sizes, exclude) -> (starts, ends, hashes, scripts, keys, "
     "valid, low, distinct, surfaces, distinct_keys, own): a field's tokens and shingle keys, and its distinct "
     "shingle texts in first-occurrence order with their first surface forms, keys, and the numbers of those "
     "`exclude` lacks; None when a code point's kind is not learned yet."},
    {"region_shingles", region_shingles, METH_VARARGS,
     "region_shingles(raws, kind, fold, script, powers, sizes, keys, texts) -> (texts, skips, char_starts, "
     "first, starts, ends, hashes, scripts, keys, valid, ids, bounds): the stretches verification reads, "
     "decoded, tokenised, shingled and matched with the field's shingles `texts` (keys aligned), or None "
     "when a code point's kind is not learned yet."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_neardup", NULL, -1, methods};

PyMODINIT_FUNC PyInit__neardup(void) { return PyModule_Create(&module); }
