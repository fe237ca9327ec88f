/*
 * A field's own shingles, from its text to what a near-duplicate query needs
 * (`audit.neardup.verify.field_shingles`), in one call: the text cut into tokens, the key of the
 * shingle at each token, and the field's distinct shingle texts (case-folded tokens, one space
 * apart) in the order they first occur, each with the surface form of its first occurrence and
 * whether the source variant's shingles (`exclude`) hold it.  In Python these were a dozen
 * steps, each making arrays or lists, for every field of every variant.
 */
#include "_neardup.h"

/* The outputs made per token, freed together. */
typedef struct {
    Py_UCS4 *points;
    int64_t *starts, *ends;
    uint64_t *hashes, *keys;
    uint8_t *scripts, *valid;
    uint32_t *low;
} Cut;

static void cut_free(Cut *c)
{
    PyMem_Free(c->points);
    PyMem_Free(c->starts);
    PyMem_Free(c->ends);
    PyMem_Free(c->hashes);
    PyMem_Free(c->keys);
    PyMem_Free(c->scripts);
    PyMem_Free(c->valid);
    PyMem_Free(c->low);
}

/* Every per-token buffer for a text of `n` code points, and the code points themselves; 0, or
 * -1 with an exception set. */
static int cut_make(Cut *c, PyObject *text, Py_ssize_t n)
{
    size_t room = (size_t)(n ? n : 1);
    *c = (Cut){0};
    c->points = PyMem_Malloc(room * sizeof(Py_UCS4));
    c->starts = PyMem_Malloc(room * 8);
    c->ends = PyMem_Malloc(room * 8);
    c->hashes = PyMem_Malloc(room * 8);
    c->keys = PyMem_Malloc(room * 8);
    c->scripts = PyMem_Malloc(room);
    c->valid = PyMem_Malloc(room);
    c->low = PyMem_Malloc(room * 4);
    if (!c->points || !c->starts || !c->ends || !c->hashes || !c->keys || !c->scripts || !c->valid || !c->low) {
        PyErr_NoMemory();
        return -1;
    }
    return PyUnicode_AsUCS4(text, c->points, (Py_ssize_t)room, 0) ? 0 : -1;
}

/* The key and 32-bit hash of the shingle at each of `count` tokens, as `shingle_keys` makes
 * them (no limit but the text's end); -1 with an exception set for a script with no size. */
static int keyed(Cut *c, Py_ssize_t count, const int64_t *size, Py_ssize_t nsizes)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (c->scripts[i] >= nsizes || size[c->scripts[i]] < 1) {
            PyErr_Format(PyExc_ValueError, "token %zd: script %u has no shingle size", i, c->scripts[i]);
            return -1;
        }
        int64_t k = size[c->scripts[i]];
        c->valid[i] = i + k <= count;
        c->keys[i] = shingle_key(c->hashes, i, k, c->valid[i]);
        c->low[i] = (uint32_t)c->keys[i];
    }
    return 0;
}

/* The field's distinct shingles in first-occurrence order: their texts, the surface form of each
 * first occurrence, their keys (bytes of uint64), and the numbers of those `exclude` lacks. */
typedef struct {
    PyObject *distinct, *surfaces, *keys, *own;
} Firsts;

static int firsts_of(const Cut *c, Py_ssize_t count, const int64_t *size, PyObject *text, PyObject *folded, PyObject *exclude, Firsts *f)
{
    PyObject *seen = PySet_New(NULL);
    Py_ssize_t found = 0;
    int status = -1;
    if (!seen || !(f->distinct = PyList_New(0)) || !(f->surfaces = PyList_New(0)) || !(f->own = PyList_New(0))
        || !(f->keys = PyBytes_FromStringAndSize(NULL, count * 8)))
        goto done;
    uint64_t *kept = (uint64_t *)PyBytes_AS_STRING(f->keys);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!c->valid[i])
            continue;
        int64_t k = size[c->scripts[i]];
        PyObject *string = shingle_text(folded, c->starts, c->ends, i, k);
        int known = string ? PySet_Contains(seen, string) : -1;
        if (known) {
            Py_XDECREF(string);
            if (known < 0)
                goto done;
            continue;
        }
        PyObject *surface = PyUnicode_Substring(text, c->starts[i], c->ends[i + k - 1]);
        int excluded = surface ? PySet_Contains(exclude, string) : -1;
        PyObject *number = excluded == 0 ? PyLong_FromSsize_t(found) : NULL;
        int failed = excluded < 0 || (excluded == 0 && (!number || PyList_Append(f->own, number) < 0)) || PySet_Add(seen, string) < 0
                     || PyList_Append(f->distinct, string) < 0 || PyList_Append(f->surfaces, surface) < 0;
        Py_XDECREF(number);
        Py_XDECREF(surface);
        Py_DECREF(string);
        if (failed)
            goto done;
        kept[found++] = c->keys[i];
    }
    status = _PyBytes_Resize(&f->keys, found * 8);
done:
    Py_XDECREF(seen);
    return status;
}

/* field_shingles(text, kind, fold, script, powers, sizes, exclude) -> None when a code point's
 * kind is not learned yet, else (starts, ends, hashes, scripts, keys, valid, low, distinct,
 * surfaces, distinct_keys, own): per token (bytes of int64, int64, uint64, uint8, uint64, bool,
 * uint32) its bounds, hash and script, the key of the shingle starting there, whether one does
 * and the key's low 32 bits; then the distinct shingle texts, the surface of each first
 * occurrence, their keys (bytes of uint64) and the list of the numbers of those not in
 * `exclude` (a set of texts). */
PyObject *field_shingles(PyObject *self, PyObject *args)
{
    PyObject *text, *exclude, *folded = NULL, *result = NULL;
    Py_buffer kind, fold, script, powers, sizes;
    if (!PyArg_ParseTuple(args, "Uy*y*y*y*y*O", &text, &kind, &fold, &script, &powers, &sizes, &exclude))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Cut c = {0};
    Firsts f = {0};
    if (kind.len != CODE_POINTS || fold.len != CODE_POINTS * 4 || script.len != CODE_POINTS || powers.len != POWERS * 8
        || sizes.itemsize != 8 || sizes.len % 8) {
        PyErr_SetString(PyExc_ValueError, "field_shingles needs the per-code-point tables and int64 shingle sizes");
        goto done;
    }
    if (!PyAnySet_Check(exclude)) {
        PyErr_SetString(PyExc_TypeError, "field_shingles needs a set or frozenset of texts to exclude");
        goto done;
    }
    if (cut_make(&c, text, n) < 0)
        goto done;
    Text t = {c.points, n, kind.buf, fold.buf, script.buf, powers.buf};
    Py_ssize_t count = cut_tokens(&t, c.starts, c.ends, c.hashes, c.scripts);
    if (count < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (keyed(&c, count, sizes.buf, sizes.len / 8) < 0 || !(folded = fold_text(text, kind.buf, fold.buf))
        || firsts_of(&c, count, sizes.buf, text, folded, exclude, &f) < 0)
        goto done;
    result = Py_BuildValue("(NNNNNNNOOOO)", PyByteArray_FromStringAndSize((char *)c.starts, count * 8),
                           PyByteArray_FromStringAndSize((char *)c.ends, count * 8), PyByteArray_FromStringAndSize((char *)c.hashes, count * 8),
                           PyByteArray_FromStringAndSize((char *)c.scripts, count), PyByteArray_FromStringAndSize((char *)c.keys, count * 8),
                           PyByteArray_FromStringAndSize((char *)c.valid, count), PyByteArray_FromStringAndSize((char *)c.low, count * 4),
                           f.distinct, f.surfaces, f.keys, f.own);
done:
    Py_XDECREF(folded);
    Py_XDECREF(f.distinct);
    Py_XDECREF(f.surfaces);
    Py_XDECREF(f.keys);
    Py_XDECREF(f.own);
    cut_free(&c);
    PyBuffer_Release(&kind);
    PyBuffer_Release(&fold);
    PyBuffer_Release(&script);
    PyBuffer_Release(&powers);
    PyBuffer_Release(&sizes);
    return result;
}
