/*
 * The n-gram signal's per-position figures of one field (`audit.signals.ngram_match`), from the
 * longest match at each of its characters: how many of its windows the corpus holds whole, and
 * its maximal matched spans.  In C because every field of every variant asks both, twice, and a
 * passage has hundreds of windows and characters, each a step of a Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

/* lengths[at] as a Py_ssize_t, or -1 with an exception set when it is out of range or no int. */
static Py_ssize_t length_at(PyObject *lengths, Py_ssize_t at)
{
    if (at < 0 || at >= PyList_GET_SIZE(lengths)) {
        PyErr_Format(PyExc_IndexError, "a window starts at %zd, outside the %zd lengths", at, PyList_GET_SIZE(lengths));
        return -1;
    }
    return PyLong_AsSsize_t(PyList_GET_ITEM(lengths, at));
}

/* One window's (start, end), or 0 with an exception set when it is no pair of ints. */
static int window_at(PyObject *windows, Py_ssize_t k, Py_ssize_t *start, Py_ssize_t *end)
{
    PyObject *pair = PyTuple_GET_ITEM(windows, k);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "a window is a (start, end) tuple");
        return 0;
    }
    *start = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    *end = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 1));
    return !PyErr_Occurred();
}

/* Of the windows (a tuple of (start, end) character spans) not set aside by `skip` (a byte per
 * window, nonzero: set aside), how many there are and how many the corpus holds whole: the
 * match starting at the window's first character reaches its end. */
static PyObject *window_found(PyObject *self, PyObject *args)
{
    PyObject *lengths, *windows, *result = NULL;
    Py_buffer skip = {NULL, NULL};
    if (!PyArg_ParseTuple(args, "O!O!|y*", &PyList_Type, &lengths, &PyTuple_Type, &windows, &skip))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(windows), counted = 0, found = 0;
    const char *aside = skip.buf;
    if (aside != NULL && skip.len != n) {
        PyErr_Format(PyExc_ValueError, "skip has %zd bytes for %zd windows", skip.len, n);
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t start, end, length;
        if (aside != NULL && aside[k])
            continue;
        if (!window_at(windows, k, &start, &end) || ((length = length_at(lengths, start)) == -1 && PyErr_Occurred()))
            goto done;
        counted++;
        found += length >= end - start;
    }
    result = Py_BuildValue("nn", counted, found);
done:
    if (aside != NULL)
        PyBuffer_Release(&skip);
    return result;
}

typedef struct {
    Py_ssize_t start, end;
} Span;

/* Longest first, the earliest on ties. */
static int longer_first(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    Py_ssize_t dx = x->end - x->start, dy = y->end - y->start;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

/* The spans list of (start, end) tuples, or NULL with an exception set. */
static PyObject *span_list(const Span *spans, Py_ssize_t count)
{
    PyObject *list = PyList_New(count);
    for (Py_ssize_t k = 0; list != NULL && k < count; k++) {
        PyObject *pair = Py_BuildValue("(nn)", spans[k].start, spans[k].end);
        if (pair == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, k, pair);
    }
    return list;
}

/* The matched spans [i, i + lengths[i]) that reach past the end of every earlier one, of at
 * least `min_chars` characters, longest first (the earliest on ties). */
static PyObject *maximal_spans(PyObject *self, PyObject *args)
{
    PyObject *lengths, *result = NULL;
    Py_ssize_t min_chars;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &lengths, &min_chars))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lengths), count = 0, furthest = 0;
    Span *spans = PyMem_Malloc((n ? n : 1) * sizeof(Span));
    if (spans == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t length = length_at(lengths, i);
        if (length == -1 && PyErr_Occurred())
            goto done;
        if (i + length <= furthest)
            continue;
        if (length >= min_chars)
            spans[count++] = (Span){i, i + length};
        furthest = i + length;
    }
    qsort(spans, count, sizeof(Span), longer_first);
    result = span_list(spans, count);
done:
    PyMem_Free(spans);
    return result;
}

static PyMethodDef methods[] = {
    {"window_found", window_found, METH_VARARGS,
     "window_found(lengths, windows[, skip]) -> (windows, found): of the (start, end) windows not set "
     "aside (skip: a byte per window), how many there are and how many have lengths[start] >= end - start."},
    {"maximal_spans", maximal_spans, METH_VARARGS,
     "maximal_spans(lengths, min_chars) -> list of (start, end): the spans [i, i + lengths[i]) reaching "
     "past every earlier one's end, of at least min_chars, longest first and the earliest on ties."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_figures", NULL, -1, methods};

PyMODINIT_FUNC PyInit__figures(void) { return PyModule_Create(&module); }
