/*
 * What the files of the `audit._suffix` extension share: a shard as the searches read it (its
 * text, its suffix array and the pointer width), the comparison of a suffix with a pattern, a
 * shard's documents as a pointer is looked up in them, and the functions one file defines for
 * another.  The module's method table is in _suffix.c; each other file holds one kind of search:
 * _suffix_longest.c the longest matches, _suffix_documents.c the documents of ranks,
 * _suffix_restricted.c the language-restricted longest match, _suffix_counts.c the counts of
 * many patterns.
 */
#ifndef AUDIT_SUFFIX_H
#define AUDIT_SUFFIX_H

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

/* How many searches run in lockstep (_suffix_longest.c, _suffix_counts.c). */
#define LANES 32

/* A shard's sampled keys (_suffix_keys.c): the suffix at every key_step-th rank, its first
 * KEY_BYTES - 1 bytes and how many of those it has, KEY_BYTES a rank. */
#define KEY_BYTES 16

typedef struct {
    const uint8_t *data;
    Py_ssize_t size;
    const uint8_t *table;
    Py_ssize_t count;
    int ratio;
    const uint8_t *keys; /* NULL: not sampled */
    Py_ssize_t samples, key_step;
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

/* A search of a shard's sampled keys for where a search for a pattern starts (the lower
 * bound's range): samples [a, b) are not yet placed, those before a sort before the pattern,
 * la and lb are the common prefixes with samples a - 1 and b, and after and within bracket
 * the upper bound as `range_of`'s do.  The samples lie in a few contiguous megabytes, where
 * the same steps in the suffix array cost two cache misses each (the pointer, then the text it
 * points to), so only the last few steps read the table.  The samples are searched straight
 * through (`sampled_start`): run a step at a time in lanes, as the table is, they were slower
 * (bench/bench_search_parts.py). */
typedef struct {
    Py_ssize_t a, b, la, lb, mid, after, within;
} KeySearch;

/* Choose the next sample and prefetch the keys of the two that can follow it; 0 when the
 * search of the samples is over. */
static inline int key_probe(KeySearch *k, const Shard *s)
{
    if (k->a >= k->b)
        return 0;
    k->mid = k->a + (k->b - k->a) / 2;
    PREFETCH(s->keys + (k->a + (k->mid - k->a) / 2) * KEY_BYTES);
    PREFETCH(s->keys + (k->mid + 1 + (k->b - k->mid - 1) / 2) * KEY_BYTES);
    return 1;
}

/* Compare the pattern with the chosen sample's key (in the text when the key is equal to it
 * as far as the key reaches) and move the bounds; then `key_probe`. */
static inline int key_step(KeySearch *k, const Shard *s, const uint8_t *pattern, Py_ssize_t m)
{
    const uint8_t *key = s->keys + k->mid * KEY_BYTES;
    Py_ssize_t width = key[KEY_BYTES - 1] < KEY_BYTES - 1 ? key[KEY_BYTES - 1] : KEY_BYTES - 1;
    Py_ssize_t limit = width < m ? width : m, i = k->la < k->lb ? k->la : k->lb, lcp, rank = k->mid * s->key_step;
    int c;
    while (i < limit && key[i] == pattern[i])
        i++;
    if (i == m)
        c = 0, lcp = m;
    else if (i < limit)
        c = key[i] < pattern[i] ? -1 : 1, lcp = i;
    else if (width < KEY_BYTES - 1)
        c = -1, lcp = i; /* the suffix ends here */
    else
        c = compare_at(s, pointer_at(s, rank), pattern, m, i, &lcp);
    if (c < 0) {
        k->a = k->mid + 1;
        k->la = lcp;
    } else {
        if (c > 0 && rank < k->after)
            k->after = rank;
        if (c == 0 && rank + 1 > k->within)
            k->within = rank + 1;
        k->b = k->mid;
        k->lb = lcp;
    }
    return key_probe(k, s);
}

/* Where the search in the suffix array for pattern[0:m] starts: [*lo, *hi) holds the lower
 * bound, and *lcp_lo, *lcp_hi are the true common prefixes with ranks *lo - 1 and *hi (0
 * where there is none), as a search from [0, count) has them when it has narrowed to the same
 * range; so every answer is the same with or without the keys.  `k` keeps the upper bound's
 * bracket (after, within). */
static inline void sampled_start(KeySearch *k, const Shard *s, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t *lo, Py_ssize_t *hi,
                                 Py_ssize_t *lcp_lo, Py_ssize_t *lcp_hi)
{
    *k = (KeySearch){0, s->samples, 0, 0, 0, s->count, 0};
    if (key_probe(k, s))
        while (key_step(k, s, pattern, m))
            ;
    *lo = k->a ? (k->a - 1) * s->key_step + 1 : 0;
    *lcp_lo = k->a ? k->la : 0;
    *hi = k->b < s->samples ? k->b * s->key_step : s->count;
    *lcp_hi = k->b < s->samples ? k->lb : 0;
}

static inline int compare_prefix(const Shard *s, Py_ssize_t rank, const uint8_t *pattern,
                                 Py_ssize_t m, Py_ssize_t skip, Py_ssize_t *lcp)
{
    return compare_at(s, pointer_at(s, rank), pattern, m, skip, lcp);
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

/* What `block_verdicts` says of a directory block: every document a pointer in it can be in is
 * allowed (1), none is (0), or some are (MIXED: the pointer's document is looked up). */
#define MIXED 2

/* Whether the document a pointer is in is allowed: its block's verdict where there is one and
 * it is not MIXED (nearly every block: a corpus's neighbouring documents share a language), else
 * `allowed` of `document_of`.  `verdicts`, where not NULL, belongs to `d`'s directory. */
static inline int allowed_at(const Documents *d, const uint8_t *allowed, const uint8_t *verdicts, int64_t pointer)
{
    if (verdicts != NULL && pointer >= 0 && (pointer >> d->shift) < d->blocks) {
        uint8_t verdict = verdicts[pointer >> d->shift];
        if (verdict != MIXED)
            return verdict;
    }
    return allowed[document_of(d, pointer)];
}

/* _suffix_keys.c */
int parse_keys(PyObject *obj, Py_buffer *view, Shard *shard);
PyObject *shard_keys(PyObject *self, PyObject *args);

/* _suffix.c */
int parse_shard(PyObject *data_obj, PyObject *table_obj, int ratio, Py_buffer *data, Py_buffer *table, Shard *shard);
void range_of(const Shard *s, const uint8_t *pattern, Py_ssize_t m, Py_ssize_t *lo_out, Py_ssize_t *hi_out);

/* _suffix_longest.c */
Py_ssize_t character_starts(const uint8_t *q, Py_ssize_t n, Py_ssize_t *positions);
PyObject *longest_matches(PyObject *self, PyObject *args);
PyObject *longest_char_matches(PyObject *self, PyObject *args);
PyObject *longest_char_ranks(PyObject *self, PyObject *args);

/* _suffix_documents.c */
PyObject *document_directory(PyObject *self, PyObject *args);
int parse_directory(PyObject *obj, Py_ssize_t size, Py_buffer *view, Documents *d);
PyObject *block_verdicts(PyObject *self, PyObject *args);
int parse_verdicts(PyObject *obj, const Documents *d, Py_buffer *view, const uint8_t **verdicts);
Py_ssize_t allowed_rank_in(const uint8_t *table, int ratio, const Documents *d, const uint8_t *allowed, const uint8_t *verdicts,
                           Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t most);
PyObject *any_allowed(PyObject *self, PyObject *args);
PyObject *sample_ranks(PyObject *self, PyObject *args);

/* One shard as the language-restricted search reads it: its suffix array, its documents and
 * whether each is allowed (and optionally the verdicts of its directory's blocks,
 * `block_verdicts`), and optionally its own unrestricted answer per character start
 * (`longest_char_ranks`: a length and a rank whose suffix starts with that many bytes), from
 * which each shorter prefix's range is found around that rank. */
typedef struct {
    Shard shard;
    Documents documents;
    const uint8_t *allowed, *verdicts; /* verdicts NULL: every rank's document looked up */
    const int64_t *lengths, *ranks;    /* NULL: search each range from scratch */
    Py_buffer views[8];
    int held;
} Restricted;

/* `allowed_rank_in` over one shard's ranks [lo, hi), reading at most `most` of them. */
static inline Py_ssize_t allowed_rank(const Restricted *s, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t most)
{
    return allowed_rank_in(s->shard.table, s->shard.ratio, &s->documents, s->allowed, s->verdicts, lo, hi, most);
}

/* Whether some shard's own unrestricted answer at start `at` (its rank) lies in an allowed
 * document and is at least m bytes long: then an allowed document holds m bytes there, found
 * without reading a range (a match lies within one document: a UTF-8 query holds no
 * separator). */
static inline int rank_holds(const Restricted *shards, Py_ssize_t count, Py_ssize_t m, Py_ssize_t at)
{
    for (Py_ssize_t k = 0; k < count; k++) {
        const Restricted *s = &shards[k];
        if (s->lengths != NULL && m > 0 && s->lengths[at] >= m && allowed_rank(s, (Py_ssize_t)s->ranks[at], (Py_ssize_t)s->ranks[at] + 1, 1) >= 0)
            return 1;
    }
    return 0;
}

/* _suffix_restricted.c */
PyObject *restricted_longest(PyObject *self, PyObject *args);

/* _suffix_held.c */
Restricted *parse_all(PyObject *list, Py_ssize_t *count);
void release_restricted(Restricted *shards, Py_ssize_t count);
int answers_fit(const Restricted *shards, Py_ssize_t count, Py_ssize_t starts);
PyObject *held_starts(PyObject *self, PyObject *args);

/* _suffix_counts.c */
PyObject *casing_counts(PyObject *self, PyObject *args);

#endif
