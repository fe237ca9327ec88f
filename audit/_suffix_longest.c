/*
 * The longest match at every start position of a query, searched in lanes (`audit._suffix`).
 */
#include "_suffix.h"

/* The longest-match searches run in lockstep, LANES at a time.  Each step of a binary search
 * reads the table then the data at unpredictable places (two cache misses), so a lane asks the
 * memory for what its next step reads (`__builtin_prefetch`) and yields to the other lanes,
 * which hide the latency.  A lane's search is the lower bound of `range_of` step for step, so it
 * ends at the same rank with the same common prefixes.  `LANES` is in _suffix.h: the counts run
 * in lanes too. */

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

/* Write the answer of a lane whose search is over: rank lo - 1 was the last probe below (or
 * the sample below where the search started), rank lo the last at or above. */
static inline void lane_answer(const Lane *lane, int64_t *lengths, int64_t *ranks)
{
    int below = lane->lcp_lo > lane->lcp_hi;
    Py_ssize_t length = below ? lane->lcp_lo : lane->lcp_hi;
    lengths[lane->slot] = length;
    if (ranks != NULL)
        ranks[lane->slot] = length == 0 ? -1 : below ? lane->lo - 1 : lane->lo;
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
                    if (s->keys != NULL) {
                        KeySearch keys;
                        sampled_start(&keys, s, lane->pattern, lane->m, &lane->lo, &lane->hi, &lane->lcp_lo, &lane->lcp_hi);
                    }
                    if (lane_probe(lane, s)) {
                        busy++;
                        break;
                    }
                    lane_answer(lane, lengths, ranks); /* an empty shard, or the samples found the rank */
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
                    lane_answer(lane, lengths, ranks);
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

/* Move the first `kept` answers to their slots (ascending, each slot at least its index, so
 * from the last down nothing is overwritten before it is moved), the skipped ones 0 (rank -1). */
static void spread_out(const Py_ssize_t *slots, Py_ssize_t kept, Py_ssize_t count, int64_t *lengths, int64_t *ranks)
{
    Py_ssize_t k = count;
    for (Py_ssize_t j = kept - 1; j >= -1; j--) {
        Py_ssize_t slot = j >= 0 ? slots[j] : -1;
        while (--k > slot) {
            lengths[k] = 0;
            if (ranks != NULL)
                ranks[k] = -1;
        }
        if (j >= 0) {
            lengths[slot] = lengths[j];
            if (ranks != NULL)
                ranks[slot] = ranks[j];
        }
    }
}

/* Drop the positions whose byte in `skip` (one per position picked) is not zero, keeping the
 * others' slots in `slots`; how many are left, or -1 (an error set) when `skip` has the wrong
 * length.  A caller that already knows some answers asks only the rest. */
static Py_ssize_t unskipped(const Py_buffer *skip, Py_ssize_t *positions, Py_ssize_t count, Py_ssize_t *slots)
{
    if (skip->len != count) {
        PyErr_Format(PyExc_ValueError, "skip has %zd bytes for %zd positions", skip->len, count);
        return -1;
    }
    const uint8_t *flags = skip->buf;
    Py_ssize_t kept = 0;
    for (Py_ssize_t k = 0; k < count; k++)
        if (!flags[k]) {
            positions[kept] = positions[k];
            slots[kept++] = k;
        }
    return kept;
}

/* Parse (data, table, ratio, query[, keys[, skip]]) and run `longest_at` over the positions
 * `choose` picks, but those `skip` flags (answered 0): the bytes of int64 it returns hold one
 * length per position picked; with `with_ranks`, a tuple of those and the bytes of the ranks. */
static PyObject *longest_over(PyObject *args, Py_ssize_t (*choose)(const uint8_t *, Py_ssize_t, Py_ssize_t *), int with_ranks)
{
    PyObject *data_obj, *table_obj, *keys_obj = NULL;
    int ratio;
    Py_buffer data, table, query, keys, skip = {0};
    Shard shard;
    if (!PyArg_ParseTuple(args, "OOiy*|Oy*", &data_obj, &table_obj, &ratio, &query, &keys_obj, &skip))
        return NULL;
    if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0) {
        PyBuffer_Release(&query);
        return NULL;
    }
    if (parse_keys(keys_obj, &keys, &shard) < 0) {
        PyBuffer_Release(&query);
        PyBuffer_Release(&data);
        PyBuffer_Release(&table);
        return NULL;
    }
    Py_ssize_t n = query.len, count = 0, kept = 0;
    PyObject *result = NULL, *found = NULL;
    Py_ssize_t *positions = PyMem_Malloc(2 * (n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (positions == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t *slots = positions + (n > 0 ? n : 1);
    kept = count = choose(query.buf, n, positions);
    if (skip.obj != NULL && (kept = unskipped(&skip, positions, count, slots)) < 0)
        goto freed;
    result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    found = with_ranks ? PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t)) : NULL;
    if (result != NULL && (found != NULL || !with_ranks)) {
        int64_t *lengths = (int64_t *)PyBytes_AS_STRING(result);
        int64_t *ranks = with_ranks ? (int64_t *)PyBytes_AS_STRING(found) : NULL;
        const uint8_t *q = query.buf;
        Py_BEGIN_ALLOW_THREADS
        longest_at(&shard, q, n, positions, kept, lengths, ranks);
        if (kept < count)
            spread_out(slots, kept, count, lengths, ranks);
        Py_END_ALLOW_THREADS
        if (with_ranks) {
            PyObject *pair = PyTuple_Pack(2, result, found);
            Py_SETREF(result, pair);
        }
    } else
        Py_CLEAR(result);
    Py_XDECREF(found);
freed:
    PyMem_Free(positions);
done:
    if (skip.obj != NULL)
        PyBuffer_Release(&skip);
    PyBuffer_Release(&keys);
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
Py_ssize_t character_starts(const uint8_t *q, Py_ssize_t n, Py_ssize_t *positions)
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
PyObject *longest_matches(PyObject *self, PyObject *args)
{
    return longest_over(args, every_byte, 0);
}

/* `longest_matches` at character starts only: the figures are per character, and a match
 * starting inside a character is never read. */
PyObject *longest_char_matches(PyObject *self, PyObject *args)
{
    return longest_over(args, character_starts, 0);
}

/* `longest_char_matches` and, per character start, a rank whose suffix starts with the match. */
PyObject *longest_char_ranks(PyObject *self, PyObject *args)
{
    return longest_over(args, character_starts, 1);
}
