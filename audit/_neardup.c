/*
 * The near-duplicate query path, in C because every field of a benchmark runs it and in numpy
 * each step cost a Python call per band, per shingle size or per token, or a dense matrix.
 *
 * `tokens`, `shingle_keys`: a text's tokens and their hashes, cut in one pass over its code
 * points, and the key of the shingle starting at each token.  `permuted`: each position's
 * affine32 hash values.  `sliding_min`: a field's chunk
 * signatures, the minimum of every window of permuted shingle hashes.  The module's other
 * functions are in their own files: `collisions` (_neardup_bands.c), the LSH candidates of a
 * field; `agreement` (_neardup_agreement.c), how many signature positions each candidate
 * shares with the field's chunks; `field_shingles` (_neardup_field.c): a field's tokens, keys
 * and distinct shingle texts (a slice of the case-folded text when their tokens are one space
 * apart), in one pass; `region_shingles` (_neardup_regions.c): the same for the stretches of
 * documents verification reads, at once.
 *
 * Arrays are passed as contiguous buffers (numpy arrays, memory maps) and checked against the
 * shapes given; results come back as bytearrays for numpy to view.  The GIL is released around
 * the loops that do not touch Python objects.
 */
#include "_neardup.h"

/* A buffer of `count` int64 values, as a bytearray (NULL with an exception set on failure). */
PyObject *int64_bytes(Py_ssize_t count, int64_t **data)
{
    PyObject *out = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out)
        *data = (int64_t *)PyByteArray_AS_STRING(out);
    return out;
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

/* permuted(hashes, valid, a, b) -> bytes of uint32, positions x perm: datasketch's affine32
 * values of each position's shingle hash, a * fmix32(h) + b (mod 2^32), and the maximum where
 * no shingle starts (`valid` 0), without the positions x perm temporaries numpy makes. */
static PyObject *permuted(PyObject *self, PyObject *args)
{
    Py_buffer hashes, valid, a, b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &hashes, &valid, &a, &b))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t rows = hashes.len / 4, perm = a.len / 4;
    if (hashes.itemsize != 4 || valid.len != rows || a.itemsize != 4 || b.itemsize != 4 || b.len != a.len || perm < 1) {
        PyErr_SetString(PyExc_ValueError, "permuted needs uint32 hashes, one bool per hash, and uint32 a and b of one length");
        goto done;
    }
    if (!(result = PyByteArray_FromStringAndSize(NULL, rows * perm * 4)))
        goto done;
    uint32_t *out = (uint32_t *)PyByteArray_AS_STRING(result);
    const uint32_t *h = hashes.buf, *pa = a.buf, *pb = b.buf;
    const uint8_t *ok = valid.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        uint32_t f = fmix32(h[r]);
        for (Py_ssize_t p = 0; p < perm; p++)
            out[r * perm + p] = ok[r] ? pa[p] * f + pb[p] : UINT32_MAX;
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&valid);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
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
    {"permuted", permuted, METH_VARARGS,
     "permuted(hashes, valid, a, b) -> bytes of uint32, positions x perm: a * fmix32(h) + b, the maximum where not valid."},
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
