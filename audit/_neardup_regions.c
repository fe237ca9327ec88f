/*
 * The stretches of documents a field's verification reads, from their bytes to what the
 * best-span search needs (`audit.neardup.verify`), in one call: each stretch decoded from its
 * first whole character (Python's own UTF-8 decoder, errors ignored), the stretches joined by
 * a newline and cut into tokens, the key of the shingle at each token (none reaching into the
 * next stretch), and, where a key is one of the field's rare shingles' keys, the shingle's
 * case-folded text compared with theirs; then per stretch how many distinct field shingles
 * it holds, the bound the search is ordered by.  In Python these were a dozen steps, each
 * making arrays or a str per proposed shingle, for every one of the few dozen stretches of a
 * field, most of which the bound then leaves unsearched.
 */
#include "_neardup.h"

/* The field's rare shingles as code points, and a table from a key to the last of its
 * shingles, the others chained (`next`): different texts may share a key. */
typedef struct {
    const uint64_t *keys;
    Py_ssize_t count;
    Py_UCS4 *text;        /* every shingle's code points, one after another */
    Py_ssize_t *offsets;  /* shingle j is text[offsets[j]:offsets[j + 1]] */
    Py_ssize_t *slots, *next;
    size_t mask;
} Wanted;

static void wanted_free(Wanted *w)
{
    PyMem_Free(w->text);
    PyMem_Free(w->offsets);
    PyMem_Free(w->slots);
    PyMem_Free(w->next);
}

/* Copy the shingle texts (a list of str, as long as `keys`) and build the table; 0, or -1 with
 * an exception set. */
static int wanted_make(Wanted *w, PyObject *texts, const uint64_t *keys)
{
    Py_ssize_t m = PyList_GET_SIZE(texts), total = 0;
    *w = (Wanted){keys, m, NULL, NULL, NULL, NULL, 0};
    for (Py_ssize_t j = 0; j < m; j++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(texts, j))) {
            PyErr_Format(PyExc_TypeError, "shingle text %zd is not str", j);
            return -1;
        }
        total += PyUnicode_GET_LENGTH(PyList_GET_ITEM(texts, j));
    }
    size_t slots = 16;
    while (slots < (size_t)m * 2)
        slots *= 2;
    w->mask = slots - 1;
    w->text = PyMem_Malloc((total ? total : 1) * sizeof(Py_UCS4));
    w->offsets = PyMem_Malloc((m + 1) * sizeof(Py_ssize_t));
    w->slots = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    w->next = PyMem_Malloc((m ? m : 1) * sizeof(Py_ssize_t));
    if (!w->text || !w->offsets || !w->slots || !w->next) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t s = 0; s < slots; s++)
        w->slots[s] = -1;
    w->offsets[0] = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *text = PyList_GET_ITEM(texts, j);
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        for (Py_ssize_t i = 0; i < n; i++)
            w->text[w->offsets[j] + i] = PyUnicode_READ_CHAR(text, i);
        w->offsets[j + 1] = w->offsets[j] + n;
        size_t at = fmix64(keys[j]) & w->mask;
        while (w->slots[at] >= 0 && keys[w->slots[at]] != keys[j])
            at = (at + 1) & w->mask;
        w->next[j] = w->slots[at];
        w->slots[at] = j;
    }
    return 0;
}

/* Whether tokens i..i+k-1 of `t`, case-folded and one space apart, are shingle j's text. */
static int same_text(const Text *t, const int64_t *starts, const int64_t *ends, Py_ssize_t i, int64_t k, const Wanted *w, Py_ssize_t j)
{
    const Py_UCS4 *text = w->text + w->offsets[j];
    Py_ssize_t length = w->offsets[j + 1] - w->offsets[j], at = 0;
    for (Py_ssize_t token = i; token < i + k; token++) {
        if (token > i && (at >= length || text[at++] != ' '))
            return 0;
        for (int64_t p = starts[token]; p < ends[token]; p++)
            if (at >= length || text[at++] != t->fold[t->points[p]])
                return 0;
    }
    return at == length;
}

/* The id of the field shingle the shingle at token i is (the key proposes, the text decides), or -1. */
static int64_t shingle_id(const Text *t, const int64_t *starts, const int64_t *ends, Py_ssize_t i, int64_t k, uint64_t key, const Wanted *w)
{
    size_t at = fmix64(key) & w->mask;
    while (w->slots[at] >= 0 && w->keys[w->slots[at]] != key)
        at = (at + 1) & w->mask;
    for (Py_ssize_t j = w->slots[at]; j >= 0; j = w->next[j])
        if (same_text(t, starts, ends, i, k, w, j))
            return j;
    return -1;
}

/* Everything a call returns, and the joined code points it is cut from. */
typedef struct {
    Py_ssize_t regions, length, tokens;
    uint32_t *points;
    int64_t *skips, *char_starts, *first, *starts, *ends, *ids, *bounds;
    uint64_t *hashes, *keys;
    uint8_t *scripts, *valid;
} Cut;

static void cut_free(Cut *c)
{
    PyMem_Free(c->points);
    PyMem_Free(c->skips);
    PyMem_Free(c->char_starts);
    PyMem_Free(c->first);
    PyMem_Free(c->starts);
    PyMem_Free(c->ends);
    PyMem_Free(c->ids);
    PyMem_Free(c->bounds);
    PyMem_Free(c->hashes);
    PyMem_Free(c->keys);
    PyMem_Free(c->scripts);
    PyMem_Free(c->valid);
}

/* Decode each stretch into `decoded` (a new list) from its first whole character, and join their
 * code points, a newline between two, into c->points.  0, or -1 with an exception set. */
static int decode_all(PyObject *raws, PyObject *decoded, Cut *c)
{
    for (Py_ssize_t r = 0; r < c->regions; r++) {
        PyObject *raw = PyList_GET_ITEM(raws, r);
        if (!PyBytes_Check(raw)) {
            PyErr_Format(PyExc_TypeError, "stretch %zd is not bytes", r);
            return -1;
        }
        const char *bytes = PyBytes_AS_STRING(raw);
        Py_ssize_t size = PyBytes_GET_SIZE(raw), skip = 0;
        while (skip < size && ((uint8_t)bytes[skip] & 0xC0) == 0x80)
            skip++;
        PyObject *text = PyUnicode_DecodeUTF8(bytes + skip, size - skip, "ignore");
        if (text == NULL)
            return -1;
        PyList_SET_ITEM(decoded, r, text);
        c->skips[r] = skip;
        c->char_starts[r] = c->length + (r > 0);
        c->length = c->char_starts[r] + PyUnicode_GET_LENGTH(text);
    }
    if (!(c->points = PyMem_Malloc((c->length ? c->length : 1) * sizeof(uint32_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t r = 0; r < c->regions; r++) {
        PyObject *text = PyList_GET_ITEM(decoded, r);
        if (r > 0)
            c->points[c->char_starts[r] - 1] = '\n';
        for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(text); i++)
            c->points[c->char_starts[r] + i] = PyUnicode_READ_CHAR(text, i);
    }
    return 0;
}

/* Tokens, shingle keys, field shingle ids and per-stretch bounds of the joined text, without
 * Python objects (the GIL is released around it).  Returns 1 when done, 0 at a code point whose
 * kind is not learned yet, -1 at a script without a shingle size. */
static int cut_regions(Cut *c, const Text *t, const int64_t *sizes, Py_ssize_t nsizes, const Wanted *w)
{
    for (Py_ssize_t i = 0; i < c->length; i++)
        if (t->kind[c->points[i]] == UNSEEN)
            return 0;
    c->tokens = cut_tokens(t, c->starts, c->ends, c->hashes, c->scripts);
    /* A stretch's first token is the first starting at or after its first character. */
    for (Py_ssize_t r = 0, token = 0; r < c->regions; r++) {
        while (token < c->tokens && c->starts[token] < c->char_starts[r])
            token++;
        c->first[r] = token;
    }
    c->first[c->regions] = c->tokens;
    for (Py_ssize_t r = 0; r < c->regions; r++)
        for (Py_ssize_t i = c->first[r]; i < c->first[r + 1]; i++) {
            if (c->scripts[i] >= nsizes || sizes[c->scripts[i]] < 1)
                return -1;
            int64_t k = sizes[c->scripts[i]];
            c->valid[i] = i + k <= c->first[r + 1];
            c->keys[i] = shingle_key(c->hashes, i, k, c->valid[i]);
            c->ids[i] = c->valid[i] && w->count ? shingle_id(t, c->starts, c->ends, i, k, c->keys[i], w) : -1;
        }
    int64_t *seen = c->bounds + c->regions; /* per field shingle, the last stretch it was counted in */
    for (Py_ssize_t j = 0; j < w->count; j++)
        seen[j] = -1;
    for (Py_ssize_t r = 0; r < c->regions; r++) {
        c->bounds[r] = 0;
        for (Py_ssize_t i = c->first[r]; i < c->first[r + 1]; i++)
            if (c->ids[i] >= 0 && seen[c->ids[i]] != r) {
                seen[c->ids[i]] = r;
                c->bounds[r]++;
            }
    }
    return 1;
}

static int cut_allocate(Cut *c, Py_ssize_t wanted)
{
    size_t n = (size_t)(c->length ? c->length : 1), r = (size_t)c->regions;
    c->first = PyMem_Malloc((r + 1) * 8);
    c->bounds = PyMem_Malloc((r + (size_t)wanted + 1) * 8);
    c->starts = PyMem_Malloc(n * 8);
    c->ends = PyMem_Malloc(n * 8);
    c->ids = PyMem_Malloc(n * 8);
    c->hashes = PyMem_Malloc(n * 8);
    c->keys = PyMem_Malloc(n * 8);
    c->scripts = PyMem_Malloc(n);
    c->valid = PyMem_Malloc(n);
    if (!c->first || !c->bounds || !c->starts || !c->ends || !c->ids || !c->hashes || !c->keys || !c->scripts || !c->valid) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *cut_result(PyObject *decoded, const Cut *c)
{
    Py_ssize_t r = c->regions, n = c->tokens;
    PyObject *parts[12] = {
        Py_NewRef(decoded),
        PyByteArray_FromStringAndSize((const char *)c->skips, r * 8),
        PyByteArray_FromStringAndSize((const char *)c->char_starts, r * 8),
        PyByteArray_FromStringAndSize((const char *)c->first, (r + 1) * 8),
        PyByteArray_FromStringAndSize((const char *)c->starts, n * 8),
        PyByteArray_FromStringAndSize((const char *)c->ends, n * 8),
        PyByteArray_FromStringAndSize((const char *)c->hashes, n * 8),
        PyByteArray_FromStringAndSize((const char *)c->scripts, n),
        PyByteArray_FromStringAndSize((const char *)c->keys, n * 8),
        PyByteArray_FromStringAndSize((const char *)c->valid, n),
        PyByteArray_FromStringAndSize((const char *)c->ids, n * 8),
        PyByteArray_FromStringAndSize((const char *)c->bounds, r * 8),
    };
    PyObject *result = PyTuple_New(12);
    for (int k = 0; k < 12; k++) {
        if (parts[k] == NULL || result == NULL) {
            Py_XDECREF(parts[k]);
            continue;
        }
        PyTuple_SET_ITEM(result, k, parts[k]);
    }
    for (int k = 0; k < 12 && result != NULL; k++)
        if (parts[k] == NULL)
            Py_CLEAR(result);
    return result;
}

PyObject *region_shingles(PyObject *self, PyObject *args)
{
    PyObject *raws, *texts, *decoded = NULL, *result = NULL;
    Py_buffer kind, fold, script, powers, sizes, keys;
    if (!PyArg_ParseTuple(args, "O!y*y*y*y*y*y*O!", &PyList_Type, &raws, &kind, &fold, &script, &powers, &sizes, &keys, &PyList_Type, &texts))
        return NULL;
    Cut c = {PyList_GET_SIZE(raws), 0, 0};
    Wanted w = {0};
    if (kind.len != CODE_POINTS || fold.len != CODE_POINTS * 4 || script.len != CODE_POINTS || powers.len != POWERS * 8
        || sizes.len % 8 || keys.len != PyList_GET_SIZE(texts) * 8) {
        PyErr_SetString(PyExc_ValueError, "region_shingles needs the per-code-point tables, int64 sizes and a uint64 key per shingle text");
        goto done;
    }
    c.skips = PyMem_Malloc((c.regions ? c.regions : 1) * 8);
    c.char_starts = PyMem_Malloc((c.regions ? c.regions : 1) * 8);
    if (!c.skips || !c.char_starts) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(decoded = PyList_New(c.regions)) || decode_all(raws, decoded, &c) < 0 || wanted_make(&w, texts, keys.buf) < 0
        || cut_allocate(&c, w.count) < 0)
        goto done;
    Text t = {c.points, c.length, kind.buf, fold.buf, script.buf, powers.buf};
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = cut_regions(&c, &t, sizes.buf, sizes.len / 8, &w);
    Py_END_ALLOW_THREADS
    if (done < 0)
        PyErr_SetString(PyExc_ValueError, "a token's script has no shingle size");
    else
        result = done ? cut_result(decoded, &c) : Py_NewRef(Py_None);
done:
    Py_XDECREF(decoded);
    cut_free(&c);
    wanted_free(&w);
    PyBuffer_Release(&kind);
    PyBuffer_Release(&fold);
    PyBuffer_Release(&script);
    PyBuffer_Release(&powers);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&keys);
    return result;
}
