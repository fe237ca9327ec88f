/*
 * Many patterns counted at once, in lanes, and a field's shingles counted in their casings
 * (`audit._suffix`).
 */
#include "_suffix.h"

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
                    if (s->keys != NULL) {
                        KeySearch keys;
                        sampled_start(&keys, s, lane->pattern, lane->m, &lane->lo, &lane->hi, &lane->lcp_lo, &lane->lcp_hi);
                        lane->after = keys.after;
                        lane->within = keys.within;
                    }
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

/* An ASCII surface's spellings without a Python call (most of a Latin-script field's): there
 * str.lower and str.upper move only A-Z and a-z, so the lower-cased spelling and the
 * capitalised one (the lower-cased with its first letter upper-cased) are written into
 * `arena` (2 * m bytes).  Distinct ones as `casings` keeps them; returns how many. */
static int ascii_casings(const uint8_t *surface, Py_ssize_t m, uint8_t *arena, const uint8_t **out, Py_ssize_t *lengths)
{
    uint8_t *lower = arena, *capital = arena + m;
    for (Py_ssize_t i = 0; i < m; i++)
        lower[i] = surface[i] >= 'A' && surface[i] <= 'Z' ? surface[i] + ('a' - 'A') : surface[i];
    memcpy(capital, lower, m);
    if (m && capital[0] >= 'a' && capital[0] <= 'z')
        capital[0] -= 'a' - 'A';
    int n = 0;
    out[n++] = surface;
    if (memcmp(lower, surface, m) != 0)
        out[n++] = lower;
    if (memcmp(capital, surface, m) != 0 && (n == 1 || memcmp(capital, lower, m) != 0))
        out[n++] = capital;
    for (int j = 0; j < n; j++)
        lengths[j] = m;
    return n;
}

/* Per code point: 0 not asked yet, 1 left alone by str.lower and str.upper, 2 changed by one.
 * Filled in, with the GIL held, as surfaces bring code points (a static table: untouched pages
 * take no memory). */
static uint8_t case_state[0x110000];

/* Whether str.lower and str.upper leave the character alone, asked of Python's own methods the
 * first time; -1 with an exception set. */
static int caseless_char(Py_UCS4 c)
{
    if (case_state[c] == 0) {
        PyObject *ch = PyUnicode_FromOrdinal(c), *lower = NULL, *upper = NULL;
        if (ch != NULL && (lower = PyObject_CallMethod(ch, "lower", NULL)) != NULL)
            upper = PyObject_CallMethod(ch, "upper", NULL);
        if (upper != NULL)
            case_state[c] = PyUnicode_Compare(lower, ch) == 0 && PyUnicode_Compare(upper, ch) == 0 ? 1 : 2;
        Py_XDECREF(ch);
        Py_XDECREF(lower);
        Py_XDECREF(upper);
        if (upper == NULL)
            return -1;
    }
    return case_state[c] == 1;
}

/* Whether every character of the surface is caseless: then its lower-cased and capitalised
 * spellings are itself (str.lower's only context rule, the final sigma, is for a cased
 * letter), and it is counted as written, without making them.  -1 with an exception set. */
static int caseless(PyObject *surface)
{
    int width = PyUnicode_KIND(surface);
    const void *data = PyUnicode_DATA(surface);
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(surface); i++) {
        int found = caseless_char(PyUnicode_READ(width, data, i));
        if (found <= 0)
            return found;
    }
    return 1;
}

/* Bytes `spell_all` writes ASCII spellings into: two per character of each ASCII surface. */
static Py_ssize_t arena_size(PyObject *surfaces)
{
    Py_ssize_t size = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(surfaces); k++) {
        PyObject *surface = PyList_GET_ITEM(surfaces, k);
        if (PyUnicode_CheckExact(surface) && PyUnicode_IS_ASCII(surface))
            size += 2 * PyUnicode_GET_LENGTH(surface);
    }
    return size;
}

/* Each surface's spellings as UTF-8 (`casings`, or `ascii_casings` into `arena`, or the surface
 * alone where it is `caseless`): pointers and
 * lengths into str objects kept in `keep` (an ASCII str's own bytes are its UTF-8), and per
 * surface the end of its spellings in `ends`.  0, or -1 with an exception. */
static int spell_all(PyObject *surfaces, PyObject *keep, uint8_t *arena, const uint8_t **patterns, Py_ssize_t *lengths, Py_ssize_t *ends)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(surfaces); k++) {
        PyObject *surface = PyList_GET_ITEM(surfaces, k), *spelled[3];
        if (!PyUnicode_CheckExact(surface)) { /* a subclass's methods could change the list */
            PyErr_Format(PyExc_TypeError, "surface %zd is not str", k);
            return -1;
        }
        if (PyUnicode_IS_ASCII(surface)) { /* kept: the list may change while the GIL is released */
            Py_ssize_t m = PyUnicode_GET_LENGTH(surface);
            if (PyList_Append(keep, surface) < 0)
                return -1;
            total += ascii_casings(PyUnicode_1BYTE_DATA(surface), m, arena, patterns + total, lengths + total);
            arena += 2 * m;
            ends[k] = total;
            continue;
        }
        int alone = caseless(surface);
        if (alone < 0)
            return -1;
        if (alone) {
            const char *utf8 = PyList_Append(keep, surface) < 0 ? NULL : PyUnicode_AsUTF8AndSize(surface, &lengths[total]);
            if (utf8 == NULL)
                return -1;
            patterns[total++] = (const uint8_t *)utf8;
            ends[k] = total;
            continue;
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
PyObject *casing_counts(PyObject *self, PyObject *args)
{
    PyObject *shards, *surfaces, *keep = NULL, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &shards, &PyList_Type, &surfaces))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(surfaces), most = 3 * n + 1;
    const uint8_t **patterns = PyMem_Calloc(most, sizeof(*patterns));
    Py_ssize_t *lengths = PyMem_Calloc(most, sizeof(*lengths)), *ends = PyMem_Calloc(n + 1, sizeof(*ends));
    int64_t *counts = PyMem_Calloc(most, sizeof(*counts)), *found = PyMem_Calloc(most, sizeof(*found));
    uint8_t *arena = PyMem_Malloc(arena_size(surfaces) + 1);
    if (patterns == NULL || lengths == NULL || ends == NULL || counts == NULL || found == NULL || arena == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((keep = PyList_New(0)) == NULL || spell_all(surfaces, keep, arena, patterns, lengths, ends) < 0)
        goto done;
    Py_ssize_t spellings = n ? ends[n - 1] : 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(shards); k++) {
        PyObject *data_obj, *table_obj, *keys_obj = NULL;
        int ratio;
        Py_buffer data, table, keys;
        Shard shard;
        PyObject *item = PyList_GET_ITEM(shards, k);
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "OOi|O", &data_obj, &table_obj, &ratio, &keys_obj)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "shard %zd is not a (data, table, ratio[, keys]) tuple", k);
            goto done;
        }
        if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0)
            goto done;
        if (parse_keys(keys_obj, &keys, &shard) < 0) {
            PyBuffer_Release(&data);
            PyBuffer_Release(&table);
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        count_lanes(&shard, patterns, lengths, spellings, found);
        for (Py_ssize_t j = 0; j < spellings; j++)
            counts[j] += found[j];
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&keys);
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
    PyMem_Free(arena);
    return result;
}
