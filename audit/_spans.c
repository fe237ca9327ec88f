/*
 * The best span of one stretch of a document for a near-duplicate field
 * (`audit.neardup.verify`), in C because every verified candidate stretch asks it and, written
 * with numpy, a stretch cost a dozen calls on small arrays.
 *
 * The stretch is tokens [lo, hi) of regions shingled in one pass: per token, the id of the
 * field shingle it starts (-1: none), its shingle key, whether a shingle starts there, its
 * character start and end, and its script.  The span is the `width` consecutive tokens (the
 * field's shingle positions) holding the most distinct field shingles, the first on ties.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    const int64_t *ids;
    const uint64_t *keys;
    const uint8_t *valid;
    const int64_t *starts, *ends;
    const uint8_t *scripts;
    const int64_t *sizes;
    Py_ssize_t tokens, nsizes;
    const uint64_t *set_aside;
    Py_ssize_t aside;
} Regions;

/* The most distinct ids among `width` consecutive tokens of [lo, hi) starting no later than
 * hi - width (or lo): each occurrence counts for the window starts that hold it and no earlier
 * occurrence of its id, added up as a difference array.  *at gets the first best start
 * (relative to lo); returns the count, or -1 when memory ran out. */
static Py_ssize_t best_window(const Regions *r, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width, Py_ssize_t kept, Py_ssize_t *at)
{
    Py_ssize_t n = hi - lo, last_start = n > width ? n - width : 0;
    int64_t *changes = calloc((size_t)last_start + 2, sizeof(int64_t));
    int64_t *last = malloc((size_t)(kept ? kept : 1) * sizeof(int64_t));
    if (changes == NULL || last == NULL) {
        free(changes);
        free(last);
        return -1;
    }
    for (Py_ssize_t v = 0; v < kept; v++)
        last[v] = -((int64_t)1 << 40);
    for (Py_ssize_t p = 0; p < n; p++) {
        int64_t v = r->ids[lo + p];
        if (v < 0)
            continue;
        int64_t first = last[v] + 1 > p - width + 1 ? last[v] + 1 : p - width + 1;
        int64_t final = p < last_start ? p : last_start;
        last[v] = p;
        if (first < 0)
            first = 0;
        if (first <= final) {
            changes[first]++;
            changes[final + 1]--;
        }
    }
    int64_t running = 0, best = 0;
    *at = 0;
    for (Py_ssize_t start = 0; start <= last_start; start++) {
        running += changes[start];
        if (running > best) {
            best = running;
            *at = start;
        }
    }
    free(changes);
    free(last);
    return (Py_ssize_t)best;
}

static int ascending(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int set_aside_holds(const Regions *r, uint64_t key)
{
    Py_ssize_t lo = 0, hi = r->aside;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (r->set_aside[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->aside && r->set_aside[lo] == key;
}

/* The distinct shingle keys of the span's tokens [from, to), less those set aside: the span's
 * side of the Jaccard's union.  -1 when memory ran out. */
static Py_ssize_t span_size(const Regions *r, Py_ssize_t from, Py_ssize_t to)
{
    uint64_t *keys = malloc((size_t)(to > from ? to - from : 1) * sizeof(uint64_t));
    if (keys == NULL)
        return -1;
    Py_ssize_t n = 0, size = 0;
    for (Py_ssize_t i = from; i < to; i++)
        if (r->valid[i])
            keys[n++] = r->keys[i];
    qsort(keys, (size_t)n, sizeof(uint64_t), ascending);
    for (Py_ssize_t i = 0; i < n; i++)
        if ((i == 0 || keys[i] != keys[i - 1]) && !set_aside_holds(r, keys[i]))
            size++;
    free(keys);
    return size;
}

/* The matched tokens of the span [from, to): the first one's character start, the furthest
 * character its shingles reach (a shingle cut at the stretch's end, hi), and the first `shown`
 * distinct ids in order, as a list. */
static PyObject *matched_of(const Regions *r, Py_ssize_t from, Py_ssize_t to, Py_ssize_t hi, Py_ssize_t shown, int64_t *first_char, int64_t *last_char)
{
    PyObject *ids = PyList_New(0);
    if (ids == NULL)
        return NULL;
    *first_char = -1;
    *last_char = -1;
    for (Py_ssize_t i = from; i < to; i++) {
        int64_t id = r->ids[i];
        if (id < 0)
            continue;
        Py_ssize_t end_token = i + r->sizes[r->scripts[i]] - 1;
        int64_t end = r->ends[end_token < hi - 1 ? end_token : hi - 1];
        if (*first_char < 0)
            *first_char = r->starts[i];
        if (end > *last_char)
            *last_char = end;
        if (PyList_GET_SIZE(ids) >= shown)
            continue;
        PyObject *value = PyLong_FromLongLong(id);
        int seen = value == NULL ? -1 : PySequence_Contains(ids, value);
        if (seen < 0 || (!seen && PyList_Append(ids, value) < 0)) {
            Py_XDECREF(value);
            Py_DECREF(ids);
            return NULL;
        }
        Py_DECREF(value);
    }
    return ids;
}

static int buffer_of(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t count, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len % itemsize || (count >= 0 && view->len != count * itemsize)) {
        PyErr_Format(PyExc_ValueError, "best_span: %s has %zd bytes, not %zd-byte items%s", name, view->len, itemsize, count >= 0 ? " one per token" : "");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Checks what the span's search relies on: ids below `kept`, every script sized and at least
 * 1, the set-aside keys ascending, and lo <= hi within the tokens. */
static int regions_fit(const Regions *r, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width, Py_ssize_t kept)
{
    if (lo < 0 || hi < lo || hi > r->tokens || width < 1) {
        PyErr_Format(PyExc_ValueError, "best_span: tokens [%zd, %zd) of %zd, width %zd", lo, hi, r->tokens, width);
        return -1;
    }
    for (Py_ssize_t i = lo; i < hi; i++)
        if (r->ids[i] >= kept || r->scripts[i] >= r->nsizes || r->sizes[r->scripts[i]] < 1) {
            PyErr_Format(PyExc_ValueError, "best_span: token %zd has id %lld of %zd or an unsized script", i, (long long)r->ids[i], kept);
            return -1;
        }
    for (Py_ssize_t j = 1; j < r->aside; j++)
        if (r->set_aside[j - 1] >= r->set_aside[j]) {
            PyErr_SetString(PyExc_ValueError, "best_span: the set-aside keys are not ascending and distinct");
            return -1;
        }
    return 0;
}

static PyObject *span_of(const Regions *r, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width, Py_ssize_t kept, Py_ssize_t shown)
{
    Py_ssize_t at;
    Py_ssize_t count = best_window(r, lo, hi, width, kept, &at);
    if (count < 0)
        return PyErr_NoMemory();
    if (count == 0)
        Py_RETURN_NONE;
    Py_ssize_t from = lo + at, to = lo + at + width < hi ? lo + at + width : hi;
    Py_ssize_t size = span_size(r, from, to);
    if (size < 0)
        return PyErr_NoMemory();
    int64_t first_char, last_char;
    PyObject *ids = matched_of(r, from, to, hi, shown, &first_char, &last_char);
    if (ids == NULL)
        return NULL;
    return Py_BuildValue("nnLLnN", count, at, (long long)first_char, (long long)last_char, size, ids);
}

/* best_span(ids, keys, valid, starts, ends, scripts, sizes, set_aside, lo, hi, width, kept, shown) */
static PyObject *best_span(PyObject *self, PyObject *args)
{
    PyObject *objs[8];
    Py_ssize_t lo, hi, width, kept, shown;
    if (!PyArg_ParseTuple(args, "OOOOOOOOnnnnn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &lo, &hi, &width, &kept, &shown))
        return NULL;
    static const char *names[8] = {"ids", "keys", "valid", "starts", "ends", "scripts", "sizes", "set_aside"};
    static const Py_ssize_t widths[8] = {8, 8, 1, 8, 8, 1, 8, 8};
    Py_buffer views[8];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 8; got++) {
        Py_ssize_t count = got <= 5 && got > 0 ? views[0].len / 8 : -1;
        if (buffer_of(objs[got], &views[got], widths[got], count, names[got]) < 0)
            goto done;
    }
    Regions r = {views[0].buf, views[1].buf, views[2].buf, views[3].buf, views[4].buf, views[5].buf, views[6].buf,
                 views[0].len / 8, views[6].len / 8, views[7].buf, views[7].len / 8};
    if (regions_fit(&r, lo, hi, width, kept) == 0)
        result = span_of(&r, lo, hi, width, kept, shown);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&views[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"best_span", best_span, METH_VARARGS,
     "best_span(ids, keys, valid, starts, ends, scripts, sizes, set_aside, lo, hi, width, kept, shown) "
     "-> None when tokens [lo, hi) hold no field shingle, else (count, at, first_char, last_char, "
     "span_size, shown_ids): the most distinct field shingles (ids, int64, -1 for none, each below "
     "kept) in `width` consecutive tokens, the first such start (relative to lo), the span's matched "
     "characters, its distinct valid keys (uint64) not among set_aside (ascending uint64), and its "
     "first `shown` distinct ids in order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_spans", NULL, -1, methods};

PyMODINIT_FUNC PyInit__spans(void) { return PyModule_Create(&module); }
