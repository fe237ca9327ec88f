/*
 * The longest match in the documents of one language (`audit._suffix`).
 */
#include "_suffix.h"

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

/* How `holds` reads a range: whole up to `scan_cap` ranks (past `first_look`, `first_look`
 * ranks sampled first) or `first_look` where that is larger, else `first_look` then `scan_cap`
 * ranks sampled. */
typedef struct {
    Py_ssize_t first_look, scan_cap;
} Reading;

/* What the checks at one character start learned of one shard: a run of ranks [none_lo,
 * none_hi) read whole and found to hold no allowed document, and a rank found in one (-1:
 * none yet).  The prefixes a start's search asks are all of one pattern, so their ranges nest
 * (a shorter prefix's holds a longer one's): after a length is refused, every shorter one asked
 * next reads only the ranks around that run, and after one is held, a longer one whose range
 * still holds that rank is held at once.  Both give what reading the whole range would. */
typedef struct {
    Py_ssize_t none_lo, none_hi, allowed;
} Known;

/* Whether an allowed document holds a rank of [lo, hi), a range `holds` reads whole (at most
 * `scan_cap` ranks): one of more than `first_look` ranks is sampled first, as before reading
 * it whole, since a common language's documents are found at once that way. */
static int read_whole(const Restricted *s, const Reading *r, Py_ssize_t lo, Py_ssize_t hi, Known *seen)
{
    if (seen->allowed >= lo && seen->allowed < hi)
        return 1;
    Py_ssize_t found = hi - lo > r->first_look ? allowed_rank(s, lo, hi, r->first_look) : -1;
    if (found < 0 && seen->none_lo < seen->none_hi && lo <= seen->none_lo && seen->none_hi <= hi) {
        found = allowed_rank(s, lo, seen->none_lo, hi - lo);
        if (found < 0)
            found = allowed_rank(s, seen->none_hi, hi, hi - lo);
    } else if (found < 0)
        found = allowed_rank(s, lo, hi, hi - lo);
    if (found >= 0) {
        seen->allowed = found;
        return 1;
    }
    seen->none_lo = lo;
    seen->none_hi = hi;
    return 0;
}

/* Whether an allowed document holds pattern[0:m], the prefix asked at character start `at`:
 * 1, 0, or -1 when a sampled range found none (a sampled answer cannot tell absence from what
 * the sample missed).  A shard whose own longest match there is shorter than m holds none.
 * A range of at most `scan_cap` ranks is read whole (`read_whole`), a larger one sampled. */
static int holds(const Restricted *shards, Py_ssize_t count, const Reading *r, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t at, Known *known)
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
        if (hi <= lo)
            continue;
        if (hi - lo <= r->scan_cap) {
            if (read_whole(s, r, lo, hi, &known[k]))
                return 1;
            continue;
        }
        Py_ssize_t found = allowed_rank(s, lo, hi, r->first_look);
        if (found < 0 && hi - lo <= r->first_look)
            continue; /* a first look larger than the scan cap read it whole */
        if (found < 0)
            found = allowed_rank(s, lo, hi, r->scan_cap);
        if (found >= 0) {
            known[k].allowed = found;
            return 1;
        }
        open = 1;
    }
    return open ? -1 : 0;
}

/* The largest n in [floor, top] an allowed document holds (floor is known to), trying top
 * first, then halving; *open is set when a check above the answer stayed open.  `known` (one
 * per shard) starts empty: what this start's checks learn. */
static Py_ssize_t restricted_search(const Restricted *shards, Py_ssize_t count, const Reading *r, const uint8_t *pattern,
                                    Py_ssize_t floor, Py_ssize_t top, Py_ssize_t at, int *open, Known *known)
{
    *open = 0;
    if (top <= floor || rank_holds(shards, count, top, at))
        return top;
    for (Py_ssize_t k = 0; k < count; k++)
        known[k] = (Known){0, 0, -1};
    int first = holds(shards, count, r, pattern, top, at, known);
    if (first == 1)
        return top;
    *open = first == -1;
    Py_ssize_t lo = floor, hi = top - 1;
    while (lo < hi) {
        Py_ssize_t middle = (lo + hi + 1) >> 1;
        int answer = holds(shards, count, r, pattern, middle, at, known);
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
                            const Py_ssize_t *positions, Py_ssize_t starts, const int64_t *tops, int64_t *lows, int64_t *highs, Known *known)
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
        Py_ssize_t length = restricted_search(shards, count, r, q + i, floor, top, k, &open, known);
        lows[k] = length;
        highs[k] = open ? top : length;
        previous = length;
        at = i;
    }
}

/* For each character start of the UTF-8 query, the longest match in allowed documents (lowest
 * and highest, in bytes): `restricted_pass` over the shards parsed from their tuples. */
PyObject *restricted_longest(PyObject *self, PyObject *args)
{
    PyObject *list;
    Py_buffer query, upper;
    Reading r;
    if (!PyArg_ParseTuple(args, "Oy*y*(nn)", &list, &query, &upper, &r.first_look, &r.scan_cap))
        return NULL;
    PyObject *result = NULL, *low = NULL, *high = NULL;
    Py_ssize_t *positions = NULL, count = 0, starts = 0;
    Known *known = NULL;
    Restricted *shards = parse_all(list, &count);
    if (shards == NULL)
        goto done;
    positions = PyMem_Malloc((query.len > 0 ? query.len : 1) * sizeof(Py_ssize_t));
    known = PyMem_Malloc((count > 0 ? count : 1) * sizeof(Known));
    if (positions == NULL || known == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    starts = character_starts(query.buf, query.len, positions);
    if (upper.len != starts * (Py_ssize_t)sizeof(int64_t) || r.first_look < 1 || r.scan_cap < 1) {
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
    restricted_pass(shards, count, &r, query.buf, query.len, positions, starts, upper.buf, lows, highs, known);
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, low, high);
done:
    Py_XDECREF(low);
    Py_XDECREF(high);
    if (shards != NULL)
        release_restricted(shards, count);
    PyMem_Free(positions);
    PyMem_Free(known);
    PyBuffer_Release(&query);
    PyBuffer_Release(&upper);
    return result;
}
